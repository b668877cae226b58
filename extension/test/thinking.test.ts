// Unit tests of reasoning shown as text when VS Code has no LanguageModelThinkingPart: the
// provider against a stand-in host over real JSON-RPC, the quoting, and its removal from the
// assistant messages of later turns.
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { FAKE } from './host-support';
import { afterEach, beforeEach, test } from 'node:test';
import * as vscode from 'vscode';
import { Host, HostConfig, HostOptions, Log } from '../src/host';
import { messageToWire, type WirePart } from '../src/parts';
import { LmBridgeChatProvider, reportParts } from '../src/provider';
import type { AnsweringModel, AnswerStats } from '../src/status';
import { stripThinkingText, ThinkingAsText } from '../src/thinking';

const fake = vscode as unknown as typeof import('./fake-vscode');

function memoryLog(): Log & { lines: [string, string][] } {
  const lines: [string, string][] = [];
  const add = (lv: string) => (m: string) => { lines.push([lv, m]); };
  return { lines, trace: add('trace'), debug: add('debug'), info: add('info'), warn: add('warn'), error: add('error'), appendLine: add('line') };
}
const think = (value: string | string[]): WirePart => ({ kind: 'thinking', value });
const text = (value: string): WirePart => ({ kind: 'text', value });
const call: WirePart = { kind: 'toolCall', callId: 'c1', name: 'get_weather', input: { city: 'Paris' } };

/** What a progress received (as a consumer reads it: no empty text parts): text parts as strings, other parts by class. */
function collect(): { progress: vscode.Progress<vscode.LanguageModelResponsePart>; got: unknown[]; joined: () => string } {
  const got: unknown[] = [];
  return {
    progress: { report: p => { if (!(p instanceof vscode.LanguageModelTextPart && p.value === '')) got.push(p); } },
    got,
    joined: () => got.map(p => (p instanceof vscode.LanguageModelTextPart ? p.value : `[${(p as object).constructor.name}]`)).join(''),
  };
}

beforeEach(() => fake.setProposals({ data: true, thinking: true }));
afterEach(() => fake.setProposals({ data: true, thinking: true }));

test('streamed reasoning becomes one quote under a marker, closed before the answer', () => {
  const r = collect();
  const t = new ThinkingAsText();
  reportParts([think('Let me'), think(' think.\nTwo'), think(['', ' lines\n']), think('\nthen'), text('Answer'), think('Again'), call], r.progress, memoryLog(), () => undefined, t);
  assert.equal(r.joined(), '> **Thinking:**\n> Let me think.\n> Two lines\n> \n> then\n\nAnswer\n\n> **Thinking:**\n> Again\n\n[LanguageModelToolCallPart]');
  // the answer's parts stay parts of their own
  assert.ok(r.got.at(-1) instanceof vscode.LanguageModelToolCallPart);
  // empty deltas (metadata only) add nothing, not even the marker
  const quiet = collect();
  reportParts([think(''), text('A')], quiet.progress, memoryLog(), () => undefined, new ThinkingAsText());
  assert.equal(quiet.joined(), 'A');
});

test('the quoted reasoning is taken out of assistant messages of later turns', () => {
  const shown = collect();
  reportParts([think('plan:\n1. look'), text('The answer'), text(' is 42.'), think('more'), call], shown.progress, memoryLog(), () => undefined, new ThinkingAsText());
  // as VS Code hands the history back: the reported parts, text separate or merged
  const parts = shown.got as unknown[];
  assert.deepEqual(messageToWire({ role: 2, content: parts }).content, [text('The answer is 42.'), call]);
  const merged = [new vscode.LanguageModelTextPart(shown.joined().replace('[LanguageModelToolCallPart]', '')), new vscode.LanguageModelToolCallPart('c1', 'get_weather', { city: 'Paris' })];
  assert.deepEqual(messageToWire({ role: 2, content: merged }).content, [text('The answer is 42.'), call]);
  // only the assistant's: a user quoting it keeps every word
  assert.deepEqual(messageToWire({ role: 1, content: [new vscode.LanguageModelTextPart(shown.joined())] }).content[0], text(shown.joined()));
  // text without the marker, or quotes of other kinds, are left alone
  const plain = [new vscode.LanguageModelTextPart('> a quote\n\nx'), new vscode.LanguageModelTextPart('y')];
  assert.deepEqual(messageToWire({ role: 2, content: plain }).content, [text('> a quote\n\nx'), text('y')]);
  assert.equal(stripThinkingText('before\n\n> **Thinking:**\n> hmm\n\nafter'), 'before\n\nafter');
  assert.equal(stripThinkingText('before\n\n> **Thinking:**\n> hmm\n'), 'before');
  assert.equal(stripThinkingText('> **Thinking:**\n> only reasoning'), '');
});

// ---------------------------------------------------------------------------- the provider

const hosts: Host[] = [];
afterEach(async () => { await Promise.all(hosts.splice(0).map(h => h.dispose())); });

