// lmbridge: serves Python language models to VS Code (vendor 'lmbridge') and lets Python use
// VS Code's models. Everything with logic in it lives in the Python host; this side starts the
// host, converts parts, forwards cancellation and keeps API keys in SecretStorage.
import { showDiagnosis } from './diagnose';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import { askable, ConsentPrompter, WorkspaceConsent } from './consent';
import { attachConsumer, watchConsumerEvents } from './consumer';
import { Host, HostConfig, HostOptions } from './host';
import { EDITOR_VENDOR, EditorGroups, hostName } from './editorGroups';
import { describe, EditorGroupsProvider } from './editorProvider';
import { registerManageModels } from './manageCommand';
import { registerMoveToEditor } from './moveToEditor';
import { readNetwork, watchNetwork } from './network';
import { LmBridgeChatProvider } from './provider';
import { createPythonEnvironment, managedPython } from './pyenv';
import { checkKey, decodeStored, encodeStored, entryFor, migrateStored, movedKeys, originOf, SECRET_PREFIX, type BoundKey, type MovedKey } from './keys';
import { findPython, FoundPython, probePython } from './interpreter';
import { bundledLib, CREATE_ENV_COMMAND, problemActions, PYTHON_DOWNLOAD_URL, PythonSource, StartProblem } from './python';
import { pythonExtensionInterpreter, stopWatching } from './pythonExtension';
import { IgnoredReporter, ignoredMessage, readSettings, scanWorkspaceSettings, type IgnoredItem, type Settings } from './settings';
import { PaceStatusItem, UsageStatusItem } from './status';
import { plain, testArgument } from './untrusted';

/** What `activate` returns: lets other extensions (and the end-to-end tests) see the host. */
export interface LmBridgeApi {
  /** The pid of the running Python host, if one runs. */
  hostPid(): number | undefined;
  /** Starts the host if needed and returns its pid. */
  ensureHost(): Promise<number | undefined>;
}

/** The decisions on the providers this workspace adds (set at activation). */
let consent: WorkspaceConsent;

/** The Language Models editor's groups VS Code asked about, with their keys. */
const editorGroups = new EditorGroups();

/** The settings with only the workspace entries the user allowed (the others are inert). */
function allowedSettings(s: Settings = readSettings()): Settings {
  return { ...s, workspaceProviders: consent.split(s.workspaceProviders, s.providers).allowed };
}

/** Names of the configured providers (the user's, then the allowed workspace entries), each once. */
function providerNames(s: Settings): string[] {
  const names = [...s.providers, ...s.workspaceProviders].map(p => p.name).filter((n): n is string => typeof n === 'string' && n.length > 0);
  return [...new Set(names)];
}

/** The settings of the consumer side, as `initialize`/`configure` and `lm/configChanged` carry them. */
function consumerSettings(): Record<string, unknown> {
  const s = readSettings();
  return {
    apps: s.apps,
    endpointEnabled: s.endpointEnabled,
    endpointTools: s.endpointTools,
    pace: s.pace,
    // user (or remote) settings only: they steer agents and apps outside the workspace
    consumerModel: s.consumerModel,
    endpointModels: s.endpointModels,
  };
}

/** Apps to run or an endpoint to open: the host must run without waiting for a model request. */
function hostWanted(): boolean {
  const s = readSettings();
  return s.apps.length > 0 || s.endpointEnabled;
}

/** The pieces of a running extension that its steps share. */
interface Parts {
  context: vscode.ExtensionContext;
  log: vscode.LogOutputChannel;
  reporter: IgnoredReporter;
  problems: StartProblemNotifier;
  host: Host;
  provider: LmBridgeChatProvider;
  /** The provider of the Language Models editor's groups (vendor 'lmbridge-api'). */
  editor: EditorGroupsProvider;
  /** Asks about the providers the workspace adds. */
  prompter: ConsentPrompter;
}

/** lmbridge's settings section. */
function config(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration('lmbridge');
}

