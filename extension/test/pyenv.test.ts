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
  const bundle = bundledPackages(EXT)!;
  const read = (file: string): string[] => fs.readFileSync(file, 'utf8').split('\n').filter(l => l && !l.startsWith('#'));
  const pins = [...read(bundle.requirements), ...(bundle.orjsonRequirements ? read(bundle.orjsonRequirements) : [])];
  assert.ok(pins.every(l => /( --hash=sha256:[0-9a-f]{64})+$/.test(l)), 'every pin has its hash');
  // a platform package (python/native/) installs its compiled build and orjson where a wheel is for this Python
  const native = bundle.wheelDirs.find(d => path.basename(d) === 'native');
  const tag = `cp${version.replace('.', '')}`;
  const fits = (name: string): boolean => native !== undefined && fs.readdirSync(native).some(f => f.startsWith(`${name}-`) && f.includes(`-${tag}-${tag}-`));
  for (const line of pins) {
    const m = /^([a-z0-9-]+)==(\S+)(?: ; python_version (<|>=) "(3\.\d+)")? --hash/.exec(line);
    assert.ok(m, `a pin this test can read: ${line}`);
    const minor = (v: string): number => Number(v.split('.')[1]);
    const applies = m[1] === 'orjson' ? fits('orjson') : !m[3] || (m[3] === '<' ? minor(version) < minor(m[4]) : minor(version) >= minor(m[4]));
    assert.equal(installed.get(m[1]), applies ? m[2] : undefined, `${m[1]} on Python ${version}`);
  }
  assert.ok(installed.has('lmbridge') && installed.has('httpx') && installed.has('h11'));
  const said = spawnSync(py, ['-I', '-m', 'lmbridge.compiled'], { encoding: 'utf8' }).stdout;
  assert.match(said, new RegExp(`^lmbridge build: ${fits('lmbridge') ? 'compiled' : 'pure Python'}; JSON: ${installed.has('orjson') ? 'orjson' : 'json'}`), said);
  assert.equal(lines.some(l => l.startsWith('orjson was not installed')), bundle.orjsonRequirements !== undefined && !installed.has('orjson'));
  // nothing else than the pins (and pip itself)
  const extra = [...installed.keys()].filter(n => n !== 'pip' && n !== 'setuptools' && !pins.some(l => l.startsWith(`${n}==`)));
  assert.deepEqual(extra, []);
  assert.ok(lines.some(l => l.includes('--no-index') && l.includes('--require-hashes')), lines.join('\n'));
  assert.ok(!lines.some(l => l.includes('--upgrade')));
});

