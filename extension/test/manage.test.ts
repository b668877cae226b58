// Unit tests of the Manage Models flow: a scripted UI answers each quick pick and input box
// (checking what it was shown), an in-memory store plays the user settings, SecretStorage and
// the host's providers/test.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import type { BoundKey, ProviderEntry } from '../src/keys';
import { manageModels, type InputOptions, type ManageStore, type ManageUI, type PickItem, type TestResult } from '../src/manage';
import { azureBaseUrl, freeName, nameProblem, parseModelList, PRESETS, urlProblem } from '../src/presets';

type Step =
  | { pick: string | RegExp; expect?: (labels: string[], title: string) => void }
  | { input: string; expect?: (o: InputOptions) => void; invalid?: string[] }
  | { confirm: boolean }
  | { escape: true };

class ScriptedUI implements ManageUI {
  shown: string[] = [];
  errors: string[] = [];
  infos: string[] = [];
  constructor(private readonly steps: Step[]) {}
  private next(kind: string): Step {
    const s = this.steps.shift();
    assert.ok(s, `the flow asked for a ${kind} after the script ended`);
    return s;
  }
  async pick<T>(items: PickItem<T>[], options: { title: string; placeholder?: string }): Promise<T | undefined> {
    const labels = items.map(i => i.label);
    this.shown.push(`pick ${options.title}: ${labels.join(' | ')}`);
    const s = this.next('pick');
    if ('escape' in s) return undefined;
    assert.ok('pick' in s, `expected ${JSON.stringify(s)}, the flow showed a pick: ${labels.join(' | ')}`);
    s.expect?.(labels, options.title);
    const found = items.find(i => (typeof s.pick === 'string' ? i.label.includes(s.pick) : s.pick.test(i.label)));
    assert.ok(found, `no item ${String(s.pick)} in ${labels.join(' | ')}`);
    return found.value;
  }
  async input(o: InputOptions): Promise<string | undefined> {
    this.shown.push(`input ${o.prompt}`);
    const s = this.next('input');
    if ('escape' in s) return undefined;
    assert.ok('input' in s, `expected ${JSON.stringify(s)}, the flow asked: ${o.prompt}`);
    s.expect?.(o);
    for (const bad of s.invalid ?? []) assert.ok(o.validate?.(bad), `'${bad}' should be refused at: ${o.prompt}`);
    assert.equal(o.validate?.(s.input), undefined, `'${s.input}' refused at: ${o.prompt}`);
    return s.input;
  }
  async confirm(message: string): Promise<boolean> {
    this.shown.push(`confirm ${message}`);
    const s = this.next('confirm');
    assert.ok('confirm' in s, `expected ${JSON.stringify(s)}, the flow asked to confirm: ${message}`);
    return s.confirm;
  }
  info(m: string): void { this.infos.push(m); }
  error(m: string): void { this.errors.push(m); }
  busy<T>(_title: string, work: () => Promise<T>): Promise<T> { return work(); }
  done(): void { assert.deepEqual(this.steps, [], 'the flow ended before the script did'); }
}

class MemoryStore implements ManageStore {
  secrets = new Map<string, BoundKey>();
  tested: string[] = [];
  writes = 0;
  constructor(public providers: ProviderEntry[] = [], private readonly answer: (name: string, s: MemoryStore) => TestResult = okAnswer) {}
  userProviders(): ProviderEntry[] { return structuredClone(this.providers); }
  async writeUserProviders(list: ProviderEntry[]): Promise<void> { this.providers = structuredClone(list); this.writes++; }
  async storedKey(name: string): Promise<BoundKey | undefined> { return this.secrets.get(name); }
  async storeKey(name: string, bound: BoundKey): Promise<void> { this.secrets.set(name, bound); }
  async deleteKey(name: string): Promise<void> { this.secrets.delete(name); }
  async test(name: string): Promise<TestResult> { this.tested.push(name); return this.answer(name, this); }
  async openSettingsJson(): Promise<void> { /* nothing to open */ }
}

function okAnswer(name: string): TestResult {
  return { name, ok: true, models: [{ id: `${name}/m1`, name: 'Model One', maxInputTokens: 1000 }, { id: `${name}/m2` }] };
}

