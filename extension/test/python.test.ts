// Unit tests of the Python decisions: which interpreter runs the host, what a failed start
// means, the safe start line of the host, and the steps of "Create Python Environment".
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { bundledLib, classifyStartFailure, createEnvSteps, HOST_BOOTSTRAP, hostArgs, parseProbe, pickWheel, problemActions, pythonExtensionAllowed, recentEnough, StartFailure, venvDir, venvPython } from '../src/python';

test('the managed environment\'s interpreter', () => {
  assert.equal(venvPython(venvDir('/s'), 'linux'), '/s/venv/bin/python');
  assert.match(venvPython('C:\\s\\venv', 'win32'), /Scripts[\\/]python\.exe$/);
});

const failure = (f: Partial<StartFailure>): StartFailure => ({ command: 'python3', cwd: '/s', cwdExists: true, stderr: [], source: 'default', ...f });

test('ENOENT: a missing working folder and a missing Python are told apart', () => {
  const cwd = classifyStartFailure(failure({ spawnError: 'ENOENT', cwdExists: false }))!;
  assert.equal(cwd.kind, 'cwd-missing');
  assert.match(cwd.message, /working folder \/s does not exist/);
  const py = classifyStartFailure(failure({ spawnError: 'ENOENT', tried: ['python3 (not found)', 'py -3 (not found)'] }))!;
  assert.equal(py.kind, 'python-missing');
  assert.equal(py.message, "No Python 3.10 or newer was found (tried: python3 (not found), py -3 (not found)). Install Python from https://www.python.org/downloads/; lmbridge then runs with it, nothing else to install. Or set 'lmbridge.pythonCommand' to a Python 3.10+ interpreter.");
  assert.deepEqual(problemActions(py), ['Install Python', 'Open Settings', 'Show Log']);
  // the advice follows where the command came from
  const setting = classifyStartFailure(failure({ spawnError: 'ENOENT', source: 'setting', command: 'uv' }))!;
  assert.match(setting.message, /^Python was not found: cannot run 'uv'\. Fix 'lmbridge\.pythonCommand'/);
  assert.deepEqual(problemActions(setting), ['Install Python', 'Open Settings', 'Show Log']);
  assert.deepEqual(problemActions(classifyStartFailure(failure({ spawnError: 'ENOENT', source: 'managed' }))!), ['Create Python Environment', 'Show Log']);
  assert.deepEqual(problemActions(classifyStartFailure(failure({ spawnError: 'ENOENT', cwdExists: false }))!), ['Show Log']);
  assert.match(classifyStartFailure(failure({ spawnError: 'ENOENT', source: 'managed' }))!.message, /is broken; run 'lmbridge: Create Python Environment' again/);
});

