// Unit tests of the consent to the providers a workspace adds (consent.ts): per entry content,
// remembered, revocable, asked once, and never in the way of the user's own providers.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ALLOW, askable, canonicalJson, ConsentPrompter, DECISIONS_KEY, DENY, entryHash, entryWhere, MANAGE, WorkspaceConsent, type ConsentUI } from '../src/consent';
import type { ProviderEntry } from '../src/keys';

function memo(): { get<T>(k: string): T | undefined; update(k: string, v: unknown): Promise<void>; data: Map<string, unknown> } {
  const data = new Map<string, unknown>();
  return { data, get: <T>(k: string) => data.get(k) as T | undefined, update: async (k, v) => { if (v === undefined) data.delete(k); else data.set(k, v); } };
}

const EVIL: ProviderEntry = { name: 'evil', format: 'chat-completions', baseUrl: 'http://127.0.0.1:5555/v1', models: [{ id: 'claude-haiku-4-5' }] };
const TEAM: ProviderEntry = { name: 'team', format: 'responses', baseUrl: 'https://llm.team.example/v1' };

/** A UI that answers each question with the next scripted answer (a pending promise: never). */
function ui(answers: (string | undefined | 'never')[], picks: (string[] | undefined)[] = []): ConsentUI & { asked: string[]; listed: unknown[][] } {
  const asked: string[] = [];
  const listed: unknown[][] = [];
  return {
    asked, listed,
    ask: (message) => {
      asked.push(message);
      const a = answers.shift();
      return a === 'never' ? new Promise(() => undefined) : Promise.resolve(a);
    },
    pickMany: (items) => {
      listed.push(items);
      const p = picks.shift();
      return Promise.resolve(p === undefined ? undefined : items.filter(i => p.includes(i.label)).map(i => i.value));
    },
    info: (m) => { asked.push(m); },
  };
}

test('the hash is of the entry content: key order does not matter, any change does', () => {
  assert.equal(canonicalJson({ b: 1, a: [{ y: 2, x: null }] }), '{"a":[{"x":null,"y":2}],"b":1}');
  assert.equal(entryHash({ name: 'evil', baseUrl: 'u' }), entryHash({ baseUrl: 'u', name: 'evil' }));
  assert.notEqual(entryHash(EVIL), entryHash({ ...EVIL, baseUrl: 'http://127.0.0.1:5556/v1' }));
  assert.notEqual(entryHash(EVIL), entryHash({ ...EVIL, headers: { 'X-A': '1' } }));
  assert.match(entryHash(EVIL), /^[0-9a-f]{64}$/);
});

test('where an entry points: the origin of its URL, and of absolute chat and models paths', () => {
  assert.equal(entryWhere(EVIL), 'http://127.0.0.1:5555');
  assert.equal(entryWhere({ ...TEAM, chatPath: 'https://other.example:8443/chat', modelsPath: '/models' }), 'https://llm.team.example:443, https://other.example:8443');
  assert.equal(entryWhere({ name: 'x' }), 'no URL');
});

test('an entry is inert until allowed; the decision is remembered per content and can be taken back', async () => {
  const m = memo();
  const consent = new WorkspaceConsent(m);
  assert.deepEqual(consent.allowed([EVIL, TEAM]), []);
  assert.deepEqual(consent.pending([EVIL, TEAM]).map(e => e.name), ['evil', 'team']);
  await consent.decide(consent.describe([EVIL]), 'allow');
  await consent.decide(consent.describe([TEAM]), 'deny');
  assert.deepEqual(consent.allowed([EVIL, TEAM]), [EVIL]);
  assert.deepEqual(consent.pending([EVIL, TEAM]), []);
  // remembered: a new consent over the same state (a new window of this workspace) agrees
  assert.deepEqual(new WorkspaceConsent(m).allowed([EVIL, TEAM]), [EVIL]);
  // the entry changed (a new URL): not allowed, asked again
  const moved = { ...EVIL, baseUrl: 'https://evil.example/v1' };
  assert.deepEqual(consent.allowed([moved]), []);
  assert.deepEqual(consent.pending([moved]).map(e => e.where), ['https://evil.example:443']);
  // what is stored names the entry and where it pointed, never more
  const stored = m.data.get(DECISIONS_KEY) as Record<string, { decision: string; name: string; where: string }>;
  assert.deepEqual(Object.values(stored).map(v => [v.name, v.where, v.decision]), [['evil', 'http://127.0.0.1:5555', 'allow'], ['team', 'https://llm.team.example:443', 'deny']]);
  await consent.reset();
  assert.deepEqual(consent.allowed([EVIL]), []);
});

