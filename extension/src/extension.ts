// lmbridge: serves Python language models to VS Code (vendor 'lmbridge') and lets Python use
// VS Code's models. Everything with logic in it lives in the Python host; this side starts the
// host, converts parts, forwards cancellation and keeps API keys in SecretStorage.
import * as path from 'path';
import * as vscode from 'vscode';
import { attachConsumer, watchConsumerEvents } from './consumer';
import { Host, HostConfig, HostOptions } from './host';
import { LmBridgeChatProvider } from './provider';
import { createPythonEnvironment, managedPython } from './pyenv';
import { CREATE_ENV_COMMAND, hostPython, StartProblem } from './python';

const SECRET_PREFIX = 'lmbridge.apiKey.';

/** What `activate` returns: lets other extensions (and the end-to-end tests) see the host. */
export interface LmBridgeApi {
  /** The pid of the running Python host, if one runs. */
  hostPid(): number | undefined;
  /** Starts the host if needed and returns its pid. */
  ensureHost(): Promise<number | undefined>;
}

interface ProviderEntry { name?: unknown; [key: string]: unknown }

function providerEntries(): ProviderEntry[] {
  const raw = vscode.workspace.getConfiguration('lmbridge').get<unknown>('providers', []);
  return Array.isArray(raw) ? raw.filter((p): p is ProviderEntry => typeof p === 'object' && p !== null) : [];
}

function providerNames(): string[] {
  return providerEntries().map(p => p.name).filter((n): n is string => typeof n === 'string' && n.length > 0);
}

/**
 * `lmbridge.apps` with relative `.py` paths made absolute against the first workspace folder
 * (the host runs in the extension's storage folder, where a relative path means nothing).
 */
function appEntries(): string[] {
  const raw = vscode.workspace.getConfiguration('lmbridge').get<unknown>('apps', []);
  const folder = vscode.workspace.workspaceFolders?.find(f => f.uri.scheme === 'file')?.uri.fsPath;
  return (Array.isArray(raw) ? raw : []).filter((a): a is string => typeof a === 'string' && a.trim().length > 0).map(a => {
    const entry = a.trim();
    const isPath = entry.endsWith('.py') || entry.includes('/') || entry.includes('\\');
    return isPath && folder && !path.isAbsolute(entry) && !entry.startsWith('~') ? path.join(folder, entry) : entry;
  });
}

/** The settings of the consumer side, as `initialize`/`configure` and `lm/configChanged` carry them. */
function consumerSettings(): Record<string, unknown> {
  const cfg = vscode.workspace.getConfiguration('lmbridge');
  return {
    apps: appEntries(),
    endpointEnabled: cfg.get<boolean>('endpoint.enabled', false) === true,
    consumerModel: cfg.get<string>('consumer.model', 'vscodelm/auto') ?? 'vscodelm/auto',
    endpointModels: cfg.get<Record<string, string>>('endpoint.models', {}) ?? {},
  };
}

/** Apps to run or an endpoint to open: the host must run without waiting for a model request. */
function hostWanted(): boolean {
  const s = consumerSettings();
  return (s.apps as string[]).length > 0 || s.endpointEnabled === true;
}

