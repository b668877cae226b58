// vscode.LanguageModelChatProvider for the vendor 'lmbridge': every call goes to the Python host.
import * as vscode from 'vscode';
import * as rpc from 'vscode-jsonrpc/node';
import { Host, HostUnavailableError, Log, REQUEST_CANCELLED } from './host';
import { Dropped, messageToWire, optionsToWire, partFromWire, thinkingPartClass, usageDataPart, WirePart } from './parts';
import { AnsweringModel, AnswerStats, parseStats } from './status';
import { ThinkingAsText } from './thinking';
import { mark } from './timing';
import { plain } from './untrusted';

/** A model of `models/list`: VS Code's information, and `workspace` (the origin) for a model of a provider a workspace's settings added. */
type WireModel = vscode.LanguageModelChatInformation & { workspace?: unknown };

/** Receives the `chat/parts` batches of one `chat/response` request. */
type PartsSink = (parts: WirePart[]) => void;

type ErrorCtor = new (message?: string, code?: string) => vscode.LanguageModelError;

/**
 * A LanguageModelError with code 'Unknown' (an unspecified failure of the model). The public
 * typings declare no constructor arguments, but VS Code's constructor takes (message, code);
 * without the code it would be ''.
 */
export function unknownError(message: string): vscode.LanguageModelError {
  return new (vscode.LanguageModelError as unknown as ErrorCtor)(message, 'Unknown');
}

/**
 * Turns a failed host request into the error VS Code's consumers expect: a
 * vscode.LanguageModelError whose code is the one the host named.
 */
export function toLanguageModelError(err: unknown, host: Host): Error {
  if (err instanceof vscode.LanguageModelError) return err;
  if (err instanceof HostUnavailableError) return unknownError(err.message);
  if (err instanceof rpc.ResponseError) {
    if (err.code === rpc.ErrorCodes.PendingResponseRejected || err.code === rpc.ErrorCodes.ConnectionInactive) {
      return unknownError(host.exitMessage());
    }
    const data = err.data as { languageModelError?: string } | undefined;
    // the host's error may quote an upstream's text: shown in chat and notifications, inert
    const message = plain(err.message);
    switch (data?.languageModelError) {
      case 'NoPermissions': return vscode.LanguageModelError.NoPermissions(message);
      case 'Blocked': return vscode.LanguageModelError.Blocked(message);
      case 'NotFound': return vscode.LanguageModelError.NotFound(message);
      default: return unknownError(message);
    }
  }
  const message = err instanceof Error ? err.message : String(err);
  // vscode-jsonrpc throws plain errors when the connection is already closed or disposed.
  if (/connection (is )?(closed|disposed|got disposed)/i.test(message)) return unknownError(host.exitMessage());
  return unknownError(`lmbridge: ${message}`);
}

/**
 * Converts a batch of wire parts and reports them in order; a malformed part is logged, not fatal.
 * With `asText` (this VS Code has no thinking part), reasoning is reported as quoted text.
 * Returns how many parts were reported.
 */
export function reportParts(parts: WirePart[], progress: vscode.Progress<vscode.LanguageModelResponsePart>, log: Log, dropped: Dropped, asText?: ThinkingAsText): number {
  let reported = 0;
  const report = (part: vscode.LanguageModelResponsePart): void => { progress.report(part); reported++; };
  for (const w of parts) {
    if (asText && w?.kind === 'thinking') {
      const value = w.value;
      if (typeof value === 'string' || (Array.isArray(value) && value.every(v => typeof v === 'string'))) {
        const text = asText.thinking(value);
        if (text) report(new vscode.LanguageModelTextPart(text));
        continue;
      }
    }
    let part: unknown;
    try {
      part = partFromWire(w, dropped);
    } catch (e) {
      log.error(`dropped a malformed part from the host: ${(e as Error).message}`);
      continue;
    }
    if (part === undefined) continue;
    const close = asText?.other();
    if (close) report(new vscode.LanguageModelTextPart(close));
    report(part as vscode.LanguageModelResponsePart);
  }
  return reported;
}

/**
 * How many reported parts VS Code's extension host holds back at most. It sends a provider's
 * parts on 30 ms after the last report, or at once when more than 30 wait
 * (extHostLanguageModels: a RunOnceScheduler of 30 ms that every report starts again, since the
 * LanguageModelChatProvider API of VS Code 1.104): parts that come closer than 30 ms apart reach
 * the consumer in lumps of 31 only, and a stream's first part waits 30 ms or more.
 */
export const VSCODE_HELD_PARTS = 30;

/**
 * The shortest time between two sends `PartRelay` asks VS Code for. Each send is one message to
 * the workbench, which hands it on to the consumer and waits for it to be taken before the next
 * (about 7 ms a send measured through code-server); under VS Code's own 30 ms, so its timer never
 * fires first.
 */
