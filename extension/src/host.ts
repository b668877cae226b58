// The Python host process: spawned on demand, spoken to with JSON-RPC over its stdio
// (vscode-jsonrpc, LSP framing); after it dies, restarted by the next request, or at once (with
// a backoff) when apps or the endpoint need it running.
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as rpc from 'vscode-jsonrpc/node';
import { HostLog } from './hostlog';
import type { NetworkSettings } from './network';
import type { BoundKey, ProviderEntry } from './keys';
import { classifyStartFailure, hostArgs, PythonSource, StartProblem } from './python';
import type { IgnoredItem } from './settings';

/** JSON-RPC error code of a cancelled request (LSP's RequestCancelled). */
export const REQUEST_CANCELLED = -32800;

/** Where host output and extension messages go (the 'lmbridge' LogOutputChannel). */
export interface Log {
  trace(msg: string): void;
  debug(msg: string): void;
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
  appendLine(line: string): void;
}

/** What `initialize` / `configure` carry besides client information. */
export interface HostConfig {
  storagePath?: string;
  /** `lmbridge.providers` of the user (or remote) settings. */
  providers: ProviderEntry[];
  /** The entries of `lmbridge.providers` of the workspace and its first folder the user allowed: the host restricts them. */
  workspaceProviders?: ProviderEntry[];
  /** The workspace's other entries: the host reports what it would ignore of them and never loads them. */
  unapprovedWorkspaceProviders?: ProviderEntry[];
  /** The groups of VS Code's Language Models editor (vendor 'lmbridge-api'), without their keys. */
  editorProviders?: { id: string; configuration: Record<string, unknown> }[];
  /** Stored API keys by provider name (an editor group's under `editor:<id>`), each with the origin it may be sent to. */
  secrets: Record<string, BoundKey>;
  settings: Record<string, unknown>;
  /** VS Code's proxy and certificate settings for the host's HTTP client. */
  network?: NetworkSettings;
}

/** How to start the host. */
export interface HostOptions {
  /** The command line that starts Python (`lmbridge.pythonCommand`, the managed venv or python3). May hold arguments (`uv run python`). */
  pythonCommand: string;
  /** Where `pythonCommand` came from (decides what a failed start tells the user to do). */
  pythonSource?: PythonSource;
  /** Commands passed over before `pythonCommand` was chosen (missing or too old), for the message when it fails too. */
  pythonTried?: string[];
  /** The folder of lmbridge and its dependencies shipped with the extension: first on the host's `sys.path`. */
  libDir?: string;
  /** The version of the lmbridge in `libDir` (the extension's): an installed compiled build of it runs instead. */
  libVersion?: string;
  clientName: string;
  clientVersion: string;
  cwd?: string;
  env?: Record<string, string>;
}

/** Result of `initialize` / `configure`. */
export interface InitializeResult {
  serverVersion: string;
  /** `compiled` (the stream pipeline built with mypyc) or `pure Python`; absent from older hosts. */
  serverBuild?: string;
  /** The JSON parser the host uses: "orjson" or "json". */
  serverJson?: string;
  vendor: string;
  providers: { name: string; ok: boolean; error?: string }[];
  /** What the host did not take from the workspace's providers (absent from older hosts). */
  ignored?: IgnoredItem[];
}

/** Raised when the host cannot be started or went away; the message says what to do. */
export class HostUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HostUnavailableError';
  }
}

/**
 * Splits a command line into words: whitespace separates, single or double quotes group.
 * Enough for `python3`, `/path with space/python` (quoted) and `uv run python`.
 */
export function splitCommand(cmd: string): string[] {
  const words: string[] = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(cmd)) !== null) words.push(m[1] ?? m[2] ?? m[3]);
  return words;
}

/**
 * A StreamMessageWriter that reports the id of each outgoing request to a listener, so that
 * `chat/parts` notifications (which name the `chat/response` request id) can be routed to the
 * right call: vscode-jsonrpc assigns ids itself and writes synchronously inside sendRequest.
 */
