// Unit tests of what package.json declares for safety: where lmbridge runs in a remote window,
// and the scope of the settings a workspace may not set.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { USER_ONLY } from '../src/settings';

const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')) as {
  extensionKind?: string[];
  contributes: { configuration: { properties: Record<string, { scope?: string }> }; commands: { command: string }[] };
};

test('in a remote window (SSH, WSL, a dev container) lmbridge runs on the local machine: keys never go into the remote', () => {
  // "ui" first: VS Code runs it in the local extension host whenever it can; "workspace" only
  // where there is none (a browser: code-server, vscode.dev with a remote), or when the user
  // asks for it with remote.extensionKind (SECURITY.md, extension/README.md)
  assert.deepEqual(manifest.extensionKind, ['ui', 'workspace']);
});

test("the settings only the user may set are machine-scoped: VS Code drops a workspace's value", () => {
  const props = manifest.contributes.configuration.properties;
  for (const key of USER_ONLY) assert.equal(props[`lmbridge.${key}`]?.scope, 'machine', key);
  for (const key of ['apps', 'consumer.model', 'endpoint.enabled', 'endpoint.models', 'pythonCommand']) assert.ok((USER_ONLY as readonly string[]).includes(key), key);
  assert.ok(manifest.contributes.commands.some(c => c.command === 'lmbridge.manageWorkspaceProviders'));
});