export const SEND_INTERVAL_MS = 20;

/** lmbridge's extension id (publisher.name), as VS Code names the extension that asked for an answer. */
export const LMBRIDGE_EXTENSION_ID = 'lmbridge.lmbridge';

/**
 * Has VS Code pass the parts of one answer on promptly: the first batch at once, later ones at
 * most every `interval` ms (what came meanwhile goes together). To make VS Code send, it tops
 * the parts waiting there up past VSCODE_HELD_PARTS with empty text parts, which carry nothing;
 * so it is used for lmbridge's own consumer side only (the loopback endpoint, apps), which drops
 * them: other consumers (VS Code's chat) get the parts as VS Code passes them.
 */
export class PartRelay {
  private waiting = 0;
  private last = -Infinity;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;

  constructor(
    private readonly progress: vscode.Progress<vscode.LanguageModelResponsePart>,
    private readonly interval = SEND_INTERVAL_MS,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** `count` parts were just reported. */
  reported(count: number): void {
    // VS Code sent them itself each time 31 were waiting
    this.waiting = (this.waiting + count) % (VSCODE_HELD_PARTS + 1);
    if (this.stopped || this.waiting === 0 || this.timer !== undefined) return;
    const wait = this.last + this.interval - this.now();
    if (wait <= 0) this.send();
    else this.timer = setTimeout(() => { this.timer = undefined; this.send(); }, wait);
  }

  /** Nothing more is reported (the answer ended or was cancelled): VS Code sends the rest itself at the end. */
  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private send(): void {
    if (this.stopped || this.waiting === 0) return;
    for (let i = this.waiting; i <= VSCODE_HELD_PARTS; i++) this.progress.report(new vscode.LanguageModelTextPart(''));
    this.waiting = 0;
    this.last = this.now();
  }
}

/** Told about each finished answer and its usage (the status bar item). */
export type AnswerListener = (model: AnsweringModel, stats: AnswerStats) => void;

/** The provider registered for the vendor 'lmbridge'. */
export class LmBridgeChatProvider implements vscode.LanguageModelChatProvider {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeLanguageModelChatInformation = this.changed.event;
  private readonly sinks = new Map<number | string, PartsSink>();
  private readonly droppedKinds = new Set<string>();
  private tokenFallbackLogged = false;
  /** Model id -> origin, for the models of providers a workspace's settings added (the last listing's). */
  private workspaceModels = new Map<string, string>();

  /**
   * `ownId` is this extension's id: its own requests (the consumer side's lm/sendRequest) get
   * their parts through a PartRelay.
   */
  constructor(private readonly host: Host, private readonly log: Log, private readonly onAnswer?: AnswerListener, private readonly ownId = LMBRIDGE_EXTENSION_ID) {}

  /** Installs the provider's notification handlers on a new host connection. */
  attach(conn: rpc.MessageConnection): void {
    conn.onNotification('chat/parts', (params: { requestId: number | string; parts: WirePart[] }) => {
      const sink = this.sinks.get(params?.requestId);
      if (sink) sink(Array.isArray(params.parts) ? params.parts : []);
      // Parts for a finished or cancelled request are dropped on purpose.
    });
    conn.onNotification('models/changed', () => this.changed.fire());
  }

  /**
   * The origin of the workspace provider a model of this vendor comes from, or undefined for a
   * model of the user's providers. Python's consumer side chooses such a model only when the
   * user's own setting names it (client/model_names.py).
   */
  workspaceOrigin(id: string): string | undefined {
    return this.workspaceModels.get(id);
  }

  /** Tells VS Code to ask for the models again. */
  fireChanged(): void {
    this.changed.fire();
  }

  private readonly dropped: Dropped = (what) => {
    if (this.droppedKinds.has(what)) return;
    this.droppedKinds.add(what);
    this.log.warn(what === 'thinking'
      ? 'this VS Code has no LanguageModelThinkingPart API: reasoning is shown as quoted text (set a provider\'s "thinking" option to "drop" to leave it out)'
      : `this VS Code has no LanguageModelDataPart API: ${what} parts are left out`);
  };

  async provideLanguageModelChatInformation(options: { silent: boolean }, token: vscode.CancellationToken): Promise<vscode.LanguageModelChatInformation[]> {
    try {
      const result = await this.host.sendRequest<{ models: WireModel[] }>('models/list', { silent: !!options?.silent }, token);
      const models = Array.isArray(result?.models) ? result.models : [];
      // which models come from a workspace's provider: the consumer side says so to Python
      this.workspaceModels = new Map(models.filter(m => typeof m.workspace === 'string').map(m => [m.id, m.workspace as string]));
      return models.map(({ workspace: _, ...info }) => info);
    } catch (e) {
      const err = toLanguageModelError(e, this.host);
      this.log.error(`listing models failed: ${err.message}`);
      // A start problem (no Python, no lmbridge) already has its notification with actions.
      if (!options?.silent && !this.host.startProblem) void vscode.window.showErrorMessage(`lmbridge: ${plain(err.message)}`);
      return [];
    }
  }