export async function activate(context: vscode.ExtensionContext): Promise<LmBridgeApi> {
  const log = createLog(context);
  await ensureStorageFolder(context, log);
  const reporter = createIgnoredReporter(context, log);
  consent = new WorkspaceConsent(context.workspaceState);
  await migrateLegacyKeys(context, log, allowedSettings()).catch((e: Error) => log.error(`migrating the stored API keys failed: ${e.message}`));
  const problems = new StartProblemNotifier(log);
  const parts = createHostAndProvider(context, log, reporter, problems);
  registerProvider(parts);
  // the user's providers start now; the workspace's wait for the user's word (never for long)
  if (hostWanted()) startHost(parts);
  void checkWorkspace(parts);
  watchSettings(parts);
  watchWorkspaceSettingsFiles(parts);
  watchSecrets(parts);
  registerKeyCommands(context, log, parts.editor);
  registerHostCommands(parts);
  registerConsentCommand(parts);
  registerCreateEnvironmentCommand(parts);
  logActivation(context, log);
  return api(parts.host);
}

/** The 'lmbridge' output channel (a log channel with levels). */
function createLog(context: vscode.ExtensionContext): vscode.LogOutputChannel {
  const log = vscode.window.createOutputChannel('lmbridge', { log: true });
  context.subscriptions.push(log);
  return log;
}

/**
 * The host runs in the storage folder (its cwd) and keeps its caches there: it must exist
 * before the first start, or spawning fails with ENOENT as if Python were missing.
 */
async function ensureStorageFolder(context: vscode.ExtensionContext, log: vscode.LogOutputChannel): Promise<void> {
  try {
    await vscode.workspace.fs.createDirectory(context.globalStorageUri);
  } catch (e) {
    log.error(`cannot create the storage folder ${context.globalStorageUri.fsPath}: ${(e as Error).message}`);
  }
}

/**
 * Settings a workspace may not set: the extension's own findings and the host's `ignored`
 * result, told once per new set, each logged at warning level once.
 */
function createIgnoredReporter(context: vscode.ExtensionContext, log: vscode.LogOutputChannel): IgnoredReporter {
  const reporter = new IgnoredReporter({
    warn: m => log.warn(m),
    debug: m => log.debug(m),
    show: (items: IgnoredItem[]) => {
      void vscode.window.showWarningMessage(ignoredMessage(items), 'Open User Settings', 'Show Log').then(choice => {
        if (choice === 'Open User Settings') void vscode.commands.executeCommand('workbench.action.openSettingsJson');
        else if (choice === 'Show Log') log.show();
      });
    },
  });
  context.subscriptions.push({ dispose: () => reporter.dispose() });
  return reporter;
}

/**
 * Reads the workspace's settings again and tells what it may not set, and asks about the
 * providers it adds that the user has not decided on (not awaited: the host does not wait).
 */
async function checkWorkspace(parts: Pick<Parts, 'reporter' | 'prompter'>): Promise<void> {
  const s = readSettings();
  void parts.prompter.check(askable(s.workspaceProviders, s.providers));
  // with workspace providers, the host's verdict on them joins the same notification
  parts.reporter.setOwn([...s.ignored, ...await scanWorkspaceSettings()], s.workspaceProviders.length > 0);
}

/**
 * Legacy keys (plain text, stored before keys were bound) get the origin of the user's entry
 * of that name; without one they stay unbound and the host asks for a confirmation.
 */
async function migrateLegacyKeys(context: vscode.ExtensionContext, log: vscode.LogOutputChannel, s: Settings): Promise<void> {
  for (const name of providerNames(s)) {
    const raw = await context.secrets.get(SECRET_PREFIX + name);
    if (raw === undefined) continue;
    const { store, message } = migrateStored(name, raw, s.providers);
    if (store !== undefined) await context.secrets.store(SECRET_PREFIX + name, store);
    if (message?.level === 'info') log.info(message.text);
    else if (message) log.warn(message.text);
  }
}

/** The stored keys of the configured providers, each with the origin it was stored for. */
async function boundKeys(context: vscode.ExtensionContext, s: Settings): Promise<Record<string, BoundKey>> {
  const secrets: Record<string, BoundKey> = {};
  for (const name of providerNames(s)) {
    const raw = await context.secrets.get(SECRET_PREFIX + name);
    if (raw === undefined) continue;
    const { key, origin, legacy } = decodeStored(raw);
    const checked = checkKey(name, key);
    if (!('error' in checked)) secrets[name] = { key: checked.key, origin: legacy ? null : origin };
  }
  return secrets;
}

