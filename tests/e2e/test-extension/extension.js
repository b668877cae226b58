// The e2e driver: runs inside VS Code's extension host, next to the installed lmbridge
// extension. It reads a plan (JSON, path in LMBRIDGE_E2E_PLAN), runs each case through the public
// vscode.lm API exactly as a consumer would, and writes a record (LMBRIDGE_E2E_OUT) that the
// pytest side asserts on. Plain CommonJS: no build step.
//
// Plan: {"selector": {...}, "waitForModels": [ids], "apiKeys": {provider: key},
//        "cases": [{"name", "kind"?: "chat"|"countTokens", "model", "messages": [wire messages],
//                   "options"?: {modelOptions, tools, toolMode}, "readText"?: bool,
//                   "cancelAfterParts"?: n, "killHostAfterParts"?: n, "text"?: str|wire message}]}
const vscode = require('vscode');
const fs = require('fs');
const path = require('path');

const PLAN = process.env.LMBRIDGE_E2E_PLAN;
const OUT = process.env.LMBRIDGE_E2E_OUT;
const t0 = Date.now();
const record = { vscodeVersion: vscode.version, appName: vscode.env.appName, apiSurface: {}, steps: [], models: [], cases: {}, errors: [], final: false };

function write(final) {
  record.final = !!final;
  record.totalMs = Date.now() - t0;
  fs.mkdirSync(path.dirname(OUT), { recursive: true });
  fs.writeFileSync(OUT + '.tmp', JSON.stringify(record, null, 2));
  fs.renameSync(OUT + '.tmp', OUT); // atomic: the runner never reads half a file
}
const step = (name, extra) => record.steps.push(Object.assign({ name, ms: Date.now() - t0 }, extra || {}));

// ------------------------------------------------------------------------ wire -> vscode
function partFromWire(w) {
  switch (w.kind) {
    case 'text': return new vscode.LanguageModelTextPart(w.value);
    case 'toolCall': return new vscode.LanguageModelToolCallPart(w.callId, w.name, w.input);
    case 'toolResult': return new vscode.LanguageModelToolResultPart(w.callId, w.content.map(partFromWire));
    case 'data': return new vscode.LanguageModelDataPart(Buffer.from(w.data, 'base64'), w.mimeType);
    case 'thinking': return new vscode.LanguageModelThinkingPart(w.value, w.id, w.metadata);
    default: throw new Error('plan: unknown part kind ' + w.kind);
  }
}
function messageFromWire(m) {
  const content = (typeof m.content === 'string' ? [{ kind: 'text', value: m.content }] : m.content).map(partFromWire);
  return new vscode.LanguageModelChatMessage(m.role, content, m.name || undefined);
}

// ------------------------------------------------------------------------ vscode -> record
function describePart(p) {
  if (p instanceof vscode.LanguageModelTextPart) return { kind: 'text', value: p.value };
  if (p instanceof vscode.LanguageModelToolCallPart) return { kind: 'toolCall', callId: p.callId, name: p.name, input: p.input };
  if (vscode.LanguageModelDataPart && p instanceof vscode.LanguageModelDataPart) {
    return { kind: 'data', mimeType: p.mimeType, data: Buffer.from(p.data).toString('base64') };
  }
  if (vscode.LanguageModelThinkingPart && p instanceof vscode.LanguageModelThinkingPart) {
    return { kind: 'thinking', value: p.value, id: p.id, metadata: p.metadata };
  }
  if (p instanceof vscode.LanguageModelToolResultPart) return { kind: 'toolResult', callId: p.callId };
  return { kind: 'unknown', ctor: p && p.constructor && p.constructor.name };
}
function describeError(e) {
  return {
    isLanguageModelError: e instanceof vscode.LanguageModelError,
    code: e && e.code, name: e && e.name, message: String(e && e.message || e),
  };
}

async function lmbridgeApi() {
  const ext = vscode.extensions.getExtension('lmbridge.lmbridge');
  if (!ext) throw new Error('the lmbridge extension is not installed');
  return ext.isActive ? ext.exports : await ext.activate();
}