test('the question: once per set of entries, naming each and where it points; Allow and Don\'t Allow are remembered', async () => {
  const consent = new WorkspaceConsent(memo());
  let changes = 0;
  const u = ui([ALLOW]);
  const prompter = new ConsentPrompter(consent, u, () => changes++);
  await prompter.check([EVIL]);
  assert.equal(u.asked.length, 1);
  assert.match(u.asked[0], /'evil' → http:\/\/127\.0\.0\.1:5555/);
  assert.match(u.asked[0], /off until you allow it/);
  assert.deepEqual(consent.allowed([EVIL]), [EVIL]);
  assert.equal(changes, 1);
  // decided: not asked again; a new entry is
  await prompter.check([EVIL]);
  assert.equal(u.asked.length, 1);
  const d = ui([DENY]);
  const p2 = new ConsentPrompter(consent, d, () => changes++);
  await p2.check([EVIL, TEAM]);
  assert.equal(d.asked.length, 1);
  assert.doesNotMatch(d.asked[0], /'evil'/); // only what was not decided
  assert.deepEqual(consent.allowed([EVIL, TEAM]), [EVIL]);
  assert.equal(consent.pending([TEAM]).length, 0);
});

test('a question dismissed or never answered leaves the entries off, holds nothing up, and is not repeated', async () => {
  const consent = new WorkspaceConsent(memo());
  let changes = 0;
  const u = ui(['never', undefined]);
  const prompter = new ConsentPrompter(consent, u, () => changes++);
  // never answered: check() does not resolve, but the caller does not wait for it
  void prompter.check([EVIL]);
  await Promise.resolve();
  assert.deepEqual(consent.allowed([EVIL]), []);
  assert.equal(changes, 0);
  await prompter.check([EVIL]); // told once: no second notification
  assert.equal(u.asked.length, 1);
  await prompter.check([TEAM]); // dismissed: off, and not repeated
  await prompter.check([TEAM]);
  assert.equal(u.asked.length, 2);
  assert.deepEqual(consent.allowed([EVIL, TEAM]), []);
});

test('Manage Workspace Providers: the checked entries are allowed, the others not (revocation)', async () => {
  const consent = new WorkspaceConsent(memo());
  let changes = 0;
  const u = ui([MANAGE], [['evil'], [], undefined]);
  const prompter = new ConsentPrompter(consent, u, () => changes++);
  await prompter.check([EVIL, TEAM]); // "Manage…" opens the list
  assert.deepEqual(consent.allowed([EVIL, TEAM]), [EVIL]);
  const first = u.listed[0] as { label: string; description: string; picked: boolean }[];
  assert.deepEqual(first.map(i => [i.label, i.description, i.picked]), [['evil', 'http://127.0.0.1:5555', false], ['team', 'https://llm.team.example:443', false]]);
  await prompter.manage([EVIL, TEAM]); // nothing checked: allowed no more
  assert.deepEqual(consent.allowed([EVIL, TEAM]), []);
  assert.equal((u.listed[1] as { picked: boolean }[])[0].picked, true);
  await prompter.manage([EVIL, TEAM]); // Escape: nothing changes
  assert.equal(changes, 2);
  await prompter.manage([]);
  assert.match(u.asked[u.asked.length - 1], /add no model provider/);
});

test("asked about: not an entry the host ignores anyway (Python code, one of the user's names)", () => {
  const user: ProviderEntry[] = [{ name: 'mine', format: 'responses', baseUrl: 'https://api.example.com/v1' }];
  const ws: ProviderEntry[] = [EVIL, { name: 'x', provider: 'os:system' }, { name: 'mine', format: 'responses', baseUrl: 'http://127.0.0.1:9/v1' }, TEAM];
  assert.deepEqual(askable(ws, user), [EVIL, TEAM]);
});

test('what the host gets: the allowed entries to load, every other one only to judge, each once', async () => {
  const consent = new WorkspaceConsent(memo());
  const user: ProviderEntry[] = [{ name: 'mine', format: 'responses', baseUrl: 'https://api.example.com/v1' }];
  const python = { name: 'x', provider: 'os:system' };
  const clash = { name: 'mine', format: 'responses', baseUrl: 'http://127.0.0.1:9/v1' };
  await consent.decide(consent.describe([EVIL]), 'allow');
  await consent.decide(consent.describe([TEAM]), 'deny');
  const { allowed, unapproved } = consent.split([EVIL, python, clash, TEAM], user);
  assert.deepEqual(allowed, [EVIL]);
  assert.deepEqual(unapproved, [python, clash, TEAM]);
  // an allowed entry that changed is no longer loaded: it is judged until allowed again
  const moved = { ...EVIL, baseUrl: 'https://evil.example/v1' };
  assert.deepEqual(consent.split([moved], user), { allowed: [], unapproved: [moved] });
});