/** What `initialize` / `configure` carry: providers, keys and settings. */
async function hostConfig(context: vscode.ExtensionContext): Promise<HostConfig> {
  const all = readSettings();
  const { allowed, unapproved } = consent.split(all.workspaceProviders, all.providers);
  const s = { ...all, workspaceProviders: allowed };
  return {
    storagePath: context.globalStorageUri.fsPath,
    providers: s.providers,
    // only the entries the user allowed, as they are now: the others are never contacted
    workspaceProviders: s.workspaceProviders,
    // the others only to be judged: what the host would ignore of them is told now
    unapprovedWorkspaceProviders: unapproved,
    editorProviders: editorGroups.wire(),
    // an editor group's name is `editor:<group>`, a name lmbridge.providers may not take
    secrets: { ...await boundKeys(context, s), ...editorGroups.secrets() },
    settings: { logLevel: s.logLevel, ...consumerSettings() },
    network: readNetwork(),
  };
}

/**
 * The Python that runs the host: `lmbridge.pythonCommand` (user or remote settings only: see
 * settings.ts), the managed environment, the Python extension's interpreter, or PATH.
 */
function python(parts: Pick<Parts, 'context' | 'log'>, onPythonExtensionChange?: () => void): Promise<FoundPython> {
  return findPython({
    setting: readSettings().pythonCommand,
    managed: managedPython(parts.context.globalStorageUri.fsPath),
    pythonExtension: () => pythonExtensionInterpreter(parts.log, onPythonExtensionChange),
    probe: (command) => probePython(command, parts.context.globalStorageUri.fsPath),
  });
}

/** Where each source of the host's Python is told in the log. */
const SOURCE_NAMES: Record<PythonSource, string> = {
  'setting': "from 'lmbridge.pythonCommand'",
  'managed': 'the environment made by Create Python Environment',
  'python-extension': "the Python extension's interpreter",
  'default': 'on PATH',
};

/**
 * How to start the host process: the Python found now (a Python installed meanwhile is found
 * by the next start) with the extension's own lmbridge and dependencies (`python/lib`) first
 * on `sys.path`; Python's bytecode cache goes to the storage folder, not the extension's.
 */
