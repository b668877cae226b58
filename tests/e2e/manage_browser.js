// The browser side of tests/e2e/test_vscode_manage.py: plays the user in the real workbench
// (run by run.js --browser-script). Runs **lmbridge: Manage Models** from the Command Palette,
// adds an OpenAI-compatible provider pointing at the test upstream, types its key, reads the
// models the Test step lists, then opens the chat model picker. Screenshots go to
// <runDir>/shots/; what was seen is the result (report.json `browser.result`).
// Parameters come from <runDir>/manage-params.json: {name, baseUrl, key, expectModels}.
'use strict';
const fs = require('fs');
const path = require('path');

const helpers = require('./browser_helpers');

const { sleep } = helpers;

module.exports = async function manage(page, ctx) {
  try {
    return await flow(page, ctx);
  } catch (e) {
    // what the page showed when a step failed
    const shots = path.join(ctx.runDir, 'shots');
    fs.mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: path.join(shots, 'failure.png') }).catch(() => {});
    const rows = await page.locator('.quick-input-widget .monaco-list-row').evaluateAll(els => els.map(x => x.getAttribute('aria-label') || x.textContent)).catch(() => []);
    throw new Error(`${e && e.message}\nquick input rows: ${JSON.stringify(rows)}`);
  }
};

async function flow(page, ctx) {
  const params = JSON.parse(fs.readFileSync(path.join(ctx.runDir, 'manage-params.json'), 'utf8'));
  const shots = path.join(ctx.runDir, 'shots');
  fs.mkdirSync(shots, { recursive: true });
  const seen = { steps: [], shots: {} };
  const step = (name, extra) => seen.steps.push(Object.assign({ name, ms: Date.now() - ctx.t0 }, extra || {}));
  /**
   * The whole page as <name>-full.png (the run's artifact) and, for the README, <name>.png: the
   * part of the page around `selectors` (their bounding boxes together, with a margin).
   */
  const shot = async (name, selectors = ['.quick-input-widget'], m = 16) => {
    // no hover tooltip where the last click was; let the quick input's transitions end
    await page.mouse.move(660, 700);
    await sleep(800);
    await page.screenshot({ path: path.join(shots, `${name}-full.png`) });
    const boxes = [];
    for (const sel of selectors) {
      const box = await page.locator(sel).first().boundingBox().catch(() => null);
      if (box) boxes.push(box);
    }
    const file = path.join(shots, `${name}.png`);
    if (boxes.length) {
      const vp = page.viewportSize();
      const x = Math.max(0, Math.min(...boxes.map(b => b.x)) - m);
      const y = Math.max(0, Math.min(...boxes.map(b => b.y)) - m);
      const right = Math.min(vp.width, Math.max(...boxes.map(b => b.x + b.width)) + m);
      const bottom = Math.min(vp.height, Math.max(...boxes.map(b => b.y + b.height)) + m);
      await page.screenshot({ path: file, clip: { x, y, width: right - x, height: bottom - y } });
    } else {
      fs.copyFileSync(path.join(shots, `${name}-full.png`), file);
    }
    seen.shots[name] = file;
  };
  await page.setViewportSize({ width: 1280, height: 800 });

  const widget = page.locator('.quick-input-widget');
  const title = () => widget.locator('.quick-input-title').textContent().catch(() => '');
  const rows = () => widget.locator('.quick-input-list .monaco-list-row').evaluateAll(els => els.map(e => e.getAttribute('aria-label') || e.textContent || ''));
  /** Waits until the quick input shows a title matching `re` (and is visible). */
  const waitTitle = async (re, timeout = 30000) => {
    for (const end = Date.now() + timeout; Date.now() < end; await sleep(100)) {
      if (await widget.isVisible().catch(() => false) && re.test(await title() || '')) return;
    }
    throw new Error(`no quick input titled ${re} (showing: ${await title()}; rows: ${(await rows().catch(() => [])).join(' | ')})`);
  };
  const choose = async (text) => {
    const row = widget.locator('.quick-input-list .monaco-list-row', { hasText: text }).first();
    await row.waitFor({ state: 'visible', timeout: 15000 });
    await row.click();
  };
  const typeInto = async (value, { replace = false } = {}) => {
    const box = widget.locator('.quick-input-box input');
    if (replace) await box.fill('');
    await box.type(value, { delay: 5 });
    await page.keyboard.press('Enter');
  };

  const runCommand = (label, timeout) => helpers.runCommand(page, label, timeout);

  // the workbench is up when its status bar is
  await page.locator('.monaco-workbench .part.statusbar').waitFor({ state: 'visible', timeout: 90000 });
  await sleep(1500);
  step('workbench');

  // 1) Command Palette -> lmbridge: Manage Models
  await runCommand('lmbridge: Manage Models');
  await waitTitle(/^lmbridge: Manage Models$/);
  seen.mainMenu = await rows();
  step('manage menu', { rows: seen.mainMenu });

  // 2) Add -> the presets (screenshot) -> OpenAI-compatible server
  await choose('Add a provider');
  await waitTitle(/add a provider/);
  seen.presets = await rows();
  await shot('manage-presets');
  // the list is taller than the box: the last presets are found by filtering
  const filter = widget.locator('.quick-input-box input');
  await filter.type('AI SDK', { delay: 5 });
  await sleep(300);
  seen.presetsFiltered = await rows();
  await filter.fill('');
  await filter.type('OpenAI-compatible', { delay: 5 });
  await choose('OpenAI-compatible server');
  await waitTitle(/OpenAI-compatible server/);
  await typeInto(params.name, { replace: true });
  await waitTitle(/OpenAI-compatible server/);
  await sleep(300);
  await typeInto(params.baseUrl);
  await waitTitle(new RegExp(`: ${params.name}$`));
  seen.keyPrompt = await widget.locator('.quick-input-message, .quick-input-description').allTextContents().catch(() => []);
  seen.keyInputType = await widget.locator('.quick-input-box input').getAttribute('type');
  await typeInto(params.key);
  step('key entered');

  // 3) the Test step: the models the upstream lists
  await waitTitle(/works: \d+ model/, 60000);
  seen.testTitle = await title();
  seen.testedModels = await rows();
  // let the "Listing the models" notification go before the screenshot
  await page.locator('.notification-toast-container').first().waitFor({ state: 'hidden', timeout: 5000 }).catch(() => {});
  await shot('manage-test');
  step('tested', { rows: seen.testedModels });
  await choose('Back');
  await waitTitle(new RegExp(`Manage Models: ${params.name}$`));
  seen.providerMenu = await rows();
  await shot('manage-provider');
  await page.keyboard.press('Escape');
  await sleep(300);

  // 4) the main menu again, now listing the provider (the screenshot for the README)
  await runCommand('lmbridge: Manage Models');
  await waitTitle(/^lmbridge: Manage Models$/);
  seen.mainMenuAfter = await rows();
  await shot('manage-menu');
  await page.keyboard.press('Escape');
  step('manage done');

  // 5) the chat view's model picker
  try {
    seen.picker = await modelPicker(page, params, shot, step);
  } catch (e) {
    seen.pickerError = String(e && e.stack || e);
    await shot('picker-failed', []).catch(() => {});
  }
  return seen;
}

