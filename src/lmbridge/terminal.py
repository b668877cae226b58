"""Terminal output in prompts: ANSI escapes, control characters and progress redraws removed.

Agents forward what commands print (coloured build output, progress bars) as tool results;
those bytes cost tokens and confuse models. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

from .errors import ConversionError
from .parts import ChatMessage, TextPart, ToolResultPart

__all__ = ["CleanTerminal", "clean_terminal_output", "clean_terminal_scope", "clean_terminal_text"]

# CSI sequences, OSC sequences (ended by BEL or ST), and two-byte ESC sequences.
_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
    r"|\x1b[@-Z\\-_]"
)
# C0 controls except tab and newline, DEL, and C1 controls.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def clean_terminal_output(text: str) -> str:
    """``text`` without ANSI escape sequences and control characters.

    Tabs and newlines stay; a CRLF becomes LF, and a lone CR (a terminal's progress redraw)
    keeps only what was written after it on its line.
    """
    text = _ANSI_RE.sub("", text)
    text = text.replace("\r\n", "\n")
    if "\r" in text:
        text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    return _CONTROL_RE.sub("", text)


CleanTerminal: TypeAlias = Literal["tool-results", "all", "off"]
"""Where terminal output is cleaned (:func:`clean_terminal_text`): in tool results only (the
default of the consumer client and the endpoint: that is where an agent forwards a command's
coloured output and progress redraws), in all text, or nowhere."""

_CLEAN_SCOPES: dict[object, CleanTerminal] = {
    "tool-results": "tool-results",
    "all": "all",
    "off": "off",
    True: "all",
    False: "off",
}


def clean_terminal_scope(value: object, where: str = "clean_terminal") -> CleanTerminal:
    """``value`` as a :data:`CleanTerminal` (``True``: ``"all"``, ``False``: ``"off"``);
    :class:`ConversionError` naming ``where`` for anything else."""
    scope = _CLEAN_SCOPES.get(value) if isinstance(value, (str, bool)) else None
    if scope is None:
        raise ConversionError(
            f"{where}: expected 'tool-results', 'all' or 'off' (or true/false), got {value!r}"
        )
    return scope


def clean_terminal_text(messages: Sequence[ChatMessage], scope: CleanTerminal) -> list[ChatMessage]:
    """``messages`` with terminal output cleaned (:func:`clean_terminal_output`) where
    ``scope`` says: the text of tool results, or all text. Messages with nothing to clean are
    the same objects; the input is not modified."""
    if scope == "off":
        return list(messages)
    out: list[ChatMessage] = []
    for message in messages:
        content = [_cleaned(part, scope) for part in message.content]
        changed = any(new is not old for new, old in zip(content, message.content, strict=True))
        out.append(ChatMessage(message.role, content, message.name) if changed else message)
    return out


def _cleaned(part: Any, scope: CleanTerminal) -> Any:
    if isinstance(part, TextPart):
        if scope != "all":
            return part
        value = clean_terminal_output(part.value)
        return part if value == part.value else TextPart(value)
    if isinstance(part, ToolResultPart):
        inner = [_cleaned(p, "all") for p in part.content]
        if all(new is old for new, old in zip(inner, part.content, strict=True)):
            return part
        return ToolResultPart(part.call_id, inner)
    return part


