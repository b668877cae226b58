// Provider groups of VS Code's Language Models editor (vendor 'lmbridge-api'): VS Code asks the
// provider for each group's models with the group's configuration (the key already read from
// its secret storage, the group's name not given). The host gets every group as an upstream
// entry named `editor:<id>` (lmbridge.sources.editor), the id made from the configuration, and
// each key bound to an origin, as a key of `lmbridge.providers` is. Pure logic here,
// unit-tested; the VS Code side is editorProvider.ts.
import { createHash } from 'crypto';
import { urlOrigin } from './keys';

/** The vendor whose groups the Language Models editor manages (package.json). */
export const EDITOR_VENDOR = 'lmbridge-api';
/** The prefix of a group's provider name in the host (refused in `lmbridge.providers`). */
export const EDITOR_PREFIX = 'editor:';
/** SecretStorage key of the origin a key given through the editor was first seen with. */
export const KEY_ORIGIN_PREFIX = 'lmbridge.editorKeyOrigin.';

/** JSON with the keys of every object sorted: the same text for the same configuration. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const obj = value as Record<string, unknown>;
    return `{${Object.keys(obj).sort().map(k => `${JSON.stringify(k)}:${canonical(obj[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * A group's id in the host (its provider is `editor:<id>`, its models `editor:<id>/<model>`):
 * the base URL's host, for the log, and a digest of the whole configuration with its key, so
 * that two groups differ (two accounts at one server) and the same group keeps its id across
 * starts. VS Code shows the group's own name beside each model.
 */
export function groupId(configuration: Record<string, unknown>, key: string | undefined): string {
  let host = 'nowhere';
  try {
    if (typeof configuration.baseUrl === 'string') host = new URL(configuration.baseUrl).host || host;
  } catch {
    host = 'invalid-url';
  }
  const digest = createHash('sha256').update(canonical(configuration)).update('\0').update(key ?? '').digest('hex');
  return `${host.replace(/[^A-Za-z0-9.:[\]-]/g, '_')}-${digest.slice(0, 8)}`;
}

/** The provider name of a group in the host. */
export function hostName(id: string): string {
  return EDITOR_PREFIX + id;
}

/** A group's configuration without its key, and the key (trimmed; none when empty). */
export function splitConfiguration(configuration: unknown): { configuration: Record<string, unknown>; key?: string } {
  if (typeof configuration !== 'object' || configuration === null || Array.isArray(configuration)) return { configuration: {} };
  const { apiKey, ...rest } = configuration as Record<string, unknown>;
  const key = typeof apiKey === 'string' && apiKey.trim() ? apiKey.trim() : undefined;
  return { configuration: rest, key };
}

/** The origin a group's configuration sends its key to now (null: no usable base URL). */
export function groupOrigin(configuration: Record<string, unknown>): string | null {
  return typeof configuration.baseUrl === 'string' ? urlOrigin(configuration.baseUrl) : null;
}

/**
 * Where the origins a key given through the editor may go to are recorded: under a digest of
 * the key, so that a group renamed, or edited, keeps its binding (the key itself is not stored
 * again).
 */
export function keyOriginSlot(key: string): string {
  return KEY_ORIGIN_PREFIX + createHash('sha256').update(key, 'utf8').digest('hex');
}

/** The origins recorded for a key (SecretStorage text: a JSON list); none when unreadable. */
export function decodeOrigins(text: string | undefined): string[] {
  if (text === undefined) return [];
  try {
    const v = JSON.parse(text) as unknown;
    return Array.isArray(v) ? v.filter((o): o is string => typeof o === 'string') : [];
  } catch {
    return [];
  }
}

/** Where the origins are kept: VS Code's SecretStorage, as far as they need it. */
export interface OriginStore {
  get(slot: string): Thenable<string | undefined>;
  store(slot: string, value: string): Thenable<void>;
}

/** Lets `key` go to `origin` too (Confirm API Key Origin, a provider moved to the editor). */
export async function allowOrigin(store: OriginStore, key: string, origin: string): Promise<void> {
  const slot = keyOriginSlot(key);
  const origins = decodeOrigins(await store.get(slot));
  if (!origins.includes(origin)) await store.store(slot, JSON.stringify([...origins, origin]));
}

