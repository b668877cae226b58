// Unit tests of the usage status item: what the `stats` of `chat/response` results become in
// the status bar text and its tooltip (fake 'vscode' module: the item is a plain object).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as vscode from 'vscode';
import { compact, escapeMarkdown, PaceStatusItem, paceText, parsePaceBite, parseStats, UsageStatusItem, UsageTotals, type AnswerStats } from '../src/status';

const fake = vscode as unknown as typeof import('./fake-vscode');

const STATS: AnswerStats = {
  model: 'gpt-4.1-2025-04-14', inputTokens: 12000, outputTokens: 345, cachedTokens: 10000, reasoningTokens: 100,
  durationMs: 2300, firstTokenMs: 400, finishReason: 'stop', maxInputTokens: 128000, estimatedInputTokens: 11800,
  calibrationFactor: 1.04,
};
const GPT = { id: 'oai/gpt-4.1', name: 'GPT-4.1', maxInputTokens: 100000 };
const rows = (tooltip: string): string[] => tooltip.split('\n').filter(l => l.startsWith('| ') && !l.startsWith('| Model'));

test('numbers are short in the status bar', () => {
  assert.deepEqual([0, 950, 1000, 1234, 12345, 99949, 128000, 999_999, 1_048_576, 2_000_000].map(compact),
    ['0', '950', '1k', '1.2k', '12.3k', '99.9k', '128k', '1M', '1M', '2M']);
});

test('stats are read as the host sends them; wrong types become unknown', () => {
  assert.equal(parseStats({}), undefined, 'an older host sends no stats');
  assert.equal(parseStats(null), undefined);
  assert.equal(parseStats({ stats: [1] }), undefined);
  assert.deepEqual(parseStats({ stats: STATS }), STATS);
  const odd = parseStats({ stats: { inputTokens: '12', outputTokens: -1, cachedTokens: 1.6, finishReason: 3, model: '' } });
  assert.deepEqual(odd, {
    model: null, inputTokens: null, outputTokens: null, cachedTokens: 2, reasoningTokens: null, durationMs: null,
    firstTokenMs: null, finishReason: null, maxInputTokens: null, estimatedInputTokens: null, calibrationFactor: null,
  });
});

