// Consumer side: the host asks VS Code's models (Copilot and any other provider) through
// vscode.lm. Thin on purpose: selection, conversion and streaming only.
import * as vscode from 'vscode';
import * as rpc from 'vscode-jsonrpc/node';
import { Log, REQUEST_CANCELLED } from './host';
import { Dropped, messageFromWire, partToWire, WirePart } from './parts';
import { parsePaceBite, type PaceBite } from './status';
import { mark } from './timing';

/**
 * Whether `name` matches an entry of `lmbridge.endpoint.tools`: a name, or a pattern with `*`,
 * `?` and `[...]` as in file names (Python's fnmatchcase, which the host applies as well).
 */
export function toolAllowed(name: string, patterns: readonly string[]): boolean {
  return patterns.some(p => globRegExp(p).test(name));
}

function globRegExp(pattern: string): RegExp {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*') re += '[\\s\\S]*';
    else if (c === '?') re += '[\\s\\S]';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 2);
      if (end < 0) { re += '\\['; continue; }
      let body = pattern.slice(i + 1, end).replace(/\\/g, '\\\\');
      if (body.startsWith('!')) body = '^' + body.slice(1);
      re += `[${body}]`;
      i = end;
    } else re += c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/** A tool's result part on the wire: text, data (images, JSON), anything else as text. */
function toolContentToWire(part: unknown): WirePart {
  const w = partToWire(part);
  return w.kind === 'text' || w.kind === 'data' ? w : { kind: 'text', value: JSON.stringify(w) };
}

/** JSON-RPC error code for a failed lm/* request (JSON-RPC's server-error range). */
export const LM_REQUEST_FAILED = -32000;

interface ModelRef { id?: string; vendor?: string }

/** What VS Code (1.104+) says a model can do; not in the typed API, so read with care. */
interface ChatCapabilities { supportsImageToText?: boolean; supportsToolCalling?: boolean }

/**
 * The origin of the workspace provider an lmbridge model comes from (undefined: not one). The
 * model's description carries it as `workspace`, so that Python chooses such a model only when
 * the user's own setting names it, never by a family, a pattern or a default.
 */
export type WorkspaceOrigin = (id: string) => string | undefined;

/** A model as `lm/selectChatModels` answers (docs/protocol.md). */
export function describeModel(m: vscode.LanguageModelChat, workspaceOrigin: WorkspaceOrigin = () => undefined) {
  const caps = (m as { capabilities?: ChatCapabilities }).capabilities;
  const capabilities = caps && typeof caps === 'object'
    ? { imageInput: caps.supportsImageToText === true, toolCalling: caps.supportsToolCalling !== false }
    : undefined;
  const workspace = m.vendor === 'lmbridge' ? workspaceOrigin(m.id) : undefined;
  return {
    id: m.id, name: m.name, vendor: m.vendor, family: m.family, version: m.version, maxInputTokens: m.maxInputTokens,
    ...(capabilities ? { capabilities } : {}), ...(workspace !== undefined ? { workspace } : {}),
  };
}

/**
 * The models lm/sendRequest and lm/countTokens found, by vendor and id, kept until VS Code's
 * models change (`forgetModels`, on onDidChangeChatModels): finding one is
 * vscode.lm.selectChatModels, for which VS Code asks the vendor's provider for all its models
 * again, a round trip through the workbench on every request otherwise. Only models that were
 * found are kept, so the map holds no more than VS Code's models.
 */
const foundModels = new Map<string, vscode.LanguageModelChat>();
let modelsGeneration = 0;

/** Drops the models kept by `findModel` (VS Code's models changed). */
export function forgetModels(): void {
  foundModels.clear();
  modelsGeneration++;
}

/** The model a request names (kept after the first time: `foundModels`). */
export async function findModel(ref: ModelRef): Promise<vscode.LanguageModelChat> {
  if (!ref || typeof ref.id !== 'string') throw new rpc.ResponseError(rpc.ErrorCodes.InvalidParams, 'model.id: expected a string');
  const selector: vscode.LanguageModelChatSelector = { id: ref.id };
  if (typeof ref.vendor === 'string') selector.vendor = ref.vendor;
  const key = `${selector.vendor ?? ''}\u0000${ref.id}`;
  const kept = foundModels.get(key);
  if (kept) return kept;
  const generation = modelsGeneration;
  const [model] = await vscode.lm.selectChatModels(selector);
  // a listing made while VS Code's models changed may be stale: used once, not kept
  if (model && generation === modelsGeneration) foundModels.set(key, model);
  if (!model) {
    throw new rpc.ResponseError(LM_REQUEST_FAILED, `no VS Code language model with id '${ref.id}'${ref.vendor ? ` from vendor '${ref.vendor}'` : ''}`,
      { languageModelError: 'NotFound', name: 'LanguageModelError' });
  }
  return model;
}

