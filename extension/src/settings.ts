// Where each lmbridge setting may come from. A repository's `.vscode/settings.json` (or a
// `.code-workspace` file) is not the user's: it must not choose the program that runs, the
// files and modules that run in the host, or open the loopback endpoint. Those settings are
// read from the user (or remote) settings only; a workspace value is ignored and reported.
// Provider lists are read per level and sent apart: the host applies its policy to the
// workspace's list (no Python references, no `apiKeyEnv`, no names of the user's entries).
//
// Scope: package.json declares these settings `"scope": "machine"` (VS Code 1.104+ supports
// `application`, `machine`, `machine-overridable`, `window`, `resource`, `language-overridable`).
// Both `application` and `machine` keep workspace and folder values out; they differ in remote
// windows (SSH, containers, WSL, code-server): VS Code then reads a `machine` setting only from
// the Remote settings of the machine the extension runs on, an `application` one only from the
// local user settings. The host is spawned on the remote machine, so its interpreter path, its
// app files and its endpoint belong to that machine: `machine`. VS Code drops a workspace's
// value of a machine setting before the extension sees it (inspect() has no workspaceValue), so
// to tell the user what was ignored the workspace settings files are read as well.
import * as path from 'path';
import * as vscode from 'vscode';
import { parse as parseJsonc } from 'jsonc-parser';
import type { ProviderEntry } from './keys';
import { plain } from './untrusted';

/** Something the extension or the host did not take from a workspace, as the host reports it too. */
export interface IgnoredItem {
  setting: string;
  /** The provider entry's name, for an item of `lmbridge.providers`. */
  name: string | null;
  /** The entry's field that was dropped (`provider`, `apiKeyEnv`...), or null for the whole value. */
  field: string | null;
  /** The ignored value as a short string (never a key). */
  value: string;
  reason: string;
}

/**
 * Settings honoured only from the user's (or remote) settings: they run code, open a port, let
 * other processes run tools, guard the user's account, or decide which model gets the prompts
 * of processes outside the workspace (agents and apps on the endpoint run in any folder, with
 * its files and tool outputs in their prompts).
 */
export const USER_ONLY = ['pythonCommand', 'apps', 'endpoint.enabled', 'endpoint.tools', 'pace', 'endpoint.models', 'consumer.model'] as const;
type UserOnly = typeof USER_ONLY[number];

const REASONS: Record<UserOnly, string> = {
  pythonCommand: 'it names the program lmbridge runs; only your user (or remote) settings may set it',
  apps: 'apps run Python code in the host; only your user (or remote) settings may set them',
  'endpoint.enabled': 'it opens a port for other processes; only your user (or remote) settings may turn it on',
  'endpoint.tools': "it lets other processes run VS Code's tools; only your user (or remote) settings may list them",
  pace: 'it guards your account against bursts of requests; only your user (or remote) settings may set it',
  'endpoint.models': "it decides which model gets the prompts of agents and apps outside this workspace; only your user (or remote) settings may set it",
  'consumer.model': "it decides which model gets the prompts of your Python apps; only your user (or remote) settings may set it",
};

/** `lmbridge.logLevel: debug` logs message bodies: from the user's settings only. */
const LOG_LEVELS = ['debug', 'info', 'warning', 'error'] as const;
const DEBUG_REASON = 'debug logs the messages sent to models (prompts and answers); only your user settings may turn it on';

