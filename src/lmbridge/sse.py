"""A sans-IO decoder for ``text/event-stream`` that follows the WHATWG rules exactly.

Feed it bytes as they arrive, in any chunking; it returns the events that are complete::

    decoder = SSEDecoder()
    for chunk in chunks:
        for event in decoder.feed(chunk):
            ...
    for event in decoder.close():
        ...

The rules (https://html.spec.whatwg.org/multipage/server-sent-events.html):

- the stream is UTF-8; invalid bytes become U+FFFD (as the spec's decoder does); a leading BOM
  is dropped; multi-byte characters split across chunks are decoded correctly;
- lines end at CR, LF or CRLF and nowhere else (U+2028, U+2029, NEL inside JSON are data, not line
  ends: ``str.splitlines`` would be wrong here); a CR at the end of one chunk and an LF at the
  start of the next are one line end;
- a blank line dispatches the event; ``data`` lines are joined with ``\\n``; a line starting with
  ``:`` is a comment; ``field: value`` loses one space after the colon; a line without a colon is
  a field with an empty value; ``event``, ``id`` (ignored when it contains NUL) and ``retry``
  (digits only) are kept; other fields are ignored; an event with no data is not dispatched.
- Lines are split on bytes (CR and LF never occur inside a multi-byte UTF-8 sequence), so the
  text is decoded once per event, and JSON parsers can take an event's :attr:`ServerSentEvent.raw`
  bytes without a round trip through ``str``.
- Two paths give the same events. The block path takes the complete events of a chunk and
  reads the common shapes event by event, each line end found with ``bytes.find`` (a memchr):
  ``data: ...`` + blank line, ``event: ...`` + ``data: ...`` + blank line (in the interpreter,
  a run of the latter is cut into lines and checked a chunk at a time, in C); everything else
  (CR line ends, comments, a BOM, ``id`` and ``retry`` or other fields, several data lines)
  goes through the line state machine, which is the reference. The block path runs only where
  the state machine would be at the start of an event (after a blank line, or at the start of
  the stream) and only on bytes with no CR, so the two cannot disagree; tests/test_sse.py
  checks that they agree on arbitrary bodies cut at arbitrary places.
- At the end of the stream the spec discards an event that has no blank line after it. Real
  servers often end without one, so by default :meth:`SSEDecoder.close` dispatches it; pass
  ``strict=True`` to follow the spec.
- An event (or a line) may not grow without end: the bytes held for an event that is not
  complete yet (its lines so far and the line being read) are at most ``max_event_bytes``
  (default :data:`MAX_EVENT_BYTES`, 16 MiB: far above any real event, a base64 image
  included). Past it :meth:`SSEDecoder.feed` raises :class:`SSELimitError`, which carries the
  events completed before the overflow (they are valid) and leaves the decoder empty. A stream
  that is one endless line, or one event of endless lines, is refused at that size instead of
  filling the memory. Each piece held is counted with :data:`PIECE_COST` bytes of bookkeeping,
  so a body trickled a byte at a time is bounded too.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat
from operator import itemgetter
from typing import Any, Final

__all__ = [
    "DONE",
    "MAX_EVENT_BYTES",
    "PIECE_COST",
    "RawEvent",
    "SSEDecoder",
    "SSELimitError",
    "ServerSentEvent",
]

DONE = "[DONE]"
"""The sentinel data OpenAI-style servers send as their last event."""

_BOM: Final = b"\xef\xbb\xbf"

MAX_EVENT_BYTES: Final = 16 * 1024 * 1024
"""The default most bytes an event may hold before it is complete (see the module notes)."""

PIECE_COST: Final = 64
"""Bytes each piece of an incomplete event is counted for besides its length (what Python
spends on a ``bytes`` object and its place in a list)."""

RawEvent = tuple[str, bytes, str, "int | None"]
"""An event as :meth:`SSEDecoder.feed_raw` gives it: (event type, data as UTF-8 bytes, last
event id, retry), the fields of :class:`ServerSentEvent` without the object."""

_COMPILED: Final = not __file__.endswith((".py", ".pyc"))
"""Whether this module runs compiled (mypyc): the block path then reads named events with a
loop of its own (see SSEDecoder._named_events)."""

# Event names repeat on every event of a stream: decode each once (bounded, names are few).
_EVENT_NAMES: Final[dict[bytes, str]] = {}


def _event_name(raw: bytes) -> str:
    name = raw.decode("utf-8", "replace")
    if len(_EVENT_NAMES) < 512:
        _EVENT_NAMES[raw] = name
    return name


class _EventLines(dict[bytes, str]):
    """``event: <name>`` line (with or without its LF; ``b""``: none) -> the event type
    (bounded: names are few)."""

    def __missing__(self, key: bytes) -> str:
        line = key[:-1] if key[-1:] == b"\n" else key
        raw = line[7:] if line[6:7] == b" " else line[6:]
        name = (_EVENT_NAMES.get(raw) or _event_name(raw)) or "message"
        if len(self) < 512:
            self[key] = name
        return name


# The block path looks names up by their whole ``event:`` line: no slice per event.
_EVENT_LINES: Final = _EventLines()
_AFTER_DATA: Final = itemgetter(slice(6, None))  # b"data: xyz" -> b"xyz"


def _completes_event(last: bytes, buf: bytes) -> bool:
    """Whether ``buf``, after a piece ending in ``last``, holds a blank line (no CR in either):
    line ends found with a memchr each (a chunk in the middle of an event has few)."""
    nl = buf.find(10)
    if nl < 0:
        return False
    if nl == 0 and last[-1] == 10:
        return True  # the blank line's two LFs on both sides of the cut
    size = len(buf)
    while nl >= 0 and nl + 1 < size:
        if buf[nl + 1] == 10:
            return True
        nl = buf.find(10, nl + 1)
    return False


class ServerSentEvent:
    """One dispatched event.

    ``data`` is text; ``raw`` is the same data as UTF-8 bytes. Events made by
    :class:`SSEDecoder` hold the bytes and decode ``data`` (invalid bytes -> U+FFFD) when first
    asked; events made from text encode ``raw`` when first asked.
    """

    __slots__ = ("_data", "_raw", "event", "id", "retry")

    def __init__(
        self,
        data: str | None = None,
        event: str = "message",
        id: str = "",
        retry: int | None = None,
        *,
        raw: bytes | None = None,
    ) -> None:
        if data is None and raw is None:
            raise TypeError("ServerSentEvent needs data or raw")
        self._data = data
        self._raw = raw
        self.event = event
        """The event type (``message`` when no ``event`` field was given)."""
        self.id = id
        """The last event id seen so far in the stream."""
        self.retry = retry
        """The reconnection time in ms, when this event set one."""

    @property
    def data(self) -> str:
        """The data lines joined with ``\\n``."""
        if self._data is None:
            assert self._raw is not None
            self._data = self._raw.decode("utf-8", "replace")
        return self._data

    @property
    def raw(self) -> bytes:
        """The data as UTF-8 bytes."""
        if self._raw is None:
            assert self._data is not None
            self._raw = self._data.encode("utf-8", "surrogatepass")
        return self._raw

    @property
    def is_done(self) -> bool:
        """Whether this is the ``[DONE]`` sentinel."""
        if self._raw is not None:
            return len(self._raw) < 32 and self._raw.strip() == b"[DONE]"
        return self.data.strip() == DONE

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ServerSentEvent):
            return NotImplemented
        return (self.data, self.event, self.id, self.retry) == (
            other.data,
            other.event,
            other.id,
            other.retry,
        )

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        # pickle and copy by the constructor (compiled, the default way cannot set the fields)
        return (_event, (self._data, self._raw, self.event, self.id, self.retry))

    def __repr__(self) -> str:
        return (
            f"ServerSentEvent(data={self.data!r}, event={self.event!r}, id={self.id!r}, "
            f"retry={self.retry!r})"
        )


def _event(
    data: str | None, raw: bytes | None, event: str, id: str, retry: int | None
) -> ServerSentEvent:
    """A :class:`ServerSentEvent` from its fields (how pickle and copy rebuild one)."""
    return ServerSentEvent(data, event, id, retry, raw=raw)


class SSELimitError(ValueError):
    """An event (or a line) grew past the decoder's ``max_event_bytes`` before it was complete.

    :attr:`events` are the events the same :meth:`SSEDecoder.feed_raw` call completed before
    the overflow (valid, to be used as usual); the decoder holds nothing more afterwards and
    should not be fed again.
    """

    def __init__(self, limit: int, events: list[RawEvent]) -> None:
        super().__init__(
            f"an event of the stream grew past {limit:,} bytes without ending (one endless "
            f"line, or an event that never ends)"
        )
        self.limit = limit
        """The limit that was passed, in bytes."""
        self.events = events
        """The events completed before the overflow, as :data:`RawEvent` tuples."""


class SSEDecoder:
    """Incremental event-stream decoder: :meth:`feed` bytes, :meth:`close` at the end.

    :meth:`feed_raw` / :meth:`close_raw` give the same events as :data:`RawEvent` tuples, for
    callers that only want the data bytes (no object per event). ``max_event_bytes`` bounds
    what an incomplete event may hold (module notes; ``0``: no bound).
    """

    __slots__ = (
        "_data",
        "_event",
        "_head",
        "_last_id",
        "_pending",
        "_retry",
        "_since",
        "_skip_lf",
        "_started",
        "_tail",
        "blocks",
        "max_event_bytes",
        "reconnection_time",
        "strict",
    )

    def __init__(
        self, *, strict: bool = False, blocks: bool = True, max_event_bytes: int = MAX_EVENT_BYTES
    ) -> None:
        self.strict = strict
        """Discard an unterminated last event at :meth:`close`, as the spec says."""
        self.blocks = blocks
        """Use the block path where it applies (``False``: the line state machine only; the
        events are the same, tests compare the two)."""
        self._head = b""  # the first bytes, until we know whether they start with a BOM
        self._tail: list[bytes] = []  # block path: the bytes of an event not complete yet
        self._pending: list[bytes] = []  # line path: bytes after the last line end, not joined yet
        self._skip_lf = False  # the previous chunk ended in CR
        self._started = False  # BOM check done
        self._data: list[bytes] = []
        self._event = ""
        self._last_id = ""
        self._retry: int | None = None
        self.reconnection_time: int | None = None
        """The last ``retry`` value in the stream (it applies even without data), in ms."""
        self.max_event_bytes = max_event_bytes
        """The most bytes an incomplete event may hold (``0``: no bound); see the module notes."""
        # Bytes fed since the last event was dispatched (pieces at PIECE_COST more): a bound of
        # what the incomplete event holds, counted exactly only when it passes the limit.
        self._since = 0

    @property
    def last_event_id(self) -> str:
        """The last ``id`` field seen, for reconnection."""
        return self._last_id

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode a chunk of bytes; return the events completed by it."""
        return [
            ServerSentEvent(None, name, last_id, retry, raw=data)
            for name, data, last_id, retry in self.feed_raw(chunk)
        ]

    def feed_text(self, text: str) -> list[ServerSentEvent]:
        """Decode already-decoded text (for callers that hold ``str``)."""
        return self.feed(text.encode("utf-8", "surrogatepass"))

    def close(self) -> list[ServerSentEvent]:
        """End of stream: dispatch, unless strict, the unterminated last event."""
        return [
            ServerSentEvent(None, name, last_id, retry, raw=data)
            for name, data, last_id, retry in self.close_raw()
        ]

    def feed_raw(self, chunk: bytes) -> list[RawEvent]:
        """:meth:`feed`, with each event as a :data:`RawEvent` tuple.

        Raises :class:`SSELimitError` when an incomplete event passes ``max_event_bytes``.
        """
        events = self._feed_raw(chunk)
        # After an event was dispatched, what is held started in this chunk.
        since = len(chunk) + PIECE_COST + 3  # (3: a BOM held back at the start)
        if not events:
            since += self._since
        self._since = since
        if since > self.max_event_bytes > 0:
            self._check_held(events)
        return events

    def _check_held(self, events: list[RawEvent]) -> None:
        """Count what the incomplete event holds; raise :class:`SSELimitError` past the limit."""
        held = len(self._head)
        for pieces in (self._tail, self._pending, self._data):
            held += len(pieces) * PIECE_COST
            for piece in pieces:
                held += len(piece)
        self._since = held
        if held > self.max_event_bytes:
            self._tail = []
            self._pending = []
            self._head = b""
            self._skip_lf = False
            self._reset_event()
            self._since = 0
            raise SSELimitError(self.max_event_bytes, events)

    def _feed_raw(self, chunk: bytes) -> list[RawEvent]:
        if not self._started:
            head = self._head + chunk if self._head else chunk
            if len(head) < 3 and _BOM.startswith(head):
                self._head = head  # could still be a BOM split across chunks
                return []
            self._started = True
            self._head = b""
            chunk = head[3:] if head.startswith(_BOM) else head
        events: list[RawEvent] = []
        if not chunk:
            return events
        if self._tail or not (  # (_at_event_start, inline)
            self._pending or self._data or self._event or self._skip_lf or self._retry is not None
        ):
            if 13 not in chunk:  # CR
                self._feed_blocks(chunk, events)
                return events
            # a CR: the line state machine takes it from here (the tail starts an event)
            if self._tail:
                self._tail.append(chunk)
                chunk = b"".join(self._tail)
                self._tail = []
            self._feed_lines(chunk, events)
        else:
            self._feed_until_event_start(chunk, events)
        return events

    def close_raw(self) -> list[RawEvent]:
        """:meth:`close`, with each event as a :data:`RawEvent` tuple."""
        events: list[RawEvent] = []
        if not (self._tail or self._pending or self._data or self._head):
            # the usual end: after a blank line, nothing to dispatch (no data: no new list)
            self._event = ""
            self._retry = None
            return events
        if not self._started and self._head:
            self._started = True
            self._feed_lines(self._head, events)
            self._head = b""
        if self._tail:
            # an event with no blank line after it: the line state machine reads its lines
            tail = b"".join(self._tail)
            self._tail = []
            self._feed_lines(tail, events)
        if self.strict:
            self._pending = []
            self._reset_event()
            return events
        if self._pending:
            line = b"".join(self._pending)
            self._pending = []
            if line:
                self._process_line(line)
        self._dispatch(events)
        return events

    # -- the block path

    def _at_event_start(self) -> bool:
        """Whether the line state machine is where an event starts: no partial line, no field
        of an event read yet, no CR waiting for its LF."""
        return not (
            self._pending or self._data or self._event or self._skip_lf or self._retry is not None
        )

    def _feed_until_event_start(self, buf: bytes, events: list[RawEvent]) -> None:
        """The line state machine, up to the first blank line; the block path after it."""
        if not self.blocks or 13 in buf:  # CR
            self._feed_lines(buf, events)
            return
        while buf:
            if self._at_event_start():
                self._feed_blocks(buf, events)
                return
            if buf[0] == 10 and not self._pending and not self._skip_lf:
                cut = 1  # the last line ended: this LF is a blank line
            else:
                end = buf.find(b"\n\n")
                cut = len(buf) if end < 0 else end + 2
            self._feed_lines(buf[:cut], events)
            buf = buf[cut:]

    def _feed_blocks(self, buf: bytes, events: list[RawEvent]) -> None:
        """Whole events out of ``buf`` (no CR in it), which starts where an event starts."""
        if not self.blocks:
            self._feed_lines(buf, events)
            return
        tail = self._tail
        if tail:
            if not _completes_event(tail[-1], buf):
                tail.append(buf)  # still no blank line: join once, when the event is complete
                return
            tail.append(buf)
            buf = b"".join(tail)
            tail.clear()
        if not _COMPILED and buf.startswith(b"event: ") and self._named_events(buf, events):
            return
        # Event by event, each line end found with a memchr (``find(10)``: a search for
        # b"\n\n" or a split reads every byte): ``data: d`` + blank line, ``event: e`` +
        # ``data: d`` + blank line, extra blank lines. An event not complete yet waits in the
        # tail; at anything else (comments, ids, several data lines, "data:" without its
        # space ...) the complete events left go one by one through _feed_events.
        last_id = self._last_id
        size = len(buf)
        pos = 0
        while pos < size:
            if buf[pos] == 10:  # a blank line with no event before it: dispatches nothing
                pos += 1
                continue
            nl = buf.find(10, pos)
            if nl < 0 or nl + 1 == size:
                break  # not complete
            if buf[nl + 1] == 10:  # one line, then the blank line
                # (a slice compared: compiled, cheaper than startswith(prefix, pos), which
                # parses its arguments as a tuple; in the interpreter, no dearer)
                if buf[pos : pos + 6] != b"data: ":
                    self._feed_rest(buf, pos, events, last_id)
                    return
                events.append(("message", buf[pos + 6 : nl], last_id, None))
                pos = nl + 2
                continue
            nl2 = buf.find(10, nl + 1)
            if nl2 < 0 or nl2 + 1 == size:
                break  # not complete
            if (
                buf[nl2 + 1] != 10
                or buf[pos : pos + 7] != b"event: "
                or buf[nl + 1 : nl + 7] != b"data: "
            ):  # three lines or more, or other fields
                self._feed_rest(buf, pos, events, last_id)
                return
            events.append((_EVENT_LINES[buf[pos:nl]], buf[nl + 7 : nl2], last_id, None))
            pos = nl2 + 2
        if pos < size:
            self._tail.append(buf[pos:] if pos else buf)

    def _named_events(self, buf: bytes, events: list[RawEvent]) -> bool:
        """Whether ``buf`` is a run of named events (Anthropic, Responses) up to its last blank
        line, taken here (the rest into the tail): lines cut and checked a whole chunk at a
        time, in C (split, join and count; lines hold no LF, so b"\n" + b"\n".join(lines)
        holds b"\nevent: " once per line that starts with it). For the interpreter, where
        that costs less than a loop over the events; compiled code runs the loop."""
        end = buf.rfind(b"\n\n")
        if end < 0:
            return False
        first = buf.find(10)  # (the first LF; a memchr)
        if buf.find(10, first + 1) == end:  # one event (event: e, data: d, blank line)
            if not buf.startswith(b"data: ", first + 1):
                return False
            events.append((_EVENT_LINES[buf[:first]], buf[first + 7 : end], self._last_id, None))
        else:
            lines = buf[:end].split(b"\n")
            if not self._named_lines(lines, events):
                return False
        if end + 2 < len(buf):
            self._tail.append(buf[end + 2 :])
        return True

    def _named_lines(self, lines: list[bytes], events: list[RawEvent]) -> bool:
        """_named_events for several events' lines: whether they are all of that shape (then
        their events are taken)."""
        if len(lines) % 3 != 2 or any(lines[2::3]):
            return False
        names, datas = lines[0::3], lines[1::3]
        k = len(names)
        if (b"\n" + b"\n".join(names)).count(b"\nevent: ") != k or (
            b"\n" + b"\n".join(datas)
        ).count(b"\ndata: ") != k:
            return False
        events += zip(
            map(_EVENT_LINES.__getitem__, names),
            map(_AFTER_DATA, datas),
            repeat(self._last_id),
            repeat(None),
        )
        return True

    def _feed_rest(self, buf: bytes, pos: int, events: list[RawEvent], last_id: str) -> None:
        """The block path's events from ``pos`` on, one by one: the complete ones (up to the
        last blank line) through _feed_events, the rest into the tail."""
        end = buf.rfind(b"\n\n", pos)
        if end < 0:
            self._tail.append(buf[pos:])
            return
        if end + 2 < len(buf):
            self._tail.append(buf[end + 2 :])
        self._feed_events(buf[pos:end].split(b"\n\n"), events, last_id)

    def _feed_events(
        self, blocks: Iterable[bytes], events: list[RawEvent], last_id: str
    ) -> None:
        """Events' lines (no CR), one block per event: the same shapes by slices,
        anything else (comments, ids, several data lines, "data:" without a space ...) through
        the line state machine."""
        append = events.append
        for block in blocks:
            if 10 not in block:  # (searching for the int 10 is a memchr; b"\n" costs more)
                if block[:6] == b"data: ":
                    append(("message", block[6:], last_id, None))
                    continue
            elif block[:6] == b"event:":
                line, _, data = block.partition(b"\n")
                if 10 not in data and data[:6] == b"data: ":
                    append((_EVENT_LINES[line], data[6:], last_id, None))
                    continue
            self._feed_lines(block + b"\n\n", events)
            last_id = self._last_id

    # -- the line state machine (the reference)

    def _feed_lines(self, buf: bytes, events: list[RawEvent]) -> None:
        if self._skip_lf and buf:
            self._skip_lf = False
            if buf[0] == 10:  # LF
                buf = buf[1:]
        if not buf:
            return
        if b"\n" not in buf and b"\r" not in buf:
            # No line end: keep the piece; joining once per line keeps long lines linear.
            self._pending.append(buf)
            return
        if self._pending:
            self._pending.append(buf)
            buf = b"".join(self._pending)
            self._pending = []
        if b"\r" in buf:
            # A CR ends a line by itself; a CR that ends the chunk may be the first half of a
            # CRLF split across chunks, so an LF that starts the next chunk is skipped.
            if buf[-1] == 13:  # CR
                self._skip_lf = True
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        # Only CR and LF end lines (splitting bytes never sees U+2028 and friends, which
        # str.splitlines would split on); the last piece has no line end yet and waits.
        lines = buf.split(b"\n")
        last = lines.pop()
        if last:
            self._pending.append(last)
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append(
                        (
                            self._event or "message",
                            data[0] if len(data) == 1 else b"\n".join(data),
                            self._last_id,
                            self._retry,
                        )
                    )
                    data = self._data = []
                self._event = ""
                self._retry = None
            elif line.startswith(b"data:"):
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line.startswith(b"event:"):
                name = line[7:] if line[6:7] == b" " else line[6:]
                self._event = _EVENT_NAMES.get(name) or _event_name(name)
            else:
                self._process_line(line)
                data = self._data

    def _process_line(self, line: bytes) -> None:
        colon = line.find(b":")
        if colon == 0:
            return  # comment
        if colon < 0:
            name, value = line, b""
        else:
            name = line[:colon]
            value = line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = _EVENT_NAMES.get(value) or _event_name(value)
        elif name == b"id":
            if b"\0" not in value:
                self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():  # bytes.isdigit: ASCII digits only
            self._retry = self.reconnection_time = int(value)
        # any other field is ignored, as the spec says

    def _dispatch(self, events: list[RawEvent]) -> None:
        if self._data:
            events.append(
                (self._event or "message", b"\n".join(self._data), self._last_id, self._retry)
            )
        self._reset_event()

    def _reset_event(self) -> None:
        self._data = []
        self._event = ""
        self._retry = None
