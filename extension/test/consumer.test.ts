// Unit tests of the consumer-side events the extension forwards to the host.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as vscode from 'vscode';
import { watchConsumerEvents } from '../src/consumer';

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
