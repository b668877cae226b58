// "lmbridge: Create Python Environment": a virtual environment in the extension's global
// storage with the lmbridge wheel shipped inside the .vsix installed into it, with the pinned
// dependency wheels shipped beside it (offline). The host uses it whenever
// `lmbridge.pythonCommand` is empty.
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import type { Log } from './host';
import { Bundle, createEnvSteps, defaultPython, explainEnvFailure, pickWheel, venvDir, venvPython } from './python';
import { splitCommand } from './host';

/**
 * What the package ships for the environment: the lmbridge wheel (`python/lmbridge-*.whl`),
 * the wheels of its dependencies (`python/deps/`) and `python/requirements.txt`, which pins
 * and hashes them all; the platform-specific package also the compiled lmbridge and orjson
 * wheels (`python/native/`; the compiled wheels' hashes are on the lmbridge pin, orjson's pin is
 * `python/native/orjson-requirements.txt`); undefined when this build has no wheel or no
 * requirements file.
 */
export function bundledPackages(extensionPath: string): (Bundle & { wheel: string }) | undefined {
  const dir = path.join(extensionPath, 'python');
  let files: string[];
  try {
    files = fs.readdirSync(dir);
  } catch {
    return undefined;
  }
  const name = pickWheel(files);
  const requirements = path.join(dir, 'requirements.txt');
  if (!name || !fs.existsSync(requirements)) return undefined;
  const native = path.join(dir, 'native');
  const wheelDirs = [dir, path.join(dir, 'deps'), ...(files.includes('native') ? [native] : [])];
  const orjson = path.join(native, 'orjson-requirements.txt');
  return { wheel: path.join(dir, name), requirements, wheelDirs, ...(fs.existsSync(orjson) ? { orjsonRequirements: orjson } : {}) };
}

/** The managed environment's interpreter when the environment exists. */
export function managedPython(storagePath: string): string | undefined {
  const py = venvPython(venvDir(storagePath));
  return fs.existsSync(py) ? py : undefined;
}

/** Runs one command, copying its output to the log; resolves with its exit code and output. */
function run(argv: string[], log: Log, cwd: string): Promise<{ code: number | null; output: string; error?: string }> {
  return new Promise(resolve => {
    let output = '';
    const proc = spawn(argv[0], argv.slice(1), { cwd, env: { ...process.env, PIP_NO_INPUT: '1' }, stdio: ['ignore', 'pipe', 'pipe'], windowsHide: true });
    const take = (chunk: Buffer): void => {
      const text = chunk.toString('utf8');
      output += text;
      for (const line of text.split(/\r?\n/)) if (line.trim()) log.appendLine(`[python-env] ${line}`);
    };
    proc.stdout!.on('data', take);
    proc.stderr!.on('data', take);
    proc.on('error', (e: NodeJS.ErrnoException) => resolve({ code: null, output, error: e.code === 'ENOENT' ? `'${argv[0]}' was not found` : e.message }));
    proc.on('close', code => resolve({ code, output }));
  });
}

/**
 * Creates (or refreshes) the managed environment: `<python> -m venv <storage>/venv`, then an
 * offline, hash-checked `pip install` of the bundled wheels (see `createEnvSteps`), then a
 * check that lmbridge imports; an optional step that fails (orjson) is logged and skipped.
 * `basePython` is the interpreter that creates it (words of a command line). Resolves with the
 * environment's interpreter; rejects with a message that says what failed.
 */
export async function createPythonEnvironment(opts: {
  storagePath: string;
  extensionPath: string;
  basePython?: string;
  log: Log;
  progress?: (message: string) => void;
}): Promise<string> {
  const bundle = bundledPackages(opts.extensionPath);
  if (!bundle) {
    throw new Error(`this build of the extension ships no lmbridge wheel and requirements (${path.join(opts.extensionPath, 'python')}); install lmbridge into a Python yourself and set 'lmbridge.pythonCommand'`);
  }
  const base = splitCommand(opts.basePython?.trim() || defaultPython());
  const dir = venvDir(opts.storagePath);
  await fs.promises.mkdir(opts.storagePath, { recursive: true });
  opts.log.info(`creating the Python environment ${dir} with ${base.join(' ')} from ${path.basename(bundle.wheel)}`);
  for (const step of createEnvSteps(base, dir, bundle)) {
    opts.progress?.(step.title);
    opts.log.info(`${step.title}: ${step.argv.join(' ')}`);
    const r = await run(step.argv, opts.log, opts.storagePath);
    if (r.code !== 0 && step.optional) {
      opts.log.warn(`${step.optional.ifFailed} (${r.error ?? `pip exited with code ${r.code}`})`);
    } else if (r.code !== 0) {
      const message = r.error
        ? (step.argv[0] === base[0] ? `cannot run '${base[0]}': not found. Install Python 3.10 or newer, or set 'lmbridge.pythonCommand' to a Python to create the environment with` : `${step.title} failed: ${r.error}`)
        : explainEnvFailure(step.title, r.output, base.join(' '));
      throw new Error(message);
    }
  }
  const py = venvPython(dir);
  opts.log.info(`the Python environment is ready: ${py}`);
  return py;
}
