// Unit tests of the Python decisions: which interpreter runs the host, what a failed start
// means, the safe start line of the host, and the steps of "Create Python Environment".
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { classifyStartFailure, createEnvSteps, HOST_BOOTSTRAP, hostArgs, hostPython, pickWheel, StartFailure, venvDir, venvPython } from '../src/python';

test('the setting wins, then the managed environment, then python3', () => {
  assert.deepEqual(hostPython(' uv run python ', '/s/venv/bin/python', 'linux'), { command: 'uv run python', source: 'setting' });
  assert.deepEqual(hostPython('', '/s/venv/bin/python', 'linux'), { command: '/s/venv/bin/python', source: 'managed' });
  assert.deepEqual(hostPython('  ', '/my storage/venv/bin/python', 'linux'), { command: '"/my storage/venv/bin/python"', source: 'managed' });
  assert.deepEqual(hostPython('', undefined, 'linux'), { command: 'python3', source: 'default' });
  assert.deepEqual(hostPython('', undefined, 'win32'), { command: 'python', source: 'default' });
  assert.equal(venvPython(venvDir('/s'), 'linux'), '/s/venv/bin/python');
  assert.match(venvPython('C:\\s\\venv', 'win32'), /Scripts[\\/]python\.exe$/);
});

const failure = (f: Partial<StartFailure>): StartFailure => ({ command: 'python3', cwd: '/s', cwdExists: true, stderr: [], source: 'default', ...f });

test('ENOENT: a missing working folder and a missing Python are told apart', () => {
  const cwd = classifyStartFailure(failure({ spawnError: 'ENOENT', cwdExists: false }))!;
  assert.equal(cwd.kind, 'cwd-missing');
  assert.match(cwd.message, /working folder \/s does not exist/);
  const py = classifyStartFailure(failure({ spawnError: 'ENOENT' }))!;
  assert.equal(py.kind, 'python-missing');
  assert.match(py.message, /^Python was not found: cannot run 'python3'\. Install Python 3\.10 or newer .*'lmbridge: Create Python Environment'/);
  // the advice follows where the command came from
  assert.match(classifyStartFailure(failure({ spawnError: 'ENOENT', source: 'setting', command: 'uv' }))!.message, /Fix 'lmbridge\.pythonCommand'/);
  assert.match(classifyStartFailure(failure({ spawnError: 'ENOENT', source: 'managed' }))!.message, /is broken; run 'lmbridge: Create Python Environment' again/);
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
    ['py', '-3', '-m', 'venv', '/s/venv'],
    ['/s/venv/bin/python', '-m', 'pip', 'install', '--disable-pip-version-check', '--no-index', '--find-links', '/ext/python', '--find-links', '/ext/python/deps',
      '--require-hashes', '--force-reinstall', '-r', '/ext/python/requirements.txt'],
    ['/s/venv/bin/python', '-I', '-c', steps[2].argv[3]],
  ]);
  // nothing unpinned, nothing from an index
  assert.ok(steps.every(s => !s.argv.includes('--upgrade')));
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
