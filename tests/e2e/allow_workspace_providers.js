// Browser script for run.js (--browser-script): plays the user who allows the providers a
// workspace adds (clicks "Allow" in lmbridge's question), then, when lmbridge asks in a modal
// whether to store a key for a workspace's provider, reads the modal and answers "Cancel".
'use strict';
const sleep = (ms) => new Promise(r => setTimeout(r, ms));

async function clickAllow(page, end) {
  while (Date.now() < end) {
    for (const toast of await page.$$('.notification-toast-container')) {
      const message = await toast.$eval('.notification-list-item-message', e => e.textContent || '').catch(() => '');
      if (!message.includes("this workspace's settings add")) continue;
      for (const button of await toast.$$('.notification-list-item-buttons-container .monaco-button')) {
        if (((await button.textContent()) || '').trim() === 'Allow') {
          await button.click();
          return message;
        }
      }
    }
    await sleep(250);
  }
  throw new Error("no lmbridge question with an 'Allow' button appeared");
}

async function cancelKeyDialog(page, end) {
  while (Date.now() < end) {
    for (const box of await page.$$('.monaco-dialog-box')) {
      const text = (await box.evaluate(e => e.innerText || e.textContent || '').catch(() => '')) || '';
      if (!text.includes("provider of this workspace's settings")) continue;
      const buttons = [];
      for (const button of await box.$$('.monaco-button')) buttons.push(((await button.textContent()) || '').trim());
      for (const button of await box.$$('.monaco-button')) {
        if (((await button.textContent()) || '').trim() === 'Cancel') {
          await button.click();
          return { text, buttons };
        }
      }
    }
    await sleep(250);
  }
  return null; // the plan asked for no key: no dialog
}

module.exports = async (page) => {
  const allowed = await clickAllow(page, Date.now() + 120000);
  const dialog = await cancelKeyDialog(page, Date.now() + 90000);
  return { clicked: true, message: allowed, dialog };
};
