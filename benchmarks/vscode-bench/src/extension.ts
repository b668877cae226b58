// The VS Code benchmark driver (benchmarks/bench_vscode.py runs it in code-server through
// tests/e2e/run.js). It registers a TypeScript provider (vendor 'lmbridge-bench', model
// 'ts-flood') that reports the same scripted parts as benchmarks/vscode_bench_provider.py serves
// through lmbridge's Python host ('bench/flood'), and consumes both as any extension would:
// model.sendRequest, then `for await` over response.stream. It writes the timings to the record
// (LMBRIDGE_E2E_OUT); the Python side computes the ratios.
//
// Plan (LMBRIDGE_E2E_PLAN): {"tsModel", "pyModel", "pySelector", "scenarios": [{"scenario",
//   "parts"}], "repeats", "warmup", "ttfpRuns", "ttfpParts", "verifyParts"}
import * as vscode from 'vscode';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';

const PLAN = process.env.LMBRIDGE_E2E_PLAN;
const OUT = process.env.LMBRIDGE_E2E_OUT;
const VENDOR = 'lmbridge-bench';
/** Parts per turn of the event loop, as in the Python provider (one upstream read's worth). */
const CHUNK = 10;

interface Plan {
  tsModel: string;
  pyModel: string;
  scenarios: { scenario: string; parts: number }[];
  repeats: number;
  warmup: number;
  ttfpRuns: number;
  ttfpParts: number;
  verifyParts: number;
  modelWaitMs?: number;
}

interface Timing {
  path: 'ts' | 'py'; scenario: string; parts: number; sendMs: number; firstMs: number; totalMs: number; count: number;
  /** When parts 1, 2, 4, ... 1024 arrived (ms): how the stream is spread out, e.g. VS Code's batching of 31 parts. */
  arrivals: number[];
  digest?: string; kinds?: Record<string, number>;
}

const t0 = Date.now();
const record: {
  vscodeVersion: string; appName: string; thinkingPart: string; models: string[]; final: boolean; totalMs: number;
  verify: Timing[]; throughput: (Timing & { rep: number })[]; ttfp: (Timing & { rep: number })[]; errors: string[]; steps: { name: string; ms: number }[];
} = { vscodeVersion: vscode.version, appName: vscode.env.appName, thinkingPart: '', models: [], final: false, totalMs: 0, verify: [], throughput: [], ttfp: [], errors: [], steps: [] };

function write(final: boolean): void {
  if (!OUT) return;
  record.final = final;
  record.totalMs = Date.now() - t0;
  fs.mkdirSync(path.dirname(OUT), { recursive: true });
  fs.writeFileSync(OUT + '.tmp', JSON.stringify(record, null, 1));
  fs.renameSync(OUT + '.tmp', OUT); // atomic: the runner never reads half a file
}
const step = (name: string): void => { record.steps.push({ name, ms: Date.now() - t0 }); };

// ------------------------------------------------------------------ the TypeScript provider

type ThinkingCtor = new (value: string, id?: string) => unknown;
const Thinking = (vscode as unknown as { LanguageModelThinkingPart?: ThinkingCtor }).LanguageModelThinkingPart;

/** Part `i` of `n` in `scenario`: must match `part_at` in benchmarks/vscode_bench_provider.py. */
function partAt(i: number, n: number, scenario: string): vscode.LanguageModelResponsePart {
  if (scenario === 'mixed') {
    if (i < Math.floor(n / 4)) {
      if (!Thinking) throw new Error('this VS Code has no LanguageModelThinkingPart');
      return new Thinking(` r${i}`, 'r0') as vscode.LanguageModelResponsePart;
    }
    if (i % 500 === 499) return new vscode.LanguageModelToolCallPart(`call_${i}`, 'get_weather', { city: `c${i}` });
  } else if (scenario !== 'text') {
    throw new Error(`modelOptions.scenario: unknown scenario ${scenario}`);
  }
  return new vscode.LanguageModelTextPart(` w${i}`);
}

const turn = (): Promise<void> => new Promise(resolve => setImmediate(resolve));

class TsBenchProvider implements vscode.LanguageModelChatProvider {
  provideLanguageModelChatInformation(): vscode.LanguageModelChatInformation[] {
    return [{
      id: 'ts-flood', name: 'Benchmark flood (TypeScript)', family: 'bench', version: '1',
      maxInputTokens: 100_000, maxOutputTokens: 1_000_000, capabilities: { toolCalling: true },
    }];
  }

  async provideLanguageModelChatResponse(
    _model: vscode.LanguageModelChatInformation,
    _messages: readonly vscode.LanguageModelChatRequestMessage[],
    options: vscode.ProvideLanguageModelChatResponseOptions,
    progress: vscode.Progress<vscode.LanguageModelResponsePart>,
    token: vscode.CancellationToken,
  ): Promise<void> {
    const mo = (options.modelOptions ?? {}) as { parts?: number; scenario?: string };
    const n = Number(mo.parts ?? 1);
    const scenario = String(mo.scenario ?? 'text');
    for (let i = 0; i < n; i++) {
      if (token.isCancellationRequested) return;
      progress.report(partAt(i, n, scenario));
      if (i % CHUNK === CHUNK - 1) await turn();
    }
  }

