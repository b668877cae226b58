// Unit tests of the consumer-side events the extension forwards to the host.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as vscode from 'vscode';
import { DEGRADED_MESSAGE, showDegraded, toolAllowed, watchConsumerEvents } from '../src/consumer';

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