  async provideLanguageModelChatResponse(
    model: vscode.LanguageModelChatInformation,
    messages: readonly vscode.LanguageModelChatRequestMessage[],
    options: vscode.ProvideLanguageModelChatResponseOptions,
    progress: vscode.Progress<vscode.LanguageModelResponsePart>,
    token: vscode.CancellationToken,
  ): Promise<void> {
    mark('ext.provide');
    const params = { modelId: model.id, messages: messages.map(messageToWire), options: optionsToWire(options) };
    let id: number | string | undefined;
    let done = false;
    // Without the thinking part class reasoning becomes quoted text rather than vanishing.
    const asText = thinkingPartClass() ? undefined : new ThinkingAsText();
    // VS Code names the extension that asked (not in the typed API): lmbridge's consumer side
    const initiator = (options as { requestInitiator?: unknown }).requestInitiator;
    const relay = typeof initiator === 'string' && initiator.toLowerCase() === this.ownId.toLowerCase() ? new PartRelay(progress) : undefined;
    const sink: PartsSink = (parts) => {
      if (done || token.isCancellationRequested) return;
      mark('ext.chat_parts', { n: parts.length });
      if (asText && parts.some(p => p?.kind === 'thinking')) this.dropped('thinking');
      const reported = reportParts(parts, progress, this.log, this.dropped, asText);
      relay?.reported(reported);
    };
    // Cancellation: vscode-jsonrpc sends $/cancelRequest when the token fires; we stop reporting
    // at once and return without waiting for the host's answer.
    let onCancel: vscode.Disposable | undefined;
    const cancelled = new Promise<'cancelled'>(res => {
      onCancel = token.onCancellationRequested(() => { relay?.stop(); res('cancelled'); });
      if (token.isCancellationRequested) res('cancelled');
    });
    try {
      const request = this.host.sendRequest<unknown>('chat/response', params, token, (rid) => {
        id = rid;
        this.sinks.set(rid, sink);
      });
      request.catch(() => undefined); // the race below may leave it unobserved
      const outcome = await Promise.race([request, cancelled]);
      relay?.stop();
      mark('ext.provided');
      if (outcome === 'cancelled') this.log.debug(`chat/response ${id} cancelled`);
      else {
        // The usage comes last, as Copilot's context ring and auto-compaction expect it.
        const usage = usageDataPart(outcome);
        if (usage) progress.report(usage as unknown as vscode.LanguageModelResponsePart);
        this.answered(model, outcome);
      }
    } catch (e) {
      if (token.isCancellationRequested) return;
      if (e instanceof rpc.ResponseError && e.code === REQUEST_CANCELLED) return;
      throw toLanguageModelError(e, this.host);
    } finally {
      done = true;
      relay?.stop();
      onCancel?.dispose();
      if (id !== undefined) this.sinks.delete(id);
    }
  }

  /** Hands a finished answer's usage to the listener (a failing listener must not fail the answer). */
  private answered(model: vscode.LanguageModelChatInformation, result: unknown): void {
    const stats = parseStats(result);
    if (!stats || !this.onAnswer) return;
    try {
      this.onAnswer({ id: model.id, name: model.name, maxInputTokens: model.maxInputTokens }, stats);
    } catch (e) {
      this.log.error(`showing the usage of an answer failed: ${(e as Error).message}`);
    }
  }

  async provideTokenCount(
    model: vscode.LanguageModelChatInformation,
    text: string | vscode.LanguageModelChatRequestMessage,
    token: vscode.CancellationToken,
  ): Promise<number> {
    const wire = typeof text === 'string' ? text : messageToWire(text);
    try {
      const result = await this.host.sendRequest<{ tokens: number }>('tokens/count', { modelId: model.id, text: wire }, token);
      if (typeof result?.tokens === 'number') return result.tokens;
      throw new Error('tokens/count answered without a number');
    } catch (e) {
      if (token.isCancellationRequested) return 0;
      // Counting must not break a chat request: VS Code calls it while building the prompt.
      // Fall back to a rough estimate and say so once.
      if (!this.tokenFallbackLogged) {
        this.tokenFallbackLogged = true;
        this.log.warn(`token counting failed, using an estimate of 4 characters a token: ${toLanguageModelError(e, this.host).message}`);
      }
      const s = typeof wire === 'string' ? wire : JSON.stringify(wire.content);
      return Math.ceil(s.length / 4);
    }
  }
}
