// The browser side of tests/e2e/test_vscode_models_editor.py: plays the user in the real
// workbench (run by run.js --browser-script). Opens VS Code's own Language Models editor
// (Chat: Manage Language Models), adds a provider of the vendor 'lmbridge API' with Add Models
// (group name, format, base URL, API key: VS Code's own prompts, driven by lmbridge's
// `configuration` schema), then waits for the group's models in the editor. Screenshots go to
// <runDir>/shots/; what was seen is the result (report.json `browser.result`).
// Parameters come from <runDir>/editor-params.json: {group, format, baseUrl, key, expectModels}.
'use strict';
const fs = require('fs');
const path = require('path');

const helpers = require('./browser_helpers');

const { sleep } = helpers;

module.exports = async function modelsEditor(page, ctx) {
  const shots = path.join(ctx.runDir, 'shots');
  fs.mkdirSync(shots, { recursive: true });
  try {
    return await flow(page, ctx, shots);
  } catch (e) {
    await page.screenshot({ path: path.join(shots, 'failure.png') }).catch(() => {});
    // what the page held, to find the elements a changed workbench moved
    fs.writeFileSync(path.join(shots, 'failure.html'), await page.content().catch(() => ''));
    const rows = await page.locator('.quick-input-widget .monaco-list-row').evaluateAll(els => els.map(x => x.getAttribute('aria-label') || x.textContent)).catch(() => []);
    throw new Error(`${e && e.message}\nquick input rows: ${JSON.stringify(rows)}`);
  }
};

async function flow(page, ctx, shots) {
  const params = JSON.parse(fs.readFileSync(path.join(ctx.runDir, 'editor-params.json'), 'utf8'));
  const seen = { steps: [], prompts: [] };
  const step = (name, extra) => seen.steps.push(Object.assign({ name, ms: Date.now() - ctx.t0 }, extra || {}));
  const shot = async (name) => {
    await page.mouse.move(660, 700);
    await sleep(500);
    await page.screenshot({ path: path.join(shots, `${name}.png`) });
  };
  await page.setViewportSize({ width: 1280, height: 800 });
  const widget = page.locator('.quick-input-widget');
  const title = () => widget.locator('.quick-input-title').textContent().catch(() => '');
  const rows = () => widget.locator('.quick-input-list .monaco-list-row').evaluateAll(els => els.map(e => e.getAttribute('aria-label') || e.textContent || ''));
  const visible = () => widget.isVisible().catch(() => false);
  /** Waits for a quick input whose title matches `re`; returns what it shows. */
  const waitPrompt = async (re, timeout = 30000) => {
    for (const end = Date.now() + timeout; Date.now() < end; await sleep(100)) {
      const t = await visible() ? (await title() || '') : '';
      const placeholder = await visible() ? await widget.locator('.quick-input-box input').getAttribute('placeholder').catch(() => '') : '';
      if (re.test(t) || re.test(placeholder || '')) {
        const prompt = {
          title: t,
          placeholder,
          inputType: await widget.locator('.quick-input-box input').getAttribute('type').catch(() => null),
          message: (await widget.locator('.quick-input-message').allTextContents().catch(() => [])).join(' '),
          rows: await rows().catch(() => []),
        };
        seen.prompts.push(prompt);
        return prompt;
      }
    }
    throw new Error(`no quick input for ${re} (showing: ${await title()}; rows: ${(await rows().catch(() => [])).join(' | ')})`);
  };
  const typeAndEnter = async (value) => {
    const box = widget.locator('.quick-input-box input');
    await box.fill('');
    if (value) await box.type(value, { delay: 3 });
    await page.keyboard.press('Enter');
    await sleep(300);
  };
  const choose = async (text) => {
    const row = widget.locator('.quick-input-list .monaco-list-row', { hasText: text }).first();
    await row.waitFor({ state: 'visible', timeout: 15000 });
    await row.click();
    await sleep(300);
  };
  const runCommand = (label, timeout) => helpers.runCommand(page, label, timeout);

  await page.locator('.monaco-workbench .part.statusbar').waitFor({ state: 'visible', timeout: 90000 });
  await sleep(1500);
  step('workbench');

  // 1) VS Code's Language Models editor
  await runCommand('Manage Language Models');
  // VS Code 1.139 opens it in a modal editor part; its Add Models button is the way in
  const addButton = page.getByText('Add Models', { exact: true }).filter({ visible: true }).first();
  await addButton.waitFor({ state: 'visible', timeout: 30000 });
  const editor = page.locator('.monaco-workbench');
  await sleep(1000);
  await shot('editor-open');
  step('editor open');

  /** Add Models -> 'lmbridge API' -> VS Code's prompts from lmbridge's configuration schema. */
  const addGroup = async (group, format, baseUrl, key, shots) => {
    await addButton.click();
    await sleep(800);
    const items = page.locator('.monaco-menu .action-item, .context-view .action-item, .action-widget .monaco-list-row');
    seen.addMenu = await items.evaluateAll(els => els.map(e => (e.textContent || '').trim())).catch(() => []);
    if (shots) await shot('add-menu');
    await items.filter({ hasText: 'lmbridge API' }).first().click();
    await waitPrompt(/name/i);
    await typeAndEnter(group);
    const formatPrompt = await waitPrompt(/API format/);
    if (shots) await shot('format-pick');
    await choose(format);
    await waitPrompt(/Base URL/);
    await typeAndEnter(baseUrl);
    await waitPrompt(/API key/);
    if (shots) await shot('key-prompt');
    await typeAndEnter(key);
    step(`group ${group} added`, { formats: formatPrompt.rows });
  };
  /** Waits until the editor shows every text of `texts`; returns the page's text. */
  const waitText = async (texts, timeout = 60000) => {
    let text = '';
    for (const end = Date.now() + timeout; Date.now() < end; await sleep(500)) {
      text = await page.locator('.monaco-workbench').innerText().catch(() => '');
      if (texts.every(t => text.includes(t))) break;
    }
    return text;
  };

  // 2) the group, and its models in the editor
  await addGroup(params.group, params.format, params.baseUrl, params.key, true);
  seen.editorText = await waitText(params.expectModels);
  await shot('editor-models');
  step('models shown');

  // 3) a second group at another origin, given the same key: lmbridge does not send it there
  if (params.second) {
    await addGroup(params.second.group, params.format, params.second.baseUrl, params.key, false);
    seen.secondText = await waitText([params.second.group], 30000);
    await sleep(3000);  // the listing's error reaches the group's row
    seen.secondText = await page.locator('.monaco-workbench').innerText().catch(() => '');
    await shot('second-group');
    step('second group added');
  }
  return seen;
}