async function hostOptions(parts: Pick<Parts, 'context' | 'log'>, onPythonExtensionChange: () => void): Promise<HostOptions> {
  const { context, log } = parts;
  const py = await python(parts, onPythonExtensionChange);
  const lib = bundledLib(context.extensionUri.fsPath);
  const libDir = fs.existsSync(lib) ? lib : undefined;
  log.info(`Python: ${py.command}${py.version ? ` (${py.version})` : ''}, ${SOURCE_NAMES[py.source]}${py.tried.length ? `; passed over: ${py.tried.join(', ')}` : ''}${libDir ? '' : `; ${lib} is missing, so the interpreter's own lmbridge package is used`}`);
  return {
    pythonCommand: py.command,
    pythonSource: py.source,
    pythonTried: py.tried,
    libDir,
    libVersion: String(context.extension.packageJSON.version),
    clientName: vscode.env.appName,
    clientVersion: vscode.version,
    cwd: context.globalStorageUri.fsPath,
    env: {
      LMBRIDGE_LOG_LEVEL: readSettings().logLevel,
      PYTHONPYCACHEPREFIX: path.join(context.globalStorageUri.fsPath, 'pycache'),
    },
  };
}

/**
 * A host that cannot start for a known reason: say so once per distinct problem (the host is
 * retried with a backoff; the same notification on every retry would be noise).
 */
class StartProblemNotifier {
  private notified: string | undefined;

  constructor(private readonly log: vscode.LogOutputChannel) {}

  notify(problem: StartProblem): void {
    if (this.notified === problem.message) return;
    this.notified = problem.message;
    // the download page as a link in the notification (plain text in the log and request errors)
    const text = plain(problem.message).replace(PYTHON_DOWNLOAD_URL, `[${PYTHON_DOWNLOAD_URL}](${PYTHON_DOWNLOAD_URL})`);
    void vscode.window.showErrorMessage(`lmbridge: ${text}`, ...problemActions(problem)).then(choice => {
      if (choice === 'Install Python') void vscode.env.openExternal(vscode.Uri.parse(PYTHON_DOWNLOAD_URL));
      else if (choice === 'Create Python Environment') void vscode.commands.executeCommand(CREATE_ENV_COMMAND);
      else if (choice === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'lmbridge.pythonCommand');
      else if (choice === 'Show Log') this.log.show();
    });
  }

  /** The next problem is told again, even if it is the last one. */
  reset(): void {
    this.notified = undefined;
  }
}

/** The host process manager and the chat provider that sends every call to it. */
function createHostAndProvider(context: vscode.ExtensionContext, log: vscode.LogOutputChannel, reporter: IgnoredReporter, problems: StartProblemNotifier): Parts {
  // The Python extension's interpreter changed: a host running with it (or with PATH's Python,
  // which it now comes before) starts again with the new one.
  const onPythonExtensionChange = (): void => {
    if (readSettings().pythonCommand.trim() || managedPython(context.globalStorageUri.fsPath)) return;
    log.info("the Python extension's interpreter changed: restarting the Python host");
    void restartHostLater({ host, provider }).then(() => { if (hostWanted()) startHost({ host, log }); });
  };
  context.subscriptions.push({ dispose: stopWatching });
  // Shown while the user's pace (lmbridge.pace) holds requests back.
  const pace = new PaceStatusItem();
  context.subscriptions.push(pace);
  // the connection setup runs when a host starts, after `provider` is made below
  const host: Host = new Host(() => hostOptions({ context, log }, onPythonExtensionChange), () => hostConfig(context), log, (conn) => {
    provider.attach(conn);
    attachConsumer(conn, log, () => readSettings().endpointTools, (bite) => pace.record(bite), id => provider.workspaceOrigin(id));
  }, {
    wanted: hostWanted,
    onStartProblem: (problem) => problems.notify(problem),
    onStarted: () => problems.reset(),
    onConfigured: (result) => reporter.setHost(Array.isArray(result.ignored) ? result.ignored : []),
  });
  // The last answer's token use against the model's limit, totals per model in the tooltip.
  const usage = new UsageStatusItem();
  context.subscriptions.push(usage);
  const provider = new LmBridgeChatProvider(host, log, (model, stats) => usage.record(model, stats), context.extension.id);
  context.subscriptions.push({ dispose: () => void host.dispose() });
  // a new or changed group goes to a running host; a host that starts later has it in initialize
  const editor = new EditorGroupsProvider(provider, host, editorGroups, context.secrets, log, async () => {
    try {
      await host.reconfigure();
    } catch (e) {
      log.error(`configure failed: ${(e as Error).message}`);
    }
  });
  // a decision on the workspace's providers: the host gets the allowed entries (configure)
  const prompter = new ConsentPrompter(consent, CONSENT_UI, () => void reconfigure(parts));
  const parts: Parts = { context, log, reporter, problems, host, provider, editor, prompter };
  return parts;
}

/** The consent's notification and list in VS Code (its text is made plain in consent.ts). */
const CONSENT_UI = {
  ask: (message: string, actions: string[]) => vscode.window.showWarningMessage(message, ...actions),
  pickMany: <T>(items: { label: string; description: string; detail: string; picked: boolean; value: T }[], title: string) =>
    vscode.window.showQuickPick(items, { title, canPickMany: true, ignoreFocusOut: true }).then(picked => picked?.map(p => p.value)),
  info: (message: string) => void vscode.window.showInformationMessage(message),
};

/** **lmbridge: Manage Workspace Providers**: allow or stop the providers this workspace adds. */
function registerConsentCommand(parts: Parts): void {
  parts.context.subscriptions.push(vscode.commands.registerCommand('lmbridge.manageWorkspaceProviders',
    () => { const s = readSettings(); return parts.prompter.manage(askable(s.workspaceProviders, s.providers)); }));
}

/**
 * Registers the chat providers: the vendor 'lmbridge' (`lmbridge.providers`, Python providers;
 * Manage Models) and 'lmbridge-api' (the Language Models editor's groups).
 */
function registerProvider(parts: Parts): void {
  parts.context.subscriptions.push(vscode.lm.registerLanguageModelChatProvider('lmbridge', parts.provider));
  parts.context.subscriptions.push(vscode.lm.registerLanguageModelChatProvider(EDITOR_VENDOR, parts.editor));
  parts.context.subscriptions.push(registerManageModels(parts.context, parts.host, parts.log));
  parts.context.subscriptions.push(registerMoveToEditor(parts.context, parts.log, () => readSettings().providers));
}

/** Starts the host now rather than on the first model request (apps to run or the endpoint on). */
function startHost({ host, log }: Pick<Parts, 'host' | 'log'>): void {
  // A failed start is logged where the process ended (with its cause); only other errors here.
  host.connection().then(() => undefined, (e: Error) => {
    const message = `starting the Python host failed: ${e.message}`;
    if (host.startProblem) log.debug(message);
    else log.error(message);
  });
}

/** A running host gets `configure` (it then sends models/changed); none running: VS Code asks again. */
async function reconfigure({ host, provider, log }: Parts): Promise<void> {
  try {
    const result = await host.reconfigure();
    if (result === undefined) provider.fireChanged();
  } catch (e) {
    log.error(`configure failed: ${(e as Error).message}`);
  }
}

/** Stops the host and forgets its failed starts: the next start uses the current settings. */
async function restartHostLater({ host, provider }: Pick<Parts, 'host' | 'provider'>): Promise<void> {
  await host.stop();
  host.resetBackoff();
  provider.fireChanged();
}

/** Settings changed: a new Python command needs a new process; other changes a `configure`. */
function watchSettings(parts: Parts): void {
  const { context, log, host } = parts;
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration(async (e) => {
    if (e.affectsConfiguration('lmbridge')) void checkWorkspace(parts);
    if (e.affectsConfiguration('lmbridge.pythonCommand')) {
      log.info('lmbridge.pythonCommand changed: restarting the Python host');
      await restartHostLater(parts);
      if (hostWanted()) startHost(parts);
    } else if (e.affectsConfiguration('lmbridge.providers') || e.affectsConfiguration('lmbridge.logLevel')) {
      await migrateLegacyKeys(context, log, allowedSettings()).catch((err: Error) => log.error(`migrating the stored API keys failed: ${err.message}`));
      await reconfigure(parts);
    } else if (e.affectsConfiguration('lmbridge.apps') || e.affectsConfiguration('lmbridge.endpoint')) {
      // a running host starts/stops apps and the endpoint on `configure`; else start one
      if (host.pid !== undefined) await reconfigure(parts);
      else if (hostWanted()) startHost(parts);
    }
  }));
  // A new proxy or certificate setting: the host's HTTP client is made again on `configure`.
  context.subscriptions.push(watchNetwork(() => void reconfigure(parts)));
  context.subscriptions.push(watchConsumerEvents((method, params) => host.notify(method, params), consumerSettings));
}

