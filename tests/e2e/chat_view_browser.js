// The browser side of tests/e2e/test_vscode_chat_view.py: plays the user in the real chat view
// (run by run.js --browser-script). Once the driver has seen the lmbridge models, opens the chat
// view, asks the driver's chat participant (@e2e), and reads what the view shows for the
// answer: its text, and the error block VS Code draws for a failed request. A screenshot goes to
// <runDir>/chat-view.png.
'use strict';
const fs = require('fs');
const path = require('path');

const sleep = (ms) => new Promise(r => setTimeout(r, ms));

async function modelsSeen(runDir, deadline) {
  const file = path.join(runDir, 'record.json');
  while (Date.now() < deadline) {
    try {
      const record = JSON.parse(fs.readFileSync(file, 'utf8'));
      if (record.final || (record.models && record.models.length)) return record;
    } catch { /* not written yet */ }
    await sleep(250);
  }
  throw new Error('the driver never listed the models');
}

module.exports = async function chatView(page, ctx) {
  await page.setViewportSize({ width: 1280, height: 800 });
  await modelsSeen(ctx.runDir, Date.now() + 90000);
  await page.keyboard.press('F1');
  await page.locator('.quick-input-widget input').first().waitFor();
  await page.keyboard.type('>Chat: Open Chat (Ask)');
  await page.locator('.quick-input-widget .monaco-list-row').first().waitFor();
  await page.keyboard.press('Enter');
  const input = page.locator('.interactive-input-editor').first();
  await input.waitFor();
  await input.click();
  await page.keyboard.type('@e2e hello from the chat view');
  await page.keyboard.press('Enter');
  // the answer is done when the view shows its error block or the participant's text
  const response = page.locator('.interactive-item-container.interactive-response').last();
  await response.waitFor({ timeout: 60000 });
  const deadline = Date.now() + 60000;
  let errorText = '';
  let answerText = '';
  while (Date.now() < deadline) {
    errorText = (await response.locator('.chat-notification-widget').allInnerTexts()).join('\n').trim();
    answerText = (await response.locator('.rendered-markdown').evaluateAll(
      els => els.filter(e => !e.closest('.chat-notification-widget')).map(e => e.innerText))).join('\n').trim();
    if (errorText) break;
    await sleep(250);
  }
  const errorIcon = await response.locator('.chat-notification-widget .codicon-error').count();
  await page.screenshot({ path: path.join(ctx.runDir, 'chat-view.png') });
  return { errorText, errorIcon, answerText, responseText: (await response.innerText()).trim() };
};
