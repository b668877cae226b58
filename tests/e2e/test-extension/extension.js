// The e2e driver: runs inside VS Code's extension host, next to the installed lmbridge
// extension. It reads a plan (JSON, path in LMBRIDGE_E2E_PLAN), runs each case through the public
// vscode.lm API exactly as a consumer would, and writes a record (LMBRIDGE_E2E_OUT) that the
// pytest side asserts on. Plain CommonJS: no build step.
//
// Plan: {"selector": {...}, "waitForHostMs"?: n, "waitForModels": [ids], "apiKeys": {provider: key},
//        "selects"?: [{"name", "selector"}] (the ids vscode.lm.selectChatModels gives, in record.selects),
//        "commandsAfterModels"?: [{"name", "command", "args"?}] (after the cases; results in record.commands),
//        "casesAfterCommands"?: [cases (chat or waitModels, each with its own "selector"?)],
//        "cases": [{"name", "kind"?: "chat"|"countTokens"|"replaceInFile"|"waitModels", "model", "messages": [wire messages],
//                   ("replaceInFile": "file", "from", "to"; "waitModels": "present", "absent", "ms", "selector"?);
//                   a model id "*/<model>" is that model of any provider
//                   "options"?: {modelOptions, tools, toolMode}, "readText"?: bool,
//                   "cancelAfterParts"?: n, "killHostAfterParts"?: n, "text"?: str|wire message,
//                   "listModels"?: true (record lmbridge's model ids before and after)}],
//        "diagnostics"?: {"files": [paths relative to the first workspace folder], "waitMs"?: n}}
//   diagnostics: each file is opened and VS Code's own problems for it (the JSON language
//   service validating settings files against the contributed settings schemas) are recorded
//   in record.diagnostics[file], once they have been steady for a second.
//   consumer.heapProbe: a folder where the extension host's heap is measured on request (see
//   answerHeapProbe).
const vscode = require('vscode');
const fs = require('fs');
const path = require('path');

const PLAN = process.env.LMBRIDGE_E2E_PLAN;
const OUT = process.env.LMBRIDGE_E2E_OUT;
const t0 = Date.now();
const record = { vscodeVersion: vscode.version, appName: vscode.env.appName, apiSurface: {}, steps: [], models: [], cases: {}, errors: [], final: false };
// What the driver's own test provider (vendor 'lmbridge-e2e') was asked, and its consumer phase.
record.providerEvents = [];
record.consumer = { settingUpdates: [] };
// The tools this driver registers (vscode.lm.registerTool), and each call they got.
record.toolCalls = [];

// Two tools, for lmbridge.endpoint.tools: the e2e allows `lmbridge_e2e_secret` only.
function registerTools() {
  for (const name of ['lmbridge_e2e_secret', 'lmbridge_e2e_hidden']) {
    vscode.lm.registerTool(name, {
      invoke(options) {
        record.toolCalls.push({ name, input: options.input, ms: Date.now() - t0 });
        const word = options.input && options.input.word;
        return new vscode.LanguageModelToolResult([new vscode.LanguageModelTextPart(`TOOL-SECRET-${word}-7391 from ${name}`)]);
      },
    });
  }
}

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

// `id` is a model id, or "*/<model>": the model of that id within any provider (whose name the
// test cannot know in advance, as a Language Models editor group's).
const idMatches = (pattern, id) => pattern.startsWith('*/') ? id.endsWith(pattern.slice(1)) : id === pattern;

async function findModel(id, selector) {
  const models = id.startsWith('*/')
    ? (await vscode.lm.selectChatModels(selector)).filter(m => idMatches(id, m.id))
    : await vscode.lm.selectChatModels(Object.assign({}, selector, { id }));
  if (!models.length) throw new Error('no model ' + id);
  return models[0];
}

async function lmbridgeModelIds() {
  return (await vscode.lm.selectChatModels({ vendor: 'lmbridge' })).map(m => m.id);
}

async function runChat(c, selector, api) {
  const out = { ok: false, parts: [], text: '', hostPidBefore: api.hostPid() };
  if (c.listModels) out.modelsBefore = await lmbridgeModelIds();
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
  if (c.listModels) out.modelsAfter = await lmbridgeModelIds();
  return out;
}

