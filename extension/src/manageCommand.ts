// The VS Code side of **lmbridge: Manage Models** (manage.ts holds the flow): quick picks and
// input boxes, the user settings, SecretStorage and the host's `providers/test`.
import * as vscode from 'vscode';
import { decodeStored, encodeStored, SECRET_PREFIX, type BoundKey, type ProviderEntry } from './keys';
import { manageModels, type ManageStore, type ManageUI, type PickItem, type TestResult } from './manage';
import { readSettings } from './settings';
import { plain } from './untrusted';

/** The command the `languageModelChatProviders` contribution names as its `managementCommand`. */
export const MANAGE_COMMAND = 'lmbridge.manageModels';

/** What the flow needs of the host. */
export interface TestHost {
  reconfigure(): Promise<unknown>;
  sendRequest<R>(method: string, params: unknown): Promise<R>;
}

interface Log {
  info(message: string): void;
  error(message: string): void;
}

// Provider names, URLs, model ids and the host's (upstream's) error texts reach every method:
// each text is made plain (untrusted.ts). A label's own icon (`$(server)`) is the flow's.
const ICON = /^\$\([a-z-]+\) /;
const label = (l: string): string => { const icon = ICON.exec(l)?.[0] ?? ''; return icon + plain(l.slice(icon.length)); };
const maybe = (s: string | undefined): string | undefined => s === undefined ? undefined : plain(s);

/** VS Code's quick picks, input boxes and notifications, with every text made plain. */
export const ui: ManageUI = {
  async pick<T>(items: PickItem<T>[], options: { title: string; placeholder?: string }): Promise<T | undefined> {
    const picked = await vscode.window.showQuickPick(items.map(i => ({ label: label(i.label), description: maybe(i.description), detail: maybe(i.detail), item: i })), {
      title: plain(options.title), placeHolder: maybe(options.placeholder), ignoreFocusOut: true, matchOnDescription: true,
    });
    return picked?.item.value;
  },
  input: (o) => Promise.resolve(vscode.window.showInputBox({
    title: plain(o.title), prompt: plain(o.prompt), value: o.value, placeHolder: maybe(o.placeholder), password: o.password, ignoreFocusOut: true,
    validateInput: o.validate ? (v) => maybe(o.validate?.(v)) : undefined,
  })),
  async confirm(message, detail, action) {
    return await vscode.window.showWarningMessage(plain(message), { modal: true, detail: plain(detail) }, action) === action;
  },
  info: (m) => void vscode.window.showInformationMessage(plain(`lmbridge: ${m}`)),
  error: (m) => void vscode.window.showErrorMessage(plain(`lmbridge: ${m}`)),
  busy: (title, work) => Promise.resolve(vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title }, work)),
};

/** Registers **lmbridge: Manage Models**. */
export function registerManageModels(context: vscode.ExtensionContext, host: TestHost, log: Log): vscode.Disposable {
  const store: ManageStore = {
    userProviders: () => readSettings().providers,
    async writeUserProviders(list: ProviderEntry[]) {
      // items that are no entry (the host ignores them) stay as they were, after the entries
      const cfg = vscode.workspace.getConfiguration('lmbridge');
      const raw = cfg.inspect<unknown>('providers')?.globalValue;
      const others = Array.isArray(raw) ? raw.filter(x => typeof x !== 'object' || x === null || Array.isArray(x)) : [];
      await cfg.update('providers', [...list, ...others], vscode.ConfigurationTarget.Global);
      log.info(`Manage Models: lmbridge.providers of the user settings now has ${list.length} entr${list.length === 1 ? 'y' : 'ies'}`);
    },
    async storedKey(name: string): Promise<BoundKey | undefined> {
      const raw = await context.secrets.get(SECRET_PREFIX + name);
      if (raw === undefined) return undefined;
      const { key, origin, legacy } = decodeStored(raw);
      return { key, origin: legacy ? null : origin };
    },
    async storeKey(name: string, bound: BoundKey) {
      await context.secrets.store(SECRET_PREFIX + name, encodeStored(bound));
      log.info(`API key for '${name}' stored, bound to ${bound.origin ?? 'no origin'}`);
    },
    async deleteKey(name: string) {
      if (await context.secrets.get(SECRET_PREFIX + name) === undefined) return;
      await context.secrets.delete(SECRET_PREFIX + name);
      log.info(`API key for '${name}' removed`);
    },
    async test(name: string): Promise<TestResult> {
      // the settings and keys just written: a running host gets them now, a new one at start
      await host.reconfigure();
      const result = await host.sendRequest<TestResult>('providers/test', { name });
      log.info(`Manage Models: testing '${name}': ${result.ok ? `${result.models.length} models` : result.error ?? 'failed'}`);
      return result;
    },
    openSettingsJson: async () => { await vscode.commands.executeCommand('workbench.action.openSettingsJson'); },
  };
  // VS Code passes the vendor ('lmbridge') when the command runs from the model picker.
  return vscode.commands.registerCommand(MANAGE_COMMAND, async () => {
    try {
      await manageModels(ui, store);
    } catch (e) {
      log.error(`Manage Models failed: ${(e as Error).message}`);
      void vscode.window.showErrorMessage(plain(`lmbridge: Manage Models failed: ${(e as Error).message}`));
    }
  });
}
