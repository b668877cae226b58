// Unit tests of the Python decisions: which interpreter runs the host, what a failed start
// means, and the steps of "Create Python Environment".
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { classifyStartFailure, createEnvSteps, hostPython, pickWheel, StartFailure, venvDir, venvPython } from '../src/python';

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

test('the bundled wheel and the steps that install it', () => {
  assert.equal(pickWheel(['README', 'lmbridge-0.1.0-py3-none-any.whl', 'other-1.0-py3-none-any.whl']), 'lmbridge-0.1.0-py3-none-any.whl');
  assert.equal(pickWheel(['lmbridge-0.9.0-py3-none-any.whl', 'lmbridge-0.10.0-py3-none-any.whl']), 'lmbridge-0.10.0-py3-none-any.whl');
  assert.equal(pickWheel(['lmbridge.tar.gz']), undefined);
  const steps = createEnvSteps(['py', '-3'], '/s/venv', '/ext/python/lmbridge-0.1.0-py3-none-any.whl', 'linux');
  assert.deepEqual(steps.map(s => s.argv.slice(0, 5)), [
    ['py', '-3', '-m', 'venv', '/s/venv'],
    ['/s/venv/bin/python', '-m', 'pip', 'install', '--disable-pip-version-check'],
    ['/s/venv/bin/python', '-m', 'pip', 'install', '--disable-pip-version-check'],
    ['/s/venv/bin/python', '-c', steps[3].argv[2]],
  ]);
  assert.equal(steps[1].argv.at(-1), '/ext/python/lmbridge-0.1.0-py3-none-any.whl');
  // the second install replaces a same-version lmbridge with the bundled one, offline
  assert.deepEqual(steps[2].argv.slice(5), ['--force-reinstall', '--no-deps', '/ext/python/lmbridge-0.1.0-py3-none-any.whl']);
});
