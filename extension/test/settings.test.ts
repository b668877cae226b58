// Unit tests of where settings may come from (settings.ts) against the fake 'vscode' module:
// user-only settings, the two provider lists, the workspace files read to tell the user, and
// the one notification per new set of ignored things.
import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import * as vscode from 'vscode';
import { ignoredInSettingsFile, IgnoredItem, ignoredMessage, IgnoredReporter, lookupSetting, readSettings, scanWorkspaceSettings } from '../src/settings';

// the fake module's test hooks (not part of the real 'vscode' API)
const fake = vscode as unknown as {
  setConfig(l: Record<string, Record<string, unknown>>): void;
  setFiles(f: Record<string, string>): void;
  setWorkspace(folders: string[], workspaceFile?: string): void;
};

afterEach(() => {
  fake.setConfig({});
  fake.setFiles({});
  fake.setWorkspace([]);
});

const USER_PROVIDER = { name: 'mine', format: 'chat-completions', baseUrl: 'https://api.example.com/v1' };

test('user-only settings come from the user (or remote) settings or the default; workspace values are ignored and reported', () => {
  fake.setWorkspace(['/ws']);
  fake.setConfig({
    'lmbridge.pythonCommand': { defaultValue: '', globalValue: '/usr/bin/python3', workspaceValue: 'sh -c "touch /tmp/m"', workspaceFolderValue: 'sh -c "touch /tmp/m"' },
    'lmbridge.apps': { defaultValue: [], workspaceValue: ['tools/x.py'] },
    'lmbridge.endpoint.enabled': { defaultValue: false, workspaceFolderValue: true },
  });
  const s = readSettings();
  assert.equal(s.pythonCommand, '/usr/bin/python3');
  assert.deepEqual(s.apps, []);
  assert.equal(s.endpointEnabled, false);
  assert.deepEqual(s.ignored.map(i => [i.setting, i.value]), [
    ['lmbridge.pythonCommand', 'sh -c "touch /tmp/m"'],
    ['lmbridge.pythonCommand', 'sh -c "touch /tmp/m"'],
    ['lmbridge.apps', '["tools/x.py"]'],
    ['lmbridge.endpoint.enabled', 'true'],
  ]);
  assert.ok(s.ignored.every(i => i.name === null && i.field === null && i.reason.includes('user')));
  // nothing from the user: the defaults, whatever the workspace says
  fake.setConfig({ 'lmbridge.pythonCommand': { defaultValue: '', workspaceValue: 'evil' } });
  assert.equal(readSettings().pythonCommand, '');
  // a user value of the wrong type falls back to the default
  fake.setConfig({ 'lmbridge.endpoint.enabled': { defaultValue: false, globalValue: 'yes' } });
  assert.equal(readSettings().endpointEnabled, false);
});

test("VS Code's tools for other processes: the user's list only; a workspace can neither turn it on nor widen it", () => {
  fake.setWorkspace(['/ws']);
  fake.setConfig({ 'lmbridge.endpoint.tools': { defaultValue: [], workspaceValue: ['*'] } });
  let s = readSettings();
  assert.deepEqual(s.endpointTools, []);
  assert.deepEqual(s.ignored.map(i => [i.setting, i.value]), [['lmbridge.endpoint.tools', '["*"]']]);
  assert.match(s.ignored[0].reason, /user/);
  fake.setConfig({ 'lmbridge.endpoint.tools': { defaultValue: [], globalValue: [' weather ', '', 'mcp_*'], workspaceFolderValue: ['*'] } });
  s = readSettings();
  assert.deepEqual(s.endpointTools, ['weather', 'mcp_*']);
  fake.setConfig({ 'lmbridge.endpoint.tools': { defaultValue: [], globalValue: '*' } });
  assert.deepEqual(readSettings().endpointTools, [], 'not a list: the default');
});

test("the pace comes from the user's settings only: a workspace can neither loosen nor set it", () => {
  fake.setWorkspace(['/ws']);
  fake.setConfig({ 'lmbridge.pace': { defaultValue: {}, globalValue: { maxConcurrent: 2 }, workspaceValue: { maxConcurrent: 50 } } });
  const s = readSettings();
  assert.deepEqual(s.pace, { maxConcurrent: 2 });
  assert.deepEqual(s.ignored.map(i => i.setting), ['lmbridge.pace']);
  fake.setConfig({ 'lmbridge.pace': { defaultValue: {}, globalValue: [1] } });
  assert.deepEqual(readSettings().pace, {}, 'not an object: the default');
});

test("the user's apps: modules and absolute paths run; a relative path would be the open folder's file and is refused", () => {
  fake.setWorkspace(['/ws']);
  fake.setConfig({ 'lmbridge.apps': { defaultValue: [], globalValue: ['my_pkg.app:main', '/home/u/app.py', '~/apps/b.py', 'tools/x.py', 'y.py', ' '] } });
  const s = readSettings();
  assert.deepEqual(s.apps, ['my_pkg.app:main', '/home/u/app.py', '~/apps/b.py']);
  assert.deepEqual(s.ignored.map(i => [i.setting, i.value]), [['lmbridge.apps', 'tools/x.py'], ['lmbridge.apps', 'y.py']]);
  assert.match(s.ignored[0].reason, /absolute path/);
});

