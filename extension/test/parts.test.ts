// Unit tests of the wire <-> VS Code part conversion, with a fake 'vscode' module.
import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import * as vscode from 'vscode';
import type * as Fake from './fake-vscode';
import { messageFromWire, messageToWire, optionsToWire, partFromWire, partToWire } from '../src/parts';

const fake = vscode as unknown as typeof import('./fake-vscode');
beforeEach(() => fake.setProposals({ data: true, thinking: true }));

test('wire parts become VS Code parts', () => {
  const text = partFromWire({ kind: 'text', value: 'hi' }) as vscode.LanguageModelTextPart;
  assert.ok(text instanceof vscode.LanguageModelTextPart);
  assert.equal(text.value, 'hi');
  const call = partFromWire({ kind: 'toolCall', callId: 'c1', name: 'f', input: { a: 1 } }) as vscode.LanguageModelToolCallPart;
  assert.deepEqual([call.callId, call.name, call.input], ['c1', 'f', { a: 1 }]);
  const data = partFromWire({ kind: 'data', mimeType: 'image/png', data: Buffer.from([1, 2, 3]).toString('base64') }) as Fake.DataPart;
  assert.ok(data instanceof fake.DataPart);
  assert.deepEqual([...data.data], [1, 2, 3]);
  const thinking = partFromWire({ kind: 'thinking', value: ['a', 'b'], id: 'r1', metadata: { signature: 's' } }) as Fake.ThinkingPart;
  assert.deepEqual([thinking.value, thinking.id, thinking.metadata], [['a', 'b'], 'r1', { signature: 's' }]);
});

test('without the proposed APIs thinking and data are left out, and said so', () => {
  fake.setProposals({ data: false, thinking: false });
  const dropped: string[] = [];
  assert.equal(partFromWire({ kind: 'thinking', value: 'x' }, k => dropped.push(k)), undefined);
  assert.equal(partFromWire({ kind: 'data', mimeType: 'text/plain', data: '' }, k => dropped.push(k)), undefined);
  assert.deepEqual(dropped, ['thinking', 'data']);
});

test('malformed wire parts are errors naming the field', () => {
  assert.throws(() => partFromWire({ kind: 'toolCall', callId: 'c', name: 'f', input: [1] }), /toolCall.input: expected an object/);
  assert.throws(() => partFromWire({ kind: 'text', value: 3 }), /text.value: expected a string, got number/);
  assert.throws(() => partFromWire({ kind: 'video' }), /unknown part kind "video"/);
  assert.throws(() => partFromWire(null), /part: expected an object/);
});

test('request messages become wire JSON, role 3 and unknown parts included', () => {
  const msg = {
    role: 3,
    name: 'sys',
    content: [
      new vscode.LanguageModelTextPart('t'),
      new vscode.LanguageModelToolCallPart('c1', 'f', { q: 'x' }),
      new vscode.LanguageModelToolResultPart('c1', [new vscode.LanguageModelTextPart('ok'), new vscode.LanguageModelPromptTsxPart({ node: 1 }), 42]),
      new fake.DataPart(new Uint8Array([104, 105]), 'text/plain'),
      new fake.ThinkingPart('hmm', 'r1'),
      new (class Mystery { secret = 1; })(),
    ],
  };
  assert.deepEqual(messageToWire(msg), {
    role: 3,
    name: 'sys',
    content: [
      { kind: 'text', value: 't' },
      { kind: 'toolCall', callId: 'c1', name: 'f', input: { q: 'x' } },
      { kind: 'toolResult', callId: 'c1', content: [{ kind: 'text', value: 'ok' }, { kind: 'text', value: '{"node":1}' }, { kind: 'text', value: '[unsupported number part: 42]' }] },
      { kind: 'data', mimeType: 'text/plain', data: 'aGk=' },
      { kind: 'thinking', value: 'hmm', id: 'r1' },
      { kind: 'text', value: '[unsupported Mystery part: {"secret":1}]' },
    ],
  });
});

test('parts of VS Code subclasses are recognised by shape', () => {
  class LanguageModelToolResultPart2 { constructor(public callId: string, public content: unknown[]) {} }
  assert.deepEqual(partToWire(new LanguageModelToolResultPart2('c', [new vscode.LanguageModelTextPart('r')])),
    { kind: 'toolResult', callId: 'c', content: [{ kind: 'text', value: 'r' }] });
});

test('options and consumer messages', () => {
  assert.deepEqual(optionsToWire({ tools: [{ name: 't', description: 'd' }], toolMode: 2, modelOptions: { temperature: 0 } }),
    { tools: [{ name: 't', description: 'd', inputSchema: null }], toolMode: 2, modelOptions: { temperature: 0 } });
  assert.deepEqual(optionsToWire({}), { tools: [], toolMode: 1, modelOptions: {} });
  // the model picker's choices (options.modelConfiguration, where VS Code passes it) go along
  const picked = { modelOptions: {}, modelConfiguration: { reasoningEffort: 'high' } } as unknown as Parameters<typeof optionsToWire>[0];
  assert.deepEqual(optionsToWire(picked), { tools: [], toolMode: 1, modelOptions: {}, modelConfiguration: { reasoningEffort: 'high' } });
  assert.deepEqual(optionsToWire({ modelConfiguration: {} } as unknown as Parameters<typeof optionsToWire>[0]), { tools: [], toolMode: 1, modelOptions: {} });
  const m = messageFromWire({ role: 2, content: 'hello', name: null }) as unknown as Fake.LanguageModelChatMessage;
  assert.equal(m.role, 2);
  assert.equal((m.content as vscode.LanguageModelTextPart[])[0].value, 'hello');
  assert.throws(() => messageFromWire({ role: 4, content: [] }), /message.role: expected 1, 2 or 3, got 4/);
});
