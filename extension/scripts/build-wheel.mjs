// Builds the lmbridge Python wheel from the repository (`pip wheel --no-deps`, hatchling
// fetched by pip from the configured index) into extension/python/, which `vsce package`
// ships inside the .vsix for "lmbridge: Create Python Environment"; then scripts/pin_deps.py
// puts the pure-Python wheels of its dependencies (the versions of constraints.txt) in
// python/deps/ and writes python/requirements.txt, pinned and hashed, for an offline install;
// last scripts/unpack_lib.py unpacks them all into python/lib, from which the host runs with
// any Python >= 3.10 (no install needed).
// The build backend (hatchling and what it needs) comes from the committed lock,
// locks/build.txt: pip installs those files alone, checking each one's hash, into
// python/.backend, and the wheel is built against them without build isolation; a file other
// than the locked one stops the build.
// Skips the wheel build when the wheel is newer than every source file. Python:
// $LMBRIDGE_PYTHON, else python3 (python on Windows).
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ext = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const repo = path.resolve(ext, '..');
const out = path.join(ext, 'python');

function newest(p) {
  const st = statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  let t = 0;
  for (const e of readdirSync(p)) if (e !== '__pycache__') t = Math.max(t, newest(path.join(p, e)));
  return t;
}

const wheels = () => { try { return readdirSync(out).filter(f => f.endsWith('.whl')); } catch { return []; } };
const python = process.env.LMBRIDGE_PYTHON || (process.platform === 'win32' ? 'python' : 'python3');

function runPython(args) {
  const r = spawnSync(python, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.error || r.status !== 0) {
    console.error(`build-wheel: '${python} ${args.join(' ')}' failed${r.error ? `: ${r.error.message}` : ` (exit ${r.status})`}`);
    process.exit(1);
  }
}

/**
 * The pinned, hashed requirements and the dependency wheels (redone only when pins change),
 * then python/lib: all of them unpacked (redone only when requirements.txt changes). What a
 * platform-specific build added (python/native/, its pins) goes.
 */
function pinDeps() {
  // the wheels add_native.py bundles for the platform-specific package only
  rmSync(path.join(out, 'native'), { recursive: true, force: true });
  runPython([path.join(ext, 'scripts', 'pin_deps.py'), out, path.join(repo, 'constraints.txt')]);
  runPython([path.join(ext, 'scripts', 'unpack_lib.py'), out]);
}

/**
 * hatchling and its dependencies from locks/build.txt, installed (once per lock) into
 * python/.backend with pip's hash check; returns that folder.
 */
function lockedBackend() {
  const lockFile = path.join(repo, 'locks', 'build.txt');
  const lock = readFileSync(lockFile, 'utf8');
  const names = new Set(['hatchling', 'packaging', 'pathspec', 'pluggy', 'trove-classifiers', 'tomli']);
  const lines = lock.split('\n').filter(l => names.has(l.split(/[=\s;]/)[0]));
  if (!lines.some(l => l.startsWith('hatchling=='))) {
    console.error(`build-wheel: ${lockFile} holds no hatchling; write it with tools/lock.py`);
    process.exit(1);
  }
  const dir = path.join(out, '.backend');
  const want = createHash('sha256').update(lines.join('\n')).digest('hex');
  const stamp = path.join(dir, '.lock-stamp');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === want) return dir;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const requirements = path.join(dir, 'requirements.txt');
  writeFileSync(requirements, lines.join('\n') + '\n');
  runPython(['-m', 'pip', 'install', '--disable-pip-version-check', '--quiet', '--require-hashes', '--no-deps',
    '--only-binary=:all:', '--target', dir, '-r', requirements]);
  writeFileSync(stamp, want);
  return dir;
}

const sources = Math.max(newest(path.join(repo, 'src', 'lmbridge')), newest(path.join(repo, 'pyproject.toml')), newest(path.join(repo, 'README.md')));
const have = wheels();
if (have.length === 1 && statSync(path.join(out, have[0])).mtimeMs >= sources && !process.argv.includes('--force')) {
  console.log(`build-wheel: python/${have[0]} is up to date`);
  pinDeps();
  process.exit(0);
}
// only the old wheel goes: python/deps/ keeps the downloaded dependency wheels
for (const f of have) rmSync(path.join(out, f), { force: true });
mkdirSync(out, { recursive: true });
const backend = lockedBackend();
const args = ['-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '--disable-pip-version-check', '--quiet', '--wheel-dir', out, repo];
const r = spawnSync(python, args, { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, PYTHONPATH: backend } });
if (r.error || r.status !== 0) {
  console.error(`build-wheel: '${python} ${args.join(' ')}' failed${r.error ? `: ${r.error.message}` : ` (exit ${r.status})`}; set LMBRIDGE_PYTHON to a Python 3.10+ with pip`);
  process.exit(1);
}
const built = wheels();
if (built.length !== 1 || !/^lmbridge-.*\.whl$/.test(built[0])) {
  console.error(`build-wheel: expected one lmbridge wheel in ${out}, found: ${built.join(', ') || 'none'}`);
  process.exit(1);
}
console.log(`build-wheel: python/${built[0]}`);
pinDeps();
