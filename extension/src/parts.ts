// Wire parts (docs/protocol.md, src/lmbridge/parts.py) <-> vscode.LanguageModel* objects.
//
// The extension targets VS Code 1.104, whose stable API has text, tool-call and tool-result
// parts; LanguageModelDataPart became stable later and LanguageModelThinkingPart is still a
// proposal. Both are found by feature detection at run time, never assumed.
import * as vscode from 'vscode';
import { stripThinkingText, THINKING_MARKER } from './thinking';

/** A part in its JSON wire form. */
export type WirePart =
  | { kind: 'text'; value: string }
  | { kind: 'thinking'; value: string | string[]; id?: string; metadata?: Record<string, unknown> }
  | { kind: 'toolCall'; callId: string; name: string; input: Record<string, unknown> }
  | { kind: 'toolResult'; callId: string; content: WirePart[] }
  | { kind: 'data'; mimeType: string; data: string };

/** A message in its JSON wire form (role 1 user, 2 assistant, 3 system). */
export interface WireMessage {
  role: number;
  content: WirePart[];
  name: string | null;
}

/** Request options in their JSON wire form. */
export interface WireOptions {
  tools: { name: string; description: string; inputSchema: object | null }[];
  toolMode: number;
  modelOptions: Record<string, unknown>;
  modelConfiguration?: Record<string, unknown>;
}

// The shapes of the parts that 1.104's typings lack.
interface DataPartLike { readonly mimeType: string; readonly data: Uint8Array }
interface ThinkingPartLike { readonly value: string | string[]; readonly id?: string; readonly metadata?: Record<string, unknown> }
type DataPartCtor = (new (data: Uint8Array, mimeType: string) => DataPartLike);
type ThinkingPartCtor = (new (value: string | string[], id?: string, metadata?: Record<string, unknown>) => ThinkingPartLike);

/** The DataPart class of this VS Code, or undefined if it has none. */
export function dataPartClass(): DataPartCtor | undefined {
  const c = (vscode as unknown as Record<string, unknown>).LanguageModelDataPart;
  return typeof c === 'function' ? (c as DataPartCtor) : undefined;
}

/**
 * The answer's usage as Copilot's context-window ring reads it: a DataPart of MIME type
 * `usage` holding the OpenAI-shaped JSON of the `chat/response` result's `usagePart`
 * (docs/protocol.md). Undefined when there is none, or this VS Code has no DataPart class (a
 * proposed LanguageModelUsagePart is not in VS Code 1.139; the DataPart form stays supported).
 */
export function usageDataPart(result: unknown): DataPartLike | undefined {
  const usage = (result as { usagePart?: unknown } | null | undefined)?.usagePart;
  const Data = dataPartClass();
  if (!Data || usage === null || typeof usage !== 'object' || Array.isArray(usage)) return undefined;
  return new Data(new TextEncoder().encode(JSON.stringify(usage)), 'usage');
}

/** The ThinkingPart class of this VS Code (a proposed API), or undefined. */
export function thinkingPartClass(): ThinkingPartCtor | undefined {
  const c = (vscode as unknown as Record<string, unknown>).LanguageModelThinkingPart;
  return typeof c === 'function' ? (c as ThinkingPartCtor) : undefined;
}

/** Something the parts could not express in this VS Code: reported once to the log. */
export type Dropped = (what: string) => void;

const b64encode = (bytes: Uint8Array): string => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
const b64decode = (text: string): Uint8Array => new Uint8Array(Buffer.from(text, 'base64'));

function ctorName(p: unknown): string {
  if (p === null) return 'null';
  if (typeof p !== 'object') return typeof p;
  return (p as object).constructor?.name || 'Object';
}

function isObj(p: unknown): p is Record<string, unknown> {
  return typeof p === 'object' && p !== null;
}

// ---------------------------------------------------------------------------- VS Code -> wire

/**
 * One part of a request message as wire JSON. Instances are checked first; shapes next (VS Code
 * may hand over its own subclasses, e.g. LanguageModelToolResultPart2); anything else becomes a
 * text part that says what it was, so the model sees a trace instead of the request failing.
 */
