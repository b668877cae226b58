// Which Python runs the host: `lmbridge.pythonCommand`, else the environment of "Create Python
// Environment", else the Python extension's interpreter, else the first of python3, python,
// `py -3` on PATH that is Python 3.10 or newer (each asked for its version). No vscode here:
// the Python extension is reached through the function the caller passes.
import { spawn } from 'child_process';
import { splitCommand } from './host';
import { defaultPython, parseProbe, PATH_PYTHONS, PROBE_CODE, PythonSource, quoteCommand, recentEnough } from './python';

/** What a candidate interpreter said about itself. */
export interface Probe {
  /** The version, e.g. [3, 12]; undefined when it did not run or gave no answer. */
  version?: [number, number];
  /** Its own path (`sys.executable`). */
  executable?: string;
  /** Why it gave no answer (not found, exit code ...). */
  error?: string;
}

/** The Python found for the host. */
export interface FoundPython {
  /** The command line (a quoted path, or the setting as written). */
  command: string;
  source: PythonSource;
  /** Candidates passed over, with why (`python3 (not found)`, `python (Python 3.8)`). */
  tried: string[];
  /** The version, when a probe gave it. */
  version?: string;
}

/** Runs `<command> -c <probe>` with a time limit and reads what it says. */
export function probePython(command: string, cwd?: string, timeoutMs = 10000): Promise<Probe> {
  const [cmd, ...pre] = splitCommand(command);
  return new Promise(resolve => {
    let out = '';
    let settled = false;
    const done = (p: Probe): void => {
      if (!settled) { settled = true; clearTimeout(timer); resolve(p); }
    };
    let proc: ReturnType<typeof spawn>;
    try {
      proc = spawn(cmd, [...pre, '-c', PROBE_CODE], { cwd, stdio: ['ignore', 'pipe', 'ignore'], windowsHide: true });
    } catch (e) {
      resolve({ error: (e as Error).message });
      return;
    }
    const timer = setTimeout(() => { proc.kill(); done({ error: `no answer in ${timeoutMs / 1000} s` }); }, timeoutMs);
    proc.stdout!.setEncoding('utf8');
    proc.stdout!.on('data', (c: string) => { out += c; });
    proc.on('error', (e: NodeJS.ErrnoException) => done({ error: e.code === 'ENOENT' ? 'not found' : e.message }));
    proc.on('close', code => {
      const p = parseProbe(out);
      if (code === 0 && p) done({ version: [p.major, p.minor], executable: p.executable });
      else done({ error: `exit code ${code}` });
    });
  });
}

/** How `findPython` looks around (injected, so that tests need no real interpreters). */
export interface FindOptions {
  /** `lmbridge.pythonCommand` (user or remote settings only). */
  setting: string;
  /** The managed environment's interpreter when it exists. */
  managed?: string;
  /** The interpreter the Python extension has selected, if it is installed and allowed. */
  pythonExtension?: () => Promise<string | undefined>;
  probe?: (command: string) => Promise<Probe>;
  candidates?: string[];
  platform?: NodeJS.Platform;
}

/**
 * The Python for the host. The setting and the managed environment are taken as they are (the
 * host's start line checks the version); the Python extension's interpreter and the PATH
 * commands are asked for their version first. None usable: the first PATH command, whose start
 * then fails and is told as "no Python 3.10 or newer" with `tried`.
 */
export async function findPython(o: FindOptions): Promise<FoundPython> {
  const setting = o.setting.trim();
  if (setting) return { command: setting, source: 'setting', tried: [] };
  if (o.managed) return { command: quoteCommand(o.managed), source: 'managed', tried: [] };
  const probe = o.probe ?? ((c: string) => probePython(c));
  const tried: string[] = [];
  const check = async (command: string, source: PythonSource): Promise<FoundPython | undefined> => {
    const p = await probe(command);
    if (p.version && recentEnough(...p.version)) {
      return { command: p.executable ? quoteCommand(p.executable) : command, source, tried, version: p.version.join('.') };
    }
    tried.push(`${command} (${p.version ? `Python ${p.version.join('.')}` : p.error ?? 'no answer'})`);
    return undefined;
  };
  const selected = await o.pythonExtension?.().catch(() => undefined);
  if (selected) {
    const found = await check(quoteCommand(selected), 'python-extension');
    if (found) return found;
  }
  for (const c of o.candidates ?? PATH_PYTHONS) {
    const found = await check(c, 'default');
    if (found) return found;
  }
  return { command: defaultPython(o.platform), source: 'default', tried };
}
