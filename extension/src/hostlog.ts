// Routes what the host says into the output channel so that each problem shows once: the host
// writes a user-facing message both to stderr (its log) and as a `log` notification, on two
// pipes whose order is not fixed, and the extension itself reports misconfigured providers from
// the `initialize`/`configure` result. Pure logic over a Log; unit-tested.
import type { Log } from './host';

export type Level = 'debug' | 'info' | 'warning' | 'error';

/** A host stderr line as `logging` formats it: `2025-01-01 12:00:00,123 ERROR lmbridge.host: text`. */
const STDERR_LINE = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) (\S+): (.*)$/;

/** How long a message shown from one source hides the same message from another. */
const DEDUPE_MS = 10000;

/** A provider that failed to load, as the host's result lists it. */
export interface ProviderStatus { name: string; ok: boolean; error?: string }

/** Python's repr of a str, as the host quotes provider names in its messages. */
function pyRepr(s: string): string {
  const q = s.includes("'") && !s.includes('"') ? '"' : "'";
  return q + s.replace(/\\/g, '\\\\').replace(new RegExp(q, 'g'), `\\${q}`) + q;
}

/** The message the host logs for a provider that could not be loaded (the same words). */
export function providerProblem(p: ProviderStatus): string {
  return `provider ${pyRepr(p.name)} is not available: ${p.error ?? 'misconfigured'}`;
}

export class HostLog {
  /** First line of each message recently shown at warning or error, and when. */
  private readonly recent = new Map<string, number>();
  /** Level of the last stderr line with a header: continuation lines (tracebacks) keep it. */
  private stderrLevel: Level = 'info';
  /** The current stderr message was shown already: its lines go to the debug level. */
  private demoted = false;
  /** Provider problems reported for the current configuration: name -> message. */
  private readonly providerProblems = new Map<string, string>();

  constructor(private readonly log: Log, private readonly now: () => number = Date.now) {}

  private key(message: string): string {
    return message.split(/\r?\n/, 1)[0].trim();
  }

  /** Whether the message was shown recently (and remembers it as shown now). */
  private seen(message: string): boolean {
    const t = this.now();
    for (const [k, at] of this.recent) if (t - at > DEDUPE_MS) this.recent.delete(k);
    const k = this.key(message);
    const was = this.recent.has(k);
    this.recent.set(k, t);
    return was;
  }

  private write(level: Level, text: string): void {
    switch (level) {
      case 'debug': this.log.debug(text); break;
      case 'warning': this.log.warn(text); break;
      case 'error': this.log.error(text); break;
      default: this.log.info(text);
    }
  }

  /**
   * A line the host wrote to stderr. Warnings and errors keep their level; a message already
   * shown (by a `log` notification or the extension) goes to the debug level only. Other lines
   * are copied as they are, since their amount follows `lmbridge.logLevel`.
   */
  stderr(line: string): void {
    const m = STDERR_LINE.exec(line);
    let level: Level;
    if (m) {
      level = m[1] === 'CRITICAL' || m[1] === 'ERROR' ? 'error' : m[1] === 'WARNING' ? 'warning' : m[1] === 'DEBUG' ? 'debug' : 'info';
      this.stderrLevel = level;
      this.demoted = (level === 'error' || level === 'warning') && this.seen(m[3]);
    } else {
      level = this.stderrLevel;
    }
    if (this.demoted) {
      this.log.debug(`[host] ${line}`);
      return;
    }
    if (level === 'error' || level === 'warning') this.write(level, `[host] ${line}`);
    else this.log.appendLine(`[host] ${line}`);
  }

  /** A `log` notification: a message meant for the user. */
  notification(level: string | undefined, message: string): void {
    const lv: Level = level === 'debug' || level === 'warning' || level === 'error' ? level : 'info';
    if ((lv === 'error' || lv === 'warning') && this.seen(message)) {
      this.log.debug(`[host] (shown above) ${message}`);
      return;
    }
    this.write(lv, `[host] ${message}`);
  }

  /**
   * The providers of an `initialize`/`configure` result: a problem is reported when it is new
   * for that provider (not again when `configure` is re-sent for another setting), and not at
   * all when the host's own message about it was just shown.
   */
  providers(statuses: readonly ProviderStatus[]): void {
    const now = new Set<string>();
    for (const p of statuses) {
      if (p.ok) continue;
      now.add(p.name);
      const message = providerProblem(p);
      if (this.providerProblems.get(p.name) === message) continue;
      this.providerProblems.set(p.name, message);
      if (!this.seen(message)) this.log.error(message);
    }
    for (const name of [...this.providerProblems.keys()]) if (!now.has(name)) this.providerProblems.delete(name);
  }

  /** A new host process: its first result reports every problem again (once). */
  newHost(): void {
    this.providerProblems.clear();
    this.stderrLevel = 'info';
    this.demoted = false;
  }
}
