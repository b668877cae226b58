// Unit tests of VS Code's network settings on their way to the host: the values read, and a
// change of them sending `configure` again (to a stand-in host over real JSON-RPC).
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { FAKE } from './host-support';
import { afterEach, test } from 'node:test';
import * as vscode from 'vscode';
import { Host, HostConfig, HostOptions, InitializeResult, Log } from '../src/host';
import { readNetwork, watchNetwork, type NetworkSettings } from '../src/network';

const fake = vscode as unknown as typeof import('./fake-vscode');
const quiet: Log = { trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined, appendLine: () => undefined };

afterEach(() => fake.setConfig({}));

test("VS Code's defaults when nothing is set", () => {
  fake.setConfig({});
  assert.deepEqual(readNetwork(), { proxy: null, proxyStrictSSL: true, noProxy: [], systemCertificates: true });
});

test("the user's proxy, certificate checks, exceptions and certificate store are read", () => {
  fake.setConfig({
    'http.proxy': { defaultValue: '', globalValue: ' http://proxy.corp:3128 ' },
    'http.proxyStrictSSL': { defaultValue: true, globalValue: false },
    'http.noProxy': { defaultValue: [], globalValue: ['localhost', ' .internal.corp', '', 7] },
    'http.systemCertificates': { defaultValue: true, globalValue: false },
  });
  assert.deepEqual(readNetwork(), { proxy: 'http://proxy.corp:3128', proxyStrictSSL: false, noProxy: ['localhost', '.internal.corp'], systemCertificates: false });
  // values of the wrong type fall back to VS Code's defaults
  fake.setConfig({ 'http.proxy': { globalValue: 3 }, 'http.proxyStrictSSL': { globalValue: 'no' }, 'http.noProxy': { globalValue: 'x' } });
  assert.deepEqual(readNetwork(), { proxy: null, proxyStrictSSL: true, noProxy: [], systemCertificates: true });
});

test('a change of a network setting sends configure with the new values; other changes do not', async () => {
  const options = (): HostOptions => ({ pythonCommand: `"${process.execPath}" "${FAKE}"`, pythonSource: 'default', clientName: 'test', clientVersion: '0', cwd: os.tmpdir(), env: { FAKE_HOST: 'ok' } });
  const config = async (): Promise<HostConfig> => ({ providers: [], secrets: {}, settings: {}, network: readNetwork() });
  const configured: NetworkSettings[] = [];
  const host = new Host(options, config, quiet, () => undefined, {
    onConfigured: (r: InitializeResult) => configured.push((r as InitializeResult & { network: NetworkSettings }).network),
  });
  const reconfigures: Promise<unknown>[] = [];
  const watch = watchNetwork(() => reconfigures.push(host.reconfigure()));
  try {
    await host.connection();
    assert.deepEqual(configured, [{ proxy: null, proxyStrictSSL: true, noProxy: [], systemCertificates: true }], 'initialize carries them');
    fake.setConfig({ 'http.proxy': { globalValue: 'http://127.0.0.1:8888' }, 'http.noProxy': { globalValue: ['example.com'] } });
    fake.fireConfigChanged(['http.proxy']);
    fake.fireConfigChanged(['http.noProxy']);
    fake.fireConfigChanged(['editor.fontSize']);
    fake.fireConfigChanged(['http.proxySupport']);
    await Promise.all(reconfigures);
    assert.equal(reconfigures.length, 2);
    assert.deepEqual(configured.slice(1), [0, 1].map(() => ({ proxy: 'http://127.0.0.1:8888', proxyStrictSSL: true, noProxy: ['example.com'], systemCertificates: true })));
  } finally {
    watch.dispose();
    await host.dispose();
  }
});