test("the last answer's token use is shown against the model's input limit", () => {
  const u = new UsageTotals();
  assert.equal(u.text(), 'lmbridge');
  u.record(GPT, STATS);
  // input + output: what the next request of the conversation starts from; the host's limit wins
  assert.equal(u.text(), 'lmbridge 12.3k/128k');
  const tip = u.tooltip();
  assert.match(tip, /12,345 tokens \(input 12,000 \+ output 345\) of the model's 128,000-token input limit \(9\.6 %\)/);
  assert.match(tip, /cached 10,000 · reasoning 100 · 2\.3 s · first token after 400 ms · finish reason: stop/);
  assert.match(tip, /upstream model: gpt\\-4\\\.1\\-2025\\-04\\-14/);
  assert.doesNotMatch(tip, /cut by the output limit/);
  // the estimate beside the upstream's count, and the factor it was made with
  assert.match(tip, /lmbridge estimated the input at 11,800 tokens, -1\.7 % against the upstream's count \(calibration factor 1\.040\)\./);
  // without a limit from the host, the model information's
  u.record(GPT, { ...STATS, maxInputTokens: null });
  assert.equal(u.text(), 'lmbridge 12.3k/100k');
  u.record({ id: 'x/y', name: 'Y' }, { ...STATS, maxInputTokens: null });
  assert.equal(u.text(), 'lmbridge 12.3k');
});

test('an answer cut by the output limit says so in the text and the tooltip', () => {
  const u = new UsageTotals();
  u.record(GPT, { ...STATS, finishReason: 'length' });
  assert.equal(u.text(), '$(warning) lmbridge 12.3k/128k');
  assert.match(u.tooltip(), /\*\*The answer was cut by the output limit\.\*\*.*`maxOutputTokens`/);
  assert.match(rows(u.tooltip())[0], /GPT\\-4\\\.1 \(1 cut by the output limit\)/);
  // Anthropic's name for it too
  u.record(GPT, { ...STATS, finishReason: 'max_tokens' });
  assert.match(rows(u.tooltip())[0], /2 cut by the output limit/);
  u.record(GPT, STATS);
  assert.doesNotMatch(u.tooltip(), /The answer was cut/, 'only the last answer is told as cut');
});

test('a conversation near the limit is flagged; without counts the estimate is used and marked', () => {
  const u = new UsageTotals();
  u.record(GPT, { ...STATS, inputTokens: 120000 });
  assert.equal(u.text(), '$(warning) lmbridge 120k/128k');
  assert.match(u.tooltip(), /close to the model's input limit/);
  u.record(GPT, { ...STATS, inputTokens: null, outputTokens: null, cachedTokens: null, reasoningTokens: null });
  assert.equal(u.text(), 'lmbridge ~11.8k/128k');
  assert.match(u.tooltip(), /about 11,800 tokens \(input ~11,800 \+ output unknown\)/);
  assert.match(u.tooltip(), /reported no token counts/);
});

test('the tooltip lists the totals per model since VS Code started', () => {
  const u = new UsageTotals();
  u.record(GPT, STATS);
  u.record({ id: 'anth/claude', name: 'Claude | *bold*', maxInputTokens: 200000 }, { ...STATS, inputTokens: 500, outputTokens: 50, cachedTokens: null, reasoningTokens: 7 });
  u.record(GPT, { ...STATS, inputTokens: 13000, outputTokens: 655, cachedTokens: 12000, reasoningTokens: null });
  assert.deepEqual(u.totals().map(([id, t]) => [id, t.answers, t.inputTokens, t.outputTokens, t.cachedTokens, t.reasoningTokens]),
    [['oai/gpt-4.1', 2, 25000, 1000, 22000, 100], ['anth/claude', 1, 500, 50, 0, 7]]);
  assert.deepEqual(rows(u.tooltip()), [
    '| GPT\\-4\\.1 | 2 | 25,000 | 1,000 | 22,000 | 100 |',
    // a name cannot break the table or add formatting
    '| Claude \\| \\*bold\\* | 1 | 500 | 50 | 0 | 7 |',
  ]);
  assert.equal(escapeMarkdown('a\nb`[x](y)'), 'a b\\`\\[x\\]\\(y\\)');
});

test('the status bar item appears with the first answer and shows the last one', () => {
  const before = fake.statusItems.length;
  const item = new UsageStatusItem();
  const shown = fake.statusItems[before];
  assert.equal(shown.visible, false, 'no answer yet: nothing to show');
  assert.equal(shown.command, 'lmbridge.showLog');
  item.record(GPT, STATS);
  assert.equal(shown.visible, true);
  assert.equal(shown.text, 'lmbridge 12.3k/128k');
  const tip = shown.tooltip as InstanceType<typeof fake.MarkdownString>;
  assert.ok(tip instanceof fake.MarkdownString);
  assert.equal(tip.isTrusted, false, 'names from settings must not run commands');
  assert.match(tip.value, /\*\*Since VS Code started\*\*/);
  assert.equal(shown.backgroundColor, undefined);
  item.record(GPT, { ...STATS, finishReason: 'length' });
  assert.equal((shown.backgroundColor as InstanceType<typeof fake.ThemeColor> | undefined)?.id, 'statusBarItem.warningBackground');
  assert.match(shown.accessibilityInformation?.label ?? '', /12345 tokens of 128000/);
  item.dispose();
  assert.equal(shown.disposed, true);
});

test('without a count from the upstream the tooltip gives the estimate alone; a bad factor is unknown', () => {
  const u = new UsageTotals();
  u.record(GPT, { ...STATS, inputTokens: null, calibrationFactor: null });
  assert.match(u.tooltip(), /lmbridge estimated the input at 11,800 tokens\./);
  assert.equal(parseStats({ stats: { ...STATS, calibrationFactor: 'x' } })?.calibrationFactor, null);
  assert.equal(parseStats({ stats: { ...STATS, calibrationFactor: -1 } })?.calibrationFactor, null);
});

test('the pace item shows while lmbridge.pace holds requests back, and hides after a quiet spell', async () => {
  assert.equal(parsePaceBite({ model: 'm' }), undefined);
  assert.equal(parsePaceBite('x'), undefined);
  const queued = parsePaceBite({ model: 'gpt-4o', scope: 'overall', limit: 'maxConcurrent=2', refused: false, waitMs: 120.4 })!;
  const refused = parsePaceBite({ model: 'gpt-4o', scope: 'model', limit: 'perMinute=10', refused: true, waitMs: 'x' })!;
  assert.equal(refused.waitMs, 0);
  assert.deepEqual(paceText([queued]), {
    text: '$(watch) paced: 1 queued',
    tooltip: 'lmbridge.pace held requests back: 1 queued. Last: waited 120 ms at maxConcurrent=2 overall. Change the limits in the lmbridge.pace user setting.',
  });
  assert.match(paceText([queued, refused]).text, /1 queued, 1 refused/);
  assert.match(paceText([queued, refused]).tooltip, /Last: refused at perMinute=10 per model \(gpt-4o\)/);
  const item = new PaceStatusItem(20);
  const shown = fake.statusItems[fake.statusItems.length - 1];
  assert.equal(shown.id, 'lmbridge.pace');
  assert.equal(shown.visible, false, 'hidden until the pace bites');
  item.record(queued);
  assert.ok(shown.visible && shown.backgroundColor === undefined);
  item.record(refused);
  assert.equal((shown.backgroundColor as { id: string } | undefined)?.id, 'statusBarItem.warningBackground');
  await new Promise(r => setTimeout(r, 60));
  assert.equal(shown.visible, false, 'hidden after a quiet spell');
  item.record(queued);
  assert.equal(shown.text, '$(watch) paced: 1 queued', 'counts start again');
  item.dispose();
  assert.ok(shown.disposed);
});