class IdReportingWriter extends rpc.StreamMessageWriter {
  onRequest: ((method: string, id: number | string) => void) | undefined;
  override write(msg: rpc.Message): Promise<void> {
    if (rpc.Message.isRequest(msg) && msg.id !== null) this.onRequest?.(msg.method, msg.id);
    return super.write(msg);
  }
}

/** One running host process and its connection. */
interface Running {
  proc: ChildProcess;
  conn: rpc.MessageConnection;
  writer: IdReportingWriter;
  ready: Promise<InitializeResult>;
  exited: boolean;
  stderrTail: string[];
  /** Stopped on purpose (stop/dispose): its end is no error and needs no restart. */
  stopping: boolean;
  /** When `initialize` answered (undefined: it never did). */
  readyAt?: number;
}

/** Hooks for what happens to host processes (all optional). */
export interface HostEvents {
  /** A host answered `initialize`. */
  onStarted?: (result: InitializeResult) => void;
  /** `initialize` or `configure` answered (a new host, or new settings). */
  onConfigured?: (result: InitializeResult) => void;
  /** A host could not start for a known reason (no Python, no lmbridge...). */
  onStartProblem?: (problem: StartProblem) => void;
  /** Whether a host that ended on its own must be started again without waiting for a request. */
  wanted?: () => boolean;
}

/** Backoff after `n` failures in a row: 1 s, 2 s, 4 s ... up to 30 s. */
export function backoffMs(n: number): number {
  return n <= 0 ? 0 : Math.min(30000, 1000 * 2 ** (n - 1));
}

/** Hooks the connection of every new host process gets (notification and request handlers). */
export type ConnectionSetup = (conn: rpc.MessageConnection) => void;

/**
 * Owns the host process. `connection()` starts one when none runs; when the process dies the
 * requests in flight fail (vscode-jsonrpc rejects them when the stream closes) and the next
 * call starts a new process with the current configuration. When `events.wanted()` says the
 * host must run (apps, the endpoint), a host that ended on its own is started again at once,
 * and after quick repeated crashes or failed starts with the backoff of `backoffMs`.
 */
export class Host {
  private running: Running | undefined;
  /** A start waiting for its options (the Python is looked for). */
  private starting: Promise<Running> | undefined;
  private lastExit: string | undefined;
  /** Why the last start failed, when the cause is known (no Python, no lmbridge...). */
  private lastProblem: StartProblem | undefined;
  private lastOptions: HostOptions | undefined;
  /** The start problem last written to the log (a repeat goes to the debug level). */
  private loggedProblem: string | undefined;
  private disposed = false;
  /** Starts that failed before `initialize` answered, in a row, and when the last one ended. */
  private failedStarts = 0;
  private lastFailedStart = 0;
  /** Hosts that ended on their own soon after starting, in a row (drives the restart backoff). */
  private crashes = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  /** Routes host stderr, `log` notifications and provider problems to the channel, once each. */
  readonly hostLog: HostLog;

  constructor(
    private readonly options: () => HostOptions | Promise<HostOptions>,
    private readonly config: () => Promise<HostConfig>,
    private readonly log: Log,
    private readonly setup: ConnectionSetup,
    private readonly events: HostEvents = {},
  ) {
    this.hostLog = new HostLog(log);
  }

  /** The pid of the running host, if any. */
  get pid(): number | undefined {
    return this.running && !this.running.exited ? this.running.proc.pid : undefined;
  }

  /** The interpreter of the last start and why it was chosen (for the diagnosis). */
  get interpreter(): { command: string; source: string; tried: string[] } | undefined {
    return this.lastOptions && {
      command: this.lastOptions.pythonCommand,
      source: this.lastOptions.pythonSource ?? 'setting',
      tried: this.lastOptions.pythonTried ?? [],
    };
  }

  /** Why the previous host process ended, if one did. */
  get lastExitReason(): string | undefined {
    return this.lastExit;
  }