export function partToWire(p: unknown): WirePart {
  const Thinking = thinkingPartClass();
  const Data = dataPartClass();
  if (p instanceof vscode.LanguageModelTextPart) return { kind: 'text', value: p.value };
  if (p instanceof vscode.LanguageModelToolCallPart) return toolCallToWire(p);
  if (p instanceof vscode.LanguageModelToolResultPart) return toolResultToWire(p.callId, p.content);
  if (Thinking && p instanceof Thinking) return thinkingToWire(p);
  if (Data && p instanceof Data) return { kind: 'data', mimeType: p.mimeType, data: b64encode(p.data) };
  if (p instanceof vscode.LanguageModelPromptTsxPart) return { kind: 'text', value: jsonText(p.value) };
  if (isObj(p)) {
    if (typeof p.callId === 'string' && typeof p.name === 'string' && 'input' in p) return toolCallToWire(p as unknown as vscode.LanguageModelToolCallPart);
    if (typeof p.callId === 'string' && Array.isArray(p.content)) return toolResultToWire(p.callId, p.content);
    if (typeof p.mimeType === 'string' && p.data instanceof Uint8Array) return { kind: 'data', mimeType: p.mimeType, data: b64encode(p.data) };
    if (/Thinking/.test(ctorName(p)) && (typeof p.value === 'string' || Array.isArray(p.value))) return thinkingToWire(p as unknown as ThinkingPartLike);
    if (typeof p.value === 'string') return { kind: 'text', value: p.value };
  }
  return { kind: 'text', value: describeUnknown(p) };
}

function toolCallToWire(p: { callId: string; name: string; input: unknown }): WirePart {
  // The wire requires an object; VS Code types input as `object`, but be strict about it.
  const input = isObj(p.input) && !Array.isArray(p.input) ? (p.input as Record<string, unknown>) : { value: p.input };
  return { kind: 'toolCall', callId: p.callId, name: p.name, input };
}

function toolResultToWire(callId: string, content: readonly unknown[]): WirePart {
  const inner: WirePart[] = [];
  for (const c of content) {
    const w = partToWire(c);
    // A tool result holds text, data and thinking only; nested calls/results become text.
    if (w.kind === 'toolCall' || w.kind === 'toolResult') inner.push({ kind: 'text', value: JSON.stringify(w) });
    else inner.push(w);
  }
  return { kind: 'toolResult', callId, content: inner };
}

function thinkingToWire(p: ThinkingPartLike): WirePart {
  const out: WirePart = { kind: 'thinking', value: Array.isArray(p.value) ? [...p.value] : p.value };
  if (typeof p.id === 'string') out.id = p.id;
  if (isObj(p.metadata)) out.metadata = { ...p.metadata };
  return out;
}

