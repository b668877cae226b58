// vscode.LanguageModelChatProvider for the vendor 'lmbridge-api': the providers the user adds in
// VS Code's Language Models editor (Add Models). VS Code asks for each group's models with its
// configuration (not its name: VS Code shows that beside the models itself); the host serves
// the group as provider `editor:<id>` (editorGroups.groupId) and this class hands chats and
// token counts to the main provider (the model ids say which provider serves them).
import * as vscode from 'vscode';
import { allowOrigin, bindKey, decodeOrigins, EditorGroups, groupId, groupOrigin, keyOriginSlot, splitConfiguration } from './editorGroups';
import { Host, Log } from './host';
import { LmBridgeChatProvider, toLanguageModelError } from './provider';

/** What VS Code passes when it lists a vendor's models: a group's configuration where the editor manages groups (VS Code 1.109 and later). */
export interface GroupListingOptions {
  silent: boolean;
  configuration?: unknown;
}

/** The provider of the Language Models editor's groups. */
export class EditorGroupsProvider implements vscode.LanguageModelChatProvider {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeLanguageModelChatInformation = this.changed.event;

  constructor(
    private readonly main: LmBridgeChatProvider,
    private readonly host: Host,
    readonly groups: EditorGroups,
    private readonly secrets: vscode.SecretStorage,
    private readonly log: Log,
    /** Tells a running host the groups (configure); a host that starts later gets them at initialize. */
    private readonly reconfigure: () => Promise<void>,
  ) {
    // the host's models changed (a catalog refresh, a configure): VS Code asks again
    main.onDidChangeLanguageModelChatInformation(() => this.changed.fire());
  }

  /** Tells VS Code to ask for the groups' models again. */
  fireChanged(): void {
    this.changed.fire();
  }

  async provideLanguageModelChatInformation(options: GroupListingOptions, token: vscode.CancellationToken): Promise<vscode.LanguageModelChatInformation[]> {
    if (options?.configuration === undefined) {
      // The vendor's own call, first in each round (or a VS Code without the editor's groups).
      if (this.groups.beginRound().length > 0) await this.reconfigure();
      return [];
    }
    const { configuration, key } = splitConfiguration(options.configuration);
    const id = groupId(configuration, key);
    const origin = key === undefined ? null : await this.boundOrigin(key, groupOrigin(configuration));
    if (this.groups.update(id, { configuration, key, origin })) await this.reconfigure();
    try {
      const result = await this.host.sendRequest<{ models: vscode.LanguageModelChatInformation[] }>('models/list', { silent: !!options.silent, group: id }, token);
      return Array.isArray(result?.models) ? result.models : [];
    } catch (e) {
      const err = toLanguageModelError(e, this.host);
      this.log.error(`listing the models of a Language Models editor group (${describe(configuration)}) failed: ${err.message}`);
      throw err; // VS Code shows it on the group in the Language Models editor
    }
  }

  /**
   * The origin a key given through the editor is sent with: the group's own when the key was
   * given or confirmed for it (a key never seen is recorded for the group's origin now).
   */
  private async boundOrigin(key: string, now: string | null): Promise<string | null> {
    const slot = keyOriginSlot(key);
    const { origin, record } = bindKey(decodeOrigins(await this.secrets.get(slot)), now);
    if (record !== undefined) {
      await this.secrets.store(slot, JSON.stringify(record));
      this.log.info(`an API key given in the Language Models editor is now bound to ${record.join(', ')}`);
    }
    return origin;
  }

  /** Lets the key of the group `id` go to the origin it points to now (Confirm API Key Origin). */
  async rebind(id: string, now: string): Promise<void> {
    const known = this.groups.get(id);
    if (known?.key === undefined) return;
    await allowOrigin(this.secrets, known.key, now);
    this.groups.update(id, { ...known, origin: now });
    await this.reconfigure();
    this.changed.fire();
  }

  provideLanguageModelChatResponse(
    model: vscode.LanguageModelChatInformation,
    messages: readonly vscode.LanguageModelChatRequestMessage[],
    options: vscode.ProvideLanguageModelChatResponseOptions,
    progress: vscode.Progress<vscode.LanguageModelResponsePart>,
    token: vscode.CancellationToken,
  ): Promise<void> {
    return this.main.provideLanguageModelChatResponse(model, messages, options, progress, token);
  }

  provideTokenCount(model: vscode.LanguageModelChatInformation, text: string | vscode.LanguageModelChatRequestMessage, token: vscode.CancellationToken): Promise<number> {
    return this.main.provideTokenCount(model, text, token);
  }
}

/** A group for messages: its format and base URL (VS Code does not give its name). */
export function describe(configuration: Record<string, unknown>): string {
  const format = typeof configuration.format === 'string' ? configuration.format : 'no format';
  const url = typeof configuration.baseUrl === 'string' ? configuration.baseUrl : 'no base URL';
  return `${format} at ${url}`;
}