  /** Why the last start failed, when the cause is known; cleared by a successful start. */
  get startProblem(): StartProblem | undefined {
    return this.lastProblem;
  }

  /** Whether a restart of a host that ended on its own is scheduled. */
  get restartPending(): boolean {
    return this.restartTimer !== undefined;
  }

  /** The connection to a running, initialized host (starting one if needed). */
  async connection(): Promise<rpc.MessageConnection> {
    if (this.disposed) throw new HostUnavailableError('lmbridge is shutting down');
    if (!this.running || this.running.exited) {
      // A host that cannot start (no Python, no lmbridge, bad command) is not retried on every
      // request: wait 1 s, 2 s, 4 s ... up to 30 s after each failed start.
      if (Date.now() - this.lastFailedStart < backoffMs(this.failedStarts)) throw new HostUnavailableError(this.exitMessage());
      this.starting ??= this.startWithOptions().finally(() => { this.starting = undefined; });
      await this.starting;
    }
    const r = this.running;
    if (!r) throw new HostUnavailableError(this.exitMessage());
    await r.ready;
    if (r.exited) throw new HostUnavailableError(this.exitMessage());
    return r.conn;
  }

  /**
   * Sends a request and tells `onId` its JSON-RPC id before any response or notification for
   * it can arrive.
   */
  async sendRequest<R>(method: string, params: unknown, token?: rpc.CancellationToken, onId?: (id: number | string) => void): Promise<R> {
    const conn = await this.connection();
    const r = this.running!;
    r.writer.onRequest = (m, id) => {
      if (m === method) onId?.(id);
    };
    try {
      return token ? conn.sendRequest<R>(method, params, token) : conn.sendRequest<R>(method, params);
    } finally {
      r.writer.onRequest = undefined;
    }
  }

  /** Sends a notification to the running host; does nothing when none runs. */
  notify(method: string, params: unknown): void {
    const r = this.running;
    if (r && !r.exited) void r.conn.sendNotification(method, params).catch(() => undefined);
  }

  /** Sends `configure` to a running host (a new host gets the configuration in `initialize`). */
  async reconfigure(): Promise<InitializeResult | undefined> {
    const r = this.running;
    if (!r || r.exited) return undefined;
    await r.ready;
    const result = await r.conn.sendRequest<InitializeResult>('configure', await this.config());
    this.hostLog.providers(result.providers ?? []);
    this.events.onConfigured?.(result);
    return result;
  }

  /**
   * A message for a request that failed because the host could not start or went away; for a
   * known cause (no Python, no lmbridge) it says what to do.
   */
  exitMessage(): string {
    if (this.lastProblem) return `The lmbridge Python host cannot start: ${this.lastProblem.message}`;
    return `The lmbridge Python host stopped${this.lastExit ? ` (${this.lastExit})` : ''}. ` +
      "The next request starts it again; see the 'lmbridge' output for its log.";
  }

  /** Looks for the options (which Python) and starts a host with them. */
  private async startWithOptions(): Promise<Running> {
    const opts = await this.options();
    this.lastOptions = opts;
    if (this.disposed) throw new HostUnavailableError('lmbridge is shutting down');
    this.running = this.start(opts);
    return this.running;
  }

  /** Starts a host process: spawn, connection, stderr routing, end handling, `initialize`. */
  private start(opts: HostOptions): Running {
    const { cmd, proc } = this.spawnProcess(opts);
    const { conn, writer } = this.connect(proc);
    const running: Running = { proc, conn, writer, ready: Promise.resolve() as unknown as Promise<InitializeResult>, exited: false, stderrTail: [], stopping: false };
    this.hostLog.newHost();
    const flushStderr = this.routeStderr(running);
    const exited = this.watchEnd(running, opts, cmd, flushStderr);
    this.installHandlers(conn);
    running.ready = this.initialize(running, opts, exited);
    // The error surfaces through connection(); don't report it twice as unhandled.
    running.ready.catch(() => undefined);
    return running;
  }

