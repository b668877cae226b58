// Reasoning shown as text when this VS Code has no LanguageModelThinkingPart (a proposed API):
// a Markdown quote under a marker line, so it is seen but not taken for the answer. A provider
// whose `thinking` option is "drop" has the host send none, so nothing is shown for it.
//
// Text reported for an answer comes back as the assistant's text in later turns; the quoted
// reasoning is taken out of assistant messages again (`stripThinkingText`) so the model does not
// read its old reasoning as something it said.

/** The line that opens quoted reasoning. */
export const THINKING_MARKER = '> **Thinking:**';

/**
 * Turns one answer's stream of thinking deltas into quoted text. Create one per answer; call
 * `thinking` for each thinking delta and `other` before any other part (it closes the quote).
 */
export class ThinkingAsText {
  private open = false;
  /** Whether the answer has shown anything yet (a quote after it starts a new paragraph). */
  private started = false;
  /** Whether the last text written ended a line (the next one needs its "> "). */
  private atLineStart = false;

  /** The text to report for a thinking delta ('' for an empty one). */
  thinking(value: string | readonly string[]): string {
    const text = typeof value === 'string' ? value : value.join('');
    if (!text) return '';
    let out = '';
    if (!this.open) {
      this.open = true;
      out = `${this.started ? '\n\n' : ''}${THINKING_MARKER}\n> `;
      this.started = true;
      this.atLineStart = false;
    } else if (this.atLineStart) {
      out = '> ';
    }
    // Every line of the reasoning stays inside the quote; a trailing newline waits for more.
    const body = text.replace(/\r\n?/g, '\n');
    const trailing = body.endsWith('\n');
    const inner = trailing ? body.slice(0, -1) : body;
    out += inner.replace(/\n/g, '\n> ');
    if (trailing) out += '\n';
    this.atLineStart = trailing;
    return out;
  }

  /** The text that closes an open quote before a part of another kind ('' when none is open). */
  other(): string {
    this.started = true;
    if (!this.open) return '';
    this.open = false;
    const close = this.atLineStart ? '\n' : '\n\n';
    this.atLineStart = false;
    return close;
  }
}

// The quote as `ThinkingAsText` writes it: the paragraph break before it (unless it opens the
// text), the marker line, its "> " lines, and the blank line (or end) that closes it.
const QUOTED = /(^|\n\n)> \*\*Thinking:\*\*[^\n]*(?:\n>[^\n]*)*(?:\n\n|\n?$)/g;

/** Assistant text without the reasoning quoted by `ThinkingAsText`. */
export function stripThinkingText(text: string): string {
  if (!text.includes(THINKING_MARKER)) return text;
  // A quote between paragraphs leaves one break; one at the end takes the break before it along.
  return text.replace(QUOTED, (m: string, lead: string, offset: number) => (offset + m.length === text.length ? '' : lead));
}