test("providers: the user's list and the workspace's are sent apart; a folder's list counts once", () => {
  const ws = [{ name: 'mine', baseUrl: 'http://127.0.0.1:9/v1' }];
  const folder = [{ name: 'x', provider: 'os:system' }];
  // single-folder window: inspect() reports the folder's settings as both levels
  fake.setWorkspace(['/ws']);
  fake.setConfig({ 'lmbridge.providers': { defaultValue: [], globalValue: [USER_PROVIDER], workspaceValue: ws, workspaceFolderValue: ws } });
  let s = readSettings();
  assert.deepEqual(s.providers, [USER_PROVIDER]);
  assert.deepEqual(s.workspaceProviders, ws);
  // multi-root: the .code-workspace's list, then the first folder's
  fake.setWorkspace(['/a', '/b'], '/w.code-workspace');
  fake.setConfig({ 'lmbridge.providers': { defaultValue: [], globalValue: [USER_PROVIDER], workspaceValue: ws, workspaceFolderValue: folder } });
  s = readSettings();
  assert.deepEqual(s.providers, [USER_PROVIDER]);
  assert.deepEqual(s.workspaceProviders, [...ws, ...folder]);
  // a workspace list never replaces the user's (VS Code's get() would return the workspace's)
  assert.deepEqual(vscode.workspace.getConfiguration('lmbridge').get('providers'), ws);
  // no user list: the host gets [] (and serves its default when both are empty); junk entries dropped
  fake.setWorkspace(['/ws']);
  fake.setConfig({ 'lmbridge.providers': { defaultValue: [], workspaceValue: [ws[0], 'junk', null, [1]] } });
  s = readSettings();
  assert.deepEqual(s.providers, []);
  assert.deepEqual(s.workspaceProviders, ws);
});

test('settings files: every form VS Code reads, with comments and trailing commas', async () => {
  assert.equal(lookupSetting({ 'lmbridge.endpoint.enabled': true }, 'lmbridge.endpoint.enabled'), true);
  assert.equal(lookupSetting({ 'lmbridge.endpoint': { enabled: true } }, 'lmbridge.endpoint.enabled'), true);
  assert.equal(lookupSetting({ lmbridge: { endpoint: { enabled: true } } }, 'lmbridge.endpoint.enabled'), true);
  assert.equal(lookupSetting({ lmbridge: { 'pythonCommand': 'x' } }, 'lmbridge.pythonCommand'), 'x');
  assert.equal(lookupSetting({ 'lmbridge.consumer.model': 'm' }, 'lmbridge.pythonCommand'), undefined);
  assert.deepEqual(ignoredInSettingsFile(['not', 'an object']), []);

  fake.setWorkspace(['/a', '/b'], '/w.code-workspace');
  fake.setFiles({
    '/a/.vscode/settings.json': '{\n  // the attack\n  "lmbridge.pythonCommand": "/tmp/evil --flag",\n  "lmbridge": {"apps": ["tools/x.py"]},\n}',
    '/w.code-workspace': '{"folders": [], "settings": {"lmbridge.endpoint": {"enabled": true}, "editor.tabSize": 2}}',
  });
  const items = await scanWorkspaceSettings();
  assert.deepEqual(items.map(i => [i.setting, i.value]), [
    ['lmbridge.pythonCommand', '/tmp/evil --flag'],
    ['lmbridge.apps', '["tools/x.py"]'],
    ['lmbridge.endpoint.enabled', 'true'],
  ]);
  // no files, or unreadable ones: nothing to tell
  fake.setFiles({ '/a/.vscode/settings.json': '{{{' });
  assert.deepEqual(await scanWorkspaceSettings(), []);
});

const item = (setting: string, value: string, name: string | null = null, field: string | null = null): IgnoredItem =>
  ({ setting, name, field, value, reason: 'r' });

function reporter(waitMs = 50): { r: IgnoredReporter; shown: IgnoredItem[][]; warnings: string[]; debug: string[] } {
  const shown: IgnoredItem[][] = [];
  const warnings: string[] = [];
  const debug: string[] = [];
  const r = new IgnoredReporter({ warn: m => warnings.push(m), debug: m => debug.push(m), show: items => shown.push(items) }, waitMs);
  return { r, shown, warnings, debug };
}
const sleep = (ms: number): Promise<void> => new Promise(res => setTimeout(res, ms));

