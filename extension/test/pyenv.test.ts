// "Create Python Environment" for real: the package's python/ folder (made by
// `npm run wheel`: the lmbridge wheel, the dependency wheels, requirements.txt) installed by
// createPythonEnvironment into a new virtual environment, with every package index and proxy
// pointing at a closed port, so that anything not shipped would fail. Python:
// $LMBRIDGE_TEST_PYTHON, else python3. Skipped when the package's python/ folder is not built.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import type { Log } from '../src/host';
import { bundledPackages, createPythonEnvironment } from '../src/pyenv';

const EXT = path.resolve(__dirname, '..');
const PYTHON = process.env.LMBRIDGE_TEST_PYTHON || 'python3';
const lines: string[] = [];
const log: Log = { trace: l => lines.push(l), debug: l => lines.push(l), info: l => lines.push(l), warn: l => lines.push(l), error: l => lines.push(l), appendLine: l => lines.push(l) };

test('the environment gets exactly the pinned versions, offline', { skip: bundledPackages(EXT) ? false : 'python/ is not built (npm run wheel)', timeout: 300000 }, async (t) => {
  const storage = fs.mkdtempSync(path.join(os.tmpdir(), 'lmbridge-env-'));
  t.after(() => fs.rmSync(storage, { recursive: true, force: true }));
  const closed = 'http://127.0.0.1:9';
  for (const k of ['PIP_INDEX_URL', 'HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) process.env[k] = closed;
  const py = await createPythonEnvironment({ storagePath: storage, extensionPath: EXT, basePython: PYTHON, log });
  // what pip installed, against what requirements.txt pins for this Python
  const list = spawnSync(py, ['-m', 'pip', 'list', '--format=json', '--disable-pip-version-check'], { encoding: 'utf8' });
  const installed = new Map((JSON.parse(list.stdout) as { name: string; version: string }[]).map(p => [p.name.toLowerCase().replace(/_/g, '-'), p.version]));
  const version = spawnSync(py, ['-c', 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")'], { encoding: 'utf8' }).stdout.trim();
  const pins = fs.readFileSync(path.join(EXT, 'python', 'requirements.txt'), 'utf8').split('\n').filter(l => l && !l.startsWith('#'));
  assert.ok(pins.every(l => /( --hash=sha256:[0-9a-f]{64})+$/.test(l)), 'every pin has its hash');
  for (const line of pins) {
    // a backport's marker (pin_deps.py), or the Pythons a platform package has orjson for (add_native.py)
    const m = /^([a-z0-9-]+)==(\S+)(?: ; (?:python_version (<|>=) "(3\.\d+)"|platform_python_implementation == "CPython" and \((.+)\)))? --hash/.exec(line);
    assert.ok(m, `a pin this test can read: ${line}`);
    const minor = (v: string): number => Number(v.split('.')[1]);
    const applies = m[5] ? m[5].includes(`"${version}"`) : !m[3] || (m[3] === '<' ? minor(version) < minor(m[4]) : minor(version) >= minor(m[4]));
    assert.equal(installed.get(m[1]), applies ? m[2] : undefined, `${m[1]} on Python ${version}`);
  }
  assert.ok(installed.has('lmbridge') && installed.has('httpx') && installed.has('h11'));
  // a platform package (python/native/) installs its compiled build where a wheel is for this Python
  const native = bundledPackages(EXT)!.wheelDirs.find(d => path.basename(d) === 'native');
  const tag = `cp${version.replace('.', '')}`;
  const compiled = native !== undefined && fs.readdirSync(native).some(f => f.startsWith('lmbridge-') && f.includes(`-${tag}-${tag}-`));
  const said = spawnSync(py, ['-I', '-m', 'lmbridge.compiled'], { encoding: 'utf8' }).stdout;
  assert.match(said, new RegExp(`^lmbridge build: ${compiled ? 'compiled' : 'pure Python'}; JSON: ${installed.has('orjson') ? 'orjson' : 'json'}`), said);
  // nothing else than the pins (and pip itself)
  const extra = [...installed.keys()].filter(n => n !== 'pip' && n !== 'setuptools' && !pins.some(l => l.startsWith(`${n}==`)));
  assert.deepEqual(extra, []);
  assert.ok(lines.some(l => l.includes('--no-index') && l.includes('--require-hashes')), lines.join('\n'));
  assert.ok(!lines.some(l => l.includes('--upgrade')));
});

test('the platform-specific package adds python/native/ to the folders pip finds wheels in', (t) => {
  const ext = fs.mkdtempSync(path.join(os.tmpdir(), 'lmbridge-ext-'));
  t.after(() => fs.rmSync(ext, { recursive: true, force: true }));
  const dir = path.join(ext, 'python');
  fs.mkdirSync(path.join(dir, 'deps'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'lmbridge-0.1.0-py3-none-any.whl'), '');
  fs.writeFileSync(path.join(dir, 'requirements.txt'), '');
  assert.deepEqual(bundledPackages(ext)?.wheelDirs, [dir, path.join(dir, 'deps')]);
  fs.mkdirSync(path.join(dir, 'native'));
  assert.deepEqual(bundledPackages(ext)?.wheelDirs, [dir, path.join(dir, 'deps'), path.join(dir, 'native')]);
  assert.equal(bundledPackages(ext)?.wheel, path.join(dir, 'lmbridge-0.1.0-py3-none-any.whl'));
});