/** VS Code drops a workspace's machine-scoped values without a change event: watch the files. */
function watchWorkspaceSettingsFiles(parts: Parts): void {
  const { context } = parts;
  const watchFolders = (): vscode.Disposable[] => (vscode.workspace.workspaceFolders ?? []).map(folder => {
    const w = vscode.workspace.createFileSystemWatcher(new vscode.RelativePattern(folder, '.vscode/settings.json'));
    w.onDidChange(() => void checkWorkspace(parts));
    w.onDidCreate(() => void checkWorkspace(parts));
    return w;
  });
  let watchers = watchFolders();
  context.subscriptions.push({ dispose: () => watchers.forEach(w => w.dispose()) });
  context.subscriptions.push(vscode.workspace.onDidChangeWorkspaceFolders(() => {
    watchers.forEach(w => w.dispose());
    watchers = watchFolders();
    void checkWorkspace(parts);
  }));
}

/** A stored key changed: the host gets the new keys. */
function watchSecrets(parts: Parts): void {
  parts.context.subscriptions.push(parts.context.secrets.onDidChange(async (e) => {
    if (e.key.startsWith(SECRET_PREFIX)) await reconfigure(parts);
  }));
}

/** One provider name: the only one, or the user's pick; undefined when there is none. */
async function pickProvider(names: string[], placeHolder: string): Promise<string | undefined> {
  if (names.length === 0) {
    void vscode.window.showInformationMessage("lmbridge: no provider is configured; add one to the 'lmbridge.providers' setting first.");
    return undefined;
  }
  if (names.length === 1) return names[0];
  const picked = await vscode.window.showQuickPick(names.map(n => ({ label: plain(n), name: n })), { placeHolder });
  return picked?.name;
}

/** Set API Key, Confirm API Key Origin, Clear API Key. */
function registerKeyCommands(context: vscode.ExtensionContext, log: vscode.LogOutputChannel, editor: EditorGroupsProvider): void {
  context.subscriptions.push(
    // arguments only in the end-to-end tests (testArgument): never from a command link
    vscode.commands.registerCommand('lmbridge.setApiKey', (name?: unknown, key?: unknown) =>
      setApiKey(context, log, testArgument(name), testArgument(key))),
    vscode.commands.registerCommand('lmbridge.confirmApiKeyOrigin', (name?: unknown) =>
      confirmApiKeyOrigin(context, log, editor, testArgument(name))),
    vscode.commands.registerCommand('lmbridge.clearApiKey', async (name?: unknown) => {
      const given = testArgument(name);
      const provider = given ?? await pickProvider(providerNames(allowedSettings()), 'Provider to clear the API key of');
      if (!provider) return;
      await context.secrets.delete(SECRET_PREFIX + provider);
      log.info(`API key for '${provider}' cleared`);
    }),
  );
}

