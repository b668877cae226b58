// The status bar item: the last answer's token use against the model's input limit, and in its
// tooltip the totals per model since VS Code started. Fed from the `stats` of each
// `chat/response` result (docs/protocol.md); the host also logs each answer's usage line.
import * as vscode from 'vscode';

/** One answer's usage as the host reports it (`chat/response` result `stats`); null: unknown. */
export interface AnswerStats {
  /** The model the upstream says answered (may differ from the picked id). */
  model: string | null;
  inputTokens: number | null;
  outputTokens: number | null;
  cachedTokens: number | null;
  reasoningTokens: number | null;
  durationMs: number | null;
  firstTokenMs: number | null;
  /** 'stop', 'length' (cut by the output limit), 'tool_calls' ... as the host names it. */
  finishReason: string | null;
  maxInputTokens: number | null;
  /** The host's estimate of the request (made before sending; beside the upstream's count, it shows how far off it was). */
  estimatedInputTokens: number | null;
  /** The calibration factor the estimate was made with (learnt from earlier counts; 1: none yet). */
  calibrationFactor: number | null;
}

const COUNTS = ['inputTokens', 'outputTokens', 'cachedTokens', 'reasoningTokens', 'durationMs', 'firstTokenMs', 'maxInputTokens', 'estimatedInputTokens'] as const;

/** The `stats` of a `chat/response` result, or undefined when it has none (an older host). Wrong types become null. */
export function parseStats(result: unknown): AnswerStats | undefined {
  const raw = typeof result === 'object' && result !== null ? (result as { stats?: unknown }).stats : undefined;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const r = raw as Record<string, unknown>;
  const count = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.round(v) : null);
  const text = (v: unknown): string | null => (typeof v === 'string' && v ? v : null);
  const stats = { model: text(r.model), finishReason: text(r.finishReason) } as AnswerStats;
  for (const k of COUNTS) stats[k] = count(r[k]);
  const factor = r.calibrationFactor;
  stats.calibrationFactor = typeof factor === 'number' && Number.isFinite(factor) && factor > 0 ? factor : null;
  return stats;
}

/** The model a request went to, as VS Code knows it. */
export interface AnsweringModel {
  id: string;
  name: string;
  maxInputTokens?: number;
}

/** Sums of one model's answers since VS Code started. */
export interface ModelTotals {
  name: string;
  answers: number;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
  /** Answers the upstream reported no token counts for (their estimate is in inputTokens). */
  unreported: number;
  /** Answers cut by the output limit. */
  cut: number;
}

/** The last answer, as the status item shows it. */
export interface LastAnswer {
  model: AnsweringModel;
  stats: AnswerStats;
  /** Tokens the conversation holds after this answer: its input plus its output. */
  used: number;
  /** Whether `used` rests on the host's estimate rather than the upstream's count. */
  estimated: boolean;
  /** The model's input limit (from the stats, else from the model information). */
  limit: number | undefined;
}

/** 950 -> "950", 12345 -> "12.3k", 128000 -> "128k", 1048576 -> "1M". */
export function compact(n: number): string {
  const unit = (v: number, suffix: string): string => `${v < 100 ? String(Math.round(v * 10) / 10) : String(Math.round(v))}${suffix}`;
  if (n < 1000) return String(Math.round(n));
  if (n < 999_950) return unit(n / 1000, 'k');
  return unit(n / 1_000_000, 'M');
}

const full = (n: number): string => n.toLocaleString('en-US');
const duration = (ms: number): string => (ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`);

/** Markdown-inert text: names come from settings and upstreams. */
export function escapeMarkdown(s: string): string {
  return s.replace(/[\\`*_{}[\]()#+\-.!|<>~]/g, c => `\\${c}`).replace(/\r?\n/g, ' ');
}

/** How lmbridge's estimate of the input compared with the upstream's count, with the calibration factor in effect. */
export function estimateText(s: AnswerStats): string {
  if (s.estimatedInputTokens === null) return '';
  const factor = s.calibrationFactor !== null ? ` (calibration factor ${s.calibrationFactor.toFixed(3)})` : '';
  if (s.inputTokens === null || s.inputTokens <= 0) return `lmbridge estimated the input at ${full(s.estimatedInputTokens)} tokens${factor}.`;
  const off = (100 * (s.estimatedInputTokens - s.inputTokens)) / s.inputTokens;
  return `lmbridge estimated the input at ${full(s.estimatedInputTokens)} tokens, ${off >= 0 ? '+' : ''}${off.toFixed(1)} % against the upstream's count${factor}.`;
}

/** Whether an answer was cut by the output limit (finish reasons of the formats lmbridge speaks). */
export function cutByLimit(reason: string | null): boolean {
  return reason !== null && /^(length|max_tokens|max_output_tokens|MAX_TOKENS)$/.test(reason);
}

