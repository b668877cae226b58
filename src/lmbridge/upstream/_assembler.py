"""The part assembler: what every upstream format has in common.

Each format's decoder is a thin ``match`` over that format's events; it tells the assembler
what happened (a text delta, a tool call's argument fragment, usage ...) and the assembler
produces VS Code parts that keep the stream contract:

- text and thinking deltas become parts at once; empty deltas produce nothing;
- thinking follows a policy: :class:`ThinkingPart` (default), plain text, or dropped;
- tool calls are buffered by the format's own key (an index, an item id, a block index) and
  emitted once, atomically, with a complete object input, when the format says the call is
  done, or at :meth:`PartAssembler.close` when the stream ended without saying so;
- arguments that are not a JSON object end the stream with a :class:`ToolArgumentsError` that
  names the tool and shows the raw arguments; a broken tool call is never emitted; so do
  arguments nested deeper than :data:`~lmbridge._nesting.MAX_VALUE_NESTING` (100) levels,
  which the bridge protocol could not carry back in the next request;
- missing or duplicate call ids are replaced by unique ones (with an optional prefix);
- usage and the finish reason are merged across the events that carry them;
- an error ends the stream: the parts already produced stay valid, pending tool calls that
  were not complete are dropped, and nothing more is produced.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Final, Literal

from .. import parts
from .._nesting import MAX_VALUE_NESTING, nested_deeper, nesting_depth
from .._unicode import is_high_surrogate, repair_surrogates
from ..errors import ToolArgumentsError, UpstreamError
from ..parts import (
    DataPart,
    FinishReason,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
)

__all__ = [
    "AssemblerOptions",
    "PartAssembler",
    "ThinkingPolicy",
    "new_usage",
    "parse_tool_arguments",
    "token_count",
]

ThinkingPolicy = Literal["part", "text", "drop"]


@dataclass(frozen=True, slots=True)
class AssemblerOptions:
    """How the assembler shapes its output."""

    thinking: ThinkingPolicy = "part"
    """``part``: ThinkingPart; ``text``: reasoning as plain text; ``drop``: no reasoning."""
    call_id_prefix: str = ""
    """Prefix for every emitted call id (namespacing across providers), e.g. ``"lmb-"``. Not
    needed to keep two upstreams' calls apart in one conversation: the converters make call ids
    unique across it (:mod:`lmbridge.convert`), so lmbridge's own providers leave it empty."""

    def __reduce__(self) -> tuple[Any, ...]:
        # pickle and copy by the constructor (compiled, the default way cannot set the fields)
        return (AssemblerOptions, (self.thinking, self.call_id_prefix))


_DEFAULT_OPTIONS: Final = AssemblerOptions()


class _PendingCall:
    __slots__ = ("call_id", "fragments", "name")

    def __init__(self, call_id: str | None, name: str | None) -> None:
        self.call_id = call_id
        self.name = name
        self.fragments: list[str] = []


_new_object: Final = object.__new__
_USAGE_SETTERS: Final = parts._USAGE_SETTERS


def new_usage(
    input_tokens: int | None,
    output_tokens: int | None,
    cache_read_tokens: int | None,
    cache_write_tokens: int | None,
    reasoning_tokens: int | None,
) -> Usage:
    """``Usage(...)`` the way its ``__init__`` makes it (the frozen slots set through their own
    setters), without calling that Python function: from compiled code, the call of Python
    code costs about as much as the rest."""
    usage: Usage = _new_object(Usage)
    set_input, set_output, set_cache_read, set_cache_write, set_reasoning = _USAGE_SETTERS
    set_input(usage, input_tokens)
    set_output(usage, output_tokens)
    set_cache_read(usage, cache_read_tokens)
    set_cache_write(usage, cache_write_tokens)
    set_reasoning(usage, reasoning_tokens)
    return usage


def token_count(value: Any) -> int | None:
    """A token count from an upstream's usage field: a non-negative integer (``3.0`` counts as 3),
    else ``None`` (missing, a boolean, a string, a negative or fractional number)."""
    if type(value) is int:  # the usual count (bool is a subclass: not this type)
        return value if value >= 0 else None
    if value is None:
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


_TOO_DEEP: Final = (
    f"nested more than {MAX_VALUE_NESTING} levels deep (the deepest a value may be in the "
    f"bridge protocol)"
)