/** What the extension uses, from where it may come, and what it ignored. */
export interface Settings {
  pythonCommand: string;
  /** `lmbridge.apps` with `~` kept for the host; relative file paths dropped (see `ignored`). */
  apps: string[];
  endpointEnabled: boolean;
  /** `lmbridge.endpoint.tools`: names or patterns of VS Code's tools offered to other processes (empty: none). */
  endpointTools: string[];
  /** `lmbridge.pace`: limits on requests to VS Code's models (empty: none); the host checks the fields. */
  pace: Record<string, unknown>;
  /** `lmbridge.endpoint.models`: name pattern -> selector (user or remote settings only). */
  endpointModels: Record<string, string>;
  /** `lmbridge.consumer.model` (user or remote settings only). */
  consumerModel: string;
  /** `lmbridge.logLevel`; a workspace may not turn on `debug` (it logs message bodies). */
  logLevel: string;
  /** `lmbridge.providers` of the user (or remote) settings: trusted. */
  providers: ProviderEntry[];
  /** `lmbridge.providers` of the workspace and the first folder: restricted by the host. */
  workspaceProviders: ProviderEntry[];
  /** Workspace values of user-only settings seen through inspect(), and refused app entries. */
  ignored: IgnoredItem[];
}

/** A value as the notification and the log quote it: JSON, cut short. */
export function shortValue(v: unknown, max = 120): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v) ?? String(v);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

function entries(v: unknown): ProviderEntry[] {
  return Array.isArray(v) ? v.filter((p): p is ProviderEntry => typeof p === 'object' && p !== null && !Array.isArray(p)) : [];
}

/** The lmbridge configuration of the first workspace folder (it also carries the workspace values). */
function folderConfig(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration('lmbridge', vscode.workspace.workspaceFolders?.[0]?.uri);
}

/**
 * A user-only setting: the user's (or remote) value if it has the right type, else the default.
 * A workspace or folder value that inspect() shows is reported as ignored.
 */
