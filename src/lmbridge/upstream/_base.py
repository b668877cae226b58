"""The base of every upstream stream decoder, and the bytes -> parts pipeline.

A decoder is sans-IO: feed it events (:meth:`StreamDecoder.feed_event` for SSE events, or
:meth:`StreamDecoder.feed_json` for already-parsed objects such as JSON-lines AI SDK parts),
get parts back; :meth:`StreamDecoder.close` flushes at the end. After each call, ``error``,
``usage`` and ``finish_reason`` tell the caller how the stream is going. An error is data, not
an exception, at this layer: the parts returned together with it are valid, and the I/O layer
decides when to raise it.
"""

from __future__ import annotations

import json
from abc import ABC
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Final

from .._mypyc import mypyc_attr
from ..errors import UpstreamError, UpstreamProtocolError
from ..parts import FinishReason, ResponsePart, Usage
from ..sse import MAX_EVENT_BYTES, RawEvent, ServerSentEvent, SSEDecoder, SSELimitError
from ._assembler import AssemblerOptions, PartAssembler, token_count

__all__ = [
    "ByteStreamDecoder",
    "StreamDecoder",
    "StreamResult",
    "json_loads",
    "set_json_loads",
    "stdlib_loads",
    "update_counts",
]

# json.loads(bytes) guesses the encoding in Python code, and json.loads(str) checks for
# whitespace with two regular expressions around the C scanner: on the small objects of a
# stream that is a third or more of its time. Event data is UTF-8 with no whitespace around
# the object (the rare exceptions take json.loads itself, with its errors).
_scan: Final[Callable[[str, int], tuple[Any, int]]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def stdlib_loads(data: str | bytes) -> Any:
    """The standard library's JSON parser as the decoders use it without orjson: the same
    values and errors as :func:`json.loads` (invalid UTF-8 in bytes is a
    ``UnicodeDecodeError``)."""
    text = data if isinstance(data, str) else data.decode()
    try:
        obj, end = _scan(text, 0)
    except StopIteration:
        return json.loads(text)  # not a JSON value at offset 0: json.loads says why
    if end != len(text):
        return json.loads(text)  # trailing whitespace (fine) or extra data (an error)
    return obj


_NO_TYPES: Final[frozenset[str]] = frozenset()


def _default_loads() -> Callable[[str | bytes], Any]:
    # orjson (the ``fast`` extra) parses the same JSON to the same Python values, 2-4x faster;
    # the benchmark in benchmarks/bench_decoders.py measures both.
    try:
        import orjson
    except ImportError:
        return stdlib_loads
    loads: Callable[[str | bytes], Any] = orjson.loads
    return loads


json_loads: Callable[[str | bytes], Any] = _default_loads()
"""The JSON parser decoders use: orjson when installed, else :data:`stdlib_loads`."""


def set_json_loads(loads: Callable[[str | bytes], Any] | None) -> None:
    """Use ``loads`` to parse event data; ``None`` restores the default (orjson when installed,
    else :data:`stdlib_loads`). ``set_json_loads(stdlib_loads)`` is the path without orjson."""
    global json_loads
    json_loads = loads or _default_loads()


def update_counts(counts: dict[str, int], usage: Any, keys: tuple[str, ...]) -> bool:
    """Copy the token counts of ``keys`` found in ``usage`` (an upstream's usage object) into
    ``counts``; whether there was any. Upstreams repeat their counts as the stream goes (each
    report cumulative, some fields only sometimes): the latest value of each field wins."""
    if not isinstance(usage, dict):  # JSON objects are dicts (and dict is the cheap check)
        return False
    seen = False
    for key in keys:
        value = usage.get(key)
        if value is None:
            continue
        if type(value) is not int or value < 0:  # the usual count is a plain int
            value = token_count(value)
            if value is None:
                continue
        counts[key] = value
        seen = True
    return seen


class StreamResult:
    """Everything a finished stream produced (compared and shown field by field, like a
    dataclass)."""

    __slots__ = ("error", "finish_reason", "format", "parts", "raw_finish_reason", "usage")

    def __init__(
        self,
        format: str,
        parts: list[ResponsePart] | None = None,
        usage: Usage | None = None,
        finish_reason: FinishReason | None = None,
        raw_finish_reason: str | None = None,
        error: UpstreamError | None = None,
    ) -> None:
        # (a plain class: compiled, a dataclass's generated methods would run as Python code)
        self.format = format
        self.parts: list[ResponsePart] = [] if parts is None else parts
        self.usage = usage
        self.finish_reason = finish_reason
        self.raw_finish_reason = raw_finish_reason
        self.error = error

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.format,
            self.parts,
            self.usage,
            self.finish_reason,
            self.raw_finish_reason,
            self.error,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StreamResult):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        # pickle and copy by the constructor (compiled, the default way cannot set the fields)
        return (StreamResult, self._fields())

    def __repr__(self) -> str:
        return (
            f"StreamResult(format={self.format!r}, parts={self.parts!r}, usage={self.usage!r}, "
            f"finish_reason={self.finish_reason!r}, raw_finish_reason={self.raw_finish_reason!r}, "
            f"error={self.error!r})"
        )