test('add a custom OpenAI-compatible provider: entry in user settings, key bound to its origin, models shown', async () => {
  const store = new MemoryStore([{ name: 'custom', baseUrl: 'http://127.0.0.1:1/v1', format: 'chat-completions' }]);
  const ui = new ScriptedUI([
    { pick: 'Add a provider', expect: (labels: string[]) => assert.ok(labels.some((l: string) => l.includes('custom'))) },
    { pick: 'OpenAI-compatible server', expect: (labels: string[]) => assert.deepEqual(labels, PRESETS.map(p => p.label)) },
    // the name offered is free; a taken one, '/' and blanks are refused
    { input: 'mine', expect: (o: InputOptions) => assert.equal(o.value, 'custom-2'), invalid: ['custom', 'a/b', '  '] },
    { input: 'https://llm.example.com/v1', invalid: ['llm.example.com', 'ftp://x', 'https://u:p@llm.example.com/v1'] },
    { input: '  sk-secret-1  ', expect: (o: InputOptions) => { assert.equal(o.password, true); assert.match(o.prompt, /sent only to https:\/\/llm\.example\.com:443/); }, invalid: ['a\nb'] },
    // the test runs at once and lists the models; picking one goes back to the provider's menu
    { pick: 'mine/m1', expect: (labels: string[], title: string) => { assert.deepEqual(labels.slice(0, 2), ['mine/m1', 'mine/m2']); assert.match(title, /'mine' works: 2 models/); } },
    { pick: 'Back', expect: (labels: string[]) => assert.ok(labels.some((l: string) => l.includes('Replace the API key'))) },
    { escape: true },
  ]);
  await manageModels(ui, store);
  ui.done();
  assert.deepEqual(store.providers[1], { name: 'mine', baseUrl: 'https://llm.example.com/v1', format: 'chat-completions' });
  assert.deepEqual(store.secrets.get('mine'), { key: 'sk-secret-1', origin: 'https://llm.example.com:443' });
  assert.ok(!JSON.stringify(store.providers).includes('sk-secret'), 'no key in the settings');
  assert.deepEqual(store.tested, ['mine']);
});

test('each preset writes the entry one would write by hand', async () => {
  const cases: [string, Step[], ProviderEntry, BoundKey | undefined][] = [
    ['OpenAI', [{ input: 'openai' }, { input: 'sk-o' }], { name: 'openai', baseUrl: 'https://api.openai.com/v1', format: 'responses' }, { key: 'sk-o', origin: 'https://api.openai.com:443' }],
    ['Anthropic', [{ input: 'claude' }, { input: 'sk-a', invalid: [''] }], { name: 'claude', baseUrl: 'https://api.anthropic.com/v1', format: 'anthropic' }, { key: 'sk-a', origin: 'https://api.anthropic.com:443' }],
    ['OpenRouter', [{ input: 'openrouter' }, { input: 'sk-r' }], { name: 'openrouter', baseUrl: 'https://openrouter.ai/api/v1', format: 'chat-completions' }, { key: 'sk-r', origin: 'https://openrouter.ai:443' }],
    ['Ollama', [{ input: 'ollama' }], { name: 'ollama', baseUrl: 'http://127.0.0.1:11434/v1', format: 'chat-completions' }, undefined],
    ['LM Studio', [{ input: 'lmstudio' }], { name: 'lmstudio', baseUrl: 'http://127.0.0.1:1234/v1', format: 'chat-completions' }, undefined],
    ['vLLM', [{ input: 'vllm' }, { input: '' }], { name: 'vllm', baseUrl: 'http://127.0.0.1:8000/v1', format: 'chat-completions' }, undefined],
    ['Azure OpenAI', [{ input: 'azure' }, { input: 'My-Res' }, { input: 'az-key' }],
      { name: 'azure', baseUrl: 'https://my-res.openai.azure.com/openai/v1', format: 'chat-completions', apiKeyHeader: 'api-key' }, { key: 'az-key', origin: 'https://my-res.openai.azure.com:443' }],
    ['AI SDK route', [{ input: 'route' }, { input: 'http://127.0.0.1:3000/api' }, { input: 'openai/gpt-5, anthropic/claude-sonnet-4.5,openai/gpt-5' }, { input: '' }],
      { name: 'route', baseUrl: 'http://127.0.0.1:3000/api', format: 'ai-sdk', models: ['openai/gpt-5', 'anthropic/claude-sonnet-4.5'] }, undefined],
  ];
  for (const [label, steps, entry, key] of cases) {
    const store = new MemoryStore();
    const ui = new ScriptedUI([{ pick: 'Add a provider' }, { pick: new RegExp(`^${label}$`) }, ...steps, { escape: true }]);
    await manageModels(ui, store);
    ui.done();
    assert.deepEqual(store.providers, [entry], label);
    assert.deepEqual(store.secrets.get(entry.name as string), key, label);
  }
});

test('escaping in the middle of adding writes nothing', async () => {
  const store = new MemoryStore();
  const ui = new ScriptedUI([{ pick: 'Add a provider' }, { pick: /^OpenAI$/ }, { input: 'openai' }, { escape: true }]);
  await manageModels(ui, store);
  ui.done();
  assert.deepEqual(store.providers, []);
  assert.equal(store.writes, 0);
  assert.equal(store.secrets.size, 0);
});