/** Wraps a VS Code error into the JSON-RPC error the protocol names. */
function toResponseError(e: unknown): rpc.ResponseError<unknown> {
  if (e instanceof rpc.ResponseError) return e;
  if (e instanceof vscode.LanguageModelError) {
    return new rpc.ResponseError(LM_REQUEST_FAILED, e.message, { languageModelError: e.code || 'Unknown', name: e.name });
  }
  const err = e instanceof Error ? e : new Error(String(e));
  return new rpc.ResponseError(LM_REQUEST_FAILED, err.message, { languageModelError: 'Unknown', name: err.name });
}

/** A vscode.CancellationToken that follows a vscode-jsonrpc one. */
function linkToken(token: rpc.CancellationToken): vscode.CancellationTokenSource {
  const cts = new vscode.CancellationTokenSource();
  if (token.isCancellationRequested) cts.cancel();
  else token.onCancellationRequested(() => cts.cancel());
  return cts;
}

/**
 * What the user is told when an app the host runs gets the fallback answer (no usable model).
 * A fixed text: the host's cause names models that other extensions registered, so it goes to
 * the log only.
 */
export const DEGRADED_MESSAGE = "VS Code's language models are responding with limited functionality: an lmbridge app found no usable model. Check that GitHub Copilot (or the provider you chose) is signed in, and the lmbridge.consumer.model setting.";

let degradedShown = false;

/** `lm/degraded`: tell the user once per window (a restarted host does not repeat it); the cause goes to the log. */
export function showDegraded(params: unknown, log: Log): void {
  const cause = typeof params === 'object' && params !== null ? (params as { cause?: unknown }).cause : undefined;
  log.warn(`an app runs without a usable model: ${typeof cause === 'string' ? cause.slice(0, 500) : 'no cause given'}`);
  if (degradedShown) return;
  degradedShown = true;
  void vscode.window.showWarningMessage(DEGRADED_MESSAGE, 'Show Log').then(choice => { if (choice === 'Show Log') (log as Partial<{ show(): void }>).show?.(); });
}