// A user's edit of a file between cases (chatLanguageModels.json ...): `from` -> `to` in `file`.
function replaceInFile(c) {
  try {
    const before = fs.readFileSync(c.file, 'utf8');
    if (!before.includes(c.from)) return { ok: false, error: { message: `${c.file} has no ${c.from}` }, text: before };
    fs.writeFileSync(c.file, before.split(c.from).join(c.to));
    return { ok: true };
  } catch (e) {
    return { ok: false, error: describeError(e) };
  }
}

// Waits until the models of `selector` include every id of `present` and none of `absent`.
async function waitModels(c, selector) {
  const start = Date.now();
  let ids = [];
  for (const end = start + (c.ms || 30000); Date.now() < end;) {
    ids = (await vscode.lm.selectChatModels(c.selector || selector)).map(m => m.id);
    if ((c.present || []).every(p => ids.some(id => idMatches(p, id))) && !(c.absent || []).some(p => ids.some(id => idMatches(p, id)))) return { ok: true, ids, ms: Date.now() - start };
    await new Promise(r => setTimeout(r, 250));
  }
  return { ok: false, ids, ms: Date.now() - start };
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

// ------------------------------------------------------------------------ a provider of its own
// Models under vendor 'lmbridge-e2e' for the consumer cases (Python uses VS Code's models):
//   "/throw <Code>"  fails with vscode.LanguageModelError.<Code>;
//   "/slow <tag>"    streams "tick i " every 100 ms for 10 s and records when its token is cancelled;
//   tools + toolMode Required: one tool call; else "<model id> says: <text>" in three parts.
// Token counts are characters + 1000, so a count is recognisably this provider's.
const E2E_MODELS = [
  { id: 'e2e-alpha', name: 'E2E Alpha', family: 'fam-a', version: '1', maxInputTokens: 4000, maxOutputTokens: 1000, capabilities: { toolCalling: true } },
  { id: 'e2e-beta', name: 'E2E Beta', family: 'fam-b', version: '2', maxInputTokens: 8000, maxOutputTokens: 1000, capabilities: { toolCalling: true } },
];
function textOf(message) {
  return (message.content || []).map(p => (p && typeof p.value === 'string' ? p.value : '')).join('');
}
const e2eProvider = {
  provideLanguageModelChatInformation: () => E2E_MODELS,
  async provideLanguageModelChatResponse(model, messages, options, progress, token) {
    const text = textOf(messages[messages.length - 1]);
    const event = { model: model.id, text: text.slice(0, 80), messages: messages.length, atMs: Date.now() - t0 };
    record.providerEvents.push(event);
    const thrown = /^\/throw (\w+)/.exec(text);
    if (thrown) {
      event.threw = thrown[1];
      throw vscode.LanguageModelError[thrown[1]](`e2e provider refuses: ${thrown[1]}`);
    }
    if ((options.tools || []).length && options.toolMode === vscode.LanguageModelChatToolMode.Required) {
      progress.report(new vscode.LanguageModelToolCallPart('call-e2e-1', options.tools[0].name, { city: 'Paris' }));
      return;
    }
    const slow = /^\/slow (\S+)/.exec(text);
    if (slow) {
      event.tag = slow[1];
      event.partsSent = 0;
      token.onCancellationRequested(() => { event.cancelled = true; event.cancelledAtMs = Date.now() - t0; });
      for (let i = 0; i < 100 && !token.isCancellationRequested; i++) {
        progress.report(new vscode.LanguageModelTextPart(`tick ${i} `));
        event.partsSent = i + 1;
        await new Promise(r => setTimeout(r, 100));
      }
      event.endedMs = Date.now() - t0;
      return;
    }
    for (const piece of [model.id, ' says: ', text]) progress.report(new vscode.LanguageModelTextPart(piece));
  },
  provideTokenCount(model, text) {
    return (typeof text === 'string' ? text : textOf(text)).length + 1000;
  },
};

// ------------------------------------------------------------------------ the consumer phase
// Turns the consumer side on through the settings (no reload): the model setting, the loopback
// endpoint, then the Python app (tests/e2e/consumer_app_e2e.py), which the host starts on
// `configure`. Serves the app's setting requests until its record is final and the pytest
// side is done with the endpoint.
// The extension host's heap for benchmarks/load_memory.py: when the file `<dir>/probe-<n>.req`
// appears, a full collection (through an inspector session of this process: the extension host
// runs without --expose-gc) and then its figures in `<dir>/probe-<n>.json`. A request may ask for
// a heap snapshot too ({"snapshot": path}).
let heapProbes = 0;
async function answerHeapProbe(dir) {
  const req = path.join(dir, `probe-${heapProbes}.req`);
  if (!fs.existsSync(req)) return;
  const ask = JSON.parse(fs.readFileSync(req, 'utf8') || '{}');
  const inspector = require('inspector');
  const v8 = require('v8');
  const session = new inspector.Session();
  session.connect();
  const post = (method) => new Promise((res, rej) => session.post(method, {}, (e, r) => (e ? rej(e) : res(r))));
  const t = Date.now();
  try {
    // twice: what a first collection frees (weak maps' entries ...) may hold more
    await post('HeapProfiler.collectGarbage');
    await post('HeapProfiler.collectGarbage');
  } finally {
    session.disconnect();
  }
  const out = { gcMs: Date.now() - t, memory: process.memoryUsage(), heap: v8.getHeapStatistics() };
  if (ask.snapshot) out.snapshot = v8.writeHeapSnapshot(ask.snapshot);
  const file = path.join(dir, `probe-${heapProbes}.json`);
  fs.writeFileSync(file + '.tmp', JSON.stringify(out));
  fs.renameSync(file + '.tmp', file);
  heapProbes++;
}

async function runConsumerPhase(c) {
  const cfg = () => vscode.workspace.getConfiguration('lmbridge');
  const global = vscode.ConfigurationTarget.Global;
  await cfg().update('consumer.model', c.model, global);
  await cfg().update('endpoint.enabled', true, global);
  await cfg().update('apps', c.apps, global);
  step('consumer settings');
  write(false);
  const readJson = (file) => { try { return JSON.parse(fs.readFileSync(file, 'utf8')); } catch { return undefined; } };
  let done = 0; let app;
  const end = Date.now() + (c.timeoutMs || 90000);
  while (Date.now() < end) {
    app = readJson(c.out);
    const requests = (app && app.settingRequests) || [];
    for (; done < requests.length; done++) {
      const { key, value } = requests[done];
      const dot = key.indexOf('.');
      await vscode.workspace.getConfiguration(key.slice(0, dot)).update(key.slice(dot + 1), value, global);
      record.consumer.settingUpdates.push({ key, value, ms: Date.now() - t0 });
    }
    if (app && app.final && (!c.endpointDone || fs.existsSync(c.endpointDone))) break;
    if (c.heapProbe) {
      try {
        await answerHeapProbe(c.heapProbe);
      } catch (e) {
        record.errors.push({ at: 'heapProbe', message: String(e && e.stack || e) });
      }
    }
    await new Promise(r => setTimeout(r, 100));
  }
  record.consumer.appFinal = !!(app && app.final);
  record.consumer.endpointDone = !c.endpointDone || fs.existsSync(c.endpointDone);
  step('consumer done');
}

async function runDiagnostics(d) {
  record.diagnostics = {};
  const folder = vscode.workspace.workspaceFolders[0].uri;
  for (const file of d.files) {
    const uri = vscode.Uri.joinPath(folder, file);
    const doc = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(doc);
    let last = '';
    let steadySince = Date.now();
    let found = [];
    for (const end = Date.now() + (d.waitMs || 30000); Date.now() < end;) {
      found = vscode.languages.getDiagnostics(uri).map(x => ({
        line: x.range.start.line, message: x.message, severity: x.severity, source: x.source || null,
      }));
      const now = JSON.stringify(found);
      if (now !== last) { last = now; steadySince = Date.now(); }
      if (found.length && Date.now() - steadySince > 1500) break;
      await new Promise(r => setTimeout(r, 200));
    }
    record.diagnostics[file] = { languageId: doc.languageId, items: found };
    step('diagnostics ' + file, { count: found.length });
    write(false);
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
  if (plan.waitForHostMs) {
    // Apps or the endpoint on: lmbridge starts its host by itself, before any model request.
    for (const end = Date.now() + plan.waitForHostMs; Date.now() < end && !api.hostPid();) await new Promise(r => setTimeout(r, 100));
    record.hostPidBeforeModels = api.hostPid() || null;
    step('host without a request', { pid: record.hostPidBeforeModels });
  }
  for (const [provider, key] of Object.entries(plan.apiKeys || {})) {
    await vscode.commands.executeCommand('lmbridge.setApiKey', provider, key);
  }
  // The models appear once the host has started and answered models/list.
  const want = plan.waitForModels || [];
  let models = [];
  for (const end = Date.now() + (plan.modelWaitMs || 30000); Date.now() < end;) {
    models = await vscode.lm.selectChatModels(selector);
    if (models.length && want.every(id => models.some(m => idMatches(id, m.id)))) break;
    await new Promise(r => setTimeout(r, 250));
  }
  record.models = models.map(m => ({ id: m.id, name: m.name, vendor: m.vendor, family: m.family, version: m.version, maxInputTokens: m.maxInputTokens }));
  record.hostPid = api.hostPid();
  step('models', { count: models.length });
  write(false);
  // what any extension gets for a selector (by family, by vendor ...): the ids, per name
  record.selects = {};
  for (const sel of plan.selects || []) {
    record.selects[sel.name] = (await vscode.lm.selectChatModels(sel.selector)).map(m => m.id);
  }
  if (plan.selects) { step('selects'); write(false); }
  for (const c of plan.cases || []) {
    const r = c.kind === 'countTokens' ? await runCountTokens(c, selector)
      : c.kind === 'replaceInFile' ? replaceInFile(c)
      : c.kind === 'waitModels' ? await waitModels(c, selector)
      : await runChat(c, selector, api);
    record.cases[c.name] = r;
    step('case ' + c.name);
    write(false);
  }
  // commands run once the models are there (a key command on a provider allowed meanwhile ...)
  record.commands = {};
  for (const c of plan.commandsAfterModels || []) {
    try {
      record.commands[c.name] = { ok: true, result: await vscode.commands.executeCommand(c.command, ...(c.args || [])) };
    } catch (e) {
      record.commands[c.name] = { ok: false, error: describeError(e) };
    }
    step('command ' + c.name);
    write(false);
  }
  // cases once the commands ran (the models a command moved ...)
  for (const c of plan.casesAfterCommands || []) {
    const r = c.kind === 'waitModels' ? await waitModels(c, selector) : await runChat(c, c.selector || selector, api);
    record.cases[c.name] = r;
    step('case ' + c.name);
    write(false);
  }
  if (plan.consumer) await runConsumerPhase(plan.consumer);
  if (plan.diagnostics) await runDiagnostics(plan.diagnostics);
}

// A chat participant for the chat view (the harness has no Copilot): it asks the plan's
// `chatModel` (an lmbridge model id) and, when the model fails, ends the turn the way Copilot
// Chat does with a failed request (`errorDetails`), so the browser can read what a user sees.
async function chatHandler(request, _context, response, token) {
  record.chatCalls = (record.chatCalls || 0) + 1;
  write(record.final);
  const plan = JSON.parse(fs.readFileSync(PLAN, 'utf8'));
  const models = await vscode.lm.selectChatModels({ vendor: 'lmbridge', id: plan.chatModel });
  if (!models.length) return { errorDetails: { message: 'e2e: no model ' + plan.chatModel } };
  try {
    const answer = await models[0].sendRequest([vscode.LanguageModelChatMessage.User(request.prompt)], {}, token);
    for await (const part of answer.stream) {
      if (part instanceof vscode.LanguageModelTextPart) response.markdown(part.value);
    }
    return {};
  } catch (e) {
    record.chatErrors = (record.chatErrors || []).concat([describeError(e)]);
    write(record.final);
    return { errorDetails: { message: String(e && e.message || e) } };
  }
}

function activate() {
  if (!PLAN || !OUT) return; // installed but not driven by the harness: do nothing
  vscode.lm.registerLanguageModelChatProvider('lmbridge-e2e', e2eProvider);
  vscode.chat.createChatParticipant('lmbridge-e2e.chat', chatHandler);
  registerTools();
  run().catch(e => record.errors.push({ at: 'run', message: String(e && e.stack || e) }))
    .finally(() => { try { write(true); } catch (e) { console.error(e); } });
}
function deactivate() {}
module.exports = { activate, deactivate };
