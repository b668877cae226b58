// API keys bound to an origin: what SecretStorage holds under `lmbridge.apiKey.<name>`, how the
// origin of a provider entry is written (the Python host computes the same text and sends a
// stored key only there), and which keys are refused. Pure functions; unit-tested.
import { domainToASCII } from 'url';

/** SecretStorage key of a provider's API key. */
export const SECRET_PREFIX = 'lmbridge.apiKey.';

/** A stored key and the origin it may be sent to (`null`: not bound; the host refuses it). */
export interface BoundKey {
  key: string;
  origin: string | null;
}

/** A provider entry as the settings hold it (only the fields that decide the origin matter here). */
export interface ProviderEntry {
  name?: unknown;
  baseUrl?: unknown;
  provider?: unknown;
  [field: string]: unknown;
}

const DEFAULT_PORTS: Record<string, number> = { http: 80, https: 443 };

/**
 * The origin of a URL as `scheme://host:port`: scheme and host lower-cased, the port always
 * written (80 for http, 443 for https when absent), an IPv6 host in brackets in its short form;
 * user info, path, query and fragment dropped. The host computes the same text
 * (`lmbridge.config.origin_of`): the URL is split the way Python's `urllib.parse.urlsplit`
 * splits it, not by WHATWG rules, which rewrite hosts (`0x7f.1` -> `127.0.0.1`); a name gets
 * its trailing dot dropped and a non-ASCII name its IDNA form. `null` for anything that is not
 * an http(s) URL with a host and a valid port. (Where the two could still differ, a rare IDN
 * such as one with 'ß', the host sees a changed origin and refuses the key: never a leak.)
 */
export function urlOrigin(url: string): string | null {
  // urlsplit drops leading C0 controls and spaces, and tabs and newlines anywhere
  // eslint-disable-next-line no-control-regex
  const cleaned = url.trim().replace(/^[\u0000-\u0020]+/, '').replace(/[\t\r\n]/g, '');
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)/.exec(cleaned);
  if (!m) return null;
  const scheme = m[1].toLowerCase();
  if (!(scheme in DEFAULT_PORTS)) return null;
  const hostinfo = m[2].slice(m[2].lastIndexOf('@') + 1);
  let host: string;
  let port: string;
  const open = hostinfo.indexOf('[');
  if (open >= 0) {
    // "[::1]:8080": the host is what the brackets hold, the port what follows the next ':'
    const close = hostinfo.indexOf(']', open);
    if (close < 0) return null;
    host = hostinfo.slice(open + 1, close);
    const rest = hostinfo.slice(close + 1);
    const colon = rest.indexOf(':');
    port = colon < 0 ? '' : rest.slice(colon + 1);
  } else {
    const colon = hostinfo.indexOf(':');
    host = colon < 0 ? hostinfo : hostinfo.slice(0, colon);
    port = colon < 0 ? '' : hostinfo.slice(colon + 1);
  }
  host = host.toLowerCase();
  if (!host) return null;
  let portNumber = DEFAULT_PORTS[scheme];
  if (port) {
    if (!/^[0-9]+$/.test(port) || Number(port) > 65535) return null;
    // as Python's `parts.port or default`: port 0 means the default
    portNumber = Number(port) || portNumber;
  }
  const canonical = canonicalHost(host);
  return canonical === null ? null : `${scheme}://${canonical}:${portNumber}`;
}

const IPV4 = /^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$/;

/** A lower-cased host as the origin writes it (see `urlOrigin`); null when it is no valid host. */
function canonicalHost(host: string): string | null {
  if (host.includes(':')) {
    // IPv6, in the short form Python's ipaddress and the WHATWG serializer agree on
    // (RFC 5952: the first longest run of zero groups as '::'); zone ids are not accepted
    if (host.includes('%')) return null;
    try {
      return new URL(`http://[${host}]/`).hostname;
    } catch {
      return null;
    }
  }
  if (IPV4.test(host)) return host;
  const name = host.replace(/\.+$/, '');
  // eslint-disable-next-line no-control-regex
  if (/^[\u0000-\u007f]*$/.test(name)) return name || null;
  return domainToASCII(name) || null;
}

/**
 * The origin a key stored for `entry` is bound to: the origin of its `baseUrl`, or
 * `python:<provider reference as written>` for a Python provider; `null` when neither is usable.
 */
export function originOf(entry: ProviderEntry | undefined): string | null {
  if (!entry) return null;
  if (typeof entry.baseUrl === 'string' && entry.baseUrl.trim()) return urlOrigin(entry.baseUrl);
  if (typeof entry.provider === 'string' && entry.provider.trim()) return `python:${entry.provider}`;
  return null;
}