test('a Python no bundled compiled or orjson wheel fits gets the pure lmbridge and no orjson, and the log says so', { skip: bundledPackages(EXT)?.orjsonRequirements ? false : 'python/ is not the platform package (npm run package:native)', timeout: 300000 }, async (t) => {
  // the platform package's python/ without this Python's wheels in native/: as a free-threaded
  // Python, or one of a version or architecture no bundled wheel is for, sees the package
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'lmbridge-nofit-'));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const ext = path.join(root, 'ext');
  fs.cpSync(path.join(EXT, 'python'), path.join(ext, 'python'), { recursive: true, filter: src => !['lib', 'native-deps'].includes(path.relative(path.join(EXT, 'python'), src).split(path.sep)[0]) });
  const version = spawnSync(PYTHON, ['-c', 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")'], { encoding: 'utf8' }).stdout.trim();
  const native = path.join(ext, 'python', 'native');
  for (const f of fs.readdirSync(native)) if (f.includes(`-cp${version}-`)) fs.rmSync(path.join(native, f));
  for (const k of ['PIP_INDEX_URL', 'HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) process.env[k] = 'http://127.0.0.1:9';
  lines.length = 0;
  const py = await createPythonEnvironment({ storagePath: path.join(root, 'storage'), extensionPath: ext, basePython: PYTHON, log });
  const said = spawnSync(py, ['-I', '-m', 'lmbridge.compiled'], { encoding: 'utf8' }).stdout;
  assert.match(said, /^lmbridge build: pure Python; JSON: json/, said);
  assert.ok(lines.some(l => /^orjson was not installed; JSON uses the standard library \(pip exited with code \d+\)$/.test(l)), lines.join('\n'));
  assert.ok(lines.includes(`the Python environment is ready: ${py}`));
});

test('the platform-specific package adds python/native/ to the folders pip finds wheels in, and its orjson pins', (t) => {
  const ext = fs.mkdtempSync(path.join(os.tmpdir(), 'lmbridge-ext-'));
  t.after(() => fs.rmSync(ext, { recursive: true, force: true }));
  const dir = path.join(ext, 'python');
  fs.mkdirSync(path.join(dir, 'deps'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'lmbridge-0.1.0-py3-none-any.whl'), '');
  fs.writeFileSync(path.join(dir, 'requirements.txt'), '');
  assert.deepEqual(bundledPackages(ext), { wheel: path.join(dir, 'lmbridge-0.1.0-py3-none-any.whl'), requirements: path.join(dir, 'requirements.txt'), wheelDirs: [dir, path.join(dir, 'deps')] });
  fs.mkdirSync(path.join(dir, 'native'));
  assert.deepEqual(bundledPackages(ext)?.wheelDirs, [dir, path.join(dir, 'deps'), path.join(dir, 'native')]);
  assert.equal(bundledPackages(ext)?.orjsonRequirements, undefined);
  fs.writeFileSync(path.join(dir, 'native', 'orjson-requirements.txt'), '');
  assert.equal(bundledPackages(ext)?.orjsonRequirements, path.join(dir, 'native', 'orjson-requirements.txt'));
});

// The steps run as real processes by a stand-in Python: `-m venv DIR` makes DIR/bin/python, which
// records its arguments and fails (as pip does when no wheel fits) when given $FAKE_PIP_FAIL.
test('a failing optional step is logged and the environment still made; a failing required step fails the command', { skip: process.platform === 'win32' ? 'the stand-in Python is a shell script' : false }, async (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'lmbridge-steps-'));
  t.after(() => { fs.rmSync(root, { recursive: true, force: true }); delete process.env.FAKE_PIP_FAIL; });
  const record = path.join(root, 'ran.txt');
  const venvPy = path.join(root, 'venv-python');
  fs.writeFileSync(venvPy, `#!/bin/sh\necho "$*" >> '${record}'\nfor a in "$@"; do if [ "$a" = "$FAKE_PIP_FAIL" ]; then echo "ERROR: No matching distribution found for orjson==3.13.0" >&2; exit 1; fi; done\n`, { mode: 0o755 });
  const base = path.join(root, 'base-python');
  // `-I -m venv <dir>`: the folder is the last argument
  fs.writeFileSync(base, `#!/bin/sh\nfor dir; do :; done\nmkdir -p "$dir/bin" && cp '${venvPy}' "$dir/bin/python"\n`, { mode: 0o755 });
  const ext = path.join(root, 'ext');
  const dir = path.join(ext, 'python');
  fs.mkdirSync(path.join(dir, 'native'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'lmbridge-0.1.0-py3-none-any.whl'), '');
  const requirements = path.join(dir, 'requirements.txt');
  const orjson = path.join(dir, 'native', 'orjson-requirements.txt');
  fs.writeFileSync(requirements, '');
  fs.writeFileSync(orjson, '');
  const ran = (): string[] => fs.readFileSync(record, 'utf8').trim().split('\n');

  // orjson's install fails: logged, and the command goes on and returns the environment
  lines.length = 0;
  process.env.FAKE_PIP_FAIL = orjson;
  const py = await createPythonEnvironment({ storagePath: path.join(root, 's1'), extensionPath: ext, basePython: base, log });
  assert.equal(py, path.join(root, 's1', 'venv', 'bin', 'python'));
  assert.equal(ran().length, 3);
  assert.ok(ran()[0].endsWith(`--require-hashes --force-reinstall -r ${requirements}`), ran()[0]);
  assert.ok(ran()[1].endsWith(`--require-hashes --force-reinstall -r ${orjson}`), ran()[1]);
  assert.match(ran()[2], /^-I -c import lmbridge/);
  assert.ok(lines.includes('orjson was not installed; JSON uses the standard library (pip exited with code 1)'), lines.join('\n'));
  assert.ok(lines.some(l => l.includes('No matching distribution found for orjson')), 'pip\'s own words are in the log');
  assert.ok(lines.includes(`the Python environment is ready: ${py}`));

  // lmbridge's install fails: the command fails, saying so, and goes no further
  fs.rmSync(record);
  process.env.FAKE_PIP_FAIL = requirements;
  await assert.rejects(createPythonEnvironment({ storagePath: path.join(root, 's2'), extensionPath: ext, basePython: base, log }),
    /installing lmbridge and its pinned dependencies from the extension's own wheels failed/);
  assert.equal(ran().length, 1);

  // with no orjson pins (the universal package) there is no orjson step
  fs.rmSync(record);
  fs.rmSync(orjson);
  delete process.env.FAKE_PIP_FAIL;
  await createPythonEnvironment({ storagePath: path.join(root, 's3'), extensionPath: ext, basePython: base, log });
  assert.deepEqual(ran().map(l => l.startsWith('-I -m pip install')), [true, false]);
});