  /** Spawns `<python command> -c <bootstrap>` in the options' working folder. */
  private spawnProcess(opts: HostOptions): { cmd: string; proc: ChildProcess } {
    const words = splitCommand(opts.pythonCommand.trim() || 'python3');
    const [cmd, ...pre] = words;
    const args = [...pre, ...hostArgs(opts.libDir, opts.libVersion)];
    this.log.info(`starting the Python host: ${[cmd, ...pre].join(' ')} -c <lmbridge host, without its working folder on sys.path>${opts.libDir ? ` ${opts.libDir}` : ''}`);
    const proc = spawn(cmd, args, {
      cwd: opts.cwd,
      env: { ...process.env, PYTHONUNBUFFERED: '1', PYTHONIOENCODING: 'utf-8', ...(opts.env ?? {}) },
      stdio: ['pipe', 'pipe', 'pipe'],
      windowsHide: true,
    });
    return { cmd, proc };
  }

  /** The JSON-RPC connection over the process's stdio (not listening yet). */
  private connect(proc: ChildProcess): { conn: rpc.MessageConnection; writer: IdReportingWriter } {
    const reader = new rpc.StreamMessageReader(proc.stdout!);
    const writer = new IdReportingWriter(proc.stdin!);
    const conn = rpc.createMessageConnection(reader, writer, {
      // vscode-jsonrpc's own messages (unhandled notifications, failed writes) go to the log.
      error: m => this.log.error(m), warn: m => this.log.warn(m), info: m => this.log.debug(m), log: m => this.log.trace(m),
    });
    return { conn, writer };
  }

  /** Routes the host's stderr to the log line by line, keeping the last 20 lines; returns a flush of the unfinished last line. */
  private routeStderr(running: Running): () => void {
    let partial = '';
    const keep = (line: string): void => {
      running.stderrTail.push(line);
      if (running.stderrTail.length > 20) running.stderrTail.shift();
    };
    const stderr = running.proc.stderr!;
    stderr.setEncoding('utf8');
    stderr.on('data', (chunk: string) => {
      const lines = (partial + chunk).split(/\r?\n/);
      partial = lines.pop() ?? '';
      for (const line of lines) {
        this.hostLog.stderr(line);
        keep(line);
      }
    });
    return () => {
      if (partial) { this.hostLog.stderr(partial); running.stderrTail.push(partial); partial = ''; }
    };
  }

  /**
   * Watches for the end of the process; resolves once it is handled (`onEnded`). It is handled
   * once the process is gone AND its output is read to the end (so parts it sent before dying
   * are still delivered), or shortly after either if the other never comes.
   */
  private watchEnd(running: Running, opts: HostOptions, cmd: string, flushStderr: () => void): Promise<void> {
    const { proc, conn } = running;
    let exitedResolve: () => void = () => {};
    const exited = new Promise<void>(res => (exitedResolve = res));
    const end: { reason?: string; spawnError?: NodeJS.ErrnoException } = {};
    let outputClosed = false;
    const finish = (): void => {
      if (running.exited) return;
      running.exited = true;
      flushStderr();
      this.onEnded(running, opts, cmd, end);
      exitedResolve();
    };
    const settle = (): void => {
      if (end.reason !== undefined && outputClosed) setTimeout(finish, 20);
      else setTimeout(finish, 1000);
    };
    proc.on('error', (err: NodeJS.ErrnoException) => {
      end.spawnError ??= err;
      end.reason ??= `cannot run '${cmd}': ${err.message}`;
      outputClosed = true;
      settle();
    });
    proc.on('exit', (code, signal) => {
      end.reason ??= signal ? `killed by ${signal}` : `exit code ${code}`;
      settle();
    });
    // A closed stdin (the process is gone) must not become an unhandled 'error' event.
    proc.stdin!.on('error', () => undefined);
    conn.onClose(() => {
      outputClosed = true;
      settle();
    });
    return exited;
  }