test("a failing test shows the upstream's error and stays in the provider's menu", async () => {
  const store = new MemoryStore([{ name: 'p', baseUrl: 'https://api.example.com/v1', format: 'chat-completions' }],
    (name) => ({ name, ok: false, models: [], error: 'p: HTTP 401 from the model catalog: Incorrect API key provided', code: 'NoPermissions' }));
  const ui = new ScriptedUI([{ pick: 'p' }, { pick: 'Test' }, { pick: 'Set the API key' }, { input: 'sk-new' }, { escape: true }]);
  await manageModels(ui, store);
  ui.done();
  assert.equal(ui.errors.length, 1);
  assert.match(ui.errors[0], /'p' does not work yet: .*HTTP 401.*Incorrect API key/);
  assert.deepEqual(store.secrets.get('p'), { key: 'sk-new', origin: 'https://api.example.com:443' });
});

test('a new base URL moves the key only when confirmed; rename moves it; remove deletes entry and key', async () => {
  const store = new MemoryStore([
    { name: 'a', baseUrl: 'https://one.example/v1', format: 'chat-completions', headers: { 'X-Team': 't' } },
    { name: 'b', baseUrl: 'https://two.example/v1', format: 'anthropic' },
  ]);
  store.secrets.set('a', { key: 'ka', origin: 'https://one.example:443' });
  store.secrets.set('b', { key: 'kb', origin: 'https://two.example:443' });
  const ui = new ScriptedUI([
    { pick: '$(server) a' },
    { pick: 'Change the base URL' }, { input: 'https://elsewhere.example/v1' }, { confirm: false },
    { pick: 'Change the base URL' }, { input: 'https://third.example/v1' }, { confirm: true },
    { pick: 'Rename' }, { input: 'alpha', invalid: ['b'] },
    { pick: 'Back' },
    { pick: '$(server) b' }, { pick: 'Remove the provider' }, { confirm: true },
    { escape: true },
  ]);
  await manageModels(ui, store);
  ui.done();
  // other fields of the entry are kept
  assert.deepEqual(store.providers, [{ name: 'alpha', baseUrl: 'https://third.example/v1', format: 'chat-completions', headers: { 'X-Team': 't' } }]);
  assert.deepEqual([...store.secrets.entries()], [['alpha', { key: 'ka', origin: 'https://third.example:443' }]]);
  assert.ok(ui.shown.some(s => s.startsWith('confirm Send the API key of \'a\' to https://elsewhere.example:443')));
});

test('presets: names, URLs, Azure resources and model lists', () => {
  assert.equal(nameProblem('ok-name', []), undefined);
  assert.match(nameProblem('x', ['x']) ?? '', /already in your settings/);
  assert.match(nameProblem('a/b', []) ?? '', /'\/' is not allowed/);
  assert.match(nameProblem('', []) ?? '', /Enter a name/);
  assert.equal(freeName('openai', ['openai', 'openai-2']), 'openai-3');
  assert.equal(urlProblem('http://127.0.0.1:8000/v1'), undefined);
  assert.ok(urlProblem('127.0.0.1:8000'));
  assert.equal(azureBaseUrl('res'), 'https://res.openai.azure.com/openai/v1');
  assert.equal(azureBaseUrl('https://res.openai.azure.com/'), 'https://res.openai.azure.com/openai/v1');
  assert.equal(azureBaseUrl('https://res.services.ai.azure.com/openai/v1/'), 'https://res.services.ai.azure.com/openai/v1');
  assert.deepEqual(parseModelList(' a, b c,,a '), ['a', 'b', 'c']);
  assert.deepEqual(PRESETS.map(p => p.id), ['openai', 'anthropic', 'openrouter', 'ollama', 'lmstudio', 'vllm', 'azure', 'custom', 'ai-sdk']);
});

test("Manage Models refuses exactly the base URLs the host refuses for a credential in them (one rule: credentials.ts is made from the host's)", () => {
  // the table the host's test reads too (tests/test_config_trust.py)
  const table = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'tests', 'data', 'credential_urls.json'), 'utf8')) as { urls: [string, boolean][] };
  assert.ok(table.urls.length > 10);
  for (const [url, refused] of table.urls) {
    const problem = urlProblem(url);
    assert.equal(problem !== undefined && /credential/i.test(problem), refused, `${url}: ${problem}`);
  }
  assert.match(urlProblem('https://x.example/v1?key=AIza')!, /query parameter 'key'/);
});