function userOnly<T>(cfg: vscode.WorkspaceConfiguration, key: UserOnly, ok: (v: unknown) => v is T, fallback: T, ignored: IgnoredItem[]): T {
  const i = cfg.inspect<unknown>(key);
  for (const v of [i?.workspaceValue, i?.workspaceFolderValue]) {
    if (v !== undefined) ignored.push({ setting: `lmbridge.${key}`, name: null, field: null, value: shortValue(v), reason: REASONS[key] });
  }
  const user = i?.globalValue;
  const dflt = i?.defaultValue;
  return ok(user) ? user : ok(dflt) ? dflt : fallback;
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isBoolean = (v: unknown): v is boolean => typeof v === 'boolean';
const isStringArray = (v: unknown): v is string[] => Array.isArray(v) && v.every(isString);
const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStringMap = (v: unknown): v is Record<string, string> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every(isString);
const isLogLevel = (v: unknown): v is string => typeof v === 'string' && (LOG_LEVELS as readonly string[]).includes(v);

/**
 * `lmbridge.logLevel`: the workspace's value (the folder's first) unless it is `debug`, which is
 * ignored and reported; then the user's, then the default.
 */
function logLevel(cfg: vscode.WorkspaceConfiguration, ignored: IgnoredItem[]): string {
  const i = cfg.inspect<unknown>('logLevel');
  const workspace = [i?.workspaceFolderValue, i?.workspaceValue];
  const user = [i?.globalValue, i?.defaultValue].find(isLogLevel) ?? 'info';
  if (workspace.includes('debug') && user !== 'debug') {
    ignored.push({ setting: 'lmbridge.logLevel', name: null, field: null, value: 'debug', reason: DEBUG_REASON });
  }
  const chosen = workspace.find((v): v is string => isLogLevel(v) && v !== 'debug');
  return chosen ?? user;
}

/**
 * Reads the settings as the contract says: user-only settings from `globalValue` (user or
 * remote) or the default; `providers` from the user level, `workspaceProviders` from the
 * workspace and the first folder.
 */
export function readSettings(): Settings {
  const cfg = folderConfig();
  const ignored: IgnoredItem[] = [];
  const pythonCommand = userOnly(cfg, 'pythonCommand', isString, '', ignored).trim();
  const apps: string[] = [];
  for (const raw of userOnly(cfg, 'apps', isStringArray, [], ignored)) {
    const entry = raw.trim();
    if (!entry) continue;
    // A relative path would name a file of whatever folder is open: a repository could put
    // its own code there. App files are named by absolute paths (or ~).
    const isPath = entry.endsWith('.py') || entry.includes('/') || entry.includes('\\');
    if (isPath && !path.isAbsolute(entry) && !entry.startsWith('~')) {
      ignored.push({ setting: 'lmbridge.apps', name: null, field: null, value: entry, reason: 'a relative path would run a file of the open folder; name app files by an absolute path' });
      continue;
    }
    apps.push(entry);
  }
  const endpointEnabled = userOnly(cfg, 'endpoint.enabled', isBoolean, false, ignored);
  const endpointTools = userOnly(cfg, 'endpoint.tools', isStringArray, [], ignored).map(t => t.trim()).filter(t => t.length > 0);
  const pace = userOnly(cfg, 'pace', isPlainObject, {}, ignored);
  const endpointModels = userOnly(cfg, 'endpoint.models', isStringMap, {}, ignored);
  const consumerModel = userOnly(cfg, 'consumer.model', isString, 'vscodelm/auto', ignored);
  const level = logLevel(cfg, ignored);
  const p = cfg.inspect<unknown>('providers');
  const workspace = entries(p?.workspaceValue);
  const folder = entries(p?.workspaceFolderValue);
  // In a single-folder window the folder's settings ARE the workspace settings: inspect()
  // gives the same list twice. Only a multi-root workspace (a .code-workspace file) has both.
  const workspaceProviders = vscode.workspace.workspaceFile ? [...workspace, ...folder] : (p?.workspaceValue !== undefined ? workspace : folder);
  return { pythonCommand, apps, endpointEnabled, endpointTools, pace, endpointModels, consumerModel, logLevel: level, providers: entries(p?.globalValue), workspaceProviders, ignored };
}

/**
 * A setting's value in a parsed settings file, in any of the forms VS Code reads:
 * `"lmbridge.endpoint.enabled": x`, `"lmbridge.endpoint": {"enabled": x}`, `"lmbridge": {...}`.
 */
export function lookupSetting(raw: unknown, key: string): unknown {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return undefined;
  const obj = raw as Record<string, unknown>;
  if (key in obj) return obj[key];
  const parts = key.split('.');
  for (let i = parts.length - 1; i > 0; i--) {
    const head = parts.slice(0, i).join('.');
    if (head in obj) {
      const found = lookupSetting(obj[head], parts.slice(i).join('.'));
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/** The user-only settings a parsed workspace settings object holds, as ignored items. */
export function ignoredInSettingsFile(raw: unknown): IgnoredItem[] {
  const items: IgnoredItem[] = [];
  for (const key of USER_ONLY) {
    const v = lookupSetting(raw, `lmbridge.${key}`);
    if (v !== undefined) items.push({ setting: `lmbridge.${key}`, name: null, field: null, value: shortValue(v), reason: REASONS[key] });
  }
  return items;
}

async function readJsonc(uri: vscode.Uri): Promise<unknown> {
  try {
    const text = new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));
    return parseJsonc(text, [], { allowTrailingComma: true, disallowComments: false });
  } catch {
    return undefined; // no such file (the usual case), or unreadable
  }
}

/**
 * The user-only settings the workspace's settings files try to set: each folder's
 * `.vscode/settings.json` and the `settings` of a `.code-workspace` file. VS Code drops these
 * values of machine-scoped settings silently; reading the files lets the user be told.
 */
export async function scanWorkspaceSettings(): Promise<IgnoredItem[]> {
  const items: IgnoredItem[] = [];
  for (const folder of vscode.workspace.workspaceFolders ?? []) {
    items.push(...ignoredInSettingsFile(await readJsonc(vscode.Uri.joinPath(folder.uri, '.vscode', 'settings.json'))));
  }
  const file = vscode.workspace.workspaceFile;
  if (file && file.scheme !== 'untitled') {
    const ws = await readJsonc(file);
    if (typeof ws === 'object' && ws !== null) items.push(...ignoredInSettingsFile((ws as Record<string, unknown>).settings));
  }
  return items;
}

/** Identity of an ignored item (the same thing reported twice counts once). */
export function itemKey(i: IgnoredItem): string {
  return JSON.stringify([i.setting, i.name, i.field, i.value]);
}

/** One line naming an ignored item: `lmbridge.providers 'x'.provider = "os:system"`. */
export function describeItem(i: IgnoredItem): string {
  const where = `${i.setting}${i.name !== null ? ` '${i.name}'` : ''}${i.field ? `.${i.field}` : ''}`;
  return `${where} = ${i.value}`;
}

/** Dedupes ignored items, keeping the first of each. */
export function uniqueItems(items: IgnoredItem[]): IgnoredItem[] {
  const seen = new Set<string>();
  const out: IgnoredItem[] = [];
  for (const i of items) {
    if (seen.has(itemKey(i))) continue;
    seen.add(itemKey(i));
    out.push(i);
  }
  return out;
}

/** The notification's text for a set of ignored items (the workspace's text made plain: no link, no icon). */
export function ignoredMessage(items: IgnoredItem[]): string {
  return `lmbridge ignored ${items.length === 1 ? 'a setting' : `${items.length} settings`} of this workspace (only your user settings may set them): ` +
    items.map(i => plain(describeItem(i))).join('; ') + '.';
}

/** Where ignored things are shown and logged. */
export interface IgnoredSink {
  warn(message: string): void;
  debug(message: string): void;
  /** Shows the notification (not awaited). */
  show(items: IgnoredItem[]): void;
}

/**
 * Tells the user about ignored settings: the extension's own (`setOwn`) and the host's
 * `ignored` result (`setHost`), combined into one notification. A notification is shown when
 * the combined set holds something not shown before (not again on every `configure`); each of
 * the extension's items is logged at warning level once (the host logs its own at warning
 * level, which reaches the same channel: here they go to the debug level). While the host's verdict on the workspace's providers is
 * pending, the extension's items wait for it (at most `waitMs`), so the user gets one
 * notification rather than two.
 */
export class IgnoredReporter {
  private own: IgnoredItem[] = [];
  private host: IgnoredItem[] = [];
  private readonly shown = new Set<string>();
  private readonly logged = new Set<string>();
  private awaitingHost = false;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly sink: IgnoredSink, private readonly waitMs = 15000) {}

  /** The extension's own items; `awaitHost`: the host has yet to judge the workspace's providers. */
  setOwn(items: IgnoredItem[], awaitHost: boolean): void {
    this.own = items;
    if (awaitHost) this.awaitingHost = true;
    this.update();
  }

  /** The host's `ignored` result of `initialize` / `configure`. */
  setHost(items: IgnoredItem[]): void {
    this.host = items;
    this.awaitingHost = false;
    this.update();
  }

  /** The items currently ignored, deduped. */
  get current(): IgnoredItem[] {
    return uniqueItems([...this.own, ...this.host]);
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private update(): void {
    const items = this.current;
    const own = new Set(this.own.map(itemKey));
    for (const i of items) {
      const k = itemKey(i);
      if (this.logged.has(k)) continue;
      this.logged.add(k);
      const line = `ignored ${describeItem(i)}: ${i.reason}`;
      if (own.has(k)) this.sink.warn(line);
      else this.sink.debug(line);
    }
    if (!items.some(i => !this.shown.has(itemKey(i)))) return;
    if (this.awaitingHost) {
      this.timer ??= setTimeout(() => { this.timer = undefined; this.awaitingHost = false; this.update(); }, this.waitMs);
      return;
    }
    this.dispose();
    items.forEach(i => this.shown.add(itemKey(i)));
    this.sink.show(items);
  }
}
