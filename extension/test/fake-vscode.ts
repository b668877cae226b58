// The parts of the 'vscode' module that src/parts.ts uses, for unit tests outside VS Code.
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
// eslint-disable-next-line prefer-const
export let LanguageModelDataPart: typeof DataPart | undefined = DataPart;
// eslint-disable-next-line prefer-const
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
export const lm = { onDidChangeChatModels: modelsChanged.event };
export const workspace = { onDidChangeConfiguration: configChanged.event };
/** Plays VS Code's onDidChangeChatModels. */
export function fireModelsChanged(): void { modelsChanged.fire(); }
/** Plays a configuration change of `sections` (and, as VS Code does, of their parents). */
export function fireConfigChanged(sections: string[]): void {
  configChanged.fire({ affectsConfiguration: (s) => sections.some(x => x === s || x.startsWith(`${s}.`)) });
}