  async provideTokenCount(_model: vscode.LanguageModelChatInformation, text: string | vscode.LanguageModelChatRequestMessage): Promise<number> {
    return Math.ceil((typeof text === 'string' ? text : JSON.stringify(text.content)).length / 4);
  }
}

// ------------------------------------------------------------------ the consumer

function describe(p: unknown): string {
  if (p instanceof vscode.LanguageModelTextPart) return `text ${p.value}`;
  if (p instanceof vscode.LanguageModelToolCallPart) return `toolCall ${p.callId} ${p.name} ${JSON.stringify(p.input)}`;
  if (Thinking && p instanceof Thinking) {
    const t = p as { value: string | string[]; id?: string };
    return `thinking ${t.id ?? ''} ${Array.isArray(t.value) ? t.value.join('') : t.value}`;
  }
  return `other ${(p as object)?.constructor?.name}`;
}

function kindOf(p: unknown): string {
  return describe(p).split(' ', 1)[0];
}

/** One request, timed from sendRequest to the end of response.stream. */
async function timed(model: vscode.LanguageModelChat, which: 'ts' | 'py', scenario: string, parts: number, verify = false): Promise<Timing> {
  const cts = new vscode.CancellationTokenSource();
  try {
    const start = performance.now();
    const resp = await model.sendRequest([vscode.LanguageModelChatMessage.User('go')], { modelOptions: { parts, scenario } }, cts.token);
    const sendMs = performance.now() - start;
    let firstMs = -1;
    let count = 0;
    const hash = verify ? crypto.createHash('sha256') : undefined;
    const kinds: Record<string, number> = {};
    const arrivals: number[] = [];
    for await (const p of resp.stream) {
      if (count === 0) firstMs = performance.now() - start;
      count++;
      if ((count & (count - 1)) === 0 && count <= 1024) arrivals.push(performance.now() - start);
      if (hash) {
        hash.update(describe(p) + '\n');
        const k = kindOf(p);
        kinds[k] = (kinds[k] ?? 0) + 1;
      }
    }
    const totalMs = performance.now() - start;
    const out: Timing = { path: which, scenario, parts, sendMs, firstMs, totalMs, count, arrivals };
    if (hash) { out.digest = hash.digest('hex'); out.kinds = kinds; }
    return out;
  } finally {
    cts.dispose();
  }
}

async function model(selector: vscode.LanguageModelChatSelector, id: string, waitMs: number): Promise<vscode.LanguageModelChat> {
  for (const end = Date.now() + waitMs; Date.now() < end;) {
    const found = (await vscode.lm.selectChatModels(selector)).find(m => m.id === id);
    if (found) return found;
    await new Promise(r => setTimeout(r, 200));
  }
  throw new Error(`no model ${id} for ${JSON.stringify(selector)} after ${waitMs} ms`);
}

async function run(plan: Plan): Promise<void> {
  record.thinkingPart = typeof Thinking;
  const ext = vscode.extensions.getExtension('lmbridge.lmbridge');
  if (!ext) throw new Error('the lmbridge extension is not installed');
  if (!ext.isActive) await ext.activate();
  step('lmbridge active');
  const wait = plan.modelWaitMs ?? 30_000;
  const models = { ts: await model({ vendor: VENDOR }, plan.tsModel, wait), py: await model({ vendor: 'lmbridge' }, plan.pyModel, wait) };
  record.models = [models.ts.id, models.py.id];
  step('models');
  const paths: ('ts' | 'py')[] = ['ts', 'py'];

  // Same parts from both? (a digest of every part as the consumer sees it)
  for (const s of plan.scenarios) {
    for (const p of paths) record.verify.push(await timed(models[p], p, s.scenario, plan.verifyParts, true));
  }
  step('verified');
  write(false);
  // Warm-up: JIT, the host's first imports, VS Code's caches.
  for (let w = 0; w < plan.warmup; w++) {
    for (const s of plan.scenarios) for (const p of paths) await timed(models[p], p, s.scenario, s.parts);
  }
  step('warm');
  // Interleaved, alternating which path goes first, so drift on a shared machine hits both.
  for (let rep = 0; rep < plan.repeats; rep++) {
    const order = rep % 2 === 0 ? paths : [...paths].reverse();
    for (const s of plan.scenarios) {
      for (const p of order) record.throughput.push({ rep, ...await timed(models[p], p, s.scenario, s.parts) });
    }
    write(false);
  }
  step('throughput');
  for (let rep = 0; rep < plan.ttfpRuns; rep++) {
    const order = rep % 2 === 0 ? paths : [...paths].reverse();
    for (const p of order) record.ttfp.push({ rep, ...await timed(models[p], p, 'text', plan.ttfpParts) });
  }
  step('ttfp');
}

export function activate(context: vscode.ExtensionContext): void {
  context.subscriptions.push(vscode.lm.registerLanguageModelChatProvider(VENDOR, new TsBenchProvider()));
  if (!PLAN || !OUT) return; // installed but not driven by the benchmark: only the provider
  let plan: Plan;
  try {
    plan = JSON.parse(fs.readFileSync(PLAN, 'utf8')) as Plan;
  } catch (e) {
    record.errors.push(`reading the plan: ${String(e)}`);
    write(true);
    return;
  }
  run(plan)
    .catch(e => { record.errors.push(String((e as Error)?.stack ?? e)); })
    .finally(() => { try { write(true); } catch (e) { console.error(e); } });
}

export function deactivate(): void {}
