// lmbridge: Diagnose: the host's report with VS Code's side added (its version, the interpreter
// and why it was chosen, the settings behind the known traps, the API classes this VS Code has).
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { afterEach, test } from 'node:test';
import { FAKE, MemoryLog, hosts } from './host-support';
import { Host, HostOptions } from '../src/host';
import { diagnosisText } from '../src/diagnose';
import { setConfig, setProposals } from './fake-vscode';

afterEach(async () => {
  await Promise.all(hosts.splice(0).map(h => h.dispose()));
  setConfig({});
  setProposals({ data: true, thinking: true });
});

function host(pythonCommand = `"${process.execPath}" "${FAKE}"`): Host {
  const options = (): HostOptions => ({ pythonCommand, pythonSource: 'python-extension', pythonTried: ['python3.9'], clientName: 'test', clientVersion: '0', cwd: os.tmpdir(), env: { FAKE_HOST: 'ok' } });
  const h = new Host(options, async () => ({ providers: [], secrets: {}, settings: {} }), new MemoryLog(), () => undefined);
  hosts.push(h);
  return h;
}

test("the diagnosis joins the host's report and VS Code's side", async () => {
  setConfig({ 'chat.byokUtilityModelDefault': { globalValue: 'mainAgent' } });
  setProposals({ data: true, thinking: false });
  const h = host();
  await h.connection();
  const text = await diagnosisText(h, '9.9.9');
  assert.match(text, /^# lmbridge diagnosis\n\n## Providers\n\n- fake: loaded\n\n## VS Code\n/);
  assert.match(text, /- VS Code: 1\.139\.0-test \(Test Code, local\)/);
  assert.match(text, /- lmbridge extension: 9\.9\.9/);
  assert.match(text, /- host interpreter: .*, chosen from the Python extension's selected interpreter/);
  assert.match(text, /- passed over: python3\.9/);
  assert.match(text, /- chat\.byokUtilityModelDefault: "mainAgent"/);
  assert.match(text, /- LanguageModelDataPart \(usage for Copilot's context ring\): yes/);
  assert.match(text, /- LanguageModelThinkingPart: no/);
});

test('without a host the diagnosis says why and still has VS Code\'s side', async () => {
  const h = host('/nonexistent/python-for-lmbridge-test');
  const text = await diagnosisText(h, '1');
  assert.match(text, /The host did not answer: /);
  assert.match(text, /## VS Code\n/);
});
