// **lmbridge: Manage Models** (the model picker's "Manage" entry): a guided flow over your user
// settings' `lmbridge.providers` and the keys in SecretStorage. The flow is plain functions over
// an injected UI and store (manageCommand.ts gives the VS Code ones), so the unit tests drive
// it step by step. Pressing Escape anywhere ends the flow; nothing half-made is written.
import { checkKey, originOf, type BoundKey, type ProviderEntry } from './keys';
import { freeName, nameProblem, parseModelList, presetEntry, PRESETS, urlProblem, type Preset } from './presets';

export interface PickItem<T> {
  label: string;
  description?: string;
  detail?: string;
  value: T;
}

export interface InputOptions {
  title: string;
  prompt: string;
  value?: string;
  placeholder?: string;
  password?: boolean;
  /** A message that keeps the value from being accepted, or `undefined`. */
  validate?: (value: string) => string | undefined;
}

/** What the flow shows. Each method resolves to `undefined` (or false) when the user escapes. */
export interface ManageUI {
  pick<T>(items: PickItem<T>[], options: { title: string; placeholder?: string }): Promise<T | undefined>;
  input(options: InputOptions): Promise<string | undefined>;
  /** A modal question with one action besides Cancel. */
  confirm(message: string, detail: string, action: string): Promise<boolean>;
  info(message: string): void;
  error(message: string): void;
  /** Runs `work` while showing that something is going on. */
  busy<T>(title: string, work: () => Promise<T>): Promise<T>;
}

/** A model as `providers/test` lists it (wire form; only what the flow shows). */
export interface TestedModel {
  id: string;
  name?: string;
  maxInputTokens?: number;
  maxOutputTokens?: number;
}

/** The result of the host's `providers/test` (docs/protocol.md). */
export interface TestResult {
  name: string;
  ok: boolean;
  models: TestedModel[];
  error?: string;
  code?: string;
}

/** Where the flow reads and writes: user settings, SecretStorage, the host. */
export interface ManageStore {
  /** `lmbridge.providers` of the user settings. */
  userProviders(): ProviderEntry[];
  /** Writes `lmbridge.providers` of the user settings (never a workspace's). */
  writeUserProviders(list: ProviderEntry[]): Promise<void>;
  storedKey(name: string): Promise<BoundKey | undefined>;
  storeKey(name: string, bound: BoundKey): Promise<void>;
  deleteKey(name: string): Promise<void>;
  /** The host's `providers/test` for `name`, with the settings as written now. */
  test(name: string): Promise<TestResult>;
  openSettingsJson(): Promise<void>;
}

const TITLE = 'lmbridge: Manage Models';

function names(list: ProviderEntry[]): string[] {
  return list.map(e => e.name).filter((n): n is string => typeof n === 'string');
}

function describeEntry(e: ProviderEntry): string {
  if (typeof e.provider === 'string') return `Python provider ${e.provider}`;
  return [e.format, e.baseUrl].filter(x => typeof x === 'string').join(' · ');
}

type MainChoice = { kind: 'provider'; name: string } | { kind: 'add' } | { kind: 'settings' };

/** The whole flow: the providers, then what to do with the one picked, until Escape. */
export async function manageModels(ui: ManageUI, store: ManageStore): Promise<void> {
  for (;;) {
    const list = store.userProviders();
    const items: PickItem<MainChoice>[] = [];
    for (const e of list) {
      if (typeof e.name !== 'string') continue;
      const key = await store.storedKey(e.name);
      items.push({ label: `$(server) ${e.name}`, description: describeEntry(e), detail: key ? `API key stored, sent only to ${key.origin ?? 'no origin yet'}` : undefined, value: { kind: 'provider', name: e.name } });
    }
    items.push({ label: '$(add) Add a provider…', description: 'OpenAI, Anthropic, OpenRouter, Ollama, LM Studio, vLLM, Azure OpenAI, any OpenAI-compatible URL, an AI SDK route', value: { kind: 'add' } });
    items.push({ label: '$(json) Edit lmbridge.providers in settings.json', value: { kind: 'settings' } });
    const choice = await ui.pick(items, { title: TITLE, placeholder: list.length ? 'Pick a provider to test, edit or remove, or add one' : 'No provider yet (the echo model is served): add one' });
    if (!choice) return;
    if (choice.kind === 'settings') {
      await store.openSettingsJson();
      return;
    }
    const name = choice.kind === 'add' ? await addProvider(ui, store) : choice.name;
    if (name === undefined) return;
    if (choice.kind === 'add' && !await showTest(ui, store, name)) return;
    if (!await providerMenu(ui, store, name)) return;
  }
}

