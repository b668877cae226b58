"""The stream contract between a provider and VS Code, as code.

A provider's response is a sequence of parts. The rules it must keep (from the stream
semantics specification the project started from):

- ``tool-result-in-response``: a response never contains a :class:`ToolResultPart`;
- ``tool-input-not-object``: a tool call's input is a JSON object (a ``dict``);
- ``duplicate-call-id`` / ``empty-call-id`` / ``empty-tool-name``: every tool call has a non-empty
  name and a call id unique within the response;
- ``empty-text``: no text part is empty (empty parts are the seeds' whitespace bug's cousin);
- ``empty-thinking``: a thinking part carries text, or at least metadata (a signature);
- ``thinking-not-allowed``: no thinking part where the caller cannot take one;
- ``invalid-mime``: a data part's MIME type is well-formed;
- ``part-after-end``: nothing after the end of the stream or after cancellation;
- ``not-a-part``: only response part objects.

:func:`check` returns the violations of a finished sequence with their positions;
:class:`ContractChecker` checks parts one at a time, as a stream produces them (the host can
turn it on at run time).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .mime import MimeTypeError, parse_mime
from .parts import DataPart, TextPart, ThinkingPart, ToolCallPart, ToolResultPart

__all__ = ["ContractChecker", "Violation", "check"]


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: which, where (index of the part in the stream), and what."""

    index: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"part {self.index}: {self.rule}: {self.message}"


class ContractChecker:
    """Checks a response stream part by part.

    Call :meth:`observe` for every part in order, then :meth:`end` (or :meth:`cancel`); any
    part observed after that is a violation.
    """

    def __init__(self, *, allow_thinking: bool = True) -> None:
        self.allow_thinking = allow_thinking
        self.violations: list[Violation] = []
        self._call_ids: set[str] = set()
        self._count = 0
        self._ended: str | None = None

    def observe(self, part: object) -> list[Violation]:
        """Check the next part; return the violations it adds (also kept in ``violations``)."""
        index = self._count
        self._count += 1
        found: list[Violation] = []

        def add(rule: str, message: str) -> None:
            found.append(Violation(index, rule, message))

        if self._ended is not None:
            add("part-after-end", f"a {type(part).__name__} came after the stream {self._ended}")
        if isinstance(part, TextPart):
            value: object = part.value
            if not isinstance(value, str):
                add("not-a-part", f"text value is {type(value).__name__}, not str")
            elif value == "":
                add("empty-text", "empty text part")
        elif isinstance(part, ThinkingPart):
            if not self.allow_thinking:
                add("thinking-not-allowed", "thinking part where thinking is not allowed")
            if not part.text and not part.metadata:
                add("empty-thinking", "thinking part with neither text nor metadata")
        elif isinstance(part, ToolCallPart):
            tool_input: object = part.input
            if not isinstance(tool_input, dict):
                add(
                    "tool-input-not-object",
                    f"tool call {part.call_id!r} input is {type(tool_input).__name__}",
                )
            if not part.name:
                add("empty-tool-name", f"tool call {part.call_id!r} has no name")
            if not part.call_id:
                add("empty-call-id", f"tool call to {part.name!r} has no call id")
            elif part.call_id in self._call_ids:
                add("duplicate-call-id", f"call id {part.call_id!r} was already used")
            else:
                self._call_ids.add(part.call_id)
        elif isinstance(part, DataPart):
            try:
                parse_mime(part.mime_type)
            except MimeTypeError as exc:
                add("invalid-mime", str(exc))
        elif isinstance(part, ToolResultPart):
            add("tool-result-in-response", f"tool result for {part.call_id!r} in a response")
        else:
            add("not-a-part", f"{type(part).__name__} is not a response part")
        self.violations.extend(found)
        return found

    def end(self) -> None:
        """The stream ended; nothing may follow."""
        self._ended = self._ended or "ended"

    def cancel(self) -> None:
        """The request was cancelled; nothing may follow."""
        self._ended = self._ended or "was cancelled"


def check(parts: Iterable[object], *, allow_thinking: bool = True) -> list[Violation]:
    """The violations in a complete response, in order."""
    checker = ContractChecker(allow_thinking=allow_thinking)
    for part in parts:
        checker.observe(part)
    return checker.violations
