// Steps the browser scripts of the end-to-end tests share (CommonJS, required by them).
'use strict';

const sleep = (ms) => new Promise(r => setTimeout(r, ms));

/**
 * Runs a command from the Command Palette. The palette lists an extension's commands once the
 * extension host has registered them: until then, close it and open it again.
 */
async function runCommand(page, label, timeout = 60000) {
  const widget = page.locator('.quick-input-widget');
  for (const end = Date.now() + timeout; ;) {
    await page.keyboard.press('F1');
    await widget.waitFor({ state: 'visible', timeout: 5000 }).catch(() => {});
    if (await widget.isVisible()) {
      await widget.locator('.quick-input-box input').type(label, { delay: 5 });
      const row = widget.locator('.quick-input-list .monaco-list-row', { hasText: label }).first();
      if (await row.waitFor({ state: 'visible', timeout: 3000 }).then(() => true, () => false)) {
        await row.click();
        return;
      }
    }
    if (Date.now() > end) throw new Error(`the Command Palette has no '${label}'`);
    await page.keyboard.press('Escape');
    await sleep(1000);
  }
}

module.exports = { runCommand, sleep };