test('a Python older than 3.10 is told by the start line, and classified as no usable Python', () => {
  const said = 'lmbridge needs Python 3.10 or newer; /usr/bin/python3 is Python 3.8.10';
  const p = classifyStartFailure(failure({ stderr: [said], tried: ['python (not found)'] }))!;
  assert.equal(p.kind, 'python-missing');
  assert.match(p.message, /^No Python 3\.10 or newer was found \(tried: python \(not found\)\); \/usr\/bin\/python3 is Python 3\.8\.10\. Install Python from https:\/\/www\.python\.org\/downloads\//);
  const s = classifyStartFailure(failure({ stderr: [said], source: 'setting', command: '/opt/py38/bin/python' }))!;
  assert.match(s.message, /^lmbridge needs Python 3\.10 or newer; \/usr\/bin\/python3 is Python 3\.8\.10\. Set 'lmbridge\.pythonCommand'/);
});

test('No module named lmbridge means the package is missing', () => {
  const p = classifyStartFailure(failure({ stderr: ['/usr/bin/python3: No module named lmbridge'] }))!;
  assert.equal(p.kind, 'lmbridge-missing');
  assert.match(p.message, /'python3' has no lmbridge package.*Run the command 'lmbridge: Create Python Environment'/);
  assert.equal(classifyStartFailure(failure({ stderr: ["python: No module named 'lmbridge.__main__'"] }))?.kind, 'lmbridge-missing');
  // a host that failed for another reason is no known problem: its own output says more
  assert.equal(classifyStartFailure(failure({ stderr: ['Traceback ...', 'ValueError: boom'] })), undefined);
  assert.equal(classifyStartFailure(failure({ spawnError: 'EACCES' }))?.kind, 'cannot-run');
});

test('the bundled wheel and the steps that install it: offline, pinned, hash-checked', () => {
  assert.equal(pickWheel(['README', 'lmbridge-0.1.0-py3-none-any.whl', 'other-1.0-py3-none-any.whl']), 'lmbridge-0.1.0-py3-none-any.whl');
  assert.equal(pickWheel(['lmbridge-0.9.0-py3-none-any.whl', 'lmbridge-0.10.0-py3-none-any.whl']), 'lmbridge-0.10.0-py3-none-any.whl');
  assert.equal(pickWheel(['lmbridge.tar.gz']), undefined);
  const steps = createEnvSteps(['py', '-3'], '/s/venv', { requirements: '/ext/python/requirements.txt', wheelDirs: ['/ext/python', '/ext/python/deps'] }, 'linux');
  assert.deepEqual(steps.map(s => s.argv), [
    ['py', '-3', '-I', '-m', 'venv', '/s/venv'],
    ['/s/venv/bin/python', '-I', '-m', 'pip', 'install', '--disable-pip-version-check', '--no-index', '--find-links', '/ext/python', '--find-links', '/ext/python/deps',
      '--require-hashes', '--force-reinstall', '-r', '/ext/python/requirements.txt'],
    ['/s/venv/bin/python', '-I', '-c', steps[2].argv[3]],
  ]);
  // nothing unpinned, nothing from an index
  assert.ok(steps.every(s => !s.argv.includes('--upgrade')));
});

test('creating the environment runs isolated: a venv or pip module in the working folder never runs', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lmbridge-planted-venv-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const marker = path.join(dir, 'ran');
  for (const name of ['venv', 'pip', 'ensurepip']) {
    fs.writeFileSync(path.join(dir, `${name}.py`), `open(${JSON.stringify(marker)}, 'a').write(${JSON.stringify(name + ' ')})\nraise SystemExit(0)\n`);
  }
  const python = interpreters()[0];
  const steps = createEnvSteps([python], path.join(dir, 'env'), { requirements: path.join(dir, 'none.txt'), wheelDirs: [] });
  // the real first step (a real environment is made), then the install step's interpreter and
  // module, run for its version only
  const made = spawnSync(steps[0].argv[0], steps[0].argv.slice(1), { cwd: dir, env: { ...process.env, PYTHONPATH: '' }, encoding: 'utf8', timeout: 120000 });
  assert.equal(made.status, 0, made.stderr);
  const pip = steps[1].argv.slice(0, steps[1].argv.indexOf('install'));
  const r = spawnSync(pip[0], [...pip.slice(1), '--version'], { cwd: dir, env: { ...process.env, PYTHONPATH: '' }, encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^pip /);
  assert.ok(!fs.existsSync(marker), `ran: ${fs.existsSync(marker) ? fs.readFileSync(marker, 'utf8') : ''}`);
});

test('a platform package with orjson pinned gets an optional step that installs it the same way, after lmbridge', () => {
  const bundle = { requirements: '/ext/python/requirements.txt', wheelDirs: ['/ext/python', '/ext/python/deps', '/ext/python/native'] };
  const plain = createEnvSteps(['python3'], '/s/venv', bundle, 'linux');
  assert.deepEqual(plain.map(s => s.title), ['creating the virtual environment', 'installing lmbridge', 'checking the installation']);
  assert.ok(plain.every(s => s.optional === undefined));
  const steps = createEnvSteps(['python3'], '/s/venv', { ...bundle, orjsonRequirements: '/ext/python/native/orjson-requirements.txt' }, 'linux');
  assert.deepEqual(steps.map(s => s.title), ['creating the virtual environment', 'installing lmbridge', 'installing orjson (optional)', 'checking the installation']);
  assert.deepEqual(steps.map(s => s.optional !== undefined), [false, false, true, false]);
  assert.deepEqual(steps[2].argv, [...steps[1].argv.slice(0, -1), '/ext/python/native/orjson-requirements.txt']);
  assert.ok(['--no-index', '--require-hashes', '--find-links'].every(a => steps[2].argv.includes(a)));
  assert.equal(steps[2].argv.filter(a => a === '/ext/python/native').length, 1);
  assert.match(steps[2].optional!.ifFailed, /orjson was not installed; JSON uses the standard library/);
});

// The host's start line run by a real Python: a folder named `lmbridge` in its working folder
// (the extension's storage folder) must not be imported, however the path gets there.
const PYTHON = process.env.LMBRIDGE_TEST_PYTHON || 'python3';
function startIn(cwd: string, env: NodeJS.ProcessEnv = {}): { status: number | null; stderr: string } {
  const r = spawnSync(PYTHON, hostArgs(), { cwd, env: { ...process.env, ...env, PYTHONPATH: env.PYTHONPATH ?? '' }, input: '', encoding: 'utf8', timeout: 60000 });
  return { status: r.status, stderr: r.stderr };
}

test('the host starts without its working folder on sys.path; without lmbridge it says so as python -m does', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lmbridge-safe-path-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const marker = path.join(dir, 'imported');
  // a planted package that would leave a marker and stop if it were imported
  fs.mkdirSync(path.join(dir, 'lmbridge'));
  fs.writeFileSync(path.join(dir, 'lmbridge', '__init__.py'), `open(${JSON.stringify(marker)}, 'w').close()\nraise SystemExit('planted lmbridge imported')\n`);
  fs.writeFileSync(path.join(dir, 'lmbridge', 'cli.py'), `open(${JSON.stringify(marker)}, 'w').close()\n`);
  for (const pythonpath of ['', '.', dir]) {
    const r = startIn(dir, { PYTHONPATH: pythonpath });
    assert.ok(!fs.existsSync(marker), `PYTHONPATH=${pythonpath}: the planted package was imported: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /planted/);
    if (/No module named lmbridge/.test(r.stderr)) {
      // a Python without lmbridge: the same words as `python -m lmbridge`, classified as before
      assert.equal(r.status, 1);
      const problem = classifyStartFailure(failure({ stderr: r.stderr.split('\n') }));
      assert.equal(problem?.kind, 'lmbridge-missing');
    } else {
      // a Python with lmbridge installed: the real host ran and ended with its input
      assert.equal(r.status, 0, r.stderr);
    }
  }
  assert.ok(HOST_BOOTSTRAP.includes("main(['host'])") && !HOST_BOOTSTRAP.includes('"'));
});

/**
 * The interpreters to try the start line with: $LMBRIDGE_TEST_PYTHON or python3, and each 3.10+
 * found as python3.1x or in pyenv's versions folder (their startups load different modules).
 */
function interpreters(): string[] {
  const found = new Set<string>();
  const pyenv = path.join(process.env.PYENV_ROOT || path.join(os.homedir(), '.pyenv'), 'versions');
  const versions = fs.existsSync(pyenv) ? fs.readdirSync(pyenv).filter(v => /^3\.1\d+\./.test(v)).map(v => path.join(pyenv, v, 'bin', 'python3')) : [];
  for (const cmd of [PYTHON, 'python3.10', 'python3.12', 'python3.13', ...versions]) {
    const r = spawnSync(cmd, ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8', timeout: 30000, cwd: os.tmpdir() });
    if (r.status === 0 && r.stdout.trim()) found.add(r.stdout.trim());
  }
  return [...found];
}

test('the first statement cleans sys.path: a standard module planted in the working folder never runs', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lmbridge-planted-std-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const marker = path.join(dir, 'ran');
  // the standard modules the start line (or what it imports) loads first; Python's own startup
  // has loaded some of them already, which differs between versions
  for (const name of ['importlib', 'types', 'warnings', 'enum', 'functools', 'collections', 're', 'json', 'contextlib', 'email', 'zipfile', 'pathlib', 'csv']) {
    fs.writeFileSync(path.join(dir, `${name}.py`), `open(${JSON.stringify(marker)}, 'a').write(${JSON.stringify(name + ' ')})\n`);
  }
  const pythons = interpreters();
  assert.ok(pythons.length > 0);
  for (const python of pythons) {
    const r = spawnSync(python, hostArgs(), { cwd: dir, env: { ...process.env, PYTHONPATH: '' }, input: '', encoding: 'utf8', timeout: 60000 });
    assert.ok(!fs.existsSync(marker), `${python}: ran ${fs.existsSync(marker) ? fs.readFileSync(marker, 'utf8') : ''}: ${r.stderr}`);
  }
  assert.match(HOST_BOOTSTRAP, /^import sys; here = [^;]*; sys\.path\[:\] = /);
});

test('the library folder shipped in the extension goes first on sys.path, the working folder still never', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lmbridge-lib-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cwd = path.join(dir, 'storage');
  const lib = path.join(dir, 'ext', 'python', 'lib');
  const marker = path.join(dir, 'ran-from-lib');
  // the working folder holds a planted package, the library folder a stand-in lmbridge whose
  // `main` records which folder it ran from and what was on sys.path
  fs.mkdirSync(path.join(cwd, 'lmbridge'), { recursive: true });
  fs.writeFileSync(path.join(cwd, 'lmbridge', '__init__.py'), "raise SystemExit('planted lmbridge imported')\n");
  fs.mkdirSync(path.join(lib, 'lmbridge'), { recursive: true });
  fs.writeFileSync(path.join(lib, 'lmbridge', '__init__.py'), '');
  fs.writeFileSync(path.join(lib, 'lmbridge', 'cli.py'),
    `import json, sys\ndef main(argv):\n    open(${JSON.stringify(marker)}, 'w').write(json.dumps({'argv': argv, 'path': sys.path, 'sysargv': sys.argv}))\n    return 0\n`);
  assert.equal(bundledLib(path.join(dir, 'ext')), lib);
  const r = spawnSync(PYTHON, hostArgs(lib), { cwd, env: { ...process.env, PYTHONPATH: '.' }, input: '', encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 0, r.stderr);
  const seen = JSON.parse(fs.readFileSync(marker, 'utf8')) as { argv: string[]; path: string[]; sysargv: string[] };
  assert.deepEqual(seen.argv, ['host']);
  assert.equal(seen.path[0], lib);
  assert.ok(!seen.path.some(p => p === '' || p === '.' || path.resolve(p) === fs.realpathSync(cwd)), seen.path.join('\n'));
  // the library folder is not left as an argument for the host to read
  assert.deepEqual(seen.sysargv, ['-c']);
  assert.deepEqual(hostArgs(), ['-c', HOST_BOOTSTRAP]);
});

test('an installed compiled lmbridge of exactly the extension\'s version runs instead of the bundled one', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lmbridge-compiled-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cwd = path.join(dir, 'storage');
  fs.mkdirSync(cwd);
  // two stand-in lmbridge packages whose `main` records which one ran: the bundled one, and one
  // installed in a site folder with its metadata (version, and a RECORD naming its files)
  const standIn = (root: string, name: string): void => {
    fs.mkdirSync(path.join(root, 'lmbridge'), { recursive: true });
    fs.writeFileSync(path.join(root, 'lmbridge', '__init__.py'), '');
    fs.writeFileSync(path.join(root, 'lmbridge', 'cli.py'),
      `import json, sys\ndef main(argv):\n    open(${JSON.stringify(path.join(dir, 'ran'))}, 'w').write(json.dumps({'ran': ${JSON.stringify(name)}, 'path': sys.path, 'metadata': 'importlib.metadata' in sys.modules}))\n    return 0\n`);
  };
  const lib = path.join(dir, 'ext', 'python', 'lib');
  standIn(lib, 'bundled');
  const site = path.join(dir, 'site');
  standIn(site, 'installed');
  const install = (version: string, compiled: boolean): void => {
    const info = path.join(site, 'lmbridge-0.0.0.dist-info');
    fs.rmSync(info, { recursive: true, force: true });
    fs.mkdirSync(info);
    fs.writeFileSync(path.join(info, 'METADATA'), `Metadata-Version: 2.1\nName: lmbridge\nVersion: ${version}\n`);
    const ext = compiled ? 'lmbridge/sse.cpython-311-x86_64-linux-gnu.so,,\n' : 'lmbridge/sse.py,,\n';
    fs.writeFileSync(path.join(info, 'RECORD'), `lmbridge/__init__.py,,\nlmbridge/cli.py,,\n${ext}lmbridge-0.0.0.dist-info/RECORD,,\n`);
  };
  const run = (version?: string): { ran: string; path: string[]; metadata: boolean } => {
    fs.rmSync(path.join(dir, 'ran'), { force: true });
    const r = spawnSync(PYTHON, hostArgs(lib, version), { cwd, env: { ...process.env, PYTHONPATH: site }, input: '', encoding: 'utf8', timeout: 60000 });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(fs.readFileSync(path.join(dir, 'ran'), 'utf8')) as { ran: string; path: string[]; metadata: boolean };
  };
  install('1.2.3', true);
  const fast = run('1.2.3');
  assert.equal(fast.ran, 'installed');
  assert.equal(fast.path[fast.path.length - 1], lib); // the bundled dependencies still there, last
  // read without importlib.metadata, whose import every start would pay (docs/benchmarks/startup.md)
  assert.equal(fast.metadata, false);
  assert.equal(run('1.2.4').ran, 'bundled'); // another version: never mixed with this extension
  assert.equal(run().ran, 'bundled'); // no version given
  install('1.2.3', false);
  assert.equal(run('1.2.3').ran, 'bundled'); // the same version, pure Python: the bundled one
  assert.ok(!HOST_BOOTSTRAP.includes('"'));
  assert.deepEqual(hostArgs(lib, '1.2.3'), ['-c', HOST_BOOTSTRAP, lib, '1.2.3']);
});

test('probe answers and versions: 3.10 is the oldest Python the host runs on', () => {
  assert.deepEqual(parseProbe('3 12 /usr/bin/python3.12\n'), { major: 3, minor: 12, executable: '/usr/bin/python3.12' });
  assert.deepEqual(parseProbe('3 11 C:\\Program Files\\Python311\\python.exe\r\n'), { major: 3, minor: 11, executable: 'C:\\Program Files\\Python311\\python.exe' });
  assert.equal(parseProbe('Python was not found; run without arguments to install from the Microsoft Store'), undefined);
  assert.ok(recentEnough(3, 10) && recentEnough(3, 14) && recentEnough(4, 0));
  assert.ok(!recentEnough(3, 9) && !recentEnough(2, 7));
});

test("the Python extension's interpreter is not used when a workspace could have chosen it", () => {
  assert.deepEqual(pythonExtensionAllowed('/usr/bin/python3', ['/home/u/repo'], false, 'linux'), { ok: true });
  assert.deepEqual(pythonExtensionAllowed('/home/u/.venvs/a/bin/python', ['/home/u/repo'], false, 'linux'), { ok: true });
  assert.equal(pythonExtensionAllowed('/home/u/repo/.venv/bin/python', ['/home/u/repo'], false, 'linux').ok, false);
  assert.match(pythonExtensionAllowed('/home/u/repo/.venv/bin/python', ['/home/u/repo'], false, 'linux').why!, /inside the workspace folder \/home\/u\/repo/);
  // a sibling folder whose name starts like the workspace's is outside it
  assert.equal(pythonExtensionAllowed('/home/u/repo2/bin/python', ['/home/u/repo'], false, 'linux').ok, true);
  assert.equal(pythonExtensionAllowed('C:\\repo\\.venv\\Scripts\\python.exe', ['c:\\repo'], false, 'win32').ok, false);
  assert.match(pythonExtensionAllowed('/usr/bin/python3', [], true, 'linux').why!, /python\.defaultInterpreterPath/);
});

test("the interpreter check resolves links and ignores case where the file system does", (t) => {
  // case: macOS and Windows file systems take /Users/u/Repo and /users/u/repo for the same folder
  assert.equal(pythonExtensionAllowed('/Users/u/Repo/.venv/bin/python', ['/users/u/repo'], false, 'darwin').ok, false);
  assert.equal(pythonExtensionAllowed('C:\\Repo\\.venv\\Scripts\\python.exe', ['c:\\REPO'], false, 'win32').ok, false);
  assert.equal(pythonExtensionAllowed('/home/u/Repo/.venv/bin/python', ['/home/u/repo'], false, 'linux').ok, true);
  // links, on a real file system: the workspace opened through a link, the environment through another
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'lmbridge-links-')));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const repo = path.join(dir, 'repo');
  fs.mkdirSync(path.join(repo, '.venv', 'bin'), { recursive: true });
  fs.writeFileSync(path.join(repo, '.venv', 'bin', 'python'), '');
  fs.symlinkSync(repo, path.join(dir, 'opened'));
  fs.symlinkSync(path.join(repo, '.venv'), path.join(dir, 'env'));
  const real = (p: string): string => fs.realpathSync.native(p);
  assert.equal(pythonExtensionAllowed(path.join(repo, '.venv', 'bin', 'python'), [path.join(dir, 'opened')], false, 'linux', real).ok, false);
  assert.equal(pythonExtensionAllowed(path.join(dir, 'env', 'bin', 'python'), [repo], false, 'linux', real).ok, false);
  // an interpreter that is a link to a system Python: its environment still counts, not the target
  fs.rmSync(path.join(repo, '.venv', 'bin', 'python'));
  fs.symlinkSync(process.execPath, path.join(repo, '.venv', 'bin', 'python'));
  assert.equal(pythonExtensionAllowed(path.join(repo, '.venv', 'bin', 'python'), [repo], false, 'linux', real).ok, false);
  assert.equal(pythonExtensionAllowed(process.execPath, [repo], false, 'linux', real).ok, true);
});