/**
 * The origin to send with a key: the group's origin now when the key was given or confirmed for
 * it; for a key never seen, the same, to be recorded (`record`: the new list); else the first
 * origin the key was recorded for, so that the host withholds the key and names the command
 * that lets it go to the new origin (Confirm API Key Origin).
 */
export function bindKey(recorded: string[], now: string | null): { origin: string | null; record?: string[] } {
  if (now !== null && recorded.includes(now)) return { origin: now };
  if (recorded.length === 0) return now === null ? { origin: null } : { origin: now, record: [now] };
  return { origin: recorded[0] };
}

/** A group as the host gets it. */
export interface KnownGroup {
  configuration: Record<string, unknown>;
  key?: string;
  /** The origin the key is bound to (see bindKey). */
  origin: string | null;
}

/**
 * The groups VS Code asked about, as the host has them. VS Code lists a vendor's models in
 * rounds: one call without a configuration, then one per group; a group no round asks about any more
 * was removed in the editor and is dropped when the next round begins.
 */
export class EditorGroups {
  private readonly groups = new Map<string, KnownGroup>();
  private asked = new Set<string>();

  /** A group's description now (by its id); true when the host must be told (new or changed). */
  update(id: string, known: KnownGroup): boolean {
    this.asked.add(id);
    const before = this.groups.get(id);
    this.groups.set(id, known);
    return before === undefined || before.key !== known.key || before.origin !== known.origin ||
      JSON.stringify(before.configuration) !== JSON.stringify(known.configuration);
  }

  /** A new round of listing: drops the groups the last round did not ask about; their names. */
  beginRound(): string[] {
    const gone = [...this.groups.keys()].filter(g => !this.asked.has(g));
    for (const g of gone) this.groups.delete(g);
    this.asked = new Set();
    return gone;
  }

  /** A group, by its id, if known. */
  get(id: string): KnownGroup | undefined {
    return this.groups.get(id);
  }

  /** Every group (by its id) with its key. */
  entries(): [string, KnownGroup][] {
    return [...this.groups.entries()];
  }

  /** `editorProviders` of `initialize` / `configure`: the groups without their keys. */
  wire(): { id: string; configuration: Record<string, unknown> }[] {
    return this.entries().map(([id, g]) => ({ id, configuration: g.configuration }));
  }

  /** The groups' keys as `secrets` of `initialize` / `configure`, under their host names. */
  secrets(): Record<string, { key: string; origin: string | null }> {
    const out: Record<string, { key: string; origin: string | null }> = {};
    for (const [id, g] of this.groups) if (g.key !== undefined) out[hostName(id)] = { key: g.key, origin: g.origin };
    return out;
  }

  /** The groups whose key is bound to another origin than the one they point to now. */
  moved(): { id: string; key: string; recorded: string | null; now: string }[] {
    const out: { id: string; key: string; recorded: string | null; now: string }[] = [];
    for (const [id, g] of this.groups) {
      const now = groupOrigin(g.configuration);
      if (g.key !== undefined && now !== null && g.origin !== now) out.push({ id, key: g.key, recorded: g.origin, now });
    }
    return out;
  }
}

/** What `lm.addLanguageModelsProviderGroup` takes: a group of the editor's vendor. */
export interface NewGroup {
  vendor: string;
  name: string;
  [property: string]: unknown;
}

/**
 * The editor group an entry of `lmbridge.providers` becomes (Move Providers to the Language
 * Models Editor): its fields as they are, and its stored key when that key is bound to the
 * origin the entry points to; otherwise why it stays (a Python provider, a key bound
 * elsewhere). `origin` is the entry's origin now.
 */
export function planMove(entry: Record<string, unknown>, stored: { key: string; origin: string | null } | undefined, origin: string | null): { group: NewGroup } | { reason: string } {
  const { name, ...fields } = entry;
  if (typeof name !== 'string' || !name) return { reason: 'the entry has no name' };
  if (typeof fields.provider === 'string') return { reason: 'a Python provider stays in lmbridge.providers' };
  if (typeof fields.format !== 'string') return { reason: "the entry has no 'format'" };
  if (stored !== undefined && (stored.origin === null || stored.origin !== origin)) {
    return { reason: `its stored API key is bound to ${stored.origin ?? 'no origin'}, not to ${origin ?? 'a valid origin'}: run 'lmbridge: Confirm API Key Origin' first` };
  }
  return { group: { vendor: EDITOR_VENDOR, name, ...fields, ...(stored ? { apiKey: stored.key } : {}) } };
}