async function findModel(id, selector) {
  const models = await vscode.lm.selectChatModels(Object.assign({}, selector, { id }));
  if (!models.length) throw new Error('no model ' + id);
  return models[0];
}

async function runChat(c, selector, api) {
  const out = { ok: false, parts: [], text: '', hostPidBefore: api.hostPid() };
  const start = Date.now();
  const cts = new vscode.CancellationTokenSource();
  try {
    const model = await findModel(c.model, selector);
    const options = Object.assign({}, c.options || {});
    if (options.toolMode === 2) options.toolMode = vscode.LanguageModelChatToolMode.Required;
    const resp = await model.sendRequest((c.messages || []).map(messageFromWire), options, cts.token);
    out.sendResolvedMs = Date.now() - start;
    if (c.readText) {
      for await (const t of resp.text) {
        out.text += t;
        out.parts.push({ kind: 'text', value: t });
      }
    } else {
      for await (const p of resp.stream) {
        const d = describePart(p);
        if (out.firstPartMs === undefined) out.firstPartMs = Date.now() - start;
        out.parts.push(d);
        if (d.kind === 'text') out.text += d.value;
        if (c.cancelAfterParts && out.parts.length === c.cancelAfterParts) { out.cancelledAtMs = Date.now() - start; cts.cancel(); }
        if (c.killHostAfterParts && out.parts.length === c.killHostAfterParts) {
          out.killedPid = api.hostPid();
          try { process.kill(out.killedPid, 'SIGKILL'); } catch (e) { out.killError = String(e); }
        }
      }
    }
    out.ok = true;
  } catch (e) {
    out.error = describeError(e);
  } finally {
    cts.dispose();
  }
  out.ms = Date.now() - start;
  if (out.cancelledAtMs !== undefined) out.endedAfterCancelMs = out.ms - out.cancelledAtMs;
  out.hostPidAfter = api.hostPid();
  return out;
}

async function runCountTokens(c, selector) {
  try {
    const model = await findModel(c.model, selector);
    const text = typeof c.text === 'string' ? c.text : messageFromWire(c.text);
    return { ok: true, tokens: await model.countTokens(text) };
  } catch (e) {
    return { ok: false, error: describeError(e) };
  }
}

async function run() {
  step('activate');
  record.apiSurface = {
    LanguageModelDataPart: typeof vscode.LanguageModelDataPart,
    LanguageModelThinkingPart: typeof vscode.LanguageModelThinkingPart,
  };
  const plan = JSON.parse(fs.readFileSync(PLAN, 'utf8'));
  const selector = plan.selector || { vendor: 'lmbridge' };
  const api = await lmbridgeApi();
  step('lmbridge active');
  for (const [provider, key] of Object.entries(plan.apiKeys || {})) {
    await vscode.commands.executeCommand('lmbridge.setApiKey', provider, key);
  }
  // The models appear once the host has started and answered models/list.
  const want = plan.waitForModels || [];
  let models = [];
  for (const end = Date.now() + (plan.modelWaitMs || 30000); Date.now() < end;) {
    models = await vscode.lm.selectChatModels(selector);
    if (models.length && want.every(id => models.some(m => m.id === id))) break;
    await new Promise(r => setTimeout(r, 250));
  }
  record.models = models.map(m => ({ id: m.id, name: m.name, vendor: m.vendor, family: m.family, version: m.version, maxInputTokens: m.maxInputTokens }));
  record.hostPid = api.hostPid();
  step('models', { count: models.length });
  write(false);
  for (const c of plan.cases || []) {
    const r = c.kind === 'countTokens' ? await runCountTokens(c, selector) : await runChat(c, selector, api);
    record.cases[c.name] = r;
    step('case ' + c.name);
    write(false);
  }
}

function activate() {
  if (!PLAN || !OUT) return; // installed but not driven by the harness: do nothing
  run().catch(e => record.errors.push({ at: 'run', message: String(e && e.stack || e) }))
    .finally(() => { try { write(true); } catch (e) { console.error(e); } });
}
function deactivate() {}
module.exports = { activate, deactivate };
