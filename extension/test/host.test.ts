// Unit tests of the Host against real processes: a stand-in host (test/fixtures/fake-host.js,
// run by node as if it were Python), a missing program, a missing working folder.
import assert from 'node:assert/strict';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, test } from 'node:test';
import { FAKE, MemoryLog, hosts } from './host-support';
import { Host, HostConfig, HostEvents, HostOptions } from '../src/host';
import type { ProviderEntry } from '../src/keys';
import { problemActions, type StartProblem } from '../src/python';

afterEach(async () => { await Promise.all(hosts.splice(0).map(h => h.dispose())); });

function makeHost(opts: Partial<HostOptions> & { mode?: string }, events: HostEvents = {}, providers: ProviderEntry[] = [], workspaceProviders: () => ProviderEntry[] = () => []): { host: Host; log: MemoryLog } {
  const log = new MemoryLog();
  const options = (): HostOptions => ({
    pythonCommand: `"${process.execPath}" "${FAKE}"`,
    pythonSource: 'default',
    clientName: 'test',
    clientVersion: '0',
    cwd: os.tmpdir(),
    env: { FAKE_HOST: opts.mode ?? 'ok' },
    ...opts,
  });
  const config = async (): Promise<HostConfig> => ({ providers, workspaceProviders: workspaceProviders(), secrets: {}, settings: {} });
  const host = new Host(options, config, log, () => undefined, events);
  hosts.push(host);
  return { host, log };
}

const sleep = (ms: number): Promise<void> => new Promise(r => setTimeout(r, ms));
async function until(what: () => boolean, ms = 5000): Promise<void> {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(20)) if (what()) return;
  assert.fail('timed out');
}

test('a missing working folder is not reported as a missing Python', async () => {
  const problems: StartProblem[] = [];
  const missing = path.join(os.tmpdir(), `lmbridge-no-such-dir-${process.pid}`, 'globalStorage');
  const { host, log } = makeHost({ cwd: missing }, { onStartProblem: p => problems.push(p) });
  await assert.rejects(host.connection(), (e: Error) => {
    assert.match(e.message, /working folder .*does not exist/);
    assert.doesNotMatch(e.message, /Python was not found/);
    return true;
  });
  await until(() => problems.length > 0);
  assert.equal(problems[0].kind, 'cwd-missing');
  assert.ok(log.at('error').some(l => l.includes('does not exist')));
});

