// Unit tests of the output routing: a problem the host reports on stderr and as a `log`
// notification, and the extension from the configure result, is shown once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HostLog, providerProblem } from '../src/hostlog';
import type { Log } from '../src/host';

function memory(): Log & { lines: [string, string][] } {
  const lines: [string, string][] = [];
  const add = (lv: string) => (m: string) => { lines.push([lv, m]); };
  return { lines, trace: add('trace'), debug: add('debug'), info: add('info'), warn: add('warn'), error: add('error'), appendLine: add('line') };
}
const visible = (log: { lines: [string, string][] }): [string, string][] => log.lines.filter(([lv]) => lv !== 'debug');
const BAD = { name: 'oai', ok: false, error: "providers[0] ('oai').format: unknown format 'x'" };
const MSG = providerProblem(BAD);
const STDERR = `2025-01-02 03:04:05,678 ERROR lmbridge.host: ${MSG}`;

test('the host names providers as Python does', () => {
  assert.equal(providerProblem({ name: 'a', ok: false, error: 'e' }), "provider 'a' is not available: e");
  assert.equal(providerProblem({ name: "it's", ok: false, error: 'e' }), 'provider "it\'s" is not available: e');
});

for (const order of ['stderr first', 'notification first']) {
  test(`a provider problem is shown once (${order}), and not again on the next configure`, () => {
    let t = 0;
    const log = memory();
    const h = new HostLog(log, () => t);
    if (order === 'stderr first') { h.stderr(STDERR); h.notification('error', MSG); } else { h.notification('error', MSG); h.stderr(STDERR); }
    h.providers([BAD, { name: 'ok', ok: true }]);
    t += 60000;
    h.providers([BAD]); // configure re-sent for another setting
    assert.equal(visible(log).length, 1, JSON.stringify(log.lines));
    assert.equal(visible(log)[0][0], 'error');
    assert.ok(log.lines.some(([lv, m]) => lv === 'debug' && m.includes(MSG)));
  });
}

test('a changed, fixed and broken-again provider is reported each time', () => {
  let t = 0;
  const log = memory();
  const h = new HostLog(log, () => t);
  h.providers([BAD]);
  t += 60000;
  h.providers([{ ...BAD, error: 'another problem' }]);
  t += 60000;
  h.providers([{ name: 'oai', ok: true }]);
  t += 60000;
  h.providers([BAD]);
  assert.deepEqual(visible(log).map(l => l[1]), [MSG, "provider 'oai' is not available: another problem", MSG]);
});

test('stderr lines keep their level; a traceback follows its header', () => {
  const log = memory();
  const h = new HostLog(log);
  h.stderr('2025-01-02 03:04:05,678 INFO lmbridge.host: providers ready: echo');
  h.stderr('2025-01-02 03:04:05,679 WARNING lmbridge.gateway: slow upstream');
  h.stderr('2025-01-02 03:04:05,680 ERROR lmbridge.host: chat/response 3 failed');
  h.stderr('Traceback (most recent call last):');
  h.stderr('2025-01-02 03:04:05,681 DEBUG lmbridge.host: body');
  h.stderr('/usr/bin/python3: No module named lmbridge');
  assert.deepEqual(log.lines.map(l => l[0]), ['line', 'warn', 'error', 'error', 'line', 'line']);
  assert.ok(log.lines.every(([, m]) => m.startsWith('[host] ')));
});
