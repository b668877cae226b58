// lmbridge: Diagnose: the host's report (docs/protocol.md, `diagnose`) with VS Code's side added,
// shown as a Markdown document to paste into a bug report. No key, token or message content.
import * as vscode from 'vscode';
import { Host } from './host';

/** What VS Code's side adds: its version, the interpreter and why, the settings behind the known traps. */
export function vscodeFacts(host: Host, extensionVersion: string): string[] {
  const lm = vscode as unknown as Record<string, unknown>;
  const chat = vscode.workspace.getConfiguration('chat');
  const interp = host.interpreter;
  const why: Record<string, string> = {
    setting: 'the lmbridge.pythonCommand setting',
    managed: "the extension's own environment (lmbridge: Create Python Environment)",
    'python-extension': "the Python extension's selected interpreter",
    default: 'the first Python 3.10+ on PATH',
  };
  return [
    `- VS Code: ${vscode.version} (${vscode.env.appName}, ${vscode.env.remoteName ?? 'local'})`,
    `- lmbridge extension: ${extensionVersion}`,
    `- host interpreter: ${interp ? `${interp.command}, chosen from ${why[interp.source] ?? interp.source}` : 'not started yet'}`,
    ...(interp && interp.tried.length ? [`- passed over: ${interp.tried.join(', ')}`] : []),
    `- host process: ${host.pid ?? 'not running'}${host.lastExitReason ? ` (last exit: ${host.lastExitReason})` : ''}`,
    `- workspace trusted: ${vscode.workspace.isTrusted ? 'yes' : 'no (Restricted Mode: the model picker shows only Auto)'}`,
    `- chat.byokUtilityModelDefault: ${JSON.stringify(chat.get('byokUtilityModelDefault') ?? null)}`,
    `- LanguageModelDataPart (usage for Copilot's context ring): ${typeof lm.LanguageModelDataPart === 'function' ? 'yes' : 'no'}`,
    `- LanguageModelThinkingPart: ${typeof lm.LanguageModelThinkingPart === 'function' ? 'yes' : 'no'}`,
  ];
}

/** The whole diagnosis as Markdown: the host's part (or why there is none) and VS Code's. */
export async function diagnosisText(host: Host, extensionVersion: string): Promise<string> {
  let hostPart: string;
  try {
    const result = await host.sendRequest<{ text?: unknown }>('diagnose', {});
    hostPart = typeof result?.text === 'string' ? result.text : '# lmbridge diagnosis\n\nThe host gave no report.\n';
  } catch (e) {
    hostPart = `# lmbridge diagnosis\n\nThe host did not answer: ${(e as Error).message}\n`;
  }
  return `${hostPart.trimEnd()}\n\n## VS Code\n\n${vscodeFacts(host, extensionVersion).join('\n')}\n`;
}

/** Shows the diagnosis in an untitled Markdown document. */
export async function showDiagnosis(host: Host, extensionVersion: string): Promise<void> {
  const content = await diagnosisText(host, extensionVersion);
  const doc = await vscode.workspace.openTextDocument({ language: 'markdown', content });
  await vscode.window.showTextDocument(doc);
}
