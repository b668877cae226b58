// Providers a workspace adds (`lmbridge.providers` of a repository's `.vscode/settings.json`
// or `.code-workspace` file) are inert until the user allows them, as VS Code does for the MCP
// servers a workspace defines: their entries are not sent to the host, so their models are not
// offered to VS Code (no extension can select them) and their servers are never contacted.
// The decision is the user's, per workspace (VS Code's workspaceState) and per entry content (a
// hash of the entry: a changed entry asks again); it is remembered and changed with
// **lmbridge: Manage Workspace Providers**. The question never holds anything up: the host
// starts with the user's own providers at once and gets the allowed entries with `configure`.
import { createHash } from 'crypto';
import { originOf, urlOrigin, type ProviderEntry } from './keys';
import { plain } from './untrusted';

/** What the user said about one workspace entry. */
export type Decision = 'allow' | 'deny';

/** The part of VS Code's Memento this needs (the workspace's state). */
export interface Memo {
  get<T>(key: string): T | undefined;
  update(key: string, value: unknown): Thenable<void>;
}

/** The workspaceState key of the decisions: entry hash -> decision and what the entry said. */
export const DECISIONS_KEY = 'lmbridge.workspaceProviders.decisions';

interface Stored {
  decision: Decision;
  name: string;
  where: string;
}

/** A workspace entry as the consent shows it. */
export interface WorkspaceEntry {
  entry: ProviderEntry;
  /** sha256 of the entry's canonical JSON. */
  hash: string;
  /** The entry's name as written (untrusted text: shown through `plain`). */
  name: string;
  /** Where it sends prompts: the origins of its `baseUrl` and any absolute `chatPath`/`modelsPath`. */
  where: string;
  decision: Decision | undefined;
}

/** JSON with the keys of every object sorted: the same entry always gives the same text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const obj = value as Record<string, unknown>;
    return `{${Object.keys(obj).sort().filter(k => obj[k] !== undefined).map(k => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** The hash a decision is stored under: any change to the entry makes another one. */
export function entryHash(entry: ProviderEntry): string {
  return createHash('sha256').update(canonicalJson(entry)).digest('hex');
}

/**
 * Where an entry sends requests, as the user is told: the origin of its `baseUrl` (or the
 * URL as written when it has none), and of `chatPath` / `modelsPath` when they are absolute URLs.
 */
export function entryWhere(entry: ProviderEntry): string {
  const places: string[] = [];
  const add = (s: string | null): void => { if (s && !places.includes(s)) places.push(s); };
  const base = originOf(entry);
  add(base ?? (typeof entry.baseUrl === 'string' ? entry.baseUrl : typeof entry.provider === 'string' ? `python:${entry.provider}` : 'no URL'));
  for (const field of ['chatPath', 'modelsPath']) {
    const v = entry[field];
    if (typeof v === 'string' && /^[a-z][a-z0-9+.-]*:/i.test(v.trim())) add(urlOrigin(v) ?? v);
  }
  return places.join(', ');
}

/**
 * The workspace entries the user is asked about: not those the host ignores whatever the user
 * says (a Python reference, `provider`, which would run code; the name of one of the user's
 * entries). The host reports those as ignored settings.
 */
export function askable(workspace: ProviderEntry[], user: ProviderEntry[]): ProviderEntry[] {
  const names = new Set<unknown>(user.map(e => e.name).filter(n => typeof n === 'string'));
  return workspace.filter(e => !('provider' in e) && !names.has(e.name));
}

/** The remembered decisions of one workspace. */
export class WorkspaceConsent {
  constructor(private readonly memo: Memo) {}

  private stored(): Record<string, Stored> {
    const v = this.memo.get<unknown>(DECISIONS_KEY);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? v as Record<string, Stored> : {};
  }

  /** Each entry with its hash, where it points and the decision taken on exactly this content. */
  describe(entries: ProviderEntry[]): WorkspaceEntry[] {
    const stored = this.stored();
    return entries.map(entry => {
      const hash = entryHash(entry);
      const d = stored[hash]?.decision;
      return {
        entry, hash,
        name: typeof entry.name === 'string' ? entry.name : '(no name)',
        where: entryWhere(entry),
        decision: d === 'allow' || d === 'deny' ? d : undefined,
      };
    });
  }

  /** The entries the user allowed, as they are now: the only ones the host gets. */
  allowed(entries: ProviderEntry[]): ProviderEntry[] {
    return this.describe(entries).filter(e => e.decision === 'allow').map(e => e.entry);
  }

