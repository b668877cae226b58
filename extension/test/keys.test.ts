// Unit tests of API keys bound to an origin: the origin text (the Python host computes the same
// for the same entries), key validation, the stored form and legacy values.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkKey, decodeStored, encodeStored, entryFor, migrateStored, movedKeys, originOf, urlOrigin } from '../src/keys';

test('the origin of a baseUrl: scheme://host:port, lower-cased, the port always written', () => {
  const cases: [string, string | null][] = [
    ['https://api.openai.com/v1', 'https://api.openai.com:443'],
    ['HTTPS://API.OpenAI.com:443/v1/', 'https://api.openai.com:443'],
    ['http://localhost:11434/v1', 'http://localhost:11434'],
    ['http://127.0.0.1/v1', 'http://127.0.0.1:80'],
    ['https://example.com:8443', 'https://example.com:8443'],
    ['https://example.com:/v1', 'https://example.com:443'],
    ['http://[::1]:8080/v1', 'http://[::1]:8080'],
    ['https://[2001:DB8::1]/x', 'https://[2001:db8::1]:443'],
    // the host's own examples (tests/test_config_trust.py)
    ['HTTPS://API.OpenAI.COM:443/v1/', 'https://api.openai.com:443'],
    ['http://Example.com', 'http://example.com:80'],
    ['http://example.com:8080/x?y=1', 'http://example.com:8080'],
    ['https://example.com:80', 'https://example.com:80'],
    ['http://127.0.0.1:1234/v1', 'http://127.0.0.1:1234'],
    ['http://[0:0:0:0:0:0:0:1]/', 'http://[::1]:80'],
    ['https://bücher.example/', 'https://xn--bcher-kva.example:443'],
    ['https://example.com./v1', 'https://example.com:443'],
    ['http://[::ffff:1.2.3.4]/', 'http://[::ffff:102:304]:80'],
    ['http://example.com:0/', 'http://example.com:80'],
    // user info, query and fragment never make a different origin
    ['https://user:pass@api.example.com/v1?key=1#f', 'https://api.example.com:443'],
    ['https://evil.example@api.example.com/v1', 'https://api.example.com:443'],
    ['https://api.example.com?x=@evil.example', 'https://api.example.com:443'],
    // written as Python's urlsplit reads it (no WHATWG host rewriting)
    ['http://0x7f.1/v1', 'http://0x7f.1:80'],
    ['  https://api.example.com/v1  ', 'https://api.example.com:443'],
    ['https://api.exa\tmple.com/v1', 'https://api.example.com:443'],
    // not an http(s) URL with a host and a valid port
    ['api.openai.com/v1', null],
    ['ftp://example.com/', null],
    ['https:///v1', null],
    ['https://example.com:99999/', null],
    ['https://example.com:8o/', null],
    ['http://[::1/v1', null],
    ['ftp://x', null],
    ['https://', null],
    ['x', null],
    ['http://h:99999/', null],
  ];
  for (const [url, origin] of cases) assert.equal(urlOrigin(url), origin, url);
});

test('the origin of an entry: its baseUrl, else python:<reference as written>', () => {
  assert.equal(originOf({ name: 'a', baseUrl: 'https://api.openai.com/v1' }), 'https://api.openai.com:443');
  assert.equal(originOf({ name: 'p', provider: 'my_pkg.mod:Provider' }), 'python:my_pkg.mod:Provider');
  // a baseUrl wins over a provider reference; an entry with neither has no origin
  assert.equal(originOf({ name: 'b', baseUrl: 'http://h:1', provider: 'x:Y' }), 'http://h:1');
  assert.equal(originOf({ name: 'c' }), null);
  assert.equal(originOf(undefined), null);
});

test('keys are trimmed; empty keys and control characters are refused naming the provider, never the key', () => {
  assert.deepEqual(checkKey('oai', '  sk-abc123 \n'), { key: 'sk-abc123' });
  for (const bad of ['sk-abc\r\nX-Evil: 1', 'sk-\u0000abc', 'sk-\u001babc', 'sk-\u0085abc', 'sk-\u2028abc', 'sk-\u007fabc']) {
    const r = checkKey('oai', bad);
    assert.ok('error' in r, JSON.stringify(bad));
    assert.match(r.error, /'oai' contains control characters/);
    assert.ok(!r.error.includes('sk-'), r.error);
  }
  const empty = checkKey('oai', ' \t ');
  assert.ok('error' in empty && /'oai' is empty/.test(empty.error));
});

