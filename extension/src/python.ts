// Which Python runs the host, why it could not start, and how the extension's own Python
// environment is made. Pure functions (no vscode, no I/O) so the decisions are unit-tested.
import * as path from 'path';

/** The command that creates the managed environment (also a notification action). */
export const CREATE_ENV_COMMAND = 'lmbridge.createPythonEnvironment';
export const CREATE_ENV_TITLE = 'lmbridge: Create Python Environment';

/** Folder of the managed virtual environment inside the extension's global storage. */
export function venvDir(storagePath: string): string {
  return path.join(storagePath, 'venv');
}

/** The interpreter inside a virtual environment. */
export function venvPython(dir: string, platform: NodeJS.Platform = process.platform): string {
  return platform === 'win32' ? path.join(dir, 'Scripts', 'python.exe') : path.join(dir, 'bin', 'python');
}

/** The Python used when nothing else is known: `python3` (`python` on Windows, where `python3` is often the Store stub). */
export function defaultPython(platform: NodeJS.Platform = process.platform): string {
  return platform === 'win32' ? 'python' : 'python3';
}

/** Quotes a path for `splitCommand` when it holds whitespace. */
export function quoteCommand(p: string): string {
  return /\s/.test(p) ? `"${p}"` : p;
}

/**
 * Where the host's Python came from: `lmbridge.pythonCommand`, the environment of "Create
 * Python Environment", the interpreter selected in the Python extension, or PATH.
 */
export type PythonSource = 'setting' | 'managed' | 'python-extension' | 'default';

/** Where to download Python (the notification's link when none is usable). */
export const PYTHON_DOWNLOAD_URL = 'https://www.python.org/downloads/';

/** The oldest Python the host runs on. */
export const MIN_PYTHON: [number, number] = [3, 10];

/** Commands tried on PATH, in order, when nothing else names a Python. */
export const PATH_PYTHONS = ['python3', 'python', 'py -3'];

/** The code a candidate interpreter runs to say its version and where it is. */
export const PROBE_CODE = 'import sys; print(sys.version_info[0], sys.version_info[1], sys.executable)';

/** What a probe printed: the version and the interpreter's own path (undefined: not a usable answer). */
export function parseProbe(stdout: string): { major: number; minor: number; executable: string } | undefined {
  const m = /^(\d+) (\d+) (.*)$/m.exec(stdout.trim());
  return m ? { major: Number(m[1]), minor: Number(m[2]), executable: m[3].trim() } : undefined;
}

/** Whether a version is new enough for the host. */
export function recentEnough(major: number, minor: number): boolean {
  return major > MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor >= MIN_PYTHON[1]);
}

/**
 * Whether the Python extension's interpreter may run the host: not one inside an open
 * workspace folder (a repository can ship a `.venv` whose `sitecustomize` or interpreter is
 * its own code, and the Python extension selects such environments by itself), and not when
 * the workspace's settings name the interpreter (`python.defaultInterpreterPath`). A workspace
 * never decides which program lmbridge runs (SECURITY.md); the user's `lmbridge.pythonCommand`
 * may name any interpreter. Paths are compared with their links resolved (`realpath`: the
 * caller's `fs.realpathSync`, this module does no I/O) and without case where the file system
 * ignores it.
 */
export function pythonExtensionAllowed(executable: string, workspaceFolders: string[], workspaceSetsInterpreter: boolean, platform: NodeJS.Platform = process.platform,
  realpath: (p: string) => string = p => p): { ok: boolean; why?: string } {
  if (workspaceSetsInterpreter) return { ok: false, why: "the workspace's settings set python.defaultInterpreterPath" };
  const p = platform === 'win32' ? path.win32 : path.posix;
  // the file systems of Windows and macOS ignore case: compare as they do
  const fold = platform === 'win32' || platform === 'darwin' ? (s: string) => s.toLowerCase() : (s: string) => s;
  const resolved = (s: string): string => { try { return realpath(s); } catch { return s; } };
  // the interpreter's folder with its links resolved (a `.venv/bin/python` links to a system
  // Python: the environment around it is what is the repository's), and as written
  const exes = [executable, p.join(resolved(p.dirname(executable)), p.basename(executable))];
  for (const folder of workspaceFolders) {
    for (const f of new Set([folder, resolved(folder)])) {
      for (const exe of exes) {
        const rel = p.relative(fold(f), fold(exe));
        if (rel === '' || (!rel.startsWith('..') && !p.isAbsolute(rel))) return { ok: false, why: `it lies inside the workspace folder ${folder}` };
      }
    }
  }
  return { ok: true };
}

