// Packages the platform-specific .vsix: the universal package's python/ (build-wheel.mjs) plus
// the compiled lmbridge and orjson for that platform (add_native.py), with `vsce package
// --target`. The compiled wheels come from the repository's dist/ (scripts/build-dist; one per
// Python version of the platform), or from $LMBRIDGE_DIST. Output: lmbridge-<target>.vsix, or
// the path given with `-o`. `npm run package` still makes the universal, pure-Python .vsix.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ext = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const repo = path.resolve(ext, '..');
const python = process.env.LMBRIDGE_PYTHON || (process.platform === 'win32' ? 'python' : 'python3');
const dist = path.resolve(process.env.LMBRIDGE_DIST || path.join(repo, 'dist'));

function run(cmd, args, capture = false) {
  const r = spawnSync(cmd, args, { cwd: ext, stdio: ['ignore', capture ? 'pipe' : 'inherit', 'inherit'], encoding: 'utf8', shell: process.platform === 'win32' });
  if (r.error || r.status !== 0) {
    console.error(`package-native: '${cmd} ${args.join(' ')}' failed${r.error ? `: ${r.error.message}` : ` (exit ${r.status})`}`);
    process.exit(1);
  }
  return r.stdout;
}

const o = process.argv.indexOf('-o');
run(process.execPath, [path.join(ext, 'scripts', 'build-wheel.mjs')]);
const target = run(python, [path.join(ext, 'scripts', 'add_native.py'), path.join(ext, 'python'), dist, path.join(repo, 'constraints.txt')], true).trim().split('\n').pop();
const out = o > 0 ? path.resolve(process.argv[o + 1]) : path.join(ext, `lmbridge-${target}.vsix`);
const bin = (name) => path.join(ext, 'node_modules', '.bin', name);
run(bin('tsc'), ['--noEmit', '-p', '.']);
run(bin('vsce'), ['package', '--no-dependencies', '--no-rewrite-relative-links', '--target', target, '-o', out]);
console.log(`package-native: ${path.relative(process.cwd(), out)} (${target})`);
