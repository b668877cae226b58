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

/** Where the host's Python came from. */
export type PythonSource = 'setting' | 'managed' | 'default';

/**
 * The command line that starts Python for the host: `lmbridge.pythonCommand` when set, else the
 * managed environment when it exists (made by "Create Python Environment"), else `python3`.
 */
export function hostPython(setting: string, managedPython: string | undefined, platform: NodeJS.Platform = process.platform): { command: string; source: PythonSource } {
  const s = setting.trim();
  if (s) return { command: s, source: 'setting' };
  if (managedPython) return { command: quoteCommand(managedPython), source: 'managed' };
  return { command: defaultPython(platform), source: 'default' };
}

/**
 * The Python code that starts the host (`python -c <this>`), instead of `python -m lmbridge
 * host`: `-m` and `-c` put the working folder (the extension's storage folder) first on
 * `sys.path`, so a `lmbridge` or `httpx` folder put there would be imported instead of the
 * installed package. This removes it (and any entry that resolves to it, e.g. a relative
 * PYTHONPATH) before lmbridge is imported; `-P` would do it only from Python 3.11 on. Without
 * the package it says what `python -m lmbridge` says, which `classifyStartFailure` recognises.
 * One line, single quotes only: it passes unchanged through any command line.
 */
export const HOST_BOOTSTRAP = [
  'import os, sys, importlib.util',
  'cwd = os.path.realpath(os.getcwd())',
  'sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != cwd]',
  "importlib.util.find_spec('lmbridge') or sys.exit(sys.executable + ': No module named lmbridge')",
  'from lmbridge.cli import main',
  "sys.exit(main(['host']))",
].join('; ');

/** The arguments that follow the interpreter's command line to start the host. */
export function hostArgs(): string[] {
  return ['-c', HOST_BOOTSTRAP];
}

/** Why a host could not start; `kind` decides which actions the notification offers. */
export interface StartProblem {
  kind: 'python-missing' | 'lmbridge-missing' | 'cwd-missing' | 'cannot-run';
  message: string;
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
}

const SETTING = "'lmbridge.pythonCommand'";

/**
 * Tells the causes of a failed start apart and says what to do about each. Node reports both a
 * missing program and a missing working folder as ENOENT; only the first means no Python.
 */
export function classifyStartFailure(f: StartFailure): StartProblem | undefined {
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
    const where = f.source === 'managed'
      ? `The Python environment lmbridge created (${f.command}) is broken; run '${CREATE_ENV_TITLE}' again`
      : f.source === 'setting'
        ? `Fix ${SETTING} (it must name a Python 3.10+ interpreter), or clear it and run '${CREATE_ENV_TITLE}'`
        : `Install Python 3.10 or newer (on PATH as '${f.command}'), then run '${CREATE_ENV_TITLE}'; or set ${SETTING} to a Python that has the lmbridge package`;
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
  /** Folders holding the wheels it names (`python/`, `python/deps/`). */
  wheelDirs: string[];
}

/**
 * The steps of "Create Python Environment": each an argv run in order. The install is offline
 * (`--no-index`) from the wheels shipped in the extension, of exactly the versions the
 * requirements file pins and with the hashes it records (`--require-hashes`): the versions
 * lmbridge was tested with, whatever the user's package index holds. `--force-reinstall` puts
 * the bundled lmbridge in place even over an installed one of the same version (an
 * environment refreshed after an update of the extension).
 */
export function createEnvSteps(basePython: string[], dir: string, bundle: Bundle, platform: NodeJS.Platform = process.platform): { title: string; argv: string[] }[] {
  const py = venvPython(dir, platform);
  return [
    { title: 'creating the virtual environment', argv: [...basePython, '-m', 'venv', dir] },
    {
      title: 'installing lmbridge',
      argv: [py, '-m', 'pip', 'install', '--disable-pip-version-check', '--no-index', ...bundle.wheelDirs.flatMap(d => ['--find-links', d]),
        '--require-hashes', '--force-reinstall', '-r', bundle.requirements],
    },
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