/**
 * The Python code that starts the host (`python -c <this>`), instead of `python -m lmbridge
 * host`: `-m` and `-c` put the working folder (the extension's storage folder) first on
 * `sys.path`, so a `lmbridge` or `httpx` folder put there would be imported instead of the
 * installed package, or a `types.py` / `importlib.py` there run by the first import of a
 * standard module. Its first statement (after `import sys`, which is built in) drops every
 * relative entry (`''` is the working folder); then any entry that resolves to the working
 * folder goes too, before lmbridge is imported; `-P` would do the first only from 3.11 on. Without
 * the package it says what `python -m lmbridge` says, which `classifyStartFailure` recognises.
 * The folder of lmbridge and its dependencies shipped in the extension (`python/lib`), given
 * as the argument after the code, goes first on `sys.path`: the host then runs with any Python
 * 3.10+, nothing installed, and with the lmbridge of this extension; the interpreter's own
 * packages (a provider's dependencies, orjson) come after it. One exception: when the
 * interpreter has the compiled build of lmbridge installed (its `lmbridge/sse` is a C
 * extension, see `lmbridge.compiled`) at exactly this extension's version (the argument after
 * the folder), that one runs and the folder goes last: the same code, faster. An older Python says so in
 * words `classifyStartFailure` recognises. One line, single quotes only: it passes unchanged
 * through any command line.
 */
export const HOST_BOOTSTRAP = [
  // first, before any import can search it: no relative entry ('' is the working folder) and
  // not the working folder itself (sys and posix/nt are built in: never looked for on the path)
  'import sys',
  "here = __import__('nt' if sys.platform == 'win32' else 'posix').getcwd().rstrip('/\\\\')",
  "sys.path[:] = [p for p in sys.path if (p[:1] in ('/', '\\\\') or p[1:3] in (':\\\\', ':/')) and p.rstrip('/\\\\') != here]",
  'import os, importlib.util',
  "sys.version_info >= (3, 10) or sys.exit('lmbridge needs Python 3.10 or newer; ' + sys.executable + ' is Python ' + sys.version.split()[0])",
  'cwd = os.path.realpath(os.getcwd())',
  'sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != cwd]',
  "lib = sys.argv[1] if len(sys.argv) > 1 else ''",
  "want = sys.argv[2] if len(sys.argv) > 2 else ''",
  // the first lmbridge-*.dist-info on sys.path, read as importlib.metadata reads it (its
  // METADATA's Version, its RECORD's files), without importlib.metadata's import on every start
  'import glob',
  "d = next((i for p in (sys.path if want else ()) for i in sorted(glob.glob(os.path.join(glob.escape(p), 'lmbridge-*.dist-info')))), '')",
  "rd = lambda n: open(os.path.join(d, n), encoding='utf-8', errors='replace').read() if os.path.isfile(os.path.join(d, n)) else ''",
  "fast = bool(d) and any(l[8:].strip() == want for l in rd('METADATA').split('\\n\\n', 1)[0].splitlines() if l.startswith('Version:')) and any(f.startswith('lmbridge/sse.') and f.endswith(('.so', '.pyd')) for f in (l.rsplit(',', 2)[0] for l in rd('RECORD').splitlines()))",
  'lib and os.path.isdir(lib) and (sys.path.append(lib) if fast else sys.path.insert(0, lib))',
  'del sys.argv[1:]',
  "importlib.util.find_spec('lmbridge') or sys.exit(sys.executable + ': No module named lmbridge')",
  'from lmbridge.cli import main',
  "sys.exit(main(['host']))",
].join('; ');

/**
 * The arguments that follow the interpreter's command line to start the host (with the bundled
 * library folder, if any, and the version of the lmbridge in it: an installed compiled build of
 * the same version is used instead).
 */
export function hostArgs(libDir?: string, version?: string): string[] {
  return libDir ? ['-c', HOST_BOOTSTRAP, libDir, ...(version ? [version] : [])] : ['-c', HOST_BOOTSTRAP];
}

/** The folder of lmbridge and its dependencies inside the extension (made by `npm run package`). */
export function bundledLib(extensionPath: string): string {
  return path.join(extensionPath, 'python', 'lib');
}

