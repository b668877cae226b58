// The providers **lmbridge: Manage Models** offers to add: each one is the `lmbridge.providers`
// entry you would write by hand (extension/README.md lists the same entries). Pure data and
// functions; unit-tested.
import { CREDENTIAL_PARAM } from './credentials';
import { urlOrigin } from './keys';

/** Whether the preset's upstream wants an API key. */
export type KeyNeed = 'required' | 'optional' | 'none';

export interface Preset {
  id: string;
  label: string;
  /** One line under the label in the quick pick. */
  detail: string;
  format: 'chat-completions' | 'responses' | 'anthropic' | 'ai-sdk';
  /** The base URL; `undefined`: asked for (with `urlPrompt`). */
  baseUrl?: string;
  urlPrompt?: string;
  urlPlaceholder?: string;
  /** Turns what the user typed into the base URL (Azure: a resource name becomes its v1 URL). */
  normalizeUrl?: (typed: string) => string;
  /** Asks for model ids (an AI SDK route may have no `/models`). */
  asksModels?: boolean;
  key: KeyNeed;
  /** The name offered for a new entry (made unique). */
  name: string;
  /** Fields the entry gets besides name, format and baseUrl. */
  extra?: Record<string, unknown>;
}

/**
 * An Azure OpenAI resource as its v1 API's base URL: a bare resource name (`my-resource`) is
 * `https://my-resource.openai.azure.com/openai/v1`; a URL without a path gets `/openai/v1`;
 * a URL with a path is kept (without a trailing slash). The key goes in the `api-key` header.
 */
export function azureBaseUrl(typed: string): string {
  const t = typed.trim().replace(/\/+$/, '');
  if (/^[A-Za-z0-9][A-Za-z0-9-]*$/.test(t)) return `https://${t.toLowerCase()}.openai.azure.com/openai/v1`;
  const m = /^(https?:\/\/[^/?#]+)(\/[^?#]*)?$/.exec(t);
  if (m && !m[2]) return `${m[1]}/openai/v1`;
  return t;
}

export const PRESETS: readonly Preset[] = [
  { id: 'openai', label: 'OpenAI', detail: 'Responses API at https://api.openai.com/v1', format: 'responses', baseUrl: 'https://api.openai.com/v1', key: 'required', name: 'openai' },
  { id: 'anthropic', label: 'Anthropic', detail: 'Messages API at https://api.anthropic.com/v1', format: 'anthropic', baseUrl: 'https://api.anthropic.com/v1', key: 'required', name: 'anthropic' },
  { id: 'openrouter', label: 'OpenRouter', detail: 'Chat Completions at https://openrouter.ai/api/v1', format: 'chat-completions', baseUrl: 'https://openrouter.ai/api/v1', key: 'required', name: 'openrouter' },
  { id: 'ollama', label: 'Ollama', detail: 'local server at http://127.0.0.1:11434/v1, no key', format: 'chat-completions', baseUrl: 'http://127.0.0.1:11434/v1', key: 'none', name: 'ollama' },
  { id: 'lmstudio', label: 'LM Studio', detail: 'local server at http://127.0.0.1:1234/v1, no key', format: 'chat-completions', baseUrl: 'http://127.0.0.1:1234/v1', key: 'none', name: 'lmstudio' },
  { id: 'vllm', label: 'vLLM', detail: 'local server at http://127.0.0.1:8000/v1 (key only if started with --api-key)', format: 'chat-completions', baseUrl: 'http://127.0.0.1:8000/v1', key: 'optional', name: 'vllm' },
  {
    id: 'azure', label: 'Azure OpenAI', detail: 'your resource\'s v1 API (https://<resource>.openai.azure.com/openai/v1), key in the api-key header',
    format: 'chat-completions', urlPrompt: 'Azure OpenAI resource: its name or its URL (https://<resource>.openai.azure.com)', urlPlaceholder: 'my-resource',
    normalizeUrl: azureBaseUrl, key: 'required', name: 'azure', extra: { apiKeyHeader: 'api-key' },
  },
  {
    id: 'custom', label: 'OpenAI-compatible server', detail: 'any Chat Completions API: enter its base URL (…/v1)', format: 'chat-completions',
    urlPrompt: 'Base URL of the OpenAI-compatible API (the part before /chat/completions)', urlPlaceholder: 'https://example.com/v1', key: 'optional', name: 'custom',
  },
  {
    id: 'ai-sdk', label: 'AI SDK route', detail: 'a Vercel AI SDK streamText route of yours (POST <url>/chat)', format: 'ai-sdk',
    urlPrompt: 'Base URL of the AI SDK route (requests go to <url>/chat)', urlPlaceholder: 'http://127.0.0.1:3000/api', asksModels: true, key: 'optional', name: 'ai-sdk',
  },
];

/**
 * Why `name` cannot name a new (or renamed) provider, or `undefined` when it can. The host's
 * rules (src/lmbridge/config.py): a non-empty name without '/', unique among your entries.
 */
export function nameProblem(name: string, taken: readonly string[]): string | undefined {
  const n = name.trim();
  if (!n) return 'Enter a name: model ids are "<name>/<model>".';
  if (n.includes('/')) return `'/' is not allowed in a name: model ids are "<name>/<model>".`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(n)) return 'A name cannot hold control characters.';
  if (taken.includes(n)) return `A provider named '${n}' is already in your settings: choose another name.`;
  return undefined;
}

/** `base`, or `base-2`, `base-3` ... : the first one not taken. */
export function freeName(base: string, taken: readonly string[]): string {
  if (!taken.includes(base)) return base;
  for (let i = 2; ; i++) if (!taken.includes(`${base}-${i}`)) return `${base}-${i}`;
}

/** Why `url` cannot be a base URL (it must be http(s) with a host), or `undefined`. */
export function urlProblem(url: string): string | undefined {
  const u = url.trim();
  if (!u) return 'Enter the base URL.';
  if (!urlOrigin(u)) return 'Enter an http:// or https:// URL with a host, e.g. https://example.com/v1.';
  if (/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(u)) return 'Leave credentials out of the URL: the key is asked for next and kept in secret storage.';
  // the host's rule (credentials.ts is made from it): a URL it would refuse is not written
  const query = /^[^?#]*\?([^#]*)/.exec(u)?.[1] ?? '';
  for (const name of new URLSearchParams(query).keys()) {
    if (CREDENTIAL_PARAM.test(name.trim())) {
      return `Leave credentials out of the URL (its query parameter '${name}' looks like one): the key is asked for next and kept in secret storage.`;
    }
  }
  return undefined;
}

/** Model ids typed as a comma- or space-separated list. */
export function parseModelList(typed: string): string[] {
  return [...new Set(typed.split(/[\s,]+/).map(s => s.trim()).filter(Boolean))];
}

/** The settings entry for a preset. */
export function presetEntry(preset: Preset, name: string, baseUrl: string, models?: string[]): Record<string, unknown> {
  const entry: Record<string, unknown> = { name: name.trim(), baseUrl: baseUrl.trim(), format: preset.format, ...(preset.extra ?? {}) };
  if (models && models.length) entry.models = models;
  return entry;
}