  /**
   * A host process ended: records why, tells a failed start apart (no Python, no lmbridge...),
   * logs it once, counts quick crashes, fails the requests in flight and schedules a restart
   * when the host is wanted.
   */
  private onEnded(running: Running, opts: HostOptions, cmd: string, end: { reason?: string; spawnError?: NodeJS.ErrnoException }): void {
    const tail = running.stderrTail.filter(l => l.trim()).slice(-3).join(' | ');
    this.lastExit = (end.reason ?? 'its output closed') + (tail ? `; last output: ${tail}` : '');
    const deliberate = this.disposed || running.stopping;
    const neverReady = running.readyAt === undefined;
    if (neverReady && !deliberate) {
      const cwdExists = opts.cwd === undefined || fs.existsSync(opts.cwd);
      this.lastProblem = classifyStartFailure({
        command: cmd, spawnError: end.spawnError?.code, spawnMessage: end.spawnError?.message,
        cwd: opts.cwd, cwdExists, stderr: running.stderrTail, source: opts.pythonSource ?? 'setting', tried: opts.pythonTried,
      });
    }
    this.logEnd(deliberate, neverReady);
    if (!deliberate && running.readyAt !== undefined) {
      // Quick crashes in a row back off; a host that ran for a while restarts at once.
      this.crashes = Date.now() - running.readyAt > 60000 ? 1 : this.crashes + 1;
    }
    // Rejects every request in flight (PendingResponseRejected); callers map that.
    running.conn.dispose();
    if (!deliberate) {
      const problem = neverReady ? this.lastProblem : undefined;
      // After `ready` settled, so that a failed start is counted before the backoff is computed.
      void running.ready.then(() => undefined, () => undefined).then(() => {
        if (problem) this.events.onStartProblem?.(problem);
        this.scheduleRestart();
      });
    }
  }

  /** Logs the end of a host: info when stopped on purpose, a start problem once, else an error. */
  private logEnd(deliberate: boolean, neverReady: boolean): void {
    if (deliberate) this.log.info(`the Python host stopped (${this.lastExit})`);
    else if (this.lastProblem && neverReady) {
      // Retries with the backoff fail the same way until something changes: say it once.
      const again = this.lastProblem.message === this.loggedProblem;
      this.loggedProblem = this.lastProblem.message;
      if (again) this.log.debug(`the Python host still cannot start: ${this.lastProblem.message}`);
      else this.log.error(`the Python host cannot start: ${this.lastProblem.message}`);
    }
    else this.log.error(`the Python host ended: ${this.lastExit}`);
  }

  /** The host's own notifications, then the caller's handlers; starts listening. */
  private installHandlers(conn: rpc.MessageConnection): void {
    // `log` notifications (messages for the user) share the routing of stderr: each shown once.
    conn.onNotification('log', (p: { level?: string; message?: unknown }) => this.hostLog.notification(p?.level, String(p?.message ?? '')));
    this.setup(conn);
    conn.listen();
  }

  /** Sends `initialize` once the process runs; resolves with its result, or rejects with why the host is unavailable. */
  private async initialize(running: Running, opts: HostOptions, exited: Promise<void>): Promise<InitializeResult> {
    const { proc, conn } = running;
    try {
      // Nothing is written to a process that never started (ENOENT): vscode-jsonrpc would
      // report the failed write as an unhandled rejection. Its end says why.
      if (!await spawned(proc)) {
        await exited;
        throw new HostUnavailableError(this.exitMessage());
      }
      const cfg = await this.config();
      const init = conn.sendRequest<InitializeResult>('initialize', { clientName: opts.clientName, clientVersion: opts.clientVersion, ...cfg });
      init.catch(() => undefined); // a dead host rejects it; the race below reports that
      let result: InitializeResult | undefined;
      try {
        result = await Promise.race([init, exited.then(() => undefined)]);
      } catch (e) {
        // A host that is gone fails `initialize` (a write to a closed pipe, a disposed
        // connection) before its end is seen: wait for the end, which says why.
        const gone = await Promise.race([exited.then(() => true), new Promise<boolean>(res => setTimeout(() => res(false), 1500))]);
        if (!gone) throw e;
      }
      if (result === undefined) throw new HostUnavailableError(this.exitMessage());
      this.onReady(running, result);
      return result;
    } catch (e) {
      this.failedStarts++;
      this.lastFailedStart = Date.now();
      if (e instanceof HostUnavailableError) throw e;
      const msg = `the lmbridge Python host failed to initialize: ${(e as Error).message}`;
      this.log.error(msg);
      proc.kill();
      throw new HostUnavailableError(msg);
    }
  }