/**
 * A key for a provider of the workspace's settings goes to an origin the workspace chose: the
 * user says so in a modal first, as in Confirm API Key Origin.
 */
async function confirmWorkspaceOrigin(provider: string, origin: string | null): Promise<boolean> {
  const confirm = 'Store a Key for This Origin';
  const choice = await vscode.window.showWarningMessage(`lmbridge: '${plain(provider)}' is a provider of this workspace's settings. Store an API key for it?`, {
    modal: true,
    detail: `The key would be sent to: ${plain(origin ?? 'nowhere (the entry has no usable URL)')}

This origin comes from this workspace's settings, not yours: continue only if you trust whoever wrote them with this key.`,
  }, confirm);
  return choice === confirm;
}

/** Stores a key bound to the origin its provider sends it to. The end-to-end tests pass `name` and `key`; interactive use picks and prompts. */
async function setApiKey(context: vscode.ExtensionContext, log: vscode.LogOutputChannel, name?: string, key?: string): Promise<boolean> {
  // a workspace's entry the user did not allow is no provider here
  const s = allowedSettings();
  const provider = typeof name === 'string' ? name : await pickProvider(providerNames(s), 'Provider to set the API key for');
  if (!provider) return false;
  // The key is bound to where the provider's entry sends it now: say where that is.
  const target = entryFor(provider, s.providers, s.workspaceProviders);
  const origin = originOf(target?.entry);
  if (target?.level === 'workspace' && !await confirmWorkspaceOrigin(provider, origin)) return false;
  const where = origin
    ? `it will be sent only to ${origin}${target?.level === 'workspace' ? " (an entry of this workspace's settings)" : ''}`
    : `no provider '${provider}' says where it goes: it will be sent nowhere until one does and you confirm it`;
  const value = typeof key === 'string' ? key : await vscode.window.showInputBox({
    prompt: plain(`API key for '${provider}': ${where}. Stored in VS Code's secret storage.`),
    password: true,
    ignoreFocusOut: true,
    validateInput: v => {
      const c = checkKey(provider, v);
      return v && 'error' in c ? c.error : undefined;
    },
  });
  if (value === undefined || (value === '' && typeof key !== 'string')) return false;
  const checked = checkKey(provider, value);
  if ('error' in checked) {
    log.error(checked.error);
    void vscode.window.showErrorMessage(plain(`lmbridge: ${checked.error}.`));
    return false;
  }
  await context.secrets.store(SECRET_PREFIX + provider, encodeStored({ key: checked.key, origin }));
  log.info(`API key for '${provider}' stored, bound to ${origin ?? 'no origin'}`);
  return true;
}

/** A key Confirm API Key Origin may re-bind: of `lmbridge.providers`, or of an editor group. */
type Moved = Omit<MovedKey, 'level'> & { level: MovedKey['level'] | 'editor'; id?: string; detail?: string };

