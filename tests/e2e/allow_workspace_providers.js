// Browser script for run.js (--browser-script): plays the user who allows the providers a
// workspace adds: waits for lmbridge's question and clicks its "Allow" button.
'use strict';
module.exports = async (page) => {
  const end = Date.now() + 120000;
  while (Date.now() < end) {
    for (const toast of await page.$$('.notification-toast-container')) {
      const message = await toast.$eval('.notification-list-item-message', e => e.textContent || '').catch(() => '');
      if (!message.includes("this workspace's settings add")) continue;
      for (const button of await toast.$$('.notification-list-item-buttons-container .monaco-button')) {
        if (((await button.textContent()) || '').trim() === 'Allow') {
          await button.click();
          return { clicked: true, message };
        }
      }
    }
    await new Promise(r => setTimeout(r, 250));
  }
  throw new Error("no lmbridge question with an 'Allow' button appeared");
};
