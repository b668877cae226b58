// The interpreter selected in the Python extension (ms-python.python), through its public API
// (@vscode/python-extension). Used only when lmbridge.pythonCommand is empty and no managed
// environment exists, and never one a workspace chose (see `pythonExtensionAllowed`).
import { PythonExtension } from '@vscode/python-extension';
import * as fs from 'fs';
import * as vscode from 'vscode';
import type { Log } from './host';
import { pythonExtensionAllowed } from './python';

const PYTHON_EXTENSION_ID = 'ms-python.python';

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([p, new Promise<T>((_, rej) => setTimeout(() => rej(new Error(`${what}: no answer in ${ms / 1000} s`)), ms))]);
}

/** Whether a workspace (or folder) value of python.defaultInterpreterPath exists. */
function workspaceSetsInterpreter(): boolean {
  const folders = vscode.workspace.workspaceFolders ?? [];
  const scopes = [undefined, ...folders.map(f => f.uri)];
  return scopes.some(scope => {
    const i = vscode.workspace.getConfiguration('python', scope).inspect<string>('defaultInterpreterPath');
    return !!(i?.workspaceValue || i?.workspaceFolderValue);
  });
}

/**
 * The Python extension's interpreter for the first workspace folder, or undefined when the
 * extension is not installed, has none, or the interpreter is not allowed (logged once per path).
 */
export async function pythonExtensionInterpreter(log: Log, onChange?: () => void): Promise<string | undefined> {
  if (!vscode.extensions.getExtension(PYTHON_EXTENSION_ID)) return undefined;
  try {
    const api = await withTimeout(PythonExtension.api(), 15000, 'the Python extension');
    if (onChange) watchChanges(api, onChange);
    const folder = vscode.workspace.workspaceFolders?.[0];
    const envPath = api.environments.getActiveEnvironmentPath(folder?.uri);
    const env = await withTimeout(api.environments.resolveEnvironment(envPath), 15000, 'the Python extension');
    const executable = env?.executable.uri?.fsPath;
    if (!executable) return undefined;
    const allowed = pythonExtensionAllowed(executable, (vscode.workspace.workspaceFolders ?? []).map(f => f.uri.fsPath), workspaceSetsInterpreter(),
      process.platform, p => fs.realpathSync.native(p));
    if (!allowed.ok) {
      log.info(`not using the Python extension's interpreter ${executable}: ${allowed.why} (a workspace does not choose the program lmbridge runs; set lmbridge.pythonCommand to use it)`);
      return undefined;
    }
    return executable;
  } catch (e) {
    log.debug(`the Python extension's interpreter is unknown: ${(e as Error).message}`);
    return undefined;
  }
}

let watching: vscode.Disposable | undefined;

/**
 * Calls `listener` when the Python extension's selected interpreter changes; subscribes once,
 * the first time the interpreter was asked for (the API is then active). Disposed by `stopWatching`.
 */
function watchChanges(api: PythonExtension, listener: () => void): void {
  watching ??= api.environments.onDidChangeActiveEnvironmentPath(() => listener());
}

/** Ends the subscription of `watchChanges`. */
export function stopWatching(): void {
  watching?.dispose();
  watching = undefined;
}