test('no Python anywhere: one problem that names what was tried and where to get Python', async () => {
  const problems: StartProblem[] = [];
  const { host } = makeHost({ pythonCommand: 'lmbridge-no-such-python3', pythonTried: ['python3 (not found)', 'python (Python 3.8)'] }, { onStartProblem: p => problems.push(p) });
  await assert.rejects(host.connection(), /No Python 3\.10 or newer was found \(tried: python3 \(not found\), python \(Python 3\.8\)\)\. Install Python from https:\/\/www\.python\.org\/downloads\//);
  await until(() => problems.length > 0);
  assert.equal(problems.length, 1);
  assert.equal(problems[0].kind, 'python-missing');
  assert.deepEqual(problemActions(problems[0]), ['Install Python', 'Open Settings', 'Show Log']);
  assert.equal(host.startProblem?.kind, 'python-missing');
});

test('options found asynchronously: concurrent requests start one host, with the library folder as the argument after the code', async () => {
  let asked = 0;
  const log = new MemoryLog();
  const host = new Host(async () => {
    asked++;
    await sleep(50);
    return { pythonCommand: `"${process.execPath}" "${FAKE}"`, pythonSource: 'default', libDir: '/ext/python/lib', clientName: 'test', clientVersion: '0', env: { FAKE_HOST: 'ok' } };
  }, async () => ({ providers: [], secrets: {}, settings: {} }), log, () => undefined);
  hosts.push(host);
  const [a, b] = await Promise.all([host.connection(), host.connection()]);
  assert.equal(a, b);
  assert.equal(asked, 1);
  assert.ok(log.at('info').some(l => l.startsWith('starting the Python host: ') && l.endsWith(' /ext/python/lib')), log.lines.join('\n'));
});

test('a Python without lmbridge says to create the environment, and the request error says it too', async () => {
  const problems: StartProblem[] = [];
  const { host, log } = makeHost({ mode: 'nomodule' }, { onStartProblem: p => problems.push(p) });
  await assert.rejects(host.connection(), /has no lmbridge package.*Run the command 'lmbridge: Create Python Environment'/);
  await until(() => problems.length > 0);
  assert.equal(problems[0].kind, 'lmbridge-missing');
  // within the backoff the next request fails at once with the same advice
  await assert.rejects(host.connection(), /Create Python Environment/);
  // after it, a new start fails the same way: logged once at the error level
  await sleep(1100);
  await assert.rejects(host.connection(), /Create Python Environment/);
  assert.equal(log.at('error').filter(l => l.startsWith('the Python host cannot start: ')).length, 1);
  assert.equal(log.at('debug').filter(l => l.startsWith('the Python host still cannot start: ')).length, 1);
});

test('a crashed host is restarted without a request when it is wanted', async () => {
  let wanted = true;
  const { host, log } = makeHost({}, { wanted: () => wanted });
  await host.connection();
  const first = host.pid!;
  process.kill(first, 'SIGKILL');
  await until(() => host.pid !== undefined && host.pid !== first);
  assert.ok(log.at('error').some(l => l.includes('the Python host ended: killed by SIGKILL')));
  // a second quick crash backs off (1 s) instead of restarting at once
  const second = host.pid!;
  await until(() => log.at('info').some(l => l.includes(`ready (pid ${second})`)));
  process.kill(second, 'SIGKILL');
  await until(() => host.pid === undefined);
  await until(() => log.at('info').some(l => l === 'restarting the Python host in 1 s'));
  assert.ok(host.restartPending);
  await until(() => host.pid !== undefined);
  // not wanted: the next crash waits for a request
  wanted = false;
  const third = host.pid!;
  await until(() => log.at('info').some(l => l.includes(`ready (pid ${third})`)));
  process.kill(third, 'SIGKILL');
  await until(() => log.at('error').filter(l => l.includes('killed by SIGKILL')).length === 3);
  await sleep(300);
  assert.equal(host.pid, undefined);
  assert.ok(!host.restartPending);
});

test('a deliberate stop is no error and is not restarted', async () => {
  const { host, log } = makeHost({}, { wanted: () => true });
  await host.connection();
  await host.stop();
  await sleep(200);
  assert.deepEqual(log.at('error'), []);
  assert.ok(log.at('info').some(l => l.startsWith('the Python host stopped (exit code 0')));
  assert.equal(host.pid, undefined);
  assert.ok(!host.restartPending);
  await host.connection(); // and a request starts it again
  assert.ok(host.pid);
});

test('a misconfigured provider is reported once, however often configure is sent', async () => {
  const { host, log } = makeHost({}, {}, [{ name: 'bad', bad: 'unknown format "x"' }, { name: 'ok' }]);
  await host.connection();
  for (let i = 0; i < 3; i++) await host.reconfigure();
  await sleep(200); // stderr arrives on its own pipe
  const shown = log.lines.filter(([lv, m]) => lv !== 'debug' && m.includes('unknown format "x"'));
  assert.equal(shown.length, 1, JSON.stringify(log.lines, null, 1));
  assert.equal(shown[0][0], 'error', JSON.stringify(log.lines, null, 1));
  // the other copies are kept at the debug level
  assert.ok(log.at('debug').some(m => m.includes('unknown format "x"')));
  // ordinary host lines are copied as they are
  assert.ok(log.at('line').some(m => m.includes('INFO lmbridge.host: providers ready')));
});

test("the host's ignored list reaches onConfigured on initialize and on every configure", async () => {
  const results: unknown[] = [];
  let ws: ProviderEntry[] = [{ name: 'x', provider: 'os:system' }];
  const { host } = makeHost({}, { onConfigured: r => results.push(r.ignored) }, [], () => ws);
  await host.connection();
  assert.deepEqual(results, [[{ setting: 'lmbridge.providers', name: 'x', field: 'provider', value: 'os:system', reason: 'workspace' }]]);
  ws = [];
  await host.reconfigure();
  assert.deepEqual(results.at(-1), []);
  assert.equal(results.length, 2);
});