/** Picks a preset, asks what it needs, writes the entry and stores the key. The new name, or `undefined`. */
export async function addProvider(ui: ManageUI, store: ManageStore): Promise<string | undefined> {
  const preset = await ui.pick(PRESETS.map(p => ({ label: p.label, detail: p.detail, value: p })), { title: `${TITLE}: add a provider`, placeholder: 'Which API?' });
  if (!preset) return undefined;
  const taken = names(store.userProviders());
  const name = await ui.input({
    title: `${TITLE}: ${preset.label}`,
    prompt: 'Name of the provider: model ids become "<name>/<model>"',
    value: freeName(preset.name, taken),
    validate: v => nameProblem(v, taken),
  });
  if (name === undefined) return undefined;
  let baseUrl = preset.baseUrl;
  if (baseUrl === undefined) {
    const typed = await ui.input({
      title: `${TITLE}: ${preset.label}`,
      prompt: preset.urlPrompt ?? 'Base URL',
      placeholder: preset.urlPlaceholder,
      validate: v => urlProblem(preset.normalizeUrl ? preset.normalizeUrl(v) : v),
    });
    if (typed === undefined) return undefined;
    baseUrl = preset.normalizeUrl ? preset.normalizeUrl(typed) : typed.trim();
  }
  let models: string[] | undefined;
  if (preset.asksModels) {
    const typed = await ui.input({ title: `${TITLE}: ${preset.label}`, prompt: `Model ids the route serves, separated by commas (empty: the list at ${baseUrl}/models)`, placeholder: 'openai/gpt-5, anthropic/claude-sonnet-4.5' });
    if (typed === undefined) return undefined;
    models = parseModelList(typed);
  }
  const entry = presetEntry(preset, name, baseUrl, models);
  let key: string | undefined;
  if (preset.key !== 'none') {
    key = await askKey(ui, entry, preset.key === 'required');
    if (key === undefined) return undefined;
  }
  await store.writeUserProviders([...store.userProviders(), entry]);
  const entryName = entry.name as string;
  if (key) await store.storeKey(entryName, { key, origin: originOf(entry) });
  else await store.deleteKey(entryName); // a key left by an earlier provider of this name
  return entryName;
}

/** Asks for a key for `entry`; '' when it may be left empty and was. `undefined`: escaped. */
async function askKey(ui: ManageUI, entry: ProviderEntry, required: boolean, replacing = false): Promise<string | undefined> {
  const name = String(entry.name);
  const origin = originOf(entry);
  const value = await ui.input({
    title: `${TITLE}: ${name}`,
    prompt: `${replacing ? 'New API key' : 'API key'} for '${name}': it will be sent only to ${origin ?? 'no origin (fix the base URL first)'}. Stored in VS Code's secret storage, never in settings.` +
      (required ? '' : ' Leave empty if the server needs none.'),
    password: true,
    validate: v => {
      if (!v.trim()) return required ? `'${name}' needs an API key` : undefined;
      const c = checkKey(name, v);
      return 'error' in c ? c.error : undefined;
    },
  });
  if (value === undefined) return undefined;
  const checked = checkKey(name, value);
  return 'error' in checked ? '' : checked.key;
}

type Action = 'test' | 'key' | 'clearKey' | 'url' | 'rename' | 'settings' | 'remove' | 'back';

