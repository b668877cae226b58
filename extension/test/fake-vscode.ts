// The parts of the 'vscode' module that src/parts.ts, src/consumer.ts, src/settings.ts and
// src/provider.ts use, for unit tests outside VS Code.
// `setProposals` adds or removes the classes that only some VS Code versions have.
export class LanguageModelTextPart { constructor(public value: string) {} }
export class LanguageModelToolCallPart { constructor(public callId: string, public name: string, public input: object) {} }
export class LanguageModelToolResultPart { constructor(public callId: string, public content: unknown[]) {} }
export class LanguageModelPromptTsxPart { constructor(public value: unknown) {} }
export class LanguageModelChatMessage {
  constructor(public role: number, public content: unknown[] | string, public name?: string) {}
}
export class DataPart { constructor(public data: Uint8Array, public mimeType: string) {} }
export class ThinkingPart { constructor(public value: string | string[], public id?: string, public metadata?: Record<string, unknown>) {} }
export enum LanguageModelChatMessageRole { User = 1, Assistant = 2 }

// Mutable exports: esbuild keeps live bindings, so parts.ts sees the change.
export let LanguageModelDataPart: typeof DataPart | undefined = DataPart;
export let LanguageModelThinkingPart: typeof ThinkingPart | undefined = ThinkingPart;

export function setProposals(p: { data: boolean; thinking: boolean }): void {
  LanguageModelDataPart = p.data ? DataPart : undefined;
  LanguageModelThinkingPart = p.thinking ? ThinkingPart : undefined;
}

// Events for the consumer side (watchConsumerEvents): fire them from a test.
type Listener<T> = (e: T) => void;
function emitter<T>(): { event: (l: Listener<T>) => Disposable; fire: (e: T) => void } {
  const listeners = new Set<Listener<T>>();
  return {
    event: (l) => { listeners.add(l); return new Disposable(() => listeners.delete(l)); },
    fire: (e) => listeners.forEach(l => l(e)),
  };
}
export class Disposable {
  constructor(private readonly fn: () => void) {}
  static from(...items: { dispose(): unknown }[]): Disposable { return new Disposable(() => items.forEach(i => i.dispose())); }
  dispose(): void { this.fn(); }
}
const modelsChanged = emitter<void>();
const configChanged = emitter<{ affectsConfiguration(section: string): boolean }>();
/** `selectChatModels` answers with what a test puts in `chatModels`, and counts its calls. */
export const chatModels: { id: string; vendor: string; countTokens(text: unknown): Promise<number> }[] = [];
export const selections: unknown[] = [];
export const lm = {
  onDidChangeChatModels: modelsChanged.event,
  selectChatModels: async (selector: { id?: string; vendor?: string }) => {
    selections.push(selector);
    return chatModels.filter(m => (selector.id === undefined || m.id === selector.id) && (selector.vendor === undefined || m.vendor === selector.vendor));
  },
};
export class CancellationTokenSource {
  token = { isCancellationRequested: false, onCancellationRequested: () => new Disposable(() => {}) };
  cancel(): void { this.token.isCancellationRequested = true; }
  dispose(): void { /* nothing held */ }
}
/** Plays VS Code's onDidChangeChatModels. */
export function fireModelsChanged(): void { modelsChanged.fire(); }
/** Plays a configuration change of `sections` (and, as VS Code does, of their parents). */
export function fireConfigChanged(sections: string[]): void {
  configChanged.fire({ affectsConfiguration: (s) => sections.some(x => x === s || x.startsWith(`${s}.`)) });
}