/** Installs the consumer-side request handlers on a host connection. */
export function attachConsumer(conn: rpc.MessageConnection, log: Log, allowedTools: () => readonly string[] = () => [], onPace: (bite: PaceBite) => void = () => {},
  workspaceOrigin: WorkspaceOrigin = () => undefined): void {
  conn.onNotification('lm/degraded', (params: unknown) => showDegraded(params, log));
  conn.onNotification('pace/limited', (params: unknown) => { const bite = parsePaceBite(params); if (bite) onPace(bite); });
  let droppedOnce = false;
  const dropped: Dropped = (what) => {
    if (!droppedOnce) log.warn(`lm/sendRequest: this VS Code cannot send ${what} parts; left out`);
    droppedOnce = true;
  };

  conn.onRequest('lm/selectChatModels', async (params: { selector?: vscode.LanguageModelChatSelector }) => {
    try {
      mark('ext.select');
      const models = await vscode.lm.selectChatModels(params?.selector ?? {});
      mark('ext.selected');
      return { models: models.map(m => describeModel(m, workspaceOrigin)) };
    } catch (e) {
      return toResponseError(e);
    }
  });

  // VS Code's tools for the host (its apps and the endpoint's /mcp and /lm/tools): only those
  // the user's lmbridge.endpoint.tools allows are listed or run, whatever the host asks.
  conn.onRequest('lm/tools', () => {
    const allowed = allowedTools();
    const tools = allowed.length ? vscode.lm.tools.filter(t => toolAllowed(t.name, allowed)) : [];
    return { tools: tools.map(t => ({ name: t.name, description: t.description, inputSchema: t.inputSchema ?? null, tags: [...t.tags] })) };
  });

  conn.onRequest('lm/invokeTool', async (params: { name?: unknown; input?: unknown }, token: rpc.CancellationToken) => {
    const name = params?.name;
    if (typeof name !== 'string' || !name) return new rpc.ResponseError(rpc.ErrorCodes.InvalidParams, 'name: expected a tool name');
    const input = params.input ?? {};
    if (typeof input !== 'object' || input === null || Array.isArray(input)) return new rpc.ResponseError(rpc.ErrorCodes.InvalidParams, 'input: expected an object');
    if (!toolAllowed(name, allowedTools()) || !vscode.lm.tools.some(t => t.name === name)) {
      return new rpc.ResponseError(LM_REQUEST_FAILED, `no tool '${name}': the tools offered are those lmbridge.endpoint.tools allows`, { toolError: 'not_found' });
    }
    const cts = linkToken(token);
    try {
      // No chat request owns this call (toolInvocationToken undefined): a tool that asks for
      // confirmation asks the user in VS Code's own dialog.
      const result = await vscode.lm.invokeTool(name, { input, toolInvocationToken: undefined }, cts.token);
      if (token.isCancellationRequested) return new rpc.ResponseError(REQUEST_CANCELLED, 'cancelled');
      return { content: result.content.map(toolContentToWire) };
    } catch (e) {
      if (token.isCancellationRequested) return new rpc.ResponseError(REQUEST_CANCELLED, 'cancelled');
      const err = e instanceof Error ? e : new Error(String(e));
      log.info(`lm/invokeTool ${name} failed: ${err.message}`);
      return new rpc.ResponseError(LM_REQUEST_FAILED, err.message, { toolError: 'failed', name: err.name });
    } finally {
      cts.dispose();
    }
  });

  conn.onRequest('lm/countTokens', async (params: { model: ModelRef; text: unknown }, token: rpc.CancellationToken) => {
    const cts = linkToken(token);
    try {
      const model = await findModel(params?.model);
      const text = typeof params.text === 'string' ? params.text : messageFromWire(params.text, dropped);
      return { tokens: await model.countTokens(text, cts.token) };
    } catch (e) {
      return toResponseError(e);
    } finally {
      cts.dispose();
    }
  });

  conn.onRequest('lm/sendRequest', async (params: {
    streamId: string; model: ModelRef; messages: unknown[]; justification?: string;
    options?: { tools?: { name: string; description?: string; inputSchema?: object | null }[]; toolMode?: number; modelOptions?: Record<string, unknown> };
  }, token: rpc.CancellationToken) => {
    mark('ext.lm_send');
    const cts = linkToken(token);
    const streamId = params?.streamId;
    try {
      if (typeof streamId !== 'string') throw new rpc.ResponseError(rpc.ErrorCodes.InvalidParams, 'streamId: expected a string');
      if (!Array.isArray(params.messages)) throw new rpc.ResponseError(rpc.ErrorCodes.InvalidParams, 'messages: expected a list');
      const model = await findModel(params.model);
      mark('ext.model');
      let messages: vscode.LanguageModelChatMessage[];
      try {
        messages = params.messages.map(m => messageFromWire(m, dropped));
      } catch (e) {
        throw new rpc.ResponseError(rpc.ErrorCodes.InvalidParams, `messages: ${(e as Error).message}`);
      }
      const o = params.options ?? {};
      const options: vscode.LanguageModelChatRequestOptions = {
        justification: params.justification,
        modelOptions: o.modelOptions,
        tools: (o.tools ?? []).map(t => ({ name: t.name, description: t.description ?? '', inputSchema: t.inputSchema ?? undefined })),
        toolMode: o.toolMode === 2 ? vscode.LanguageModelChatToolMode.Required : vscode.LanguageModelChatToolMode.Auto,
      };
      const response = await model.sendRequest(messages, options, cts.token);
      mark('ext.response');
      // Parts are batched: everything that arrives before the event loop turns goes in one notification.
      let batch: WirePart[] = [];
      let scheduled = false;
      const flush = (): void => {
        scheduled = false;
        if (!batch.length || token.isCancellationRequested) { batch = []; return; }
        const parts = batch;
        batch = [];
        mark('ext.lm_parts', { n: parts.length });
        void conn.sendNotification('lm/parts', { streamId, parts });
      };
      for await (const part of response.stream) {
        if (token.isCancellationRequested) break;
        // an empty text part carries nothing (lmbridge's provider sends them to have VS Code pass its parts on at once)
        if (part instanceof vscode.LanguageModelTextPart && part.value === '') continue;
        batch.push(partToWire(part));
        if (!scheduled) { scheduled = true; setImmediate(flush); }
      }
      flush();
      mark('ext.lm_done');
      if (token.isCancellationRequested) return new rpc.ResponseError(REQUEST_CANCELLED, 'cancelled');
      return {};
    } catch (e) {
      if (token.isCancellationRequested) return new rpc.ResponseError(REQUEST_CANCELLED, 'cancelled');
      return toResponseError(e);
    } finally {
      cts.dispose();
    }
  });
}

/**
 * Forwards VS Code's model and configuration changes to the host. `lm/configChanged` carries
 * the current consumer settings (`settings()`), so a new model setting reaches Python without
 * a reload; VS Code's own `lm` section matters to consumers too.
 */
export function watchConsumerEvents(
  notify: (method: string, params: unknown) => void,
  settings: () => Record<string, unknown>,
): vscode.Disposable {
  return vscode.Disposable.from(
    vscode.lm.onDidChangeChatModels(() => { forgetModels(); notify('lm/modelsChanged', {}); }),
    vscode.workspace.onDidChangeConfiguration(e => {
      for (const section of ['lmbridge', 'lm']) {
        if (e.affectsConfiguration(section)) notify('lm/configChanged', { section, settings: settings() });
      }
    }),
  );
}

