// Unit tests of the consumer-side events the extension forwards to the host.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as vscode from 'vscode';
import * as rpc from 'vscode-jsonrpc/node';
import { attachConsumer, DEGRADED_MESSAGE, showDegraded, toolAllowed, watchConsumerEvents } from '../src/consumer';

const fake = vscode as unknown as typeof import('./fake-vscode');

test('model and configuration changes reach the host with the consumer settings', () => {
  const sent: [string, unknown][] = [];
  let model = 'vscodelm/auto';
  const watch = watchConsumerEvents((m, p) => sent.push([m, p]), () => ({ consumerModel: model }));
  fake.fireModelsChanged();
  model = 'vscodelm/copilot/gpt-4o';
  fake.fireConfigChanged(['lmbridge.consumer.model']);
  fake.fireConfigChanged(['lm.someSetting']);
  fake.fireConfigChanged(['editor.fontSize']);
  assert.deepEqual(sent, [
    ['lm/modelsChanged', {}],
    ['lm/configChanged', { section: 'lmbridge', settings: { consumerModel: 'vscodelm/copilot/gpt-4o' } }],
    ['lm/configChanged', { section: 'lm', settings: { consumerModel: 'vscodelm/copilot/gpt-4o' } }],
  ]);
  watch.dispose();
  fake.fireModelsChanged();
  assert.equal(sent.length, 3, 'nothing is forwarded after dispose');
});

test('an app without a usable model is told to the user once per window; the cause only in the log', () => {
  const lines: string[] = [];
  const log = { trace() {}, debug() {}, info() {}, warn: (m: string) => lines.push(m), error() {}, appendLine() {} };
  const before = fake.shownWarnings.length;
  showDegraded({ cause: 'no model matches [x](command:workbench.action.tasks.runTask)' }, log);
  showDegraded({ cause: 'again' }, log);
  showDegraded('not an object', log);
  assert.deepEqual(fake.shownWarnings.slice(before), [DEGRADED_MESSAGE]);
  assert.ok(!DEGRADED_MESSAGE.includes('command:'));
  assert.equal(lines.length, 3);
  assert.match(lines[0], /no model matches/);
  assert.match(lines[2], /no cause given/);
});

test("lmbridge.endpoint.tools entries match as the host's fnmatchcase does", () => {
  const allow = ['weather', 'mcp_github_*', 'read?', 'x[ab]', 'y[!a]', 'a.b'];
  for (const name of ['weather', 'mcp_github_search', 'mcp_github_', 'read1', 'xa', 'xb', 'yc', 'a.b']) assert.ok(toolAllowed(name, allow), name);
  for (const name of ['Weather', 'weather2', 'mcp_gitlab_x', 'read', 'read12', 'xc', 'ya', 'axb', '']) assert.ok(!toolAllowed(name, allow), name);
  assert.ok(toolAllowed('anything at all', ['*']));
  assert.ok(!toolAllowed('weather', []));
  assert.ok(toolAllowed('a(b)+', ['a(b)+']), 'regex characters are literal');
});

test('the model a request names is found once and kept until VS Code says its models changed', async () => {
  const handlers = new Map<string, (params: unknown, token: rpc.CancellationToken) => Promise<unknown>>();
  const conn = { onRequest: (m: string, h: never) => handlers.set(m, h), onNotification: () => undefined } as unknown as rpc.MessageConnection;
  const log = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, appendLine() {} };
  attachConsumer(conn, log);
  const watch = watchConsumerEvents(() => undefined, () => ({}));
  fake.chatModels.splice(0, fake.chatModels.length, { id: 'm1', vendor: 'v', countTokens: async () => 7 });
  fake.fireModelsChanged(); // nothing kept from another test
  const token = new rpc.CancellationTokenSource().token;
  const count = handlers.get('lm/countTokens')!;
  const before = fake.selections.length;
  for (let i = 0; i < 3; i++) assert.deepEqual(await count({ model: { id: 'm1', vendor: 'v' }, text: 'hi' }, token), { tokens: 7 });
  assert.equal(fake.selections.length - before, 1, 'one vscode.lm.selectChatModels for three requests');
  // VS Code's models changed: the next request finds its model again (here a new one)
  fake.chatModels.splice(0, 1, { id: 'm1', vendor: 'v', countTokens: async () => 9 });
  fake.fireModelsChanged();
  assert.deepEqual(await count({ model: { id: 'm1', vendor: 'v' }, text: 'hi' }, token), { tokens: 9 });
  assert.equal(fake.selections.length - before, 2);
  // a model that is not there is looked for every time (nothing kept), and said so
  const gone = await count({ model: { id: 'nope', vendor: 'v' }, text: 'hi' }, token);
  assert.ok(gone instanceof rpc.ResponseError && /no VS Code language model with id 'nope'/.test(gone.message));
  await count({ model: { id: 'nope', vendor: 'v' }, text: 'hi' }, token);
  assert.equal(fake.selections.length - before, 4);
  watch.dispose();
});