/** What to do with one provider, until Back (true) or Escape (false). */
export async function providerMenu(ui: ManageUI, store: ManageStore, name: string): Promise<boolean> {
  for (;;) {
    const entry = store.userProviders().find(e => e.name === name);
    if (!entry) return true;
    const key = await store.storedKey(name);
    const items: PickItem<Action>[] = [
      { label: '$(beaker) Test', description: 'list its models as the upstream gives them now', value: 'test' },
      { label: key ? '$(key) Replace the API key' : '$(key) Set the API key', description: key ? `stored, sent only to ${key.origin ?? 'no origin yet'}` : undefined, value: 'key' },
    ];
    if (key) items.push({ label: '$(close) Remove the API key', value: 'clearKey' });
    if (typeof entry.provider !== 'string') items.push({ label: '$(link) Change the base URL', description: typeof entry.baseUrl === 'string' ? entry.baseUrl : undefined, value: 'url' });
    items.push(
      { label: '$(edit) Rename', value: 'rename' },
      { label: '$(json) Edit in settings.json', description: 'headers, models, limits and every other option', value: 'settings' },
      { label: '$(trash) Remove the provider', value: 'remove' },
      { label: '$(arrow-left) Back', value: 'back' },
    );
    const action = await ui.pick(items, { title: `${TITLE}: ${name}`, placeholder: describeEntry(entry) });
    switch (action) {
      case undefined: return false;
      case 'back': return true;
      case 'test':
        if (!await showTest(ui, store, name)) return false;
        break;
      case 'key': {
        const value = await askKey(ui, entry, false, key !== undefined);
        if (value) await store.storeKey(name, { key: value, origin: originOf(entry) });
        break;
      }
      case 'clearKey':
        await store.deleteKey(name);
        break;
      case 'url':
        await changeUrl(ui, store, entry, key);
        break;
      case 'rename': {
        const renamed = await rename(ui, store, entry, key);
        if (renamed) name = renamed;
        break;
      }
      case 'settings':
        await store.openSettingsJson();
        return false;
      case 'remove': {
        if (!await ui.confirm(`Remove the provider '${name}'?`, `Its entry leaves your user settings${key ? ' and its API key leaves the secret storage' : ''}.`, 'Remove')) break;
        await store.writeUserProviders(store.userProviders().filter(e => e.name !== name));
        await store.deleteKey(name);
        return true;
      }
    }
  }
}

/** Asks the host for the models; shows them (a pick whose choice goes back) or the error. False: escaped. */
export async function showTest(ui: ManageUI, store: ManageStore, name: string): Promise<boolean> {
  let result: TestResult;
  try {
    result = await ui.busy(`Listing the models of '${name}'…`, () => store.test(name));
  } catch (e) {
    ui.error(`Testing '${name}' failed: ${(e as Error).message}`);
    return true;
  }
  if (!result.ok) {
    ui.error(`'${name}' does not work yet: ${result.error ?? 'no reason given'}`);
    return true;
  }
  const items: PickItem<'back'>[] = result.models.map(m => ({
    label: m.id,
    description: m.name && m.name !== m.id ? m.name : undefined,
    detail: m.maxInputTokens ? `input up to ${m.maxInputTokens} tokens${m.maxOutputTokens ? `, output up to ${m.maxOutputTokens}` : ''}` : undefined,
    value: 'back' as const,
  }));
  items.push({ label: '$(arrow-left) Back', value: 'back' });
  const count = result.models.length;
  const picked = await ui.pick(items, { title: `${TITLE}: '${name}' works: ${count} model${count === 1 ? '' : 's'}`, placeholder: count ? 'These models are in the model picker now' : 'The upstream lists no model: add "models" to the entry in settings.json' });
  return picked !== undefined;
}

async function changeUrl(ui: ManageUI, store: ManageStore, entry: ProviderEntry, key: BoundKey | undefined): Promise<void> {
  const name = String(entry.name);
  const typed = await ui.input({ title: `${TITLE}: ${name}`, prompt: 'Base URL', value: typeof entry.baseUrl === 'string' ? entry.baseUrl : '', validate: urlProblem });
  if (typed === undefined) return;
  const moved: ProviderEntry = { ...entry, baseUrl: typed.trim() };
  await store.writeUserProviders(store.userProviders().map(e => (e.name === name ? moved : e)));
  const now = originOf(moved);
  if (!key || !now || now === key.origin) return;
  // A stored key goes to a new place only when you say so (as with Confirm API Key Origin).
  if (await ui.confirm(`Send the API key of '${name}' to ${now}?`, `It was stored for ${key.origin ?? 'no origin'}. Without this, the key stays bound there and '${name}' gets no key.`, `Send the Key to ${now}`)) {
    await store.storeKey(name, { key: key.key, origin: now });
  }
}

async function rename(ui: ManageUI, store: ManageStore, entry: ProviderEntry, key: BoundKey | undefined): Promise<string | undefined> {
  const name = String(entry.name);
  const taken = names(store.userProviders()).filter(n => n !== name);
  const typed = await ui.input({ title: `${TITLE}: ${name}`, prompt: 'New name: model ids become "<name>/<model>"', value: name, validate: v => nameProblem(v, taken) });
  const next = typed?.trim();
  if (!next || next === name) return undefined;
  await store.writeUserProviders(store.userProviders().map(e => (e.name === name ? { ...e, name: next } : e)));
  if (key) {
    // the key moves with the entry, bound where it was
    await store.storeKey(next, key);
    await store.deleteKey(name);
  }
  return next;
}

/** Exposed for the tests and the README: the presets by id. */
export function preset(id: string): Preset | undefined {
  return PRESETS.find(p => p.id === id);
}