function provider(onAnswer?: (m: AnsweringModel, s: AnswerStats) => void): { p: LmBridgeChatProvider; log: ReturnType<typeof memoryLog> } {
  const log = memoryLog();
  const options = (): HostOptions => ({ pythonCommand: `"${process.execPath}" "${FAKE}"`, pythonSource: 'default', clientName: 'test', clientVersion: '0', cwd: os.tmpdir(), env: { FAKE_HOST: 'ok' } });
  const config = async (): Promise<HostConfig> => ({ providers: [], secrets: {}, settings: {} });
  const host = new Host(options, config, log, conn => p.attach(conn));
  hosts.push(host);
  const p: LmBridgeChatProvider = new LmBridgeChatProvider(host, log, onAnswer);
  return { p, log };
}
const token = { isCancellationRequested: false, onCancellationRequested: () => ({ dispose: () => undefined }) } as unknown as vscode.CancellationToken;
const MODEL = { id: 'fake/script', name: 'Script', family: 'claude', version: '1', maxInputTokens: 200000, maxOutputTokens: 8000, capabilities: {} } as vscode.LanguageModelChatInformation;
const ask = async (p: LmBridgeChatProvider, modelOptions: Record<string, unknown>): Promise<ReturnType<typeof collect>> => {
  const r = collect();
  await p.provideLanguageModelChatResponse(MODEL, [{ role: 1, content: [new vscode.LanguageModelTextPart('hi')], name: undefined }] as unknown as vscode.LanguageModelChatRequestMessage[],
    { modelOptions, tools: [], toolMode: 1 } as unknown as vscode.ProvideLanguageModelChatResponseOptions, r.progress, token);
  return r;
};

test('without the thinking part class the provider shows reasoning as quoted text, and says so once', async () => {
  fake.setProposals({ data: true, thinking: false });
  const { p, log } = provider();
  const script = [think('hmm'), text('Hello')];
  const first = await ask(p, { script });
  assert.equal(first.joined(), '> **Thinking:**\n> hmm\n\nHello');
  await ask(p, { script });
  assert.equal(log.lines.filter(([lv, m]) => lv === 'warn' && /reasoning is shown as quoted text/.test(m)).length, 1);
});

test('with the thinking part class reasoning stays a thinking part', async () => {
  const { p } = provider();
  const r = await ask(p, { script: [think('hmm'), text('Hello')] });
  assert.ok(r.got[0] instanceof fake.ThinkingPart);
  assert.equal((r.got[0] as InstanceType<typeof fake.ThinkingPart>).value, 'hmm');
  assert.equal(r.joined(), '[ThinkingPart]Hello');
});

test("each answer's stats reach the listener with the model VS Code picked", async () => {
  const seen: [AnsweringModel, AnswerStats][] = [];
  const { p } = provider((m, s) => seen.push([m, s]));
  const stats = { model: 'claude-x', inputTokens: 10, outputTokens: 2, cachedTokens: null, reasoningTokens: null, durationMs: 5, firstTokenMs: 1, finishReason: 'length', maxInputTokens: 1000, estimatedInputTokens: 9, calibrationFactor: 1.2 };
  await ask(p, { script: [text('x')], stats });
  await ask(p, { script: [text('y')] }); // an older host: no stats, nothing to show
  assert.deepEqual(seen, [[{ id: 'fake/script', name: 'Script', maxInputTokens: 200000 }, stats]]);
  // a failing listener does not fail the answer
  const { p: p2, log } = provider(() => { throw new Error('boom'); });
  const r = await ask(p2, { script: [text('z')], stats });
  assert.equal(r.joined(), 'z');
  assert.ok(log.lines.some(([lv, m]) => lv === 'error' && m.includes('boom')));
});

test("the answer's usage ends it as a DataPart of MIME type 'usage' (Copilot's context ring), where VS Code has the class", async () => {
  const usagePart = { prompt_tokens: 859, completion_tokens: 122, total_tokens: 981, prompt_tokens_details: { cached_tokens: 800 } };
  const { p } = provider();
  const r = await ask(p, { script: [text('x')], usagePart });
  const last = r.got[r.got.length - 1] as InstanceType<typeof fake.DataPart>;
  assert.ok(last instanceof fake.DataPart, `the last part is ${String(last)}`);
  assert.equal(last.mimeType, 'usage');
  assert.deepEqual(JSON.parse(new TextDecoder().decode(last.data)), usagePart);
  // an older host (no usagePart) adds nothing
  const older = await ask(p, { script: [text('y')] });
  assert.equal(older.got.filter(g => g instanceof fake.DataPart).length, 0);
  // a VS Code without LanguageModelDataPart: the answer as before, without the usage
  fake.setProposals({ data: false, thinking: true });
  try {
    const without = await ask(p, { script: [text('z')], usagePart });
    assert.equal(without.joined(), 'z');
    assert.equal(without.got.length, 1);
  } finally {
    fake.setProposals({ data: true, thinking: true });
  }
});