function jsonText(value: unknown): string {
  try {
    return typeof value === 'string' ? value : JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

function describeUnknown(p: unknown): string {
  let body: string;
  try {
    body = JSON.stringify(p) ?? '';
  } catch {
    body = '';
  }
  if (body.length > 2000) body = body.slice(0, 2000) + '…';
  return `[unsupported ${ctorName(p)} part${body && body !== '{}' ? `: ${body}` : ''}]`;
}

/** A request message (VS Code's LanguageModelChatRequestMessage or LanguageModelChatMessage) as wire JSON. */
export function messageToWire(m: { role: number; content: readonly unknown[] | string; name?: string }): WireMessage {
  const content = typeof m.content === 'string' ? [{ kind: 'text', value: m.content } as WirePart] : m.content.map(partToWire);
  const role = Number(m.role);
  return { role, content: role === 2 ? withoutQuotedThinking(content) : content, name: m.name ?? null };
}

/**
 * An assistant message's parts without the reasoning that was shown as quoted text (see
 * thinking.ts): each run of text parts that holds the marker becomes one text part without it.
 */
function withoutQuotedThinking(parts: WirePart[]): WirePart[] {
  if (!parts.some(p => p.kind === 'text' && p.value.includes(THINKING_MARKER))) return parts;
  const out: WirePart[] = [];
  let run: string[] = [];
  const flush = (): void => {
    if (run.length === 0) return;
    const joined = run.join('');
    const text = joined.includes(THINKING_MARKER) ? stripThinkingText(joined) : undefined;
    if (text === undefined) run.forEach(value => out.push({ kind: 'text', value }));
    else if (text) out.push({ kind: 'text', value: text });
    run = [];
  };
  for (const p of parts) {
    if (p.kind === 'text') run.push(p.value);
    else { flush(); out.push(p); }
  }
  flush();
  return out;
}

/** The provider's request options as wire JSON. */
export function optionsToWire(o: {
  tools?: readonly { name: string; description: string; inputSchema?: object | undefined }[];
  toolMode?: number;
  modelOptions?: { readonly [name: string]: unknown };
}): WireOptions {
  const wire: WireOptions = {
    tools: (o.tools ?? []).map(t => ({ name: t.name, description: t.description ?? '', inputSchema: t.inputSchema ?? null })),
    toolMode: o.toolMode ?? 1,
    modelOptions: { ...(o.modelOptions ?? {}) },
  };
  // The values chosen for the model's configurationSchema in the model picker (Thinking
  // Effort): VS Code passes them as options.modelConfiguration where it has the field (1.139
  // does; the 1.104 typings do not know it).
  const chosen = (o as { modelConfiguration?: unknown }).modelConfiguration;
  if (chosen && typeof chosen === 'object' && !Array.isArray(chosen) && Object.keys(chosen).length > 0) {
    wire.modelConfiguration = { ...(chosen as Record<string, unknown>) };
  }
  return wire;
}

// ---------------------------------------------------------------------------- wire -> VS Code

/**
 * One wire part as a VS Code response/input part. Returns undefined when this VS Code cannot
 * express it (thinking or data without the API); `dropped` is told, once per kind by the caller.
 */
export function partFromWire(w: unknown, dropped?: Dropped): unknown {
  if (!isObj(w)) throw new Error(`part: expected an object, got ${ctorName(w)}`);
  switch (w.kind) {
    case 'text':
      return new vscode.LanguageModelTextPart(str(w.value, 'text.value'));
    case 'thinking': {
      const Thinking = thinkingPartClass();
      const value = w.value;
      if (!(typeof value === 'string' || (Array.isArray(value) && value.every(v => typeof v === 'string')))) {
        throw new Error('thinking.value: expected a string or a list of strings');
      }
      // Without the proposed API the reasoning is left out here; the provider's answers show it
      // as quoted text instead (thinking.ts), which messageToWire takes out again.
      if (!Thinking) { dropped?.('thinking'); return undefined; }
      const id = typeof w.id === 'string' ? w.id : undefined;
      const metadata = isObj(w.metadata) ? (w.metadata as Record<string, unknown>) : undefined;
      return new Thinking(value as string | string[], id, metadata);
    }
    case 'toolCall': {
      if (!isObj(w.input) || Array.isArray(w.input)) throw new Error('toolCall.input: expected an object');
      return new vscode.LanguageModelToolCallPart(str(w.callId, 'toolCall.callId'), str(w.name, 'toolCall.name'), w.input);
    }
    case 'toolResult': {
      if (!Array.isArray(w.content)) throw new Error('toolResult.content: expected a list');
      const content = w.content.map(c => partFromWire(c, dropped)).filter(c => c !== undefined);
      return new vscode.LanguageModelToolResultPart(str(w.callId, 'toolResult.callId'), content);
    }
    case 'data': {
      const Data = dataPartClass();
      const mime = str(w.mimeType, 'data.mimeType');
      const bytes = b64decode(str(w.data, 'data.data'));
      if (!Data) { dropped?.('data'); return undefined; }
      return new Data(bytes, mime);
    }
    default:
      throw new Error(`part.kind: unknown part kind ${JSON.stringify(w.kind)}`);
  }
}

function str(v: unknown, where: string): string {
  if (typeof v !== 'string') throw new Error(`${where}: expected a string, got ${ctorName(v)}`);
  return v;
}

/** A wire message as a vscode.LanguageModelChatMessage (consumer side: Python -> VS Code's models). */
export function messageFromWire(w: unknown, dropped?: Dropped): vscode.LanguageModelChatMessage {
  if (!isObj(w)) throw new Error(`message: expected an object, got ${ctorName(w)}`);
  const role = w.role;
  if (role !== 1 && role !== 2 && role !== 3) throw new Error(`message.role: expected 1, 2 or 3, got ${JSON.stringify(role)}`);
  const raw = typeof w.content === 'string' ? [{ kind: 'text', value: w.content }] : w.content;
  if (!Array.isArray(raw)) throw new Error('message.content: expected a list');
  const content = raw.map(p => partFromWire(p, dropped)).filter(p => p !== undefined);
  const name = typeof w.name === 'string' ? w.name : undefined;
  // Role 3 (System) is a proposed role: the constructor takes the number as it is.
  return new vscode.LanguageModelChatMessage(role as vscode.LanguageModelChatMessageRole, content as vscode.LanguageModelTextPart[], name);
}