test("one notification for the extension's and the host's ignored things together", async () => {
  const { r, shown, warnings, debug } = reporter(5000);
  const own = [item('lmbridge.pythonCommand', 'evil'), item('lmbridge.apps', '["tools/x.py"]')];
  const host = [item('lmbridge.providers', 'os:system', 'x', 'provider'), item('lmbridge.providers', 'GITHUB_TOKEN', 'leak', 'apiKeyEnv')];
  r.setOwn(own, true); // workspace providers: wait for the host's verdict
  assert.equal(shown.length, 0);
  r.setHost(host);
  assert.deepEqual(shown, [[...own, ...host]]);
  // every configure repeats the same: no second notification, no second log line
  r.setHost(host);
  r.setOwn(own, false);
  r.setHost([...host]);
  assert.equal(shown.length, 1);
  // the extension's findings at warning level, once; the host logs its own (here: debug)
  assert.deepEqual(warnings, ['ignored lmbridge.pythonCommand = evil: r', 'ignored lmbridge.apps = ["tools/x.py"]: r']);
  assert.deepEqual(debug, ["ignored lmbridge.providers 'x'.provider = os:system: r", "ignored lmbridge.providers 'leak'.apiKeyEnv = GITHUB_TOKEN: r"]);
  // something new: a notification naming the whole current set
  r.setHost([...host, item('lmbridge.providers', 'mine', 'mine', 'name')]);
  assert.equal(shown.length, 2);
  assert.equal(shown[1].length, 5);
  // fewer things ignored: nothing new to tell
  r.setHost([]);
  assert.equal(shown.length, 2);
  r.dispose();
});

test('without an answer from the host the extension tells its own findings after the wait', async () => {
  const { r, shown } = reporter(30);
  r.setOwn([item('lmbridge.pythonCommand', 'evil')], true);
  assert.equal(shown.length, 0);
  await sleep(80);
  assert.equal(shown.length, 1);
  // nothing to wait for: at once
  const other = reporter(10000);
  other.r.setOwn([item('lmbridge.apps', 'a.py')], false);
  assert.equal(other.shown.length, 1);
  other.r.setOwn([], false);
  assert.equal(other.shown.length, 1);
  other.r.dispose();
});

test('the notification names each ignored setting and value', () => {
  const text = ignoredMessage([item('lmbridge.pythonCommand', 'sh -c "touch m"'), item('lmbridge.providers', 'os:system', 'x', 'provider')]);
  assert.match(text, /ignored 2 settings of this workspace/);
  assert.ok(text.includes('lmbridge.pythonCommand = sh -c "touch m"'), text);
  assert.ok(text.includes("lmbridge.providers 'x'.provider = os:system"), text);
});

test("the endpoint's name map and the apps' model steer processes outside the workspace: user (or remote) settings only", () => {
  fake.setWorkspace(['/ws']);
  fake.setConfig({
    'lmbridge.endpoint.models': { defaultValue: {}, globalValue: { 'my-*': 'vscodelm/copilot/gpt-4o' }, workspaceValue: { 'claude-*': 'vscodelm/lmbridge//evil/claude-haiku-4-5' } },
    'lmbridge.consumer.model': { defaultValue: 'vscodelm/auto', workspaceFolderValue: 'vscodelm/lmbridge//evil/gpt-5-codex' },
  });
  const s = readSettings();
  assert.deepEqual(s.endpointModels, { 'my-*': 'vscodelm/copilot/gpt-4o' });
  assert.equal(s.consumerModel, 'vscodelm/auto');
  assert.deepEqual(s.ignored.map(i => i.setting), ['lmbridge.endpoint.models', 'lmbridge.consumer.model']);
  assert.match(s.ignored[0].reason, /outside this workspace/);
  // the settings file VS Code drops them from (machine scope) is read to tell the user too
  assert.deepEqual(ignoredInSettingsFile({ 'lmbridge.endpoint.models': { 'gpt-*': 'x' }, lmbridge: { consumer: { model: 'y' } } }).map(i => [i.setting, i.value]),
    [['lmbridge.endpoint.models', '{"gpt-*":"x"}'], ['lmbridge.consumer.model', 'y']]);
});

test('logLevel debug (message bodies in the log) only from the user; a workspace may set the other levels', () => {
  fake.setWorkspace(['/ws']);
  fake.setConfig({ 'lmbridge.logLevel': { defaultValue: 'info', workspaceValue: 'debug', workspaceFolderValue: 'debug' } });
  let s = readSettings();
  assert.equal(s.logLevel, 'info');
  assert.deepEqual(s.ignored.map(i => [i.setting, i.value]), [['lmbridge.logLevel', 'debug']]);
  fake.setConfig({ 'lmbridge.logLevel': { defaultValue: 'info', globalValue: 'debug', workspaceValue: 'debug' } });
  s = readSettings();
  assert.equal(s.logLevel, 'debug');
  assert.deepEqual(s.ignored, []);
  fake.setConfig({ 'lmbridge.logLevel': { defaultValue: 'info', globalValue: 'debug', workspaceValue: 'error' } });
  assert.equal(readSettings().logLevel, 'error');
  fake.setConfig({ 'lmbridge.logLevel': { defaultValue: 'info', workspaceValue: 'nonsense' } });
  assert.equal(readSettings().logLevel, 'info');
});