// Configuration and workspace files for settings.ts: a test sets the layers inspect() reports
// (`setConfig`), the workspace folders and file, and the files workspace.fs can read.
export class Uri {
  constructor(public readonly scheme: string, public readonly fsPath: string) {}
  static file(p: string): Uri { return new Uri('file', p); }
  static joinPath(base: Uri, ...parts: string[]): Uri { return new Uri(base.scheme, [base.fsPath, ...parts].join('/')); }
  toString(): string { return `${this.scheme}://${this.fsPath}`; }
}
export interface Layers { defaultValue?: unknown; globalValue?: unknown; workspaceValue?: unknown; workspaceFolderValue?: unknown }
let layers: Record<string, Layers> = {};
const files = new Map<string, string>();
export function setConfig(l: Record<string, Layers>): void { layers = l; }
export function setFiles(f: Record<string, string>): void { files.clear(); for (const [k, v] of Object.entries(f)) files.set(k, v); }
export function setWorkspace(folders: string[], workspaceFile?: string): void {
  workspace.workspaceFolders = folders.map((p, index) => ({ uri: Uri.file(p), name: p, index }));
  workspace.workspaceFile = workspaceFile === undefined ? undefined : Uri.file(workspaceFile);
}
function getConfiguration(section: string, scope?: Uri): { inspect(key: string): Layers & { key: string } | undefined; get<T>(key: string, d?: T): T | undefined } {
  return {
    inspect: (key) => {
      const l = layers[`${section}.${key}`] ?? {};
      // as VS Code: a folder value only for a configuration scoped to a folder
      return { key: `${section}.${key}`, ...l, workspaceFolderValue: scope ? l.workspaceFolderValue : undefined };
    },
    get: <T>(key: string, d?: T) => {
      const l = layers[`${section}.${key}`] ?? {};
      return ((scope ? l.workspaceFolderValue : undefined) ?? l.workspaceValue ?? l.globalValue ?? l.defaultValue ?? d) as T | undefined;
    },
  };
}
// For diagnose.ts: the version and environment VS Code reports.
export const version = '1.139.0-test';
export const env = { appName: 'Test Code', remoteName: undefined as string | undefined };
export const workspace: {
  isTrusted: boolean;
  onDidChangeConfiguration: typeof configChanged.event;
  getConfiguration: typeof getConfiguration;
  workspaceFolders: { uri: Uri; name: string; index: number }[] | undefined;
  workspaceFile: Uri | undefined;
  fs: { readFile(uri: Uri): Promise<Uint8Array> };
} = {
  isTrusted: true,
  onDidChangeConfiguration: configChanged.event,
  getConfiguration,
  workspaceFolders: undefined,
  workspaceFile: undefined,
  fs: {
    readFile: async (uri) => {
      const text = files.get(uri.fsPath);
      if (text === undefined) throw new Error(`ENOENT: ${uri.fsPath}`);
      return new TextEncoder().encode(text);
    },
  },
};

// The status bar item (status.ts): a test reads the items created (`statusItems`).
export enum StatusBarAlignment { Left = 1, Right = 2 }
export class ThemeColor { constructor(public readonly id: string) {} }
export class MarkdownString {
  isTrusted = false;
  constructor(public value = '', public supportThemeIcons = false) {}
}
export class StatusBarItem {
  text = '';
  name: string | undefined;
  command: string | undefined;
  tooltip: string | MarkdownString | undefined;
  backgroundColor: ThemeColor | undefined;
  accessibilityInformation: { label: string } | undefined;
  visible = false;
  disposed = false;
  constructor(public readonly id: string, public readonly alignment: StatusBarAlignment, public readonly priority?: number) {}
  show(): void { this.visible = true; }
  hide(): void { this.visible = false; }
  dispose(): void { this.disposed = true; this.visible = false; }
}
export const statusItems: StatusBarItem[] = [];
// For provider.ts: LanguageModelError as VS Code builds it (message, code), an EventEmitter and
// the error notifications shown (`shownErrors`).
export class LanguageModelError extends Error {
  constructor(message?: string, public readonly code: string = '') { super(message); this.name = 'LanguageModelError'; }
  static NoPermissions(message?: string): LanguageModelError { return new LanguageModelError(message, 'NoPermissions'); }
  static Blocked(message?: string): LanguageModelError { return new LanguageModelError(message, 'Blocked'); }
  static NotFound(message?: string): LanguageModelError { return new LanguageModelError(message, 'NotFound'); }
}
export class EventEmitter<T> {
  private readonly e = emitter<T>();
  readonly event = this.e.event;
  fire(data: T): void { this.e.fire(data); }
  dispose(): void { /* nothing held */ }
}
export const shownErrors: string[] = [];
export const shownWarnings: string[] = [];
export const window = {
  createStatusBarItem(id: string, alignment: StatusBarAlignment, priority?: number): StatusBarItem {
    const item = new StatusBarItem(id, alignment, priority);
    statusItems.push(item);
    return item;
  },
  showErrorMessage: async (message: string): Promise<undefined> => { shownErrors.push(message); return undefined; },
  showWarningMessage: async (message: string): Promise<undefined> => { shownWarnings.push(message); return undefined; },
};
