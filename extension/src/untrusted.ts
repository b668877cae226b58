// Text that lmbridge did not write (a workspace's setting values, provider names, model ids,
// an upstream's error text) shown in VS Code's UI. VS Code turns `[label](command:...)` in a
// notification's message into a link that runs a command, and `$(name)` in quick picks and
// some labels into an icon: a repository could put "Repair lmbridge" there that runs one of
// its tasks, or dress its entry up as the user's. `plain` makes such text inert: every piece of
// it goes through here before it reaches a notification, a dialog, a quick pick or an input box.

// A zero-width space between the characters that make a link or an icon: the text reads the
// same and no renderer sees the syntax.
const BREAK = '\u200b';

// C0/C1 controls and the line separators (they forge lines), and the bidirectional overrides and
// isolates (they make an origin read as another): shown as a space and as U+FFFD.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;
const BIDI = /[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/g;

/**
 * `text` with nothing a VS Code renderer acts on: no markdown link (`](` and `]:` are broken,
 * so neither `[x](command:...)` nor a reference link forms), no autolink (`<` of `<scheme:` and
 * the `:` of `command:` / `vscode:` ... URIs are broken), no icon (`$(`), no control or
 * bidirectional characters. Idempotent; plain text without these reads the same.
 */
export function plain(text: unknown): string {
  const s = typeof text === 'string' ? text : String(text);
  return s
    .replace(CONTROL, ' ')
    .replace(BIDI, '\ufffd')
    .replace(/\](?=\s*[([:])/g, `]${BREAK}`)
    .replace(/\$(?=\()/g, `$${BREAK}`)
    .replace(/<(?=[A-Za-z][A-Za-z0-9+.-]*:)/g, `<${BREAK}`)
    .replace(/\b(command|vscode|vscode-insiders|file|vscode-file|vscode-remote)(?=:)/gi, `$1${BREAK}`);
}

/**
 * A command's argument, taken only when VS Code's environment has
 * `LMBRIDGE_TEST_COMMAND_ARGUMENTS=1` (the end-to-end runner sets it; no setting can). A
 * command link in rendered text (`command:lmbridge.setApiKey?["openai","sk-..."]`) passes
 * arguments too: outside the tests the commands ignore them and ask the user.
 */
export function testArgument(value: unknown, env: NodeJS.ProcessEnv = process.env): string | undefined {
  return env.LMBRIDGE_TEST_COMMAND_ARGUMENTS === '1' && typeof value === 'string' ? value : undefined;
}