def parse_tool_arguments(raw: str | dict[str, Any] | None, *, name: str, call_id: str) -> dict[str, Any]:
    """Tool arguments as a dict; empty arguments are ``{}``.

    Raises :class:`ToolArgumentsError` when they are not JSON, not a JSON object, or nested
    deeper than :data:`~lmbridge._nesting.MAX_VALUE_NESTING` levels.
    """
    if raw is None:
        return {}
    if isinstance(raw, dict):
        if nested_deeper(raw, MAX_VALUE_NESTING):
            raise ToolArgumentsError(name, call_id, _raw_text(raw), _TOO_DEEP)
        return raw
    if not isinstance(raw, str):
        raise ToolArgumentsError(name, call_id, repr(raw), f"a {type(raw).__name__}, not a JSON object")
    text = raw.strip()
    if not text:
        return {}
    # Counting brackets is quick and bounds the depth; the exact scan runs only past it.
    if text.count("[") + text.count("{") > MAX_VALUE_NESTING and (
        nesting_depth(text.encode("utf-8", "surrogatepass")) > MAX_VALUE_NESTING
    ):
        raise ToolArgumentsError(name, call_id, raw, _TOO_DEEP)
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ToolArgumentsError(name, call_id, raw, f"not valid JSON: {exc}") from None
    except RecursionError:
        raise ToolArgumentsError(name, call_id, raw, "nested too deeply to parse") from None
    if not isinstance(value, dict):
        raise ToolArgumentsError(name, call_id, raw, f"a JSON {type(value).__name__}, not an object")
    return value