async function modelPicker(page, params, shot, step) {
  const widget = page.locator('.quick-input-widget');
  await page.keyboard.press('F1');
  await widget.waitFor({ state: 'visible' });
  await widget.locator('.quick-input-box input').type('Chat: Open Chat', { delay: 5 });
  await widget.locator('.quick-input-list .monaco-list-row', { hasText: 'Chat: Open Chat' }).first().click();
  // the chat input's model picker shows the model in use; it opens the list of models
  const button = page.locator('.model-picker-item .model-picker-name').first();
  await button.waitFor({ state: 'visible', timeout: 20000 });
  const current = (await button.textContent()) || '';
  step('chat open', { current });
  await button.click();
  await sleep(1000);
  const visibleOptions = () => page.evaluate(() => [...document.querySelectorAll('[role="option"], [role="menuitem"], [role="menuitemcheckbox"], [role="menuitemradio"], .action-widget .monaco-list-row')]
    .filter(e => e.offsetParent !== null).map(e => (e.getAttribute('aria-label') || e.textContent || '').trim()).filter(Boolean));
  // the picker shows the model in use first; the others are under "Other Models"
  const more = page.locator('[role="option"], [role="menuitem"], .monaco-list-row', { hasText: 'Other Models' }).first();
  if (await more.isVisible().catch(() => false)) {
    await more.click();
    await sleep(1000);
  }
  const options = await visibleOptions();
  await shot('picker', ['.action-widget', '.interactive-input-part'], 48);
  step('model picker', { options });
  await page.keyboard.press('Escape');
  return { current, options };
}