/** Usage since VS Code started: the last answer and per-model totals. No I/O: the item below shows it. */
export class UsageTotals {
  private readonly models = new Map<string, ModelTotals>();
  last: LastAnswer | undefined;

  record(model: AnsweringModel, stats: AnswerStats): LastAnswer {
    const estimated = stats.inputTokens === null;
    const input = stats.inputTokens ?? stats.estimatedInputTokens ?? 0;
    const limit = stats.maxInputTokens ?? (model.maxInputTokens && model.maxInputTokens > 0 ? model.maxInputTokens : undefined);
    this.last = { model, stats, used: input + (stats.outputTokens ?? 0), estimated, limit };
    let t = this.models.get(model.id);
    if (!t) {
      t = { name: model.name || model.id, answers: 0, inputTokens: 0, outputTokens: 0, cachedTokens: 0, reasoningTokens: 0, unreported: 0, cut: 0 };
      this.models.set(model.id, t);
    }
    t.name = model.name || model.id;
    t.answers++;
    t.inputTokens += input;
    t.outputTokens += stats.outputTokens ?? 0;
    t.cachedTokens += stats.cachedTokens ?? 0;
    t.reasoningTokens += stats.reasoningTokens ?? 0;
    if (estimated || stats.outputTokens === null) t.unreported++;
    if (cutByLimit(stats.finishReason)) t.cut++;
    return this.last;
  }

  /** Totals by model id, in the order the models first answered. */
  totals(): [string, ModelTotals][] {
    return [...this.models.entries()];
  }

  /** The status bar text: "lmbridge 12.3k/128k" (a warning sign when the answer was cut or the limit is near). */
  text(): string {
    const l = this.last;
    if (!l) return 'lmbridge';
    const used = `${l.estimated ? '~' : ''}${compact(l.used)}`;
    const warn = cutByLimit(l.stats.finishReason) || this.nearLimit() ? '$(warning) ' : '';
    return `${warn}lmbridge ${used}${l.limit ? `/${compact(l.limit)}` : ''}`;
  }

  /** Whether the last answer left the conversation at 90 % of the model's input limit or more. */
  nearLimit(): boolean {
    const l = this.last;
    return !!l && !!l.limit && l.used >= 0.9 * l.limit;
  }

  /** The tooltip, as Markdown. */
  tooltip(): string {
    const l = this.last;
    if (!l) return 'lmbridge: no answer yet';
    const s = l.stats;
    const lines: string[] = [];
    lines.push(`**lmbridge: last answer** from ${escapeMarkdown(l.model.name || l.model.id)} (\`${l.model.id.replace(/`/g, "'")}\`)`);
    lines.push('');
    const input = s.inputTokens ?? s.estimatedInputTokens;
    const parts = `input ${input === null ? 'unknown' : `${s.inputTokens === null ? '~' : ''}${full(input)}`} + output ${s.outputTokens === null ? 'unknown' : full(s.outputTokens)}`;
    const of = l.limit ? ` of the model's ${full(l.limit)}-token input limit (${(100 * l.used / l.limit).toFixed(1)} %)` : '';
    lines.push(`The conversation holds ${l.estimated ? 'about ' : ''}${full(l.used)} tokens (${parts})${of}.`);
    if (l.estimated) lines.push('The upstream reported no token counts: the input is lmbridge\'s estimate.');
    const estimate = estimateText(s);
    if (estimate) lines.push(estimate);
    const details: string[] = [];
    if (s.cachedTokens !== null) details.push(`cached ${full(s.cachedTokens)}`);
    if (s.reasoningTokens !== null) details.push(`reasoning ${full(s.reasoningTokens)}`);
    if (s.durationMs !== null) details.push(duration(s.durationMs));
    if (s.firstTokenMs !== null) details.push(`first token after ${duration(s.firstTokenMs)}`);
    if (s.finishReason !== null) details.push(`finish reason: ${escapeMarkdown(s.finishReason)}`);
    if (s.model !== null && s.model !== l.model.id) details.push(`upstream model: ${escapeMarkdown(s.model)}`);
    if (details.length) { lines.push(''); lines.push(details.join(' · ')); }
    if (cutByLimit(s.finishReason)) {
      lines.push('');
      lines.push('$(warning) **The answer was cut by the output limit.** Ask for a shorter answer, or raise the model\'s `maxOutputTokens` in `lmbridge.providers`.');
    } else if (this.nearLimit()) {
      lines.push('');
      lines.push('$(warning) **The conversation is close to the model\'s input limit.** Start a new chat, or let older tool results be cleared.');
    }
    lines.push('');
    lines.push('**Since VS Code started**');
    lines.push('');
    lines.push('| Model | Answers | Input | Output | Cached | Reasoning |');
    lines.push('|---|---:|---:|---:|---:|---:|');
    for (const [, t] of this.totals()) {
      const notes = [t.cut ? `${t.cut} cut by the output limit` : '', t.unreported ? `${t.unreported} without counts from the upstream` : ''].filter(Boolean);
      lines.push(`| ${escapeMarkdown(t.name)}${notes.length ? ` (${notes.join('; ')})` : ''} | ${t.answers} | ${full(t.inputTokens)} | ${full(t.outputTokens)} | ${full(t.cachedTokens)} | ${full(t.reasoningTokens)} |`);
    }
    return lines.join('\n');
  }
}