@mypyc_attr(allow_interpreted_subclasses=True)
class StreamDecoder(ABC):
    """One upstream wire format's events -> VS Code parts.

    Subclass it for a format of your own (see :attr:`handlers` and :meth:`handle`); in the
    compiled build too.
    """

    format: ClassVar[str]
    """The format's name (``chat-completions``, ``responses``, ``anthropic``, ``ai-sdk``)."""

    _table_dispatch: ClassVar[bool] = True  # handle() is the base class's: the table decides
    _own_on_other: ClassVar[bool] = False  # on_other() is not the base class's (a no-op)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # What the decode loop would otherwise look up on every call (methods are set when the
        # class is made).
        super().__init_subclass__(**kwargs)
        cls._table_dispatch = cls.handle is StreamDecoder.handle
        cls._own_on_other = cls.on_other is not StreamDecoder.on_other

    def __init__(self, options: AssemblerOptions | None = None) -> None:
        self._assembler = PartAssembler(options)
        self.unhandled: set[str] = set()
        """The event (or part) types this stream carried that produced nothing here: the I/O
        layer logs each once, so that a new upstream event never vanishes without a trace."""

    # -- state

    @property
    def error(self) -> UpstreamError | None:
        """The error that ended the stream, if any."""
        return self._assembler.error

    @property
    def usage(self) -> Usage | None:
        """Usage reported so far."""
        return self._assembler.usage

    @property
    def finish_reason(self) -> FinishReason | None:
        """The normalised finish reason, once known."""
        return self._assembler.finish_reason

    @property
    def raw_finish_reason(self) -> str | None:
        """The upstream's own finish reason."""
        return self._assembler.raw_finish_reason

    @property
    def closed(self) -> bool:
        """Whether the stream is over."""
        return self._assembler.closed

    # -- input

    def feed_event(self, event: ServerSentEvent) -> list[ResponsePart]:
        """Decode one SSE event."""
        if not self._assembler.closed:
            self._feed_data(event.raw, event.event)
        return self._assembler.drain()

    def feed_raw_events(self, events: Iterable[RawEvent]) -> list[ResponsePart]:
        """Decode SSE events given as :data:`~lmbridge.sse.RawEvent` tuples (what
        :meth:`SSEDecoder.feed_raw` returns); the parts of all of them.

        The same as :meth:`feed_event` on each, without an object and a list per event: this
        is the loop every streamed token goes through.
        """
        asm = self._assembler
        loads = json_loads
        # (compiled, a call of stdlib_loads by its name is a direct C call; through the
        # variable, a call of a Python object that parses its arguments)
        stdlib = loads is stdlib_loads
        # The table dispatch of :meth:`handle`, inline, when the decoder uses it: one call less
        # per event. (The class's settings are read only when they are used: compiled, each
        # read is a lookup by name.)
        table: Mapping[str, Callable[[Any, dict[str, Any]], None]] | None = None
        by_name = False
        other: Callable[[dict[str, Any], Any], None] | None = None
        ignored: frozenset[str] = _NO_TYPES
        if self._table_dispatch:
            table = self.handlers
            by_name = self.type_from_event_name
            # on_other, unless it is the base class's (which does nothing), and not for the
            # types the decoder says it would ignore
            if self._own_on_other:
                other = self.on_other
                ignored = self.ignored_events
        done = None
        if type(events) is list and events and events[-1][1] == b"[DONE]":
            # the usual last event of Chat Completions: not JSON, and a parser's error costs
            # more than this check
            done = events[-1]
            events = events[:-1]
        for name, raw, _, _ in events:
            if asm.closed:
                break
            try:
                obj = stdlib_loads(raw) if stdlib else loads(raw)
            except (ValueError, RecursionError):
                self._feed_data(raw, name)
                continue
            if type(obj) is not dict:
                self._feed_data(raw, name)
                continue
            try:
                if table is None:
                    self.handle(obj, name)  # (compiled, a direct call: no bound method)
                    continue
                kind = obj.get("type")
                if not kind and by_name:
                    kind = name
                handler = table.get(kind) if isinstance(kind, str) else None
                if handler is not None:
                    handler(self, obj)
                else:
                    if type(kind) is str:
                        self.unhandled.add(kind)
                    if other is not None and not (type(kind) is str and kind in ignored):
                        other(obj, kind)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                self._malformed(obj, name, exc)
        if done is not None and not asm.closed:
            self._feed_data(done[1], done[0])
        return asm.drain()

    def _feed_data(self, raw: bytes, event_name: str) -> None:
        """One event's data: ``[DONE]``, JSON (bytes that are not UTF-8 are decoded with
        U+FFFD first, as the event-stream rules say), or an error that ends the stream."""
        asm = self._assembler
        if len(raw) < 32 and raw.strip() == b"[DONE]":
            self.on_done()
            return
        try:
            obj = json_loads(raw)
        except (ValueError, RecursionError):
            # The bytes may hold invalid UTF-8, which the event-stream rules turn into U+FFFD:
            # parse the decoded text before calling it broken. (RecursionError: the stdlib
            # parser's answer to deeply nested arrays/objects.)
            data = raw.decode("utf-8", "replace")
            try:
                # the standard library also reads lone surrogate escapes ("\ud83d"), which
                # orjson refuses; the assembler repairs them in text
                obj = json.loads(data)
            except (ValueError, RecursionError) as exc:
                shown = data if len(data) <= 200 else data[:200] + "..."
                asm.fail(
                    UpstreamProtocolError(
                        f"{self.format}: event data is not valid JSON ({exc}): {shown!r}"
                    )
                )
                return
        self._handle_any(obj, event_name)

    def feed_json(self, obj: Any, event_name: str | None = None) -> list[ResponsePart]:
        """Decode one already-parsed event object."""
        if self._assembler.closed:
            return []
        return self._feed(obj, event_name)

    def close(self) -> list[ResponsePart]:
        """End of input: flush what is buffered."""
        if not self._assembler.closed:
            try:
                self.on_close()
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                self._assembler.fail(UpstreamProtocolError(f"{self.format}: at end of stream: {exc!r}"))
            self._assembler.close()
        return self._assembler.drain()

    def result(self, parts: list[ResponsePart]) -> StreamResult:
        """A :class:`StreamResult` with ``parts`` and this decoder's final state."""
        asm = self._assembler
        return StreamResult(
            self.format, parts, asm.usage, asm.finish_reason, asm.raw_finish_reason, asm.error
        )

    def _feed(self, obj: Any, event_name: str | None) -> list[ResponsePart]:
        self._handle_any(obj, event_name)
        return self._assembler.drain()

    def _handle_any(self, obj: Any, event_name: str | None) -> None:
        if not isinstance(obj, dict):
            self._assembler.fail(
                UpstreamProtocolError(f"{self.format}: expected a JSON object, got {type(obj).__name__}")
            )
            return
        try:
            self.handle(obj, event_name)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self._malformed(obj, event_name, exc)

    def _malformed(self, obj: dict[str, Any], event_name: str | None, exc: Exception) -> None:
        kind = obj.get("type") or event_name or "event"
        self._assembler.fail(UpstreamProtocolError(f"{self.format}: malformed {kind!r} event ({exc!r})"))

    # -- for subclasses

    handlers: ClassVar[Mapping[str, Callable[[Any, dict[str, Any]], None]]] = {}
    """The dispatch table: event type -> the small method that handles it. The type is the
    object's ``type`` field, else (when :attr:`type_from_event_name`) the SSE event name."""

    ignored_events: ClassVar[frozenset[str]] = frozenset()
    """Event types :meth:`on_other` would do nothing with (the decode loop skips the call)."""

    type_from_event_name: ClassVar[bool] = True
    """Whether an object without ``type`` takes its type from the SSE event name."""

    def handle(self, obj: dict[str, Any], event_name: str | None) -> None:
        """Handle one event object, telling ``self._assembler`` what happened.

        By default through :attr:`handlers` (formats whose objects have no type, such as Chat
        Completions chunks, override this). Missing or mistyped fields may raise
        KeyError/TypeError/ValueError/AttributeError: the base class turns them into an
        :class:`UpstreamProtocolError` that names the event. Unknown events must produce
        nothing.
        """
        kind = obj.get("type")
        if not kind and self.type_from_event_name:
            kind = event_name
        handler = self.handlers.get(kind) if isinstance(kind, str) else None
        if handler is not None:
            handler(self, obj)
        else:
            if isinstance(kind, str):
                self.unhandled.add(kind)
            self.on_other(obj, kind)

    def on_other(self, obj: dict[str, Any], kind: Any) -> None:  # noqa: B027 - optional hook
        """An event :attr:`handlers` does not name (``kind``: its type). By default: nothing."""

    def on_done(self) -> None:
        """The ``[DONE]`` sentinel arrived. By default: end of stream."""
        self.close_stream()

    def on_close(self) -> None:  # noqa: B027 - optional hook
        """End of input, before pending tool calls are flushed."""

    def close_stream(self) -> None:
        """The upstream ended the stream properly (an end event): flush complete tool calls."""
        self.on_close()
        self._assembler.close(finished=True)