  /** `initialize` answered: the start problems are over. */
  private onReady(running: Running, result: InitializeResult): void {
    this.failedStarts = 0;
    this.lastProblem = undefined;
    this.loggedProblem = undefined;
    running.readyAt = Date.now();
    const build = [result.serverBuild, result.serverJson].filter(Boolean).join(', ');
    this.log.info(`Python host ${result.serverVersion}${build ? ` (${build})` : ''} ready (pid ${running.proc.pid})`);
    this.hostLog.providers(result.providers ?? []);
    this.events.onStarted?.(result);
    this.events.onConfigured?.(result);
  }

  /**
   * A host that ended on its own is started again when it is wanted (apps, the endpoint): at
   * once after a host that ran, after the backoff when starts fail or hosts crash quickly.
   */
  private scheduleRestart(): void {
    if (this.disposed || this.restartTimer || !(this.events.wanted?.() ?? false)) return;
    if (this.running && !this.running.exited) return;
    const delay = Math.max(
      this.failedStarts ? this.lastFailedStart + backoffMs(this.failedStarts) - Date.now() : 0,
      backoffMs(this.crashes - 1),
      0,
    );
    this.log.info(`restarting the Python host${delay ? ` in ${Math.round(delay / 1000)} s` : ''}`);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      if (this.disposed || !(this.events.wanted?.() ?? false)) return;
      if (this.running && !this.running.exited) return;
      // A failure is logged (and scheduled again) by the process's own end.
      this.connection().catch(() => undefined);
    }, delay + 5);
  }

  /** Forgets failed starts and crashes: the next start is tried at once (new Python, settings). */
  resetBackoff(): void {
    this.failedStarts = 0;
    this.lastFailedStart = 0;
    this.crashes = 0;
    this.lastProblem = undefined;
  }

  /** Stops the running host: `shutdown` then `exit`, then a kill if it lingers. */
  async stop(): Promise<void> {
    if (this.restartTimer) {
      clearTimeout(this.restartTimer);
      this.restartTimer = undefined;
    }
    const r = this.running;
    this.running = undefined;
    if (!r || r.exited) return;
    r.stopping = true;
    const gone = new Promise<void>(res => (r.exited ? res() : r.proc.once('exit', () => res())));
    try {
      await Promise.race([
        (async () => {
          await r.conn.sendRequest('shutdown', {});
          await r.conn.sendNotification('exit');
        })(),
        new Promise(res => setTimeout(res, 1500)),
      ]);
    } catch {
      // The host may already be going away; the kill below makes sure.
    }
    const timer = setTimeout(() => r.proc.kill('SIGKILL'), 2000);
    await Promise.race([gone, new Promise(res => setTimeout(res, 2500))]);
    clearTimeout(timer);
  }

  /** Stops the host and refuses new requests. */
  async dispose(): Promise<void> {
    this.disposed = true;
    await this.stop();
  }
}

/** Whether the process started (false: spawning failed, e.g. ENOENT). */
function spawned(proc: ChildProcess): Promise<boolean> {
  return new Promise<boolean>(res => {
    if (proc.pid !== undefined) res(true);
    proc.once('spawn', () => res(true));
    proc.once('error', () => res(false));
  });
}
