// End-to-end runner: a real VS Code (code-server) with the lmbridge .vsix and the e2e driver
// extension installed, opened by headless Chromium (the browser connection is what starts the
// extension host). Waits for the driver's record, then stops everything it started, by pid.
//
// Usage: <node24> tests/e2e/run.js --run-dir DIR --plan PLAN.json [--settings SETTINGS.json]
//          [--workspace-settings SETTINGS.json] [--driver DIR] [--server-env ENV.json]
//          [--browser-script FILE.js]
//   --server-env names a JSON object of environment variables for code-server and everything
//   it starts (the extension host, the Python host), e.g. a PATH without Python.
//   --settings are the user's; those lmbridge declares with scope "machine" go to the remote
//   settings (code-server is a remote window: VS Code reads machine-scoped settings only from
//   there). --workspace-settings become <workspace>/.vscode/settings.json.
//   Notifications the workbench shows (read from its DOM while the run lasts, and for
//   $LMBRIDGE_E2E_LINGER_MS after the record is final) go to report.json's `notifications`,
//   each with the links its message renders.
//   VS Code's environment has LMBRIDGE_TEST_COMMAND_ARGUMENTS=1: lmbridge's key commands then
//   take the driver's arguments (a provider name, a key), which they refuse otherwise.
//   The cache made by scripts/e2e-setup is ${LMBRIDGE_E2E_CACHE:-~/.cache/lmbridge-e2e}.
//   Writes DIR/record.json (the driver's record) and DIR/report.json (timings, memory, logs).
//   --browser-script: a CommonJS module exporting `async (page, ctx) => result`, run once the
//   workbench page has loaded, beside the driver (it plays the user: keys, clicks, screenshots;
//   ctx: {runDir, port, t0}). The run waits for it after the record is final; its result (or
//   error) goes to report.json's `browser`, and a failed script fails the run.
//   A plan with "statusItem": {"contains": text, "screenshot": PNG path, "hoverScreenshot"?: PNG
//   path} has the runner, once the record is final, find the status bar item whose text holds
//   `contains`, read its text and accessible label, save a screenshot of the page, hover the
//   item and read (and save) its tooltip: report.json's `statusItem`.
//   Exit code 0 iff the record is final and has no driver errors.
'use strict';
const { spawn, execFileSync } = require('child_process');
const fs = require('fs');
const http = require('http');
const net = require('net');
const os = require('os');
const path = require('path');

const REPO = path.resolve(__dirname, '../..');
const CACHE = process.env.LMBRIDGE_E2E_CACHE || path.join(os.homedir(), '.cache/lmbridge-e2e');

function arg(name, dflt) {
  const i = process.argv.indexOf(name);
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1];
  if (dflt === undefined) throw new Error(`missing ${name}`);
  return dflt;
}
const RUN = path.resolve(arg('--run-dir'));
const PLAN = path.resolve(arg('--plan'));
const SETTINGS = arg('--settings', '');
const WORKSPACE_SETTINGS = arg('--workspace-settings', '');
const SERVER_ENV = arg('--server-env', '');
// The driver extension (a folder with package.json); benchmarks/vscode-bench brings its own.
const DRIVER = path.resolve(arg('--driver', path.join(__dirname, 'test-extension')));
const BROWSER_SCRIPT = arg('--browser-script', '');
const TIMEOUT_MS = +(process.env.LMBRIDGE_E2E_TIMEOUT_MS || 150000);
const LINGER_MS = +(process.env.LMBRIDGE_E2E_LINGER_MS || 0);
const sleep = (ms) => new Promise(r => setTimeout(r, ms));