export async function activate(context: vscode.ExtensionContext): Promise<LmBridgeApi> {
  const log = vscode.window.createOutputChannel('lmbridge', { log: true });
  context.subscriptions.push(log);

  // The host runs in the storage folder (its cwd) and keeps its caches there: it must exist
  // before the first start, or spawning fails with ENOENT as if Python were missing.
  try {
    await vscode.workspace.fs.createDirectory(context.globalStorageUri);
  } catch (e) {
    log.error(`cannot create the storage folder ${context.globalStorageUri.fsPath}: ${(e as Error).message}`);
  }

  const config = (): vscode.WorkspaceConfiguration => vscode.workspace.getConfiguration('lmbridge');

  const hostConfig = async (): Promise<HostConfig> => {
    const secrets: Record<string, string> = {};
    for (const name of providerNames()) {
      const key = await context.secrets.get(SECRET_PREFIX + name);
      if (key) secrets[name] = key;
    }
    return {
      storagePath: context.globalStorageUri.fsPath,
      providers: providerEntries(),
      secrets,
      settings: { logLevel: config().get<string>('logLevel', 'info'), ...consumerSettings() },
    };
  };

  const python = (): { command: string; source: 'setting' | 'managed' | 'default' } =>
    hostPython(config().get<string>('pythonCommand', '') ?? '', managedPython(context.globalStorageUri.fsPath));

  const hostOptions = (): HostOptions => ({
    pythonCommand: python().command,
    pythonSource: python().source,
    clientName: vscode.env.appName,
    clientVersion: vscode.version,
    cwd: context.globalStorageUri.fsPath,
    env: { LMBRIDGE_LOG_LEVEL: config().get<string>('logLevel', 'info') ?? 'info' },
  });

  // A host that cannot start for a known reason: say so once per distinct problem (the host is
  // retried with a backoff; the same notification on every retry would be noise).
  let notified: string | undefined;
  const notifyProblem = (problem: StartProblem): void => {
    if (notified === problem.message) return;
    notified = problem.message;
    const actions = problem.kind === 'cwd-missing' ? ['Show Log'] : ['Create Python Environment', 'Open Settings', 'Show Log'];
    void vscode.window.showErrorMessage(`lmbridge: ${problem.message}`, ...actions).then(choice => {
      if (choice === 'Create Python Environment') void vscode.commands.executeCommand(CREATE_ENV_COMMAND);
      else if (choice === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'lmbridge.pythonCommand');
      else if (choice === 'Show Log') log.show();
    });
  };

  let provider: LmBridgeChatProvider | undefined;
  const host = new Host(hostOptions, hostConfig, log, (conn) => {
    provider?.attach(conn);
    attachConsumer(conn, log);
  }, {
    wanted: hostWanted,
    onStartProblem: notifyProblem,
    onStarted: () => { notified = undefined; },
  });
  provider = new LmBridgeChatProvider(host, log);
  context.subscriptions.push({ dispose: () => void host.dispose() });

  context.subscriptions.push(vscode.lm.registerLanguageModelChatProvider('lmbridge', provider));

  // Apps to run or the endpoint on: start the host now rather than on the first model request.
  const startHost = (): void => {
    // A failed start is logged where the process ended (with its cause); only other errors here.
    host.connection().then(() => undefined, (e: Error) => {
      const message = `starting the Python host failed: ${e.message}`;
      if (host.startProblem) log.debug(message);
      else log.error(message);
    });
  };
  if (hostWanted()) startHost();

  // Settings or secrets changed: a running host gets `configure` (it then sends models/changed);
  // a new Python command needs a new process.
  const reconfigure = async (): Promise<void> => {
    try {
      const result = await host.reconfigure();
      if (result === undefined) provider?.fireChanged();
    } catch (e) {
      log.error(`configure failed: ${(e as Error).message}`);
    }
  };
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration(async (e) => {
    if (e.affectsConfiguration('lmbridge.pythonCommand')) {
      log.info('lmbridge.pythonCommand changed: restarting the Python host');
      await host.stop();
      host.resetBackoff();
      provider?.fireChanged();
      if (hostWanted()) startHost();
    } else if (e.affectsConfiguration('lmbridge.providers') || e.affectsConfiguration('lmbridge.logLevel')) {
      await reconfigure();
    } else if (e.affectsConfiguration('lmbridge.apps') || e.affectsConfiguration('lmbridge.endpoint')) {
      // a running host starts/stops apps and the endpoint on `configure`; else start one
      if (host.pid !== undefined) await reconfigure();
      else if (hostWanted()) startHost();
    }
  }));
  context.subscriptions.push(context.secrets.onDidChange(async (e) => {
    if (e.key.startsWith(SECRET_PREFIX)) await reconfigure();
  }));
  context.subscriptions.push(watchConsumerEvents((method, params) => host.notify(method, params), consumerSettings));

  const pickProvider = async (placeHolder: string): Promise<string | undefined> => {
    const names = providerNames();
    if (names.length === 0) {
      void vscode.window.showInformationMessage("lmbridge: no provider is configured; add one to the 'lmbridge.providers' setting first.");
      return undefined;
    }
    return names.length === 1 ? names[0] : vscode.window.showQuickPick(names, { placeHolder });
  };

  context.subscriptions.push(
    vscode.commands.registerCommand('lmbridge.setApiKey', async (name?: string, key?: string) => {
      // Arguments allow scripting (tests, other extensions); interactive use picks and prompts.
      const provider = typeof name === 'string' ? name : await pickProvider('Provider to set the API key for');
      if (!provider) return;
      const value = typeof key === 'string' ? key : await vscode.window.showInputBox({
        prompt: `API key for '${provider}' (stored in VS Code's secret storage)`,
        password: true,
        ignoreFocusOut: true,
      });
      if (!value) return;
      await context.secrets.store(SECRET_PREFIX + provider, value);
      log.info(`API key for '${provider}' stored`);
    }),
    vscode.commands.registerCommand('lmbridge.clearApiKey', async (name?: string) => {
      const provider = typeof name === 'string' ? name : await pickProvider('Provider to clear the API key of');
      if (!provider) return;
      await context.secrets.delete(SECRET_PREFIX + provider);
      log.info(`API key for '${provider}' cleared`);
    }),
    vscode.commands.registerCommand('lmbridge.restartHost', async () => {
      await host.stop();
      host.resetBackoff();
      try {
        await host.connection();
      } catch (e) {
        void vscode.window.showErrorMessage(`lmbridge: ${(e as Error).message}`);
      }
      provider?.fireChanged();
    }),
    vscode.commands.registerCommand('lmbridge.showLog', () => log.show()),
    vscode.commands.registerCommand(CREATE_ENV_COMMAND, async () => {
      const setting = (config().get<string>('pythonCommand', '') ?? '').trim();
      try {
        const py = await vscode.window.withProgress(
          { location: vscode.ProgressLocation.Notification, title: 'lmbridge: Python environment', cancellable: false },
          (progress) => createPythonEnvironment({
            storagePath: context.globalStorageUri.fsPath,
            extensionPath: context.extensionUri.fsPath,
            basePython: setting || undefined,
            log,
            progress: (message) => progress.report({ message }),
          }),
        );
        await host.stop();
        host.resetBackoff();
        notified = undefined;
        if (setting) {
          const clear = 'Clear the Setting';
          const choice = await vscode.window.showInformationMessage(
            `lmbridge: the Python environment is ready (${py}); it is used while 'lmbridge.pythonCommand' is empty, and that setting is '${setting}'.`, clear);
          if (choice === clear) await config().update('pythonCommand', undefined, vscode.ConfigurationTarget.Global);
        } else {
          void vscode.window.showInformationMessage(`lmbridge: the Python environment is ready; the host now runs with ${py}.`);
        }
        if (hostWanted()) startHost();
        provider?.fireChanged();
        return py;
      } catch (e) {
        const message = (e as Error).message;
        log.error(`creating the Python environment failed: ${message}`);
        void vscode.window.showErrorMessage(`lmbridge: creating the Python environment failed: ${message}`, 'Show Log').then(c => { if (c) log.show(); });
        return undefined;
      }
    }),
  );

  const py = python();
  log.info(`lmbridge ${String(context.extension.packageJSON.version)} active; Python: ${py.command} (${py.source === 'setting' ? "from 'lmbridge.pythonCommand'" : py.source === 'managed' ? 'the environment made by Create Python Environment' : 'on PATH'})`);

  return {
    hostPid: () => host.pid,
    ensureHost: async () => {
      await host.connection();
      return host.pid;
    },
  };
}

export function deactivate(): void {
  // Disposing the subscriptions stops the host (shutdown, exit, then kill).
}