/** The status bar item; hidden until the first answer. */
/** What the host reports when `lmbridge.pace` held a request back (`pace/limited`). */
export interface PaceBite {
  model: string;
  /** 'overall' or 'model'. */
  scope: string;
  /** The limit that bit, e.g. `maxConcurrent=2`. */
  limit: string;
  /** True: refused (its client got a 429); false: it waited in line and then ran. */
  refused: boolean;
  waitMs: number;
}

/** A `pace/limited` notification's params, or undefined when malformed. */
export function parsePaceBite(params: unknown): PaceBite | undefined {
  if (typeof params !== 'object' || params === null) return undefined;
  const p = params as Record<string, unknown>;
  if (typeof p.model !== 'string' || typeof p.limit !== 'string') return undefined;
  return {
    model: p.model,
    scope: typeof p.scope === 'string' ? p.scope : 'overall',
    limit: p.limit,
    refused: p.refused === true,
    waitMs: typeof p.waitMs === 'number' && Number.isFinite(p.waitMs) ? p.waitMs : 0,
  };
}

/** The text and tooltip the pace item shows for the bites since it last hid. */
export function paceText(bites: readonly PaceBite[]): { text: string; tooltip: string } {
  const refused = bites.filter(b => b.refused).length;
  const queued = bites.length - refused;
  const last = bites[bites.length - 1];
  const parts = [queued ? `${queued} queued` : '', refused ? `${refused} refused` : ''].filter(Boolean);
  const where = last.scope === 'model' ? `per model (${last.model})` : 'overall';
  return {
    text: `$(watch) paced: ${parts.join(', ')}`,
    tooltip: `lmbridge.pace held requests back: ${parts.join(', ')}. Last: ${last.refused ? 'refused' : `waited ${Math.round(last.waitMs)} ms`} at ${last.limit} ${where}. Change the limits in the lmbridge.pace user setting.`,
  };
}

/** Shown while the user's pace (`lmbridge.pace`) bites; hides after a quiet minute. */
export class PaceStatusItem implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private bites: PaceBite[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly quietMs = 60_000) {
    this.item = vscode.window.createStatusBarItem('lmbridge.pace', vscode.StatusBarAlignment.Right, 99);
    this.item.name = 'lmbridge pace';
    this.item.command = 'lmbridge.showLog';
  }

  /** One `pace/limited` notification. */
  record(bite: PaceBite): void {
    this.bites.push(bite);
    if (this.bites.length > 1000) this.bites = this.bites.slice(-1000);
    const { text, tooltip } = paceText(this.bites);
    this.item.text = text;
    this.item.tooltip = tooltip;
    this.item.backgroundColor = this.bites.some(b => b.refused) ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
    this.item.show();
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => { this.item.hide(); this.bites = []; }, this.quietMs);
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.item.dispose();
  }
}

export class UsageStatusItem implements vscode.Disposable {
  readonly usage = new UsageTotals();
  private readonly item: vscode.StatusBarItem;

  constructor() {
    this.item = vscode.window.createStatusBarItem('lmbridge.usage', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'lmbridge usage';
    this.item.command = 'lmbridge.showLog';
  }

  /** Shows a finished answer. */
  record(model: AnsweringModel, stats: AnswerStats): void {
    this.usage.record(model, stats);
    this.item.text = this.usage.text();
    const tip = new vscode.MarkdownString(this.usage.tooltip(), true);
    tip.isTrusted = false;
    this.item.tooltip = tip;
    const l = this.usage.last!;
    this.item.accessibilityInformation = {
      label: `lmbridge: the last answer used ${l.used} tokens${l.limit ? ` of ${l.limit}` : ''}`,
    };
    this.item.backgroundColor = cutByLimit(stats.finishReason) || this.usage.nearLimit()
      ? new vscode.ThemeColor('statusBarItem.warningBackground')
      : undefined;
    this.item.show();
  }

  dispose(): void {
    this.item.dispose();
  }
}
