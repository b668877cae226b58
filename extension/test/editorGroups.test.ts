// Unit tests of the Language Models editor's groups (vendor 'lmbridge-api'): the id a group
// gets from its configuration, the origins its key may go to, the rounds in which VS Code lists
// groups, and what an entry of lmbridge.providers becomes when moved to the editor.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bindKey, decodeOrigins, EditorGroups, groupId, groupOrigin, hostName, keyOriginSlot, planMove, splitConfiguration } from '../src/editorGroups';

const config = { format: 'chat-completions', baseUrl: 'https://api.example.com/v1', headers: { 'X-A': '1' } };

test('a group id: the base URL host and a digest of the configuration with its key', () => {
  const id = groupId(config, 'sk-1');
  assert.match(id, /^api\.example\.com-[0-9a-f]{8}$/);
  // the same group keeps its id whatever the order of its fields
  assert.equal(groupId({ headers: { 'X-A': '1' }, baseUrl: config.baseUrl, format: config.format }, 'sk-1'), id);
  // two accounts at one server, or another option, are other groups
  assert.notEqual(groupId(config, 'sk-2'), id);
  assert.notEqual(groupId(config, undefined), id);
  assert.notEqual(groupId({ ...config, headers: { 'X-A': '2' } }, 'sk-1'), id);
  // an id never holds '/' (model ids are <provider>/<model>) and says what it points to
  assert.match(groupId({ baseUrl: 'http://127.0.0.1:8080/v1' }, undefined), /^127\.0\.0\.1:8080-/);
  assert.match(groupId({ baseUrl: 'not a url' }, undefined), /^invalid-url-/);
  assert.match(groupId({}, undefined), /^nowhere-/);
  assert.equal(hostName(id), `editor:${id}`);
});

test('the key leaves the configuration; an empty key is none', () => {
  assert.deepEqual(splitConfiguration({ ...config, apiKey: '  sk-x  ' }), { configuration: config, key: 'sk-x' });
  assert.deepEqual(splitConfiguration({ ...config, apiKey: '' }), { configuration: config, key: undefined });
  assert.deepEqual(splitConfiguration({ ...config, apiKey: 42 }), { configuration: config, key: undefined });
  assert.deepEqual(splitConfiguration(undefined), { configuration: {} });
  assert.deepEqual(splitConfiguration([1]), { configuration: {} });
  assert.equal(groupOrigin(config), 'https://api.example.com:443');
  assert.equal(groupOrigin({ baseUrl: 'ftp://x' }), null);
});

test('a key goes where it was given or confirmed; a new origin waits for a confirmation', () => {
  const a = 'https://a.example:443';
  const b = 'https://b.example:443';
  // first seen: bound to where the group points
  assert.deepEqual(bindKey([], a), { origin: a, record: [a] });
  // seen for a: sent with a
  assert.deepEqual(bindKey([a], a), { origin: a });
  // the group (or another one) now points to b: the host gets a and withholds the key
  assert.deepEqual(bindKey([a], b), { origin: a });
  // confirmed for b as well: both work
  assert.deepEqual(bindKey([a, b], b), { origin: b });
  // no usable origin: nothing recorded, the key goes nowhere
  assert.deepEqual(bindKey([], null), { origin: null });
  assert.deepEqual(bindKey([a], null), { origin: a });
  // the stored list is read defensively; the slot is a digest, never the key
  assert.deepEqual(decodeOrigins(JSON.stringify([a, 3, b])), [a, b]);
  assert.deepEqual(decodeOrigins('not json'), []);
  assert.deepEqual(decodeOrigins(undefined), []);
  assert.ok(!keyOriginSlot('sk-secret').includes('sk-secret'));
  assert.equal(keyOriginSlot('sk-secret'), keyOriginSlot('sk-secret'));
});

test('groups are told to the host when new or changed, and dropped when a round no longer asks', () => {
  const groups = new EditorGroups();
  assert.deepEqual(groups.beginRound(), []);
  assert.equal(groups.update('one', { configuration: config, key: 'k1', origin: 'https://api.example.com:443' }), true);
  assert.equal(groups.update('two', { configuration: { ...config, baseUrl: 'https://b.example/v1' }, key: 'k2', origin: 'https://api.example.com:443' }), true);
  // the same description again: nothing to tell
  assert.equal(groups.update('one', { configuration: { ...config }, key: 'k1', origin: 'https://api.example.com:443' }), false);
  assert.deepEqual(groups.wire().map(g => g.id), ['one', 'two']);
  assert.ok(!JSON.stringify(groups.wire()).includes('k1'), 'the keys travel apart');
  assert.deepEqual(groups.secrets(), {
    'editor:one': { key: 'k1', origin: 'https://api.example.com:443' },
    'editor:two': { key: 'k2', origin: 'https://api.example.com:443' },
  });
  // 'two' points elsewhere than its key's origin: Confirm API Key Origin offers it
  assert.deepEqual(groups.moved().map(m => [m.id, m.recorded, m.now]), [['two', 'https://api.example.com:443', 'https://b.example:443']]);
  // the next round asks for 'one' only: 'two' was deleted in the editor
  assert.deepEqual(groups.beginRound(), []);
  groups.update('one', { configuration: config, key: 'k1', origin: 'https://api.example.com:443' });
  assert.deepEqual(groups.beginRound(), ['two']);
  assert.deepEqual(groups.wire().map(g => g.id), ['one']);
});

test('moving an entry of lmbridge.providers keeps its fields and its key where it is bound', () => {
  const entry = { name: 'openai', format: 'responses', baseUrl: 'https://api.openai.com/v1', models: ['gpt-5'] };
  const origin = 'https://api.openai.com:443';
  assert.deepEqual(planMove(entry, { key: 'sk-o', origin }, origin), {
    group: { vendor: 'lmbridge-api', name: 'openai', format: 'responses', baseUrl: 'https://api.openai.com/v1', models: ['gpt-5'], apiKey: 'sk-o' },
  });
  assert.deepEqual(planMove(entry, undefined, origin), {
    group: { vendor: 'lmbridge-api', name: 'openai', format: 'responses', baseUrl: 'https://api.openai.com/v1', models: ['gpt-5'] },
  });
  // a key bound elsewhere (or never bound) is not carried to this origin
  assert.match((planMove(entry, { key: 'sk-o', origin: 'https://proxy.example:443' }, origin) as { reason: string }).reason, /Confirm API Key Origin/);
  assert.match((planMove(entry, { key: 'sk-o', origin: null }, origin) as { reason: string }).reason, /bound to no origin/);
  // Python providers stay
  assert.match((planMove({ name: 'py', provider: 'pkg.mod:P' }, undefined, null) as { reason: string }).reason, /Python provider/);
});
