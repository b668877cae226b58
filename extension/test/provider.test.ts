// Unit tests of the chat provider's glue against a real Host process (the stand-in host of
// test/fixtures/fake-host.js speaking JSON-RPC over stdio, as the Python host does): model
// information passed through, response parts forwarded in order, cancellation, and failures
// mapped to vscode.LanguageModelError with the code the host named.
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { afterEach, test } from 'node:test';
import { FAKE, MemoryLog, hosts } from './host-support';
import * as rpc from 'vscode-jsonrpc/node';
import * as vscode from 'vscode';
import { Host, HostOptions } from '../src/host';
import { describeModel } from '../src/consumer';
import { LmBridgeChatProvider, PartRelay, toLanguageModelError, VSCODE_HELD_PARTS } from '../src/provider';
// the fake 'vscode' module's extras
import { LanguageModelChatMessage, LanguageModelTextPart, setProposals, shownErrors } from './fake-vscode';

afterEach(async () => {
  await Promise.all(hosts.splice(0).map(h => h.dispose()));
  shownErrors.length = 0;
  setProposals({ data: true, thinking: true });
});

function setup(env: Record<string, string> = {}, pythonCommand = `"${process.execPath}" "${FAKE}"`): { provider: LmBridgeChatProvider; host: Host; log: MemoryLog } {
  const log = new MemoryLog();
  const options = (): HostOptions => ({ pythonCommand, pythonSource: 'default', clientName: 'test', clientVersion: '0', cwd: os.tmpdir(), env: { FAKE_HOST: 'ok', ...env } });
  // eslint-disable-next-line prefer-const -- the connection setup runs after the provider exists
  let provider: LmBridgeChatProvider;
  const host = new Host(options, async () => ({ providers: [], secrets: {}, settings: {} }), log, conn => provider.attach(conn));
  provider = new LmBridgeChatProvider(host, log);
  hosts.push(host);
  return { provider, host, log };
}

const model = (id: string): vscode.LanguageModelChatInformation =>
  ({ id, name: id, family: 'fake', version: '1', maxInputTokens: 1000, maxOutputTokens: 100, capabilities: {} }) as vscode.LanguageModelChatInformation;
const user = (text: string): vscode.LanguageModelChatRequestMessage =>
  new LanguageModelChatMessage(1, [new LanguageModelTextPart(text)]) as unknown as vscode.LanguageModelChatRequestMessage;
const options = { tools: [], toolMode: 1, modelOptions: { temperature: 0 } } as unknown as vscode.ProvideLanguageModelChatResponseOptions;
const none = new rpc.CancellationTokenSource().token as vscode.CancellationToken;

const isEmptyText = (p: unknown): boolean => p instanceof LanguageModelTextPart && p.value === '';

/**
 * Runs a chat request; returns what was reported as a consumer reads it (no empty text parts),
 * the error it threw, and what VS Code's extension host would have sent on before the answer
 * ended: it holds reported parts until more than VSCODE_HELD_PARTS wait (or 30 ms pass).
 * `initiator` is the extension VS Code says asked.
 */
async function chat(provider: LmBridgeChatProvider, id: string, token = none, initiator = 'github.copilot-chat'): Promise<{ parts: unknown[]; error?: unknown; reported: unknown[]; sentAtOnce: unknown[][]; held: unknown[] }> {
  const parts: unknown[] = [];
  const reported: unknown[] = [];
  const sentAtOnce: unknown[][] = [];
  let held: unknown[] = [];
  const report = (p: unknown): void => {
    reported.push(p);
    if (!isEmptyText(p)) parts.push(p);
    held.push(p);
    if (held.length > VSCODE_HELD_PARTS) { sentAtOnce.push(held); held = []; }
  };
  try {
    const asked = { ...options, requestInitiator: initiator } as vscode.ProvideLanguageModelChatResponseOptions;
    await provider.provideLanguageModelChatResponse(model(id), [user('hello')], asked, { report }, token);
    return { parts, reported, sentAtOnce, held };
  } catch (error) {
    return { parts, error, reported, sentAtOnce, held };
  }
}

test('the host\'s model information reaches VS Code as it was sent; a junk answer is no model', async () => {
  const { provider } = setup();
  const models = await provider.provideLanguageModelChatInformation({ silent: true }, none);
  assert.deepEqual(models.map(m => m.id), ['fake/stream', 'fake/slow']);
  assert.deepEqual(models[0], { id: 'fake/stream', name: 'Stream', family: 'fake', version: '1', maxInputTokens: 1000, maxOutputTokens: 100, capabilities: { toolCalling: true, imageInput: false } });
  const junk = setup({ FAKE_MODELS: 'junk' });
  assert.deepEqual(await junk.provider.provideLanguageModelChatInformation({ silent: false }, none), []);
  assert.deepEqual(shownErrors, []);
});