function loadEnv() {
  const file = path.join(CACHE, 'env.json');
  if (!fs.existsSync(file)) throw new Error(`${file} is missing: run scripts/e2e-setup first`);
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

function freePort() {
  return new Promise((res, rej) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); });
    s.on('error', rej);
  });
}
function httpStatus(url) {
  return new Promise((res) => {
    const r = http.get(url, (resp) => { resp.resume(); res(resp.statusCode); });
    r.on('error', () => res(0));
    r.setTimeout(2000, () => { r.destroy(); res(0); });
  });
}
// Memory of a process tree: RSS counts shared pages once per process, PSS shares them out.
function treeMemoryMb(rootPid) {
  const kids = {}; const rss = {}; const pss = {};
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = +st.slice(st.lastIndexOf(')') + 2).split(' ')[1];
      (kids[ppid] ||= []).push(+d);
      const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${d}/status`, 'utf8'));
      rss[+d] = m ? +m[1] : 0;
      const q = /Pss:\s+(\d+)/.exec(fs.readFileSync(`/proc/${d}/smaps_rollup`, 'utf8'));
      pss[+d] = q ? +q[1] : 0;
    } catch { /* the process ended meanwhile */ }
  }
  let r = 0; let p = 0; const stack = [rootPid];
  while (stack.length) { const x = stack.pop(); r += rss[x] || 0; p += pss[x] || 0; (kids[x] || []).forEach(c => stack.push(c)); }
  return { rss: Math.round(r / 1024), pss: Math.round(p / 1024) };
}
function run(cmd, args, opts) {
  try {
    return execFileSync(cmd, args, Object.assign({ encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }, opts));
  } catch (e) {
    throw new Error(`${path.basename(cmd)} ${args.join(' ')} failed:\n${e.stdout || ''}${e.stderr || ''}`);
  }
}

// The status bar item whose text holds `want.contains`, as the user sees it: its text, label,
// a screenshot, and the tooltip its hover shows (each screenshot saved where the plan says).
async function readStatusItem(page, want) {
  const out = { found: false };
  const selector = '.statusbar-item';
  let handle;
  for (const end = Date.now() + 20000; Date.now() < end && !handle; await sleep(250)) {
    for (const el of await page.$$(selector)) {
      const text = (await el.textContent().catch(() => '')) || '';
      if (text.includes(want.contains)) { handle = el; break; }
    }
  }
  if (!handle) {
    out.items = await page.$$eval(selector, els => els.map(e => e.textContent || '')).catch(() => []);
    return out;
  }
  out.found = true;
  out.text = ((await handle.textContent()) || '').trim();
  out.id = await handle.getAttribute('id');
  out.ariaLabel = await handle.getAttribute('aria-label')
    || await handle.$eval('[aria-label]', e => e.getAttribute('aria-label')).catch(() => null);
  out.hasWarningIcon = !!(await handle.$('.codicon-warning'));
  if (want.screenshot) {
    fs.mkdirSync(path.dirname(want.screenshot), { recursive: true });
    await page.screenshot({ path: want.screenshot });
    out.screenshot = want.screenshot;
  }
  // the tooltip: VS Code shows it in a hover widget after a short delay
  await handle.hover();
  const hoverSel = '.workbench-hover, .monaco-hover';
  for (const end = Date.now() + 10000; Date.now() < end; await sleep(250)) {
    const texts = await page.$$eval(hoverSel, els => els.filter(e => e.offsetParent !== null || e.getClientRects().length).map(e => e.innerText || e.textContent || '')).catch(() => []);
    const tip = texts.find(t => t.includes('lmbridge'));
    if (tip) { out.tooltip = tip; break; }
  }
  if (want.hoverScreenshot && out.tooltip !== undefined) {
    await sleep(300); // the hover's fade-in
    const boxes = [await handle.boundingBox()];
    for (const h of await page.$$(hoverSel)) boxes.push(await h.boundingBox());
    const vp = page.viewportSize() || { width: 1280, height: 720 };
    const b = boxes.filter(Boolean);
    const x0 = Math.max(0, Math.min(...b.map(r => r.x)) - 16); const y0 = Math.max(0, Math.min(...b.map(r => r.y)) - 16);
    const x1 = Math.min(vp.width, Math.max(...b.map(r => r.x + r.width)) + 16); const y1 = Math.min(vp.height, Math.max(...b.map(r => r.y + r.height)) + 4);
    fs.mkdirSync(path.dirname(want.hoverScreenshot), { recursive: true });
    await page.screenshot({ path: want.hoverScreenshot, clip: { x: x0, y: y0, width: x1 - x0, height: y1 - y0 } });
    out.hoverScreenshot = want.hoverScreenshot;
  }
  return out;
}

(async () => {
  const env = loadEnv();
  const { chromium } = require(env.playwrightCore);
  const report = { runDir: RUN };
  const t0 = Date.now();
  fs.mkdirSync(RUN, { recursive: true });
  for (const d of ['ext', 'data/User', 'workspace', 'xdg', 'tmp', 'vsix']) fs.mkdirSync(path.join(RUN, d), { recursive: true });
  const nodeDir = path.dirname(env.node);
  const toolEnv = Object.assign({}, process.env, { PATH: `${nodeDir}:${process.env.PATH}` });

  // 1) package both extensions and install them with code-server's own CLI
  const extDir = path.join(REPO, 'extension');
  if (!fs.existsSync(path.join(extDir, 'node_modules/.bin/vsce'))) throw new Error('extension/node_modules is missing: run scripts/e2e-setup');
  if (process.env.LMBRIDGE_E2E_NATIVE === '1') {
    // the platform-specific .vsix (compiled lmbridge and orjson inside; needs $LMBRIDGE_DIST)
    run('npm', ['run', '--silent', 'package:native', '--', '-o', path.join(RUN, 'vsix/lmbridge.vsix')], { cwd: extDir, env: toolEnv });
  } else {
    run('npm', ['run', '--silent', 'package'], { cwd: extDir, env: toolEnv });
    fs.copyFileSync(path.join(extDir, 'lmbridge.vsix'), path.join(RUN, 'vsix/lmbridge.vsix'));
  }
  run(path.join(extDir, 'node_modules/.bin/vsce'), ['package', '--no-dependencies', '--allow-missing-repository', '-o', path.join(RUN, 'vsix/lmbridge-e2e.vsix')],
    { cwd: DRIVER, env: toolEnv });
  const xdg = { XDG_CONFIG_HOME: path.join(RUN, 'xdg/config'), XDG_DATA_HOME: path.join(RUN, 'xdg/data'), XDG_CACHE_HOME: path.join(RUN, 'xdg/cache') };
  const csEnv = Object.assign({}, toolEnv, xdg, {
    TMPDIR: path.join(RUN, 'tmp'),
    // keep the workbench and the server from looking for an extension gallery on the network
    EXTENSIONS_GALLERY: JSON.stringify({ serviceUrl: 'http://127.0.0.1:9/gallery', itemUrl: 'http://127.0.0.1:9/item', resourceUrlTemplate: 'http://127.0.0.1:9/{publisher}/{name}/{version}/{path}' }),
  });
  fs.writeFileSync(path.join(RUN, 'config.yaml'), 'auth: none\ncert: false\n');
  const csCommon = ['--config', path.join(RUN, 'config.yaml'), '--extensions-dir', path.join(RUN, 'ext'), '--user-data-dir', path.join(RUN, 'data')];
  run(env.node, [env.codeServerEntry, ...csCommon, '--install-extension', path.join(RUN, 'vsix/lmbridge.vsix'),
    '--install-extension', path.join(RUN, 'vsix/lmbridge-e2e.vsix'), '--force'], { env: csEnv });
  report.installedMs = Date.now() - t0;

  // 2) user settings: the base ones keep VS Code quiet; the test's ones configure lmbridge
  const settings = Object.assign({
    'security.workspace.trust.enabled': false,
    'workbench.startupEditor': 'none',
    'telemetry.telemetryLevel': 'off',
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'update.mode': 'none',
  }, SETTINGS ? JSON.parse(fs.readFileSync(SETTINGS, 'utf8')) : {});
  const props = JSON.parse(fs.readFileSync(path.join(extDir, 'package.json'), 'utf8')).contributes.configuration.properties;
  const machine = {};
  for (const key of Object.keys(settings)) {
    if (props[key] && props[key].scope === 'machine') { machine[key] = settings[key]; delete settings[key]; }
  }
  fs.writeFileSync(path.join(RUN, 'data/User/settings.json'), JSON.stringify(settings, null, 2));
  fs.mkdirSync(path.join(RUN, 'data/Machine'), { recursive: true });
  fs.writeFileSync(path.join(RUN, 'data/Machine/settings.json'), JSON.stringify(machine, null, 2));
  if (WORKSPACE_SETTINGS) {
    fs.mkdirSync(path.join(RUN, 'workspace/.vscode'), { recursive: true });
    fs.copyFileSync(WORKSPACE_SETTINGS, path.join(RUN, 'workspace/.vscode/settings.json'));
  }

  // 3) code-server on loopback, then the browser
  const OUT = path.join(RUN, 'record.json');
  fs.rmSync(OUT, { force: true });
  const port = await freePort();
  const log = fs.openSync(path.join(RUN, 'code-server.log'), 'w');
  const cs = spawn(env.node, [env.codeServerEntry, '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`, '--disable-telemetry',
    '--disable-update-check', '--disable-workspace-trust', '--disable-getting-started-override', ...csCommon, path.join(RUN, 'workspace')],
  { env: Object.assign({}, csEnv, SERVER_ENV ? JSON.parse(fs.readFileSync(SERVER_ENV, 'utf8')) : {}, { LMBRIDGE_E2E_PLAN: PLAN, LMBRIDGE_E2E_OUT: OUT, LMBRIDGE_TEST_COMMAND_ARGUMENTS: '1' }), stdio: ['ignore', log, log], detached: true });
  report.codeServerPid = cs.pid;
  let browser; let ok = false;
  try {
    let up = false;
    for (const end = Date.now() + 60000; Date.now() < end;) {
      if (await httpStatus(`http://127.0.0.1:${port}/healthz`) === 200) { up = true; break; }
      if (cs.exitCode !== null) break;
      await sleep(200);
    }
    if (!up) throw new Error(`code-server did not come up (see ${path.join(RUN, 'code-server.log')})`);
    report.httpReadyMs = Date.now() - t0;
    browser = await chromium.launchPersistentContext(path.join(RUN, 'chrome-profile'), {
      executablePath: env.chromium, headless: true,
      env: Object.assign({}, process.env, { XDG_CONFIG_HOME: path.join(RUN, 'xdg/chrome-config'), XDG_CACHE_HOME: path.join(RUN, 'xdg/chrome-cache') }),
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
    });
    const page = browser.pages()[0] || await browser.newPage();
    const consoleLines = [];
    page.on('console', m => consoleLines.push(`[${m.type()}] ${m.text()}`.slice(0, 400)));
    page.on('pageerror', e => consoleLines.push(`[pageerror] ${e.message}`.slice(0, 400)));
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(path.join(RUN, 'workspace'))}`, { waitUntil: 'domcontentloaded', timeout: 60000 });
    // Each notification toast once (its element is marked when first seen), as the user saw it.
    const toasts = new Map();
    const readToasts = async () => {
      let seen = [];
      try {
        seen = await page.evaluate(() => [...document.querySelectorAll('.notification-toast-container')].map(el => {
          if (!el.dataset.e2eToast) el.dataset.e2eToast = String((window.__e2eToasts = (window.__e2eToasts || 0) + 1));
          const text = (sel) => [...el.querySelectorAll(sel)].map(n => n.textContent || '');
          // every link the message renders (a workspace's text must never become one)
          const links = [...el.querySelectorAll('.notification-list-item-message a')].map(a => a.getAttribute('href') || a.getAttribute('data-href') || a.textContent || '');
          return { id: el.dataset.e2eToast, message: text('.notification-list-item-message').join(' '), source: text('.notification-list-item-source').join(' '),
            buttons: text('.notification-list-item-buttons-container .monaco-button'), links };
        }));
      } catch { /* the page is loading */ }
      for (const t of seen) if (!toasts.has(t.id)) toasts.set(t.id, Object.assign({ atMs: Date.now() - t0 }, t));
    };
    let browserDone;
    if (BROWSER_SCRIPT) {
      const script = require(path.resolve(BROWSER_SCRIPT));
      browserDone = Promise.resolve().then(() => script(page, { runDir: RUN, port, t0 })).then(
        result => { report.browser = { ok: true, result }; },
        e => { report.browser = { ok: false, error: String(e && e.stack || e) }; });
    }
    let record;
    for (const end = Date.now() + TIMEOUT_MS; Date.now() < end;) {
      try { record = JSON.parse(fs.readFileSync(OUT, 'utf8')); } catch { record = undefined; }
      await readToasts();
      if (record && record.final) break;
      await sleep(250);
    }
    if (browserDone) {
      const end = Date.now() + TIMEOUT_MS;
      while (!report.browser && Date.now() < end) { await readToasts(); await sleep(250); }
      if (!report.browser) report.browser = { ok: false, error: 'the browser script did not finish' };
    }
    if (record && record.final) {
      const plan = JSON.parse(fs.readFileSync(PLAN, 'utf8'));
      if (plan.statusItem) report.statusItem = await readStatusItem(page, plan.statusItem);
    }
    for (const end = Date.now() + LINGER_MS; Date.now() < end; await sleep(250)) await readToasts();
    report.notifications = [...toasts.values()];
    report.recordMs = Date.now() - t0;
    // everything this run started: code-server, its extension host, the Python host, Chromium
    report.memoryMb = treeMemoryMb(process.pid);
    fs.writeFileSync(path.join(RUN, 'browser-console.log'), consoleLines.join('\n'));
    if (!record) throw new Error('the driver extension wrote no record (see code-server.log and data/logs)');
    if (!record.final) report.error = 'timed out waiting for the driver to finish';
    ok = !!record.final && record.errors.length === 0 && (!browserDone || report.browser.ok);
  } catch (e) {
    report.error = String(e && e.stack || e);
  } finally {
    if (browser) await browser.close().catch(() => {});
    try { process.kill(-cs.pid, 'SIGTERM'); } catch { /* already gone */ }
    for (const end = Date.now() + 10000; Date.now() < end;) {
      try { process.kill(-cs.pid, 0); } catch { break; }
      await sleep(100);
    }
    try { process.kill(-cs.pid, 'SIGKILL'); } catch { /* already gone */ }
  }
  report.totalMs = Date.now() - t0;
  fs.writeFileSync(path.join(RUN, 'report.json'), JSON.stringify(report, null, 2));
  console.log(JSON.stringify(report));
  process.exit(ok ? 0 : 1);
})().catch((e) => {
  console.error(String(e && e.stack || e));
  process.exit(2);
});