@mypyc_attr(allow_interpreted_subclasses=True)
class ByteStreamDecoder:
    """Bytes of an SSE body -> parts, through :class:`SSEDecoder` and a format decoder.

    An event that grows past ``max_event_bytes`` (:class:`~lmbridge.sse.SSELimitError`) ends
    the stream with an :class:`UpstreamProtocolError`; the parts of the events before it are
    returned as usual.
    """

    def __init__(
        self,
        decoder: StreamDecoder,
        *,
        strict_sse: bool = False,
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        self.decoder = decoder
        self.sse = SSEDecoder(strict=strict_sse, max_event_bytes=max_event_bytes)

    def feed(self, chunk: bytes) -> list[ResponsePart]:
        """Decode a chunk of the body."""
        try:
            events = self.sse.feed_raw(chunk)
        except SSELimitError as exc:
            return self._overflow(exc)
        return self.decoder.feed_raw_events(events) if events else []

    def _overflow(self, exc: SSELimitError) -> list[ResponsePart]:
        decoder = self.decoder
        out = decoder.feed_raw_events(exc.events) if exc.events else []
        if not decoder.closed:
            decoder._assembler.fail(UpstreamProtocolError(f"{decoder.format}: {exc}"))
            out += decoder._assembler.drain()
        return out

    def close(self) -> list[ResponsePart]:
        """End of body."""
        events = self.sse.close_raw()
        if not events:
            return self.decoder.close()
        out = self.decoder.feed_raw_events(events)
        out += self.decoder.close()
        return out

    def decode_all(self, chunks: Iterable[bytes]) -> StreamResult:
        """Decode a whole body."""
        parts: list[ResponsePart] = []
        for chunk in chunks:
            parts += self.feed(chunk)
        parts += self.close()
        return self.decoder.result(parts)