class PartAssembler:
    """Turns format-neutral stream events into contract-keeping VS Code parts."""

    def __init__(self, options: AssemblerOptions | None = None) -> None:
        self.options = options or _DEFAULT_OPTIONS
        self.out: list[ResponsePart] = []
        """The parts produced since the last drain (the list :meth:`drain` hands over)."""
        self._pending: dict[Hashable, _PendingCall] = {}
        self._used_ids: set[str] | None = None  # the call ids given out (made with the first)
        self._generated = 0
        self._usage: Usage | None = None  # the reports so far, merged when asked for
        self._usages: list[Usage | Callable[[], Usage | None]] = []  # reports not merged yet
        self.finish_reason: FinishReason | None = None
        """The normalised finish reason, once known."""
        self.raw_finish_reason: str | None = None
        """The upstream's own finish reason."""
        self.error: UpstreamError | None = None
        """The error that ended the stream, if any."""
        self.closed = False
        """Whether the stream is over (closed, or ended by an error)."""
        self._held = ""  # a high surrogate that ended the last text delta
        self.plain = True
        """Not closed and no surrogate held: an ASCII text delta ``d`` is then exactly
        ``emitted_text = True; out.append(TextPart(d))`` (the decoders' fast
        path, see :meth:`text`); kept up to date with ``closed`` and the held surrogate."""
        self.emitted_text = False
        """Whether any text part was produced."""

    # -- output

    def drain(self) -> list[ResponsePart]:
        """The parts produced since the last drain."""
        out, self.out = self.out, []
        return out

    @property
    def usage(self) -> Usage | None:
        """The usage reported so far, or ``None`` when the stream reported none."""
        if self._usages:
            merged = self._usage
            for report in self._usages:
                usage = report() if callable(report) else report
                if usage is not None:
                    merged = usage if merged is None else merged.merged(usage)
            self._usage = merged
            self._usages = []
        return self._usage

    # -- content

    def text(self, delta: str | None) -> None:
        """A text delta.

        Decoders' hot path may instead, when :attr:`plain` and the delta is an ASCII ``str``,
        append ``TextPart(delta)`` (if not empty) to :attr:`out` and set :attr:`emitted_text`:
        the same result without a call.
        """
        if delta and not self.closed:
            if self._held or not delta.isascii():
                delta = self._join_surrogates(delta)
                if not delta:
                    return
            self.emitted_text = True
            self.out.append(TextPart(delta))

    def _join_surrogates(self, delta: str) -> str:
        # Upstreams written in JavaScript may cut a UTF-16 surrogate pair between two deltas
        # ("\ud83d" then "\ude00"): keep a trailing high surrogate until the next delta, join
        # pairs, and make any lone surrogate U+FFFD, so that every part is valid Unicode.
        if self._held:
            delta = self._held + delta
            self._held = ""
            self.plain = not self.closed
        if is_high_surrogate(delta[-1]):
            delta, self._held = delta[:-1], delta[-1]
            self.plain = False
        return repair_surrogates(delta)

    def _flush_surrogate(self) -> None:
        if self._held:
            self._held = ""
            self.plain = not self.closed
            self.out.append(TextPart("\ufffd"))

    def thinking(
        self,
        delta: str | None,
        *,
        id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """A reasoning delta, or (with an empty delta) metadata for a reasoning block."""
        if self.closed or (not delta and not metadata):
            return
        if delta and not delta.isascii():
            delta = repair_surrogates(delta)
        policy = self.options.thinking
        if policy == "part":
            self.out.append(ThinkingPart(delta or "", id, metadata or None))
        elif policy == "text" and delta:
            self.out.append(TextPart(delta))

    def data(self, part: DataPart) -> None:
        """A data part (image, citation, file ...)."""
        if not self.closed:
            self._flush_surrogate()
            self.out.append(part)

    # -- tool calls

    def tool_start(self, key: Hashable, *, call_id: str | None = None, name: str | None = None) -> None:
        """A tool call begins; its arguments will follow under ``key``."""
        if self.closed:
            return
        pending = self._pending.get(key)
        if pending is None:
            self._pending[key] = _PendingCall(call_id or None, name or None)
        else:
            pending.call_id = pending.call_id or call_id or None
            pending.name = pending.name or name or None

    def tool_delta(
        self,
        key: Hashable,
        fragment: str | None,
        *,
        call_id: str | None = None,
        name: str | None = None,
    ) -> None:
        """A fragment of a tool call's JSON arguments (the call is started if it is new)."""
        if self.closed:
            return
        self.tool_start(key, call_id=call_id, name=name)
        if fragment:
            self._pending[key].fragments.append(fragment)

    def tool_arguments_so_far(self, key: Hashable) -> str:
        """The argument text buffered under ``key``."""
        pending = self._pending.get(key)
        return "".join(pending.fragments) if pending else ""

    def tool_end(
        self,
        key: Hashable,
        *,
        arguments: str | dict[str, Any] | None = None,
        call_id: str | None = None,
        name: str | None = None,
    ) -> None:
        """The tool call under ``key`` is complete: emit it.

        ``arguments``, when given, is the upstream's final word on the input (a JSON string or
        an object) and wins over the buffered fragments.
        """
        if self.closed:
            return
        pending = self._pending.pop(key, None) or _PendingCall(None, None)
        raw: str | dict[str, Any] = "".join(pending.fragments) if arguments is None else arguments
        self._emit_call(pending.call_id or call_id, pending.name or name, raw)

    def tool_call(self, call_id: str | None, name: str | None, arguments: str | dict[str, Any] | None) -> None:
        """A tool call that arrived whole."""
        if not self.closed:
            self._emit_call(call_id, name, arguments if arguments is not None else {})

    def discard_tool(self, key: Hashable) -> None:
        """Forget a buffered call (e.g. one the upstream runs itself)."""
        self._pending.pop(key, None)

    def _emit_call(self, call_id: str | None, name: str | None, raw: str | dict[str, Any]) -> None:
        shown_id = call_id or "(no id)"
        if not name:
            self.fail(ToolArgumentsError("(no name)", shown_id, _raw_text(raw), "the tool call has no name"))
            return
        try:
            tool_input = parse_tool_arguments(raw, name=name, call_id=shown_id)
        except ToolArgumentsError as exc:
            self.fail(exc)
            return
        self._flush_surrogate()
        self.out.append(ToolCallPart(self._unique_id(call_id), name, tool_input))

    def _unique_id(self, call_id: str | None) -> str:
        prefix = self.options.call_id_prefix
        used = self._used_ids
        if used is None:
            used = self._used_ids = set()
        candidate = f"{prefix}{call_id}" if call_id else None
        while candidate is None or candidate in used:
            self._generated += 1
            base = call_id or "call"
            candidate = f"{prefix}{base}_{self._generated}"
        used.add(candidate)
        return candidate

    # -- end of stream

    def set_usage(self, usage: Usage) -> None:
        """Merge usage reported by the stream (later values win field by field)."""
        # (merged when asked for: Usage is frozen, and making one is not cheap)
        self._usages.append(usage)

    def set_usage_from(self, report: Callable[[], Usage | None]) -> None:
        """:meth:`set_usage` with the usage ``report()`` returns when the usage is asked for:
        for decoders whose every report is the counts so far, made into a :class:`Usage` only
        once however many times they change (``None``: no usage after all). A report equal to
        the last one (the same bound method) is not added twice."""
        usages = self._usages
        if not usages or usages[-1] != report:
            usages.append(report)

    def set_finish(self, reason: FinishReason, raw: str | None = None) -> None:
        """Record why the stream finished (the last report wins; an error is final)."""
        if self.error is not None:
            return
        self.finish_reason = reason
        self.raw_finish_reason = raw

    def fail(self, error: UpstreamError) -> None:
        """End the stream with an error. Parts already produced stay; pending calls are dropped."""
        if self.closed:
            return
        self.error = error
        self.closed = True
        self.plain = False
        self._pending.clear()
        self.finish_reason = FinishReason.ERROR

    def close(self, *, finished: bool | None = None) -> None:
        """End of stream: emit buffered tool calls that are complete, then stop.

        ``finished`` says whether the upstream ended the stream properly (an end event, or a
        finish reason); by default, whether a finish reason was reported. A stream cut off
        before that may have been cut inside a tool call: a call whose arguments never arrived
        is then an error, not a call with empty input (which VS Code would run). Arguments that
        form a complete JSON object are complete either way.
        """
        if self.closed:
            return
        if self._held:
            self._flush_surrogate()
        if not self._pending:  # the usual end: no tool call waiting
            self.closed = True
            self.plain = False
            return
        truncated = self.finish_reason is None if finished is None else not finished
        for key in list(self._pending):
            pending = self._pending[key]
            if truncated and not "".join(pending.fragments).strip():
                self.fail(
                    ToolArgumentsError(
                        pending.name or "(no name)",
                        pending.call_id or "(no id)",
                        "",
                        "the stream ended before its arguments arrived",
                    )
                )
                return
            self.tool_end(key)
            if self.error is not None:  # a call with broken arguments ended the stream
                return
        self.closed = True
        self.plain = False


def _raw_text(raw: str | dict[str, Any]) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return json.dumps(raw)
    except RecursionError:  # deeper than the encoder goes
        return "(an object nested too deep to show)"