  /**
   * What the host gets: the entries the user allowed (loaded), and every other entry of the
   * workspace (only judged, never loaded), each once.
   */
  split(workspace: ProviderEntry[], user: ProviderEntry[]): { allowed: ProviderEntry[]; unapproved: ProviderEntry[] } {
    const allowed = this.allowed(askable(workspace, user));
    return { allowed, unapproved: workspace.filter(e => !allowed.includes(e)) };
  }

  /** The entries nobody decided on yet. */
  pending(entries: ProviderEntry[]): WorkspaceEntry[] {
    return this.describe(entries).filter(e => e.decision === undefined);
  }

  /** Remembers `decision` for each of `items` (their current content). */
  async decide(items: WorkspaceEntry[], decision: Decision): Promise<void> {
    const stored = this.stored();
    for (const i of items) stored[i.hash] = { decision, name: i.name, where: i.where };
    await this.memo.update(DECISIONS_KEY, stored);
  }

  /** Forgets every decision of this workspace (each entry asks again). */
  async reset(): Promise<void> {
    await this.memo.update(DECISIONS_KEY, undefined);
  }
}

/** What the consent shows (VS Code's notifications and quick pick; a fake in the unit tests). */
export interface ConsentUI {
  /** A notification with actions; resolves to the action taken, or undefined when dismissed (or never). */
  ask(message: string, actions: string[]): Thenable<string | undefined>;
  /** A multi-select list; resolves to the picked values, or undefined on Escape. */
  pickMany<T>(items: { label: string; description: string; detail: string; picked: boolean; value: T }[], title: string): Thenable<T[] | undefined>;
  info(message: string): void;
}

export const ALLOW = 'Allow';
export const DENY = "Don't Allow";
export const MANAGE = 'Manage…';

/** One line per entry: `'name' → origin`, untrusted text made plain. */
function listEntries(items: WorkspaceEntry[]): string {
  return items.map(i => `'${plain(i.name)}' → ${plain(i.where)}`).join('; ');
}

/** The question for entries nobody decided on yet. */
export function consentMessage(items: WorkspaceEntry[]): string {
  const n = items.length;
  return `lmbridge: this workspace's settings add ${n === 1 ? 'a model provider' : `${n} model providers`} (${listEntries(items)}). ` +
    `${n === 1 ? 'It stays' : 'They stay'} off until you allow ${n === 1 ? 'it' : 'them'}: not contacted, no model offered. ` +
    'Allow only if you trust whoever wrote these settings with the prompts you send to these models.';
}

/**
 * Asks about the workspace's undecided entries, once per set of entries (a dismissed question is
 * not repeated until the entries change; the command asks any time). Never awaited by the host's
 * start: `changed` is called when a decision was taken, and a `configure` then sends the
 * allowed entries.
 */
export class ConsentPrompter {
  private readonly told = new Set<string>();

  constructor(private readonly consent: WorkspaceConsent, private readonly ui: ConsentUI, private readonly changed: () => void) {}

  /** Tells the user about undecided entries not told yet; resolves when the question is answered or dismissed. */
  async check(entries: ProviderEntry[]): Promise<void> {
    const pending = this.consent.pending(entries).filter(i => !this.told.has(i.hash));
    if (pending.length === 0) return;
    pending.forEach(i => this.told.add(i.hash));
    const choice = await this.ui.ask(consentMessage(pending), [ALLOW, DENY, MANAGE]);
    if (choice === ALLOW || choice === DENY) {
      // decided on what was shown: an entry changed meanwhile has another hash and asks again
      await this.consent.decide(pending, choice === ALLOW ? 'allow' : 'deny');
      this.changed();
    } else if (choice === MANAGE) {
      await this.manage(entries);
    }
  }

  /** **lmbridge: Manage Workspace Providers**: the entries picked are allowed, the others not. */
  async manage(entries: ProviderEntry[]): Promise<void> {
    const items = this.consent.describe(entries);
    if (items.length === 0) {
      this.ui.info("lmbridge: this workspace's settings add no model provider.");
      return;
    }
    const picked = await this.ui.pickMany(items.map(i => ({
      label: plain(i.name),
      description: plain(i.where),
      detail: i.decision === 'allow' ? 'allowed' : i.decision === 'deny' ? 'not allowed' : 'not decided yet (off)',
      picked: i.decision === 'allow',
      value: i.hash,
    })), "lmbridge: providers this workspace's settings add (checked: allowed to be contacted and offered)");
    if (picked === undefined) return;
    const allow = new Set(picked);
    await this.consent.decide(items.filter(i => allow.has(i.hash)), 'allow');
    await this.consent.decide(items.filter(i => !allow.has(i.hash)), 'deny');
    this.changed();
  }
}