// C0 and C1 controls, DEL and the Unicode line separators: a header value can't carry them,
// and in a log line they forge lines or hide the key from redaction.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

/**
 * The key to store, trimmed; or an error naming the provider (never the key) when it is empty
 * or holds control characters.
 */
export function checkKey(provider: string, value: string): { key: string } | { error: string } {
  const key = value.trim();
  if (!key) return { error: `the API key for '${provider}' is empty` };
  if (CONTROL.test(key)) {
    return { error: `the API key for '${provider}' contains control characters (a line break, NUL...); it was not stored. Paste the key alone` };
  }
  return { key };
}

/** The SecretStorage text of a bound key. */
export function encodeStored(bound: BoundKey): string {
  return JSON.stringify({ key: bound.key, origin: bound.origin });
}

/**
 * Reads a stored value: the JSON form `{"key", "origin"}`, or a legacy plain key (stored before
 * keys were bound), which comes back with `legacy: true` and no origin.
 */
export function decodeStored(text: string): BoundKey & { legacy: boolean } {
  if (text.startsWith('{')) {
    try {
      const v = JSON.parse(text) as unknown;
      if (typeof v === 'object' && v !== null) {
        const { key, origin } = v as Record<string, unknown>;
        if (typeof key === 'string' && (typeof origin === 'string' || origin === null || origin === undefined)) {
          return { key, origin: origin ?? null, legacy: false };
        }
      }
    } catch {
      // not JSON: a plain key that starts with '{'
    }
  }
  return { key: text, origin: null, legacy: true };
}

/**
 * The entry a key of `name` is bound through: the user's entry of that name if there is one
 * (it wins over a workspace entry of the same name, which the host ignores), else the
 * workspace's.
 */
export function entryFor(name: string, user: ProviderEntry[], workspace: ProviderEntry[]): { entry: ProviderEntry; level: 'user' | 'workspace' } | undefined {
  const u = user.find(e => e.name === name);
  if (u) return { entry: u, level: 'user' };
  const w = workspace.find(e => e.name === name);
  return w ? { entry: w, level: 'workspace' } : undefined;
}

/**
 * What becomes of a stored value at activation: a legacy plain key is bound to the origin of
 * the USER's entry of that name (`store` is the new SecretStorage text); without one it stays as
 * it is and is sent unbound (the host refuses it and says to confirm). `message` says what
 * happened, naming the provider, never the key.
 */
export function migrateStored(name: string, text: string, user: ProviderEntry[]): { store?: string; message?: { level: 'info' | 'warn'; text: string } } {
  const stored = decodeStored(text);
  if (!stored.legacy) return {};
  const checked = checkKey(name, stored.key);
  if ('error' in checked) return { message: { level: 'warn', text: `the stored API key is not usable (${checked.error}); set it again with 'lmbridge: Set API Key'` } };
  const origin = originOf(user.find(e => e.name === name));
  if (!origin) {
    return { message: { level: 'warn', text: `the API key for '${name}' was stored before keys were bound to an origin, and no provider '${name}' in your user settings says where it goes: run 'lmbridge: Confirm API Key Origin' to use it` } };
  }
  return { store: encodeStored({ key: checked.key, origin }), message: { level: 'info', text: `the API key for '${name}' is now bound to ${origin}` } };
}

/** A stored key whose provider now points to another origin than the one it was stored for. */
export interface MovedKey {
  name: string;
  key: string;
  /** The origin the key was stored for (null: stored before keys were bound). */
  recorded: string | null;
  /** Where the provider's entry points now. */
  now: string;
  /** Which settings that entry comes from. */
  level: 'user' | 'workspace';
}

/**
 * The keys **lmbridge: Confirm API Key Origin** offers to re-bind: for each provider name with a
 * stored value, the entry that decides its origin (the user's, else the workspace's) points to
 * a valid origin different from the recorded one.
 */
export function movedKeys(stored: { name: string; text: string }[], user: ProviderEntry[], workspace: ProviderEntry[]): MovedKey[] {
  const moved: MovedKey[] = [];
  for (const { name, text } of stored) {
    const value = decodeStored(text);
    const target = entryFor(name, user, workspace);
    const now = originOf(target?.entry);
    const recorded = value.legacy ? null : value.origin;
    if (target && now && now !== recorded) moved.push({ name, key: value.key, recorded, now, level: target.level });
  }
  return moved;
}