test('stored keys are JSON {key, origin}; a plain value is legacy', () => {
  const text = encodeStored({ key: 'sk-1', origin: 'https://api.openai.com:443' });
  assert.deepEqual(JSON.parse(text), { key: 'sk-1', origin: 'https://api.openai.com:443' });
  assert.deepEqual(decodeStored(text), { key: 'sk-1', origin: 'https://api.openai.com:443', legacy: false });
  assert.deepEqual(decodeStored(encodeStored({ key: 'k', origin: null })), { key: 'k', origin: null, legacy: false });
  assert.deepEqual(decodeStored('sk-plain'), { key: 'sk-plain', origin: null, legacy: true });
  // a plain key that looks like JSON but is not the stored form stays a key
  assert.deepEqual(decodeStored('{not json'), { key: '{not json', origin: null, legacy: true });
  assert.deepEqual(decodeStored('{"key": 1}'), { key: '{"key": 1}', origin: null, legacy: true });
});

test("the user's entry decides where a key goes; a workspace entry only for a name the user has not", () => {
  const user = [{ name: 'oai', baseUrl: 'https://api.openai.com/v1' }];
  const workspace = [{ name: 'oai', baseUrl: 'http://127.0.0.1:9/v1' }, { name: 'new', baseUrl: 'http://127.0.0.1:9/v1' }];
  assert.deepEqual(entryFor('oai', user, workspace), { entry: user[0], level: 'user' });
  assert.deepEqual(entryFor('new', user, workspace), { entry: workspace[1], level: 'workspace' });
  assert.equal(entryFor('none', user, workspace), undefined);
});

test("a legacy plain key is bound to the origin of the user's entry of its name, else left unbound", () => {
  const user = [{ name: 'oai', baseUrl: 'https://api.openai.com/v1' }];
  const m = migrateStored('oai', ' sk-legacy ', user);
  assert.deepEqual(JSON.parse(m.store!), { key: 'sk-legacy', origin: 'https://api.openai.com:443' });
  assert.equal(m.message?.level, 'info');
  // only a workspace entry has the name: not bound (the host refuses it and says to confirm)
  const w = migrateStored('ws', 'sk-legacy', user);
  assert.equal(w.store, undefined);
  assert.match(w.message!.text, /'ws'.*Confirm API Key Origin/);
  // already bound: nothing to do
  assert.deepEqual(migrateStored('oai', encodeStored({ key: 'k', origin: 'https://x:443' }), user), {});
  // a legacy value that is no usable key is not bound, and never echoed
  const bad = migrateStored('oai', 'sk-a\r\nb', user);
  assert.equal(bad.store, undefined);
  assert.ok(!bad.message!.text.includes('sk-a'));
});

test('Confirm API Key Origin offers the keys whose provider points elsewhere now', () => {
  const user = [{ name: 'oai', baseUrl: 'https://proxy.example.com/v1' }, { name: 'same', baseUrl: 'https://a.example/v1' }];
  const workspace = [{ name: 'oai', baseUrl: 'http://127.0.0.1:9/v1' }, { name: 'ws', baseUrl: 'http://127.0.0.1:9/v1' }];
  const stored = [
    { name: 'oai', text: encodeStored({ key: 'k1', origin: 'https://api.openai.com:443' }) },
    { name: 'same', text: encodeStored({ key: 'k2', origin: 'https://a.example:443' }) },
    { name: 'ws', text: 'legacy-plain' },
    { name: 'gone', text: encodeStored({ key: 'k3', origin: 'https://x:443' }) },
  ];
  assert.deepEqual(movedKeys(stored, user, workspace), [
    // the user's entry decides, not the workspace's entry of the same name
    { name: 'oai', key: 'k1', recorded: 'https://api.openai.com:443', now: 'https://proxy.example.com:443', level: 'user' },
    // a legacy key has no recorded origin; this one would go where the workspace says (the modal says so)
    { name: 'ws', key: 'legacy-plain', recorded: null, now: 'http://127.0.0.1:9', level: 'workspace' },
  ]);
});