/** Why a host could not start; `kind` decides which actions the notification offers. */
export interface StartProblem {
  kind: 'python-missing' | 'lmbridge-missing' | 'cwd-missing' | 'cannot-run';
  message: string;
  /** Where the command came from (decides the notification's actions). */
  source?: PythonSource;
}

/** The actions the notification of a start problem offers. */
export function problemActions(problem: StartProblem): string[] {
  if (problem.kind === 'cwd-missing') return ['Show Log'];
  if (problem.kind === 'python-missing' && problem.source !== 'managed') return ['Install Python', 'Open Settings', 'Show Log'];
  if (problem.source === 'managed') return ['Create Python Environment', 'Show Log'];
  return ['Create Python Environment', 'Open Settings', 'Show Log'];
}

/** What is known about a host process that ended before it answered `initialize`. */
export interface StartFailure {
  /** The program run (first word of the command line). */
  command: string;
  /** `error.code` of the spawn error, if spawning failed. */
  spawnError?: string;
  spawnMessage?: string;
  /** The working folder the process was given, and whether it exists. */
  cwd?: string;
  cwdExists: boolean;
  /** The last lines the process wrote to stderr. */
  stderr: string[];
  /** Where the command came from. */
  source: PythonSource;
  /** What was tried before (PATH commands that were missing or too old), for the message. */
  tried?: string[];
}

const SETTING = "'lmbridge.pythonCommand'";

/**
 * Tells the causes of a failed start apart and says what to do about each. Node reports both a
 * missing program and a missing working folder as ENOENT; only the first means no Python.
 */
export function classifyStartFailure(f: StartFailure): StartProblem | undefined {
  const problem = classify(f);
  return problem && { ...problem, source: f.source };
}

/** No usable Python: the one message, with where to get one. */
function noPythonMessage(f: StartFailure, found: string): string {
  const tried = f.tried?.length ? ` (tried: ${f.tried.join(', ')})` : '';
  return `No Python 3.10 or newer was found${tried}${found}. Install Python from ${PYTHON_DOWNLOAD_URL}; lmbridge then runs with it, nothing else to install. Or set ${SETTING} to a Python 3.10+ interpreter`;
}

