// Unit tests of `plain` (untrusted.ts): the one helper every untrusted string goes through
// before a notification, a dialog, a quick pick or an input box shows it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ignoredMessage } from '../src/settings';
import { consentMessage, WorkspaceConsent } from '../src/consent';
import { plain, testArgument } from '../src/untrusted';

// VS Code's notification renderer (vs/base/common/linkedText.ts): a markdown link whose target is
// http(s), command: or file:. A string this finds no link in is shown as text.
const LINK = /\[([^\]]+)\]\(((?:https?:\/\/|command:|file:)[^)\s]+)(?: (["'])(.+?)(\3))?\)/gi;
const links = (s: string): string[] => [...s.matchAll(LINK)].map(m => m[2]);
// a codicon in a quick pick label or a status text
const ICON = /\$\([a-z0-9-~]+\)/i;

const HOSTILE = [
  '[Repair lmbridge](command:workbench.action.tasks.runTask?%5B%22pwn%22%5D)',
  "[Set API key](command:lmbridge.setApiKey?[\"openai\",\"sk-attacker\"] 'Fix')",
  '[x] (command:lmbridge.clearApiKey)',
  '[click](https://evil.example/steal)',
  '[file](file:///etc/passwd)',
  'ok\n[newline](command:x)',
  '$(check) trusted by you',
  '<command:lmbridge.setApiKey>',
  'a\u202etxt.exe',
];

test('no untrusted text stays a link or an icon, however it is written', () => {
  for (const s of HOSTILE) {
    const p = plain(s);
    assert.deepEqual(links(p), [], p);
    assert.doesNotMatch(p, ICON, p);
    assert.doesNotMatch(p, /command:/i, p);
    assert.doesNotMatch(p, /[\n\r\u202e]/, p);
    assert.equal(plain(p), p, 'idempotent');
  }
  // the text still reads the same to the user (only invisible breaks were added)
  assert.equal(plain(HOSTILE[0]).replace(/\u200b/g, ''), HOSTILE[0]);
  // plain text is left alone
  for (const s of ['mine', 'http://127.0.0.1:8080/v1', 'lmbridge.apps = ["tools/x.py"]', "provider 'x' failed: 401"]) assert.equal(plain(s), s);
  assert.equal(plain(42), '42');
});

test('the ignored-settings notification and the consent question carry the workspace text inert', async () => {
  const evil = HOSTILE[1];
  const text = ignoredMessage([{ setting: 'lmbridge.providers', name: evil, field: 'provider', value: HOSTILE[0], reason: 'r' }]);
  assert.deepEqual(links(text), []);
  assert.doesNotMatch(text, /command:/);
  const store = new Map<string, unknown>();
  const consent = new WorkspaceConsent({ get: <T>(k: string) => store.get(k) as T | undefined, update: async (k, v) => { store.set(k, v); } });
  const question = consentMessage(consent.describe([{ name: evil, format: 'chat-completions', baseUrl: 'http://127.0.0.1:9/v1', chatPath: HOSTILE[0] }]));
  assert.deepEqual(links(question), []);
  assert.doesNotMatch(question, /command:/);
  assert.ok(question.includes('http://127.0.0.1:9'), question);
});

test('a command takes a key or a provider name as an argument only in the end-to-end tests, never from a link', () => {
  // what VS Code passes when a rendered command:lmbridge.setApiKey?["openai","sk-attacker"] is clicked
  const [name, key] = JSON.parse(decodeURIComponent('%5B%22openai%22%2C%22sk-attacker%22%5D')) as unknown[];
  assert.equal(testArgument(name, {}), undefined);
  assert.equal(testArgument(key, { LMBRIDGE_TEST_COMMAND_ARGUMENTS: '0' }), undefined);
  assert.equal(testArgument(key, { LMBRIDGE_TEST_COMMAND_ARGUMENTS: '1' }), 'sk-attacker');
  assert.equal(testArgument(42, { LMBRIDGE_TEST_COMMAND_ARGUMENTS: '1' }), undefined);
});
