// lmbridge: serves Python language models to VS Code (vendor 'lmbridge') and lets Python use
// VS Code's models. Everything with logic in it lives in the Python host; this side starts the
// host, converts parts, forwards cancellation and keeps API keys in SecretStorage.
import * as path from 'path';
import * as vscode from 'vscode';
import { attachConsumer, watchConsumerEvents } from './consumer';
import { Host, HostConfig, HostOptions } from './host';
import { LmBridgeChatProvider } from './provider';

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
  };
}

/** Apps to run or an endpoint to open: the host must run without waiting for a model request. */
function hostWanted(): boolean {
  const s = consumerSettings();
  return (s.apps as string[]).length > 0 || s.endpointEnabled === true;
}

export function activate(context: vscode.ExtensionContext): LmBridgeApi {
  const log = vscode.window.createOutputChannel('lmbridge', { log: true });
  context.subscriptions.push(log);

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

  const hostOptions = (): HostOptions => ({
    pythonCommand: config().get<string>('pythonCommand', '') ?? '',
    clientName: vscode.env.appName,
    clientVersion: vscode.version,
    cwd: context.globalStorageUri.fsPath,
    env: { LMBRIDGE_LOG_LEVEL: config().get<string>('logLevel', 'info') ?? 'info' },
  });

  let provider: LmBridgeChatProvider | undefined;
  const host = new Host(hostOptions, hostConfig, log, (conn) => {
    provider?.attach(conn);
    attachConsumer(conn, log);
    conn.onNotification('log', (p: { level?: string; message?: string }) => {
      const msg = `[host] ${p?.message ?? ''}`;
      switch (p?.level) {
        case 'debug': log.debug(msg); break;
        case 'warning': log.warn(msg); break;
        case 'error': log.error(msg); break;
        default: log.info(msg);
      }
    });
  });
  provider = new LmBridgeChatProvider(host, log);
  context.subscriptions.push({ dispose: () => void host.dispose() });

  // The host writes its caches (token counts) under the storage path; make sure it exists.
  void vscode.workspace.fs.createDirectory(context.globalStorageUri).then(undefined, () => undefined);

  context.subscriptions.push(vscode.lm.registerLanguageModelChatProvider('lmbridge', provider));

  // Apps to run or the endpoint on: start the host now rather than on the first model request.
  const startHost = (): void => {
    host.connection().then(() => undefined, (e: Error) => log.error(`starting the Python host failed: ${e.message}`));
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
      try {
        await host.connection();
      } catch (e) {
        void vscode.window.showErrorMessage(`lmbridge: ${(e as Error).message}`);
      }
      provider?.fireChanged();
    }),
    vscode.commands.registerCommand('lmbridge.showLog', () => log.show()),
  );

  log.info(`lmbridge ${String(context.extension.packageJSON.version)} active; Python: ${hostOptions().pythonCommand || 'python3'}`);

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