test("a workspace provider's models: VS Code gets their information only; the consumer side learns where they point", async () => {
  const { provider } = setup({ FAKE_MODELS: 'workspace' });
  const models = await provider.provideLanguageModelChatInformation({ silent: true }, none);
  assert.deepEqual(models.map(m => m.id), ['fake/stream', 'fake/slow', 'evil/claude-haiku-4-5']);
  assert.ok(models.every(m => !('workspace' in m)));
  assert.equal(provider.workspaceOrigin('evil/claude-haiku-4-5'), 'http://127.0.0.1:9');
  assert.equal(provider.workspaceOrigin('fake/stream'), undefined);
  // what lm/selectChatModels tells Python: the mark on lmbridge's model only
  const chat = (id: string, vendor: string) => ({ id, vendor, name: id, family: 'claude-haiku-4-5', version: '1', maxInputTokens: 1 }) as unknown as vscode.LanguageModelChat;
  const origin = (id: string) => provider.workspaceOrigin(id);
  assert.equal(describeModel(chat('evil/claude-haiku-4-5', 'lmbridge'), origin).workspace, 'http://127.0.0.1:9');
  assert.equal(describeModel(chat('evil/claude-haiku-4-5', 'copilot'), origin).workspace, undefined);
  assert.ok(!('workspace' in describeModel(chat('fake/stream', 'lmbridge'), origin)));
  // a later listing without it: no longer marked (and no longer offered)
  const again = setup();
  await again.provider.provideLanguageModelChatInformation({ silent: true }, none);
  assert.equal(again.provider.workspaceOrigin('evil/claude-haiku-4-5'), undefined);
});

test('listing fails: no model, one error message unless silent or a start problem already told it', async () => {
  const broken = setup({}, 'lmbridge-no-such-python3');
  assert.deepEqual(await broken.provider.provideLanguageModelChatInformation({ silent: false }, none), []);
  // a missing Python is a start problem: its own notification (with actions) says it
  assert.equal(broken.host.startProblem?.kind, 'python-missing');
  assert.deepEqual(shownErrors, []);
  assert.ok(broken.log.at('error').some(l => l.startsWith('listing models failed: ')));
  // a host that ends while listing: the error is shown, unless VS Code asked silently
  const crash = setup({ FAKE_MODELS: 'die' });
  assert.deepEqual(await crash.provider.provideLanguageModelChatInformation({ silent: true }, none), []);
  assert.deepEqual(shownErrors, []);
  assert.deepEqual(await crash.provider.provideLanguageModelChatInformation({ silent: false }, none), []);
  assert.equal(shownErrors.length, 1, shownErrors.join('\n'));
  assert.match(shownErrors[0], /^lmbridge: The lmbridge Python host stopped \(exit code 4[;)]/);
  assert.equal(crash.host.startProblem, undefined);
});

test('response parts are forwarded in order, converted; a malformed part is logged and skipped', async () => {
  const { provider, log } = setup();
  const { parts, error } = await chat(provider, 'fake/stream');
  assert.equal(error, undefined);
  assert.deepEqual(parts.map(p => p!.constructor.name), ['LanguageModelTextPart', 'LanguageModelToolCallPart', 'ThinkingPart', 'LanguageModelTextPart']);
  assert.equal((parts[0] as LanguageModelTextPart).value, 'You said: hello');
  assert.deepEqual({ ...(parts[1] as object) }, { callId: 'c1', name: 'weather', input: { city: 'Paris' } });
  assert.deepEqual({ ...(parts[2] as object) }, { value: 'hmm', id: 't1', metadata: undefined });
  assert.equal((parts[3] as LanguageModelTextPart).value, '!');
  assert.ok(log.at('error').some(l => l.startsWith('dropped a malformed part from the host: ')), log.lines.join('\n'));
  // without the proposed thinking API the reasoning is shown as quoted text (said once), the rest comes
  setProposals({ data: true, thinking: false });
  const again = await chat(provider, 'fake/stream');
  assert.deepEqual(again.parts.map(p => p!.constructor.name), ['LanguageModelTextPart', 'LanguageModelToolCallPart', 'LanguageModelTextPart', 'LanguageModelTextPart', 'LanguageModelTextPart']);
  assert.deepEqual(again.parts.slice(2).map(p => (p as LanguageModelTextPart).value), ['\n\n> **Thinking:**\n> hmm', '\n\n', '!']);
  await chat(provider, 'fake/stream');
  assert.equal(log.at('warn').filter(l => l.includes('LanguageModelThinkingPart API')).length, 1);
});

