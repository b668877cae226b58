// Unit tests of the provider of the Language Models editor's groups (vendor 'lmbridge-api')
// against a recording stand-in for the host: what VS Code's calls become (a round's first call,
// a group's configuration), where a key is recorded and which origin goes with it, and what
// Confirm API Key Origin changes. The whole path runs in tests/e2e/test_vscode_models_editor.py.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as rpc from 'vscode-jsonrpc/node';
import * as vscode from 'vscode';
import { decodeOrigins, EditorGroups, keyOriginSlot } from '../src/editorGroups';
import { EditorGroupsProvider } from '../src/editorProvider';
import { Host } from '../src/host';
import { LmBridgeChatProvider } from '../src/provider';
import { MemoryLog } from './host-support';

const none = new rpc.CancellationTokenSource().token as vscode.CancellationToken;
const A = 'https://a.example:443';
const B = 'https://b.example:443';

class Secrets {
  readonly map = new Map<string, string>();
  get(key: string): Promise<string | undefined> { return Promise.resolve(this.map.get(key)); }
  store(key: string, value: string): Promise<void> { this.map.set(key, value); return Promise.resolve(); }
}

function setup(fail?: string): { provider: EditorGroupsProvider; groups: EditorGroups; secrets: Secrets; sent: unknown[][]; configures: number[]; log: MemoryLog } {
  const sent: unknown[][] = [];
  const configures = [0];
  const host = {
    sendRequest: (method: string, params: unknown) => {
      sent.push([method, params]);
      if (fail) return Promise.reject(new rpc.ResponseError(-32000, fail, { languageModelError: 'NoPermissions' }));
      const id = (params as { group: string }).group;
      return Promise.resolve({ models: [{ id: `editor:${id}/m`, name: 'm' }] });
    },
    exitMessage: () => 'stopped',
  } as unknown as Host;
  const log = new MemoryLog();
  const main = new LmBridgeChatProvider(host, log);
  const groups = new EditorGroups();
  const secrets = new Secrets();
  const provider = new EditorGroupsProvider(main, host, groups, secrets as unknown as vscode.SecretStorage, log, async () => { configures[0]++; });
  return { provider, groups, secrets, sent, configures, log };
}

const at = (url: string, key?: string): { silent: boolean; configuration: Record<string, unknown> } =>
  ({ silent: true, configuration: { format: 'chat-completions', baseUrl: url, ...(key ? { apiKey: key } : {}) } });

test("the vendor's own call (and a VS Code without groups) lists nothing and asks the host nothing", async () => {
  const { provider, sent, configures } = setup();
  assert.deepEqual(await provider.provideLanguageModelChatInformation({ silent: true }, none), []);
  assert.deepEqual(sent, []);
  assert.equal(configures[0], 0);
});

test('a group is told to the host once and listed by its id; its key is recorded for its origin', async () => {
  const { provider, groups, secrets, sent, configures, log } = setup();
  const models = await provider.provideLanguageModelChatInformation(at('https://a.example/v1', 'sk-1'), none);
  const [id] = groups.wire().map(g => g.id);
  assert.deepEqual(models.map(m => m.id), [`editor:${id}/m`]);
  assert.deepEqual(sent, [['models/list', { silent: true, group: id }]]);
  assert.equal(configures[0], 1);
  assert.deepEqual(decodeOrigins(secrets.map.get(keyOriginSlot('sk-1'))), [A]);
  assert.deepEqual(groups.secrets(), { [`editor:${id}`]: { key: 'sk-1', origin: A } });
  assert.ok(!JSON.stringify([...secrets.map]).includes('sk-1'), 'the key is not stored again');
  assert.ok(!log.lines.some(l => l[1].includes('sk-1')), 'the key is not logged');
  // asked again, unchanged: listed, not told again
  await provider.provideLanguageModelChatInformation(at('https://a.example/v1', 'sk-1'), none);
  assert.equal(configures[0], 1);
});

test('the same key at another origin goes with its first origin (withheld) until confirmed', async () => {
  const { provider, groups, secrets } = setup();
  await provider.provideLanguageModelChatInformation(at('https://a.example/v1', 'sk-1'), none);
  await provider.provideLanguageModelChatInformation(at('https://b.example/v1', 'sk-1'), none);
  const moved = groups.moved();
  assert.deepEqual(moved.map(m => [m.recorded, m.now]), [[A, B]]);
  assert.deepEqual(decodeOrigins(secrets.map.get(keyOriginSlot('sk-1'))), [A]);
  await provider.rebind(moved[0].id, B);
  assert.deepEqual(decodeOrigins(secrets.map.get(keyOriginSlot('sk-1'))), [A, B]);
  assert.deepEqual(groups.moved(), []);
  // both origins now take the key
  await provider.provideLanguageModelChatInformation(at('https://b.example/v1', 'sk-1'), none);
  assert.deepEqual(Object.values(groups.secrets()).map(s => s.origin).sort(), [A, B]);
});

test('a group no round asks about any more leaves the host at the next round', async () => {
  const { provider, groups, configures } = setup();
  await provider.provideLanguageModelChatInformation({ silent: true }, none);
  await provider.provideLanguageModelChatInformation(at('https://a.example/v1'), none);
  await provider.provideLanguageModelChatInformation(at('https://b.example/v1'), none);
  assert.equal(groups.wire().length, 2);
  const before = configures[0];
  await provider.provideLanguageModelChatInformation({ silent: true }, none);
  await provider.provideLanguageModelChatInformation(at('https://a.example/v1'), none);
  await provider.provideLanguageModelChatInformation({ silent: true }, none);
  assert.deepEqual(groups.wire().map(g => g.configuration.baseUrl), ['https://a.example/v1']);
  assert.equal(configures[0], before + 1);
});

test("a group's failure is thrown for VS Code to show on the group, and logged with what it points to", async () => {
  const { provider, log } = setup('the stored API key was stored for X');
  await assert.rejects(provider.provideLanguageModelChatInformation(at('https://a.example/v1', 'sk-1'), none), (e: Error & { code?: string }) => {
    assert.match(e.message, /stored for X/);
    assert.equal(e.code, 'NoPermissions');
    return true;
  });
  assert.ok(log.at('error').some(l => l.includes('chat-completions at https://a.example/v1') && l.includes('stored for X')));
});
