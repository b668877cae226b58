// Which Python runs the host when lmbridge.pythonCommand is empty: the managed environment,
// the Python extension's interpreter, then python3, python, `py -3` on PATH, each asked for
// its version (3.10+). Fake probes for the order; real processes for the probe itself.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { findPython, Probe, probePython } from '../src/interpreter';

const PYTHON = process.env.LMBRIDGE_TEST_PYTHON || 'python3';

/** A probe that answers from a table (missing: not found) and records what was asked. */
function fakeProbe(table: Record<string, Probe>): { probe: (c: string) => Promise<Probe>; asked: string[] } {
  const asked: string[] = [];
  return { asked, probe: async (c) => { asked.push(c); return table[c] ?? { error: 'not found' }; } };
}

test('the setting and the managed environment are taken without asking anything', async () => {
  const { probe, asked } = fakeProbe({});
  let extensionAsked = false;
  const pythonExtension = async (): Promise<string> => { extensionAsked = true; return '/x/python'; };
  assert.deepEqual(await findPython({ setting: ' uv run python ', managed: '/s/venv/bin/python', probe, pythonExtension }), { command: 'uv run python', source: 'setting', tried: [] });
  assert.deepEqual(await findPython({ setting: '', managed: '/my s/venv/bin/python', probe, pythonExtension }), { command: '"/my s/venv/bin/python"', source: 'managed', tried: [] });
  assert.deepEqual(asked, []);
  assert.equal(extensionAsked, false);
});

test("the Python extension's interpreter comes before PATH, if it is 3.10+", async () => {
  const { probe, asked } = fakeProbe({ '/opt/py/bin/python': { version: [3, 12], executable: '/opt/py/bin/python' }, python3: { version: [3, 11], executable: '/usr/bin/python3.11' } });
  const found = await findPython({ setting: '', probe, pythonExtension: async () => '/opt/py/bin/python' });
  assert.deepEqual(found, { command: '/opt/py/bin/python', source: 'python-extension', tried: [], version: '3.12' });
  assert.deepEqual(asked, ['/opt/py/bin/python']);
  // too old, or failing: PATH's python3, by its own path
  const old = fakeProbe({ '/opt/py38/bin/python': { version: [3, 8], executable: '/opt/py38/bin/python' }, python3: { version: [3, 11], executable: '/usr/bin/python3.11' } });
  assert.deepEqual(await findPython({ setting: '', probe: old.probe, pythonExtension: async () => '/opt/py38/bin/python' }),
    { command: '/usr/bin/python3.11', source: 'default', tried: ['/opt/py38/bin/python (Python 3.8)'], version: '3.11' });
  const broken = await findPython({ setting: '', probe: old.probe, pythonExtension: async () => { throw new Error('activation failed'); } });
  assert.equal(broken.source, 'default');
});

test('PATH: python3, python, py -3 in order; the first 3.10+ wins; none: python3 with what was tried', async () => {
  const { probe, asked } = fakeProbe({ python3: { version: [3, 9], executable: '/usr/bin/python3' }, 'py -3': { version: [3, 13], executable: 'C:\\Python 313\\python.exe' } });
  assert.deepEqual(await findPython({ setting: '', probe }),
    { command: '"C:\\Python 313\\python.exe"', source: 'default', tried: ['python3 (Python 3.9)', 'python (not found)'], version: '3.13' });
  assert.deepEqual(asked, ['python3', 'python', 'py -3']);
  const none = await findPython({ setting: '', probe: fakeProbe({}).probe, platform: 'linux' });
  assert.deepEqual(none, { command: 'python3', source: 'default', tried: ['python3 (not found)', 'python (not found)', 'py -3 (not found)'] });
});

test('a real probe: a Python says its version and path; a missing command and a non-Python are no answer', async (t) => {
  const p = await probePython(PYTHON);
  assert.ok(p.version && p.version[0] === 3 && p.version[1] >= 10, JSON.stringify(p));
  assert.ok(p.executable && path.isAbsolute(p.executable), JSON.stringify(p));
  assert.deepEqual(await probePython('lmbridge-no-such-python'), { error: 'not found' });
  // a program that prints something else and fails, as the Windows Store's python3 stub does
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lmbridge-probe-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const stub = path.join(dir, 'python3');
  fs.writeFileSync(stub, '#!/bin/sh\necho "Python was not found; run without arguments to install from the Microsoft Store"\nexit 9\n', { mode: 0o755 });
  assert.deepEqual(await probePython(stub), { error: 'exit code 9' });
  // one that never answers is given up on
  const slow = path.join(dir, 'slow');
  fs.writeFileSync(slow, '#!/bin/sh\nsleep 30\n', { mode: 0o755 });
  assert.deepEqual(await probePython(slow, undefined, 300), { error: 'no answer in 0.3 s' });
});