/** VS Code's extension host as it takes a provider's parts: held until more than VSCODE_HELD_PARTS wait (its 30 ms timer left out). */
function vscodeQueue(): { progress: vscode.Progress<vscode.LanguageModelResponsePart>; sent: unknown[][]; held: () => unknown[] } {
  const sent: unknown[][] = [];
  let held: unknown[] = [];
  return {
    progress: { report: p => { held.push(p); if (held.length > VSCODE_HELD_PARTS) { sent.push(held.filter(x => !isEmptyText(x))); held = []; } } },
    sent,
    held: () => held,
  };
}

test("the first batch from the host goes on at once, later ones at most every interval, not held for VS Code's 30 ms", async () => {
  let now = 1000;
  const q = vscodeQueue();
  const relay = new PartRelay(q.progress, 20, () => now);
  const report = (...values: string[]): void => { values.forEach(v => q.progress.report(new LanguageModelTextPart(v))); relay.reported(values.length); };
  report('a');
  assert.deepEqual(q.sent.map(b => b.map(p => (p as LanguageModelTextPart).value)), [['a']], 'sent on at once');
  now += 5;
  report('b', 'c');
  report('d');
  assert.equal(q.sent.length, 1, 'within the interval: kept together');
  await new Promise(r => setTimeout(r, 40)); // the relay's timer (15 ms left of the interval)
  assert.deepEqual(q.sent.map(b => b.map(p => (p as LanguageModelTextPart).value)), [['a'], ['b', 'c', 'd']]);
  // a long batch: VS Code sends 31 by itself, the relay tops up the rest
  now += 100;
  report(...Array.from({ length: 40 }, (_, i) => `${i}`));
  assert.deepEqual(q.sent.slice(2).map(b => b.length), [31, 9]);
  assert.deepEqual(q.held(), []);
  // stopped (the answer ended): nothing more is reported
  now += 100;
  relay.stop();
  report('late');
  assert.equal(q.sent.length, 4);
  assert.deepEqual(q.held().map(p => (p as LanguageModelTextPart).value), ['late']);
});

test("through the host: for lmbridge's own consumer side the first part is passed on before the answer ends; others get the parts as they are", async () => {
  const { provider } = setup();
  const other = await chat(provider, 'fake/stream');
  assert.ok(other.parts.length >= 4);
  assert.deepEqual(other.reported, other.parts, 'no empty parts for another extension');
  const { parts, error, sentAtOnce } = await chat(provider, 'fake/stream', none, 'LMBridge.lmbridge');
  assert.equal(error, undefined);
  assert.ok(parts.length >= 4);
  assert.ok(sentAtOnce.length >= 1, 'VS Code sent the first batch on before the answer ended');
  assert.deepEqual(sentAtOnce[0].filter(p => !isEmptyText(p))[0], parts[0]);
  // what a consumer reads is the answer, whatever tops the batches up
  assert.deepEqual(sentAtOnce.flat().filter(p => !isEmptyText(p)), parts.slice(0, sentAtOnce.flat().filter(p => !isEmptyText(p)).length));
});

test('cancellation: the call returns at once, the host is told, later parts are dropped', async () => {
  const { provider, host, log } = setup();
  const cts = new rpc.CancellationTokenSource();
  const parts: unknown[] = [];
  const started = Date.now();
  const call = provider.provideLanguageModelChatResponse(model('fake/slow'), [user('wait')], options, {
    report: p => {
      parts.push(p);
      cts.cancel(); // cancel once the first part arrived
    },
  }, cts.token as vscode.CancellationToken);
  await call; // resolves: a cancelled request is no error
  assert.ok(Date.now() - started < 1500, 'returned without waiting for the host');
  assert.deepEqual(parts.map(p => (p as LanguageModelTextPart).value), ['first']);
  // the host saw the cancellation ($/cancelRequest) and its late part went nowhere
  for (const end = Date.now() + 3000; Date.now() < end && !log.lines.some(l => /cancelled \d+: true/.test(l[1])); await new Promise(r => setTimeout(r, 20)));
  assert.ok(log.lines.some(l => /cancelled \d+: true/.test(l[1])), log.lines.map(l => l[1]).join('\n'));
  await new Promise(r => setTimeout(r, 100));
  assert.deepEqual(parts.map(p => (p as LanguageModelTextPart).value), ['first']);
  // the same host answers the next request
  const pid = host.pid;
  assert.equal((await chat(provider, 'fake/stream')).error, undefined);
  assert.equal(host.pid, pid);
  // a token cancelled before the call: nothing is reported, no error
  const pre = new rpc.CancellationTokenSource();
  pre.cancel();
  const early = await chat(provider, 'fake/stream', pre.token as vscode.CancellationToken);
  assert.equal(early.error, undefined);
  assert.deepEqual(early.parts, []);
});