/** Lets a stored key whose provider now points elsewhere (or that was never bound) go to the new origin, after a modal confirmation. */
async function confirmApiKeyOrigin(context: vscode.ExtensionContext, log: vscode.LogOutputChannel, editor: EditorGroupsProvider, name?: string): Promise<boolean> {
  const s = allowedSettings();
  const stored: { name: string; text: string }[] = [];
  for (const n of providerNames(s)) {
    const text = typeof name === 'string' && n !== name ? undefined : await context.secrets.get(SECRET_PREFIX + n);
    if (text !== undefined) stored.push({ name: n, text });
  }
  const moved: Moved[] = movedKeys(stored, s.providers, s.workspaceProviders);
  // the Language Models editor's groups whose key was first seen with another origin
  for (const m of editor.groups.moved()) {
    if (typeof name === 'string' && hostName(m.id) !== name) continue;
    const known = editor.groups.get(m.id);
    moved.push({ name: hostName(m.id), id: m.id, key: m.key, recorded: m.recorded, now: m.now, level: 'editor', detail: known && describe(known.configuration) });
  }
  const pick = moved.length <= 1 ? moved[0] : await vscode.window.showQuickPick(
    moved.map(m => ({ label: plain(m.name), description: plain(`${m.recorded ?? 'not bound'} → ${m.now}`), detail: m.level === 'editor' ? plain(`Language Models editor: ${m.detail ?? ''}`) : undefined, m })),
    { placeHolder: 'Provider whose API key may go to its new origin' },
  ).then(p => p?.m);
  if (!pick) {
    if (moved.length === 0) void vscode.window.showInformationMessage(plain(`lmbridge: no stored API key${typeof name === 'string' ? ` of '${name}'` : ''} waits for a new origin.`));
    return false;
  }
  const confirm = `Send the Key to ${plain(pick.now)}`;
  const choice = await vscode.window.showWarningMessage(plain(`lmbridge: send the API key of '${pick.name}' to a new origin?`), {
    modal: true,
    detail: plain(`Recorded origin: ${pick.recorded ?? 'none (the key was stored before keys were bound to an origin)'}`) + `\nNew origin: ${plain(pick.now)}` +
      (pick.level === 'workspace' ? "\n\nThe new origin comes from this workspace's settings, not yours: confirm only if you trust whoever wrote them with this key." : ''),
  }, confirm);
  if (choice !== confirm) return false;
  const checked = checkKey(pick.name, pick.key);
  if ('error' in checked) {
    void vscode.window.showErrorMessage(plain(`lmbridge: ${checked.error}; set it again with 'lmbridge: Set API Key'.`));
    return false;
  }
  if (pick.level === 'editor' && pick.id !== undefined) await editor.rebind(pick.id, pick.now);
  else await context.secrets.store(SECRET_PREFIX + pick.name, encodeStored({ key: checked.key, origin: pick.now }));
  log.info(`the API key for '${pick.name}' is now bound to ${pick.now} (was ${pick.recorded ?? 'not bound'})`);
  return true;
}

/** Restart Python Host, Show Log. */
function registerHostCommands(parts: Parts): void {
  const { context, log, host, provider } = parts;
  context.subscriptions.push(
    vscode.commands.registerCommand('lmbridge.restartHost', async () => {
      await host.stop();
      host.resetBackoff();
      try {
        await host.connection();
      } catch (e) {
        void vscode.window.showErrorMessage(plain(`lmbridge: ${(e as Error).message}`));
      }
      provider.fireChanged();
    }),
    vscode.commands.registerCommand('lmbridge.showLog', () => log.show()),
    vscode.commands.registerCommand('lmbridge.diagnose', () => showDiagnosis(host, String(context.extension.packageJSON.version ?? '?'))),
  );
}

/** Create Python Environment: a venv in the storage folder with the bundled wheels; the host then uses it. */
function registerCreateEnvironmentCommand(parts: Parts): void {
  parts.context.subscriptions.push(vscode.commands.registerCommand(CREATE_ENV_COMMAND, () => createEnvironment(parts)));
}

async function createEnvironment(parts: Parts): Promise<string | undefined> {
  const { context, log, host, provider } = parts;
  const setting = readSettings().pythonCommand;
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
    parts.problems.reset();
    if (setting) {
      const clear = 'Clear the Setting';
      const choice = await vscode.window.showInformationMessage(
        plain(`lmbridge: the Python environment is ready (${py}); it is used while 'lmbridge.pythonCommand' is empty, and that setting is '${setting}'.`), clear);
      if (choice === clear) await config().update('pythonCommand', undefined, vscode.ConfigurationTarget.Global);
    } else {
      void vscode.window.showInformationMessage(plain(`lmbridge: the Python environment is ready; the host now runs with ${py}.`));
    }
    if (hostWanted()) startHost(parts);
    provider.fireChanged();
    return py;
  } catch (e) {
    const message = (e as Error).message;
    log.error(`creating the Python environment failed: ${message}`);
    void vscode.window.showErrorMessage(plain(`lmbridge: creating the Python environment failed: ${message}`), 'Show Log').then(c => { if (c) log.show(); });
    return undefined;
  }
}

/** The first log line (which Python runs the host is logged at each start). */
function logActivation(context: vscode.ExtensionContext, log: vscode.LogOutputChannel): void {
  log.info(`lmbridge ${String(context.extension.packageJSON.version)} active`);
}

/** What other extensions (and the end-to-end tests) get. */
function api(host: Host): LmBridgeApi {
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
