// lmbridge: Move Providers to the Language Models Editor: entries of the user's
// `lmbridge.providers` become groups of the vendor 'lmbridge-api' in VS Code's Language Models
// editor, their keys going to VS Code's secret storage with their origin binding kept.
import * as vscode from 'vscode';
import { allowOrigin, planMove, type NewGroup } from './editorGroups';
import { decodeStored, originOf, SECRET_PREFIX, type ProviderEntry } from './keys';
import { plain, testArgument } from './untrusted';

/** VS Code's command that adds a group to the Language Models editor (VS Code 1.109 and later). */
export const ADD_GROUP_COMMAND = 'lm.addLanguageModelsProviderGroup';

/** Registers **lmbridge: Move Providers to the Language Models Editor**. */
export function registerMoveToEditor(context: vscode.ExtensionContext, log: vscode.LogOutputChannel, userProviders: () => ProviderEntry[]): vscode.Disposable {
  // a provider name as argument only in the end-to-end tests (testArgument): it is moved without asking
  return vscode.commands.registerCommand('lmbridge.moveToLanguageModelsEditor', (name?: unknown) => moveToEditor(context, log, userProviders, testArgument(name)));
}

async function moveToEditor(context: vscode.ExtensionContext, log: vscode.LogOutputChannel, userProviders: () => ProviderEntry[], only?: string): Promise<string[]> {
  if (!(await vscode.commands.getCommands(true)).includes(ADD_GROUP_COMMAND)) {
    void vscode.window.showInformationMessage("lmbridge: this VS Code's Language Models editor cannot add providers (VS Code 1.109 or later can); keep them in 'lmbridge.providers' (lmbridge: Manage Models).");
    return [];
  }
  const entries = userProviders();
  const candidates = entries.filter(e => typeof e.name === 'string' && typeof e.format === 'string');
  if (candidates.length === 0) {
    void vscode.window.showInformationMessage("lmbridge: your 'lmbridge.providers' has no API provider to move (Python providers stay there).");
    return [];
  }
  const picked = only !== undefined ? candidates.filter(e => e.name === only).map(e => ({ e })) : await vscode.window.showQuickPick(
    candidates.map(e => ({ label: plain(String(e.name)), description: plain(`${String(e.format)}, ${String(e.baseUrl ?? '')}`), picked: true, e })),
    { canPickMany: true, title: 'Providers to move to the Language Models editor', ignoreFocusOut: true },
  );
  if (!picked || picked.length === 0) return [];
  const go = 'Move';
  const choice = only !== undefined ? go : await vscode.window.showWarningMessage(`lmbridge: move ${picked.length} provider${picked.length > 1 ? 's' : ''} to the Language Models editor?`, {
    modal: true,
    detail: "Each becomes a group of 'lmbridge API' in the Language Models editor and leaves 'lmbridge.providers' in your user settings; its API key moves to VS Code's secret storage, still sent only to the origin it was stored for. Its models get new ids (editor:<host>-<digest>/<model>) under the vendor 'lmbridge-api'.",
  }, go);
  if (choice !== go) return [];
  const moved: string[] = [];
  for (const { e } of picked) {
    const name = String(e.name);
    const raw = await context.secrets.get(SECRET_PREFIX + name);
    const stored = raw === undefined ? undefined : decodeStored(raw);
    const origin = originOf(e);
    const plan = planMove(e, stored && { key: stored.key, origin: stored.legacy ? null : stored.origin }, origin);
    if ('reason' in plan) {
      log.warn(`'${name}' stays in lmbridge.providers: ${plan.reason}`);
      void vscode.window.showWarningMessage(plain(`lmbridge: '${name}' stays in lmbridge.providers: ${plan.reason}.`));
      continue;
    }
    try {
      // the key keeps its binding: the editor's provider finds it recorded for this origin
      if (stored !== undefined && origin !== null) await allowOrigin(context.secrets, stored.key.trim(), origin);
      await vscode.commands.executeCommand(ADD_GROUP_COMMAND, plan.group satisfies NewGroup);
    } catch (err) {
      log.error(`moving '${name}' to the Language Models editor failed: ${(err as Error).message}`);
      void vscode.window.showErrorMessage(plain(`lmbridge: moving '${name}' failed: ${(err as Error).message}`));
      continue;
    }
    moved.push(name);
  }
  if (moved.length === 0) return moved;
  const remaining = entries.filter(e => !(typeof e.name === 'string' && moved.includes(e.name)));
  await vscode.workspace.getConfiguration('lmbridge').update('providers', remaining.length ? remaining : undefined, vscode.ConfigurationTarget.Global);
  for (const name of moved) await context.secrets.delete(SECRET_PREFIX + name);
  log.info(`moved to the Language Models editor: ${moved.join(', ')}`);
  void vscode.window.showInformationMessage(plain(`lmbridge: moved ${moved.join(', ')} to the Language Models editor (Chat: Manage Language Models).`));
  return moved;
}