test('failures become LanguageModelErrors with the code the host named', async () => {
  const { provider } = setup();
  const expect = async (id: string, code: string, message: RegExp): Promise<void> => {
    const { error } = await chat(provider, id);
    assert.ok(error instanceof vscode.LanguageModelError, `${id}: ${String(error)}`);
    assert.equal((error as vscode.LanguageModelError).code, code, id);
    assert.match((error as Error).message, message);
  };
  await expect('fake/notfound', 'NotFound', /^no model fake\/notfound$/);
  await expect('fake/blocked', 'Blocked', /^the upstream refused the request$/);
  await expect('fake/noperm', 'NoPermissions', /^no key for fake$/);
  await expect('fake/other', 'Unknown', /^boom in fake\/other$/);
  // the host dies mid-answer: what was streamed stays, the error says the host stopped
  const died = await chat(provider, 'fake/die');
  assert.deepEqual(died.parts.map(p => (p as LanguageModelTextPart).value), ['partial']);
  assert.ok(died.error instanceof vscode.LanguageModelError);
  assert.equal((died.error as vscode.LanguageModelError).code, 'Unknown');
  assert.match((died.error as Error).message, /The lmbridge Python host stopped \(exit code 3/);
});

test('errors outside the host\'s answers map too: no host, a closed connection, anything else', () => {
  const { host } = setup({}, 'lmbridge-no-such-python3');
  const same = vscode.LanguageModelError.Blocked('x');
  assert.equal(toLanguageModelError(same, host), same);
  const closed = toLanguageModelError(new Error('Connection is closed.'), host) as vscode.LanguageModelError;
  assert.equal(closed.code, 'Unknown');
  assert.match(closed.message, /^The lmbridge Python host stopped/);
  const other = toLanguageModelError(new TypeError('bad'), host) as vscode.LanguageModelError;
  assert.equal(other.message, 'lmbridge: bad');
  assert.equal(toLanguageModelError('text', host).message, 'lmbridge: text');
});

test('token counts come from the host; when it cannot count, an estimate (said once)', async () => {
  const { provider, log } = setup();
  assert.equal(await provider.provideTokenCount(model('fake/stream'), 'hello world', none), 11);
  assert.equal(await provider.provideTokenCount(model('fake/fail'), 'abcdefgh', none), 2);
  assert.equal(await provider.provideTokenCount(model('fake/fail'), 'abcd', none), 1);
  assert.equal(log.at('warn').filter(l => l.startsWith('token counting failed')).length, 1);
});

test('finished, failed and cancelled requests leave no part sink and no listener on their token', async () => {
  // What each request adds (the sink for its chat/parts, the listeners on VS Code's token)
  // must go with it: an extension host serves thousands of requests (docs/benchmarks/load.md).
  const { provider } = setup();
  const sinks = (provider as unknown as { sinks: Map<unknown, unknown> }).sinks;
  let live = 0;
  /** A token that counts the listeners registered on it and not yet disposed. */
  const counted = (): { token: vscode.CancellationToken; cancel(): void } => {
    const cts = new rpc.CancellationTokenSource();
    const token = {
      get isCancellationRequested() { return cts.token.isCancellationRequested; },
      onCancellationRequested(listener: (e: unknown) => unknown) {
        const sub = cts.token.onCancellationRequested(listener);
        live++;
        let disposed = false;
        return { dispose: () => { if (!disposed) { disposed = true; live--; sub.dispose(); } } };
      },
    } as unknown as vscode.CancellationToken;
    return { token, cancel: () => cts.cancel() };
  };
  const answered = counted();
  assert.equal((await chat(provider, 'fake/stream', answered.token)).error, undefined);
  const failed = counted();
  assert.ok((await chat(provider, 'fake/blocked', failed.token)).error instanceof vscode.LanguageModelError);
  const cancelled = counted();
  const parts: unknown[] = [];
  await provider.provideLanguageModelChatResponse(model('fake/slow'), [user('wait')], options, {
    report: p => { parts.push(p); cancelled.cancel(); },
  }, cancelled.token);
  assert.equal(parts.length, 1);
  // the host answers the cancelled request (-32800) a little later: its listeners go then
  for (const end = Date.now() + 3000; Date.now() < end && (live || sinks.size); await new Promise(r => setTimeout(r, 20)));
  assert.equal(sinks.size, 0);
  assert.equal(live, 0);
});