function classify(f: StartFailure): Omit<StartProblem, 'source'> | undefined {
  const old = f.stderr.find(l => /lmbridge needs Python 3\.10 or newer/.test(l));
  if (old && !f.spawnError) {
    const said = old.replace(/^.*?lmbridge needs/, 'lmbridge needs');
    if (f.source === 'setting') return { kind: 'python-missing', message: `${said}. Set ${SETTING} to a Python 3.10+ interpreter (or clear it)` };
    return { kind: 'python-missing', message: noPythonMessage(f, `; ${said.replace(/^lmbridge needs Python 3\.10 or newer; /, '')}`) };
  }
  if (f.spawnError === 'ENOENT' || f.spawnError === 'EACCES') {
    if (f.cwd !== undefined && !f.cwdExists) {
      return {
        kind: 'cwd-missing',
        message: `the host's working folder ${f.cwd} does not exist (the extension's storage folder could not be created); reload the window, and check that the folder can be created`,
      };
    }
    if (f.spawnError === 'EACCES') {
      return { kind: 'cannot-run', message: `cannot run '${f.command}': permission denied. Set ${SETTING} to a Python interpreter you can run` };
    }
    if (f.source === 'default' || f.source === 'python-extension') return { kind: 'python-missing', message: `${noPythonMessage(f, '')}.` };
    const where = f.source === 'managed'
      ? `The Python environment lmbridge created (${f.command}) is broken; run '${CREATE_ENV_TITLE}' again`
      : `Fix ${SETTING} (it must name a Python 3.10+ interpreter), or clear it: lmbridge then finds a Python by itself`;
    return { kind: 'python-missing', message: `Python was not found: cannot run '${f.command}'. ${where}.` };
  }
  if (f.spawnError) return { kind: 'cannot-run', message: `cannot run '${f.command}': ${f.spawnMessage ?? f.spawnError}` };
  // `python -m lmbridge` without the package: "/usr/bin/python3: No module named lmbridge"
  // (or "... lmbridge.__main__" for a broken install).
  if (f.stderr.some(l => /No module named '?lmbridge/.test(l))) {
    const what = f.source === 'managed'
      ? `The Python environment lmbridge created (${f.command}) has no lmbridge package; run '${CREATE_ENV_TITLE}' again`
      : f.source === 'setting'
        ? `Run '${CREATE_ENV_TITLE}' after clearing ${SETTING}, or install lmbridge into that Python ('${f.command} -m pip install <the lmbridge wheel or package>')`
        : `Run the command '${CREATE_ENV_TITLE}': it installs the lmbridge package shipped with the extension into a virtual environment of its own and uses it. Or set ${SETTING} to a Python that has lmbridge installed`;
    return { kind: 'lmbridge-missing', message: `'${f.command}' has no lmbridge package (python -m lmbridge: No module named lmbridge). ${what}.` };
  }
  return undefined;
}

/** The bundled lmbridge wheel among the files of the extension's `python` folder (newest version last wins). */
export function pickWheel(files: string[]): string | undefined {
  const wheels = files.filter(f => /^lmbridge-[^-]+-.*\.whl$/.test(f));
  wheels.sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  return wheels.at(-1);
}

/** What the .vsix ships for "Create Python Environment" (its `python` folder). */
export interface Bundle {
  /** `python/requirements.txt`: lmbridge and its runtime dependencies, pinned and hashed. */
  requirements: string;
  /** Folders holding the wheels it names (`python/`, `python/deps/`, `python/native/` in a platform-specific package). */
  wheelDirs: string[];
  /** `python/native/orjson-requirements.txt` of a platform-specific package: orjson, pinned and hashed (optional). */
  orjsonRequirements?: string;
}

/** One step of "Create Python Environment". */
export interface EnvStep {
  title: string;
  argv: string[];
  /** Set on a step whose failure leaves a working environment: the command goes on and logs this. */
  optional?: { ifFailed: string };
}

/**
 * The steps of "Create Python Environment": each an argv run in order. The install is offline
 * (`--no-index`) from the wheels shipped in the extension, of exactly the versions the
 * requirements file pins and with the hashes it records (`--require-hashes`): the versions
 * lmbridge was tested with, whatever the user's package index holds. `--force-reinstall` puts
 * the bundled lmbridge in place even over an installed one of the same version (an
 * environment refreshed after an update of the extension). A platform-specific package's orjson
 * comes in a step of its own that may fail: no wheel fits a free-threaded Python, or a Python
 * version or architecture the package has none for, and orjson is optional.
 */
export function createEnvSteps(basePython: string[], dir: string, bundle: Bundle, platform: NodeJS.Platform = process.platform): EnvStep[] {
  const py = venvPython(dir, platform);
  // `-I`: the working folder (the storage folder) off sys.path, PYTHON* variables ignored: a
  // `venv` or `pip` planted there would run instead
  const install = (requirements: string): string[] => [py, '-I', '-m', 'pip', 'install', '--disable-pip-version-check', '--no-index',
    ...bundle.wheelDirs.flatMap(d => ['--find-links', d]), '--require-hashes', '--force-reinstall', '-r', requirements];
  return [
    { title: 'creating the virtual environment', argv: [...basePython, '-I', '-m', 'venv', dir] },
    { title: 'installing lmbridge', argv: install(bundle.requirements) },
    ...(bundle.orjsonRequirements === undefined ? [] : [{
      title: 'installing orjson (optional)',
      argv: install(bundle.orjsonRequirements),
      optional: { ifFailed: 'orjson was not installed; JSON uses the standard library' },
    }]),
    { title: 'checking the installation', argv: [py, '-I', '-c', 'import lmbridge, sys; print(lmbridge.__version__, sys.version.split()[0])'] },
  ];
}

/** What to tell the user when a step of "Create Python Environment" failed. */
export function explainEnvFailure(step: string, output: string, basePython: string): string {
  const tail = output.trim().split(/\r?\n/).slice(-3).join(' | ');
  if (step.startsWith('creating') && /ensurepip|venv/.test(output)) {
    return `'${basePython} -m venv' failed: this Python cannot create virtual environments (on Debian/Ubuntu: sudo apt install python3-venv). Output: ${tail}`;
  }
  if (step === 'installing lmbridge') {
    return `installing lmbridge and its pinned dependencies from the extension's own wheels failed (lmbridge needs Python 3.10 or newer). Output: ${tail}`;
  }
  return `${step} failed: ${tail}`;
}
