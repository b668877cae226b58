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
- At the end of the stream the spec discards an event that has no blank line after it. Real
  servers often end without one, so by default :meth:`SSEDecoder.close` dispatches it; pass
  ``strict=True`` to follow the spec.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

__all__ = ["DONE", "SSEDecoder", "ServerSentEvent"]

DONE = "[DONE]"
"""The sentinel data OpenAI-style servers send as their last event."""


@dataclass(slots=True)
class ServerSentEvent:
    """One dispatched event."""

    data: str
    """The data lines joined with ``\\n``."""
    event: str = "message"
    """The event type (``message`` when no ``event`` field was given)."""
    id: str = ""
    """The last event id seen so far in the stream."""
    retry: int | None = None
    """The reconnection time in ms, when this event set one."""

    @property
    def is_done(self) -> bool:
        """Whether this is the ``[DONE]`` sentinel."""
        return self.data.strip() == DONE


class SSEDecoder:
    """Incremental event-stream decoder: :meth:`feed` bytes, :meth:`close` at the end."""

    __slots__ = (
        "_data",
        "_decoder",
        "_event",
        "_last_id",
        "_pending",
        "_pending_parts",
        "_retry",
        "_skip_lf",
        "_started",
        "reconnection_time",
        "strict",
    )

    def __init__(self, *, strict: bool = False) -> None:
        self.strict = strict
        """Discard an unterminated last event at :meth:`close`, as the spec says."""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""  # text after the last line end
        self._pending_parts: list[str] = []  # more of it, not joined yet
        self._skip_lf = False  # the previous chunk ended in CR
        self._started = False  # BOM check done
        self._data: list[str] = []
        self._event = ""
        self._last_id = ""
        self._retry: int | None = None
        self.reconnection_time: int | None = None
        """The last ``retry`` value in the stream (it applies even without data), in ms."""

    @property
    def last_event_id(self) -> str:
        """The last ``id`` field seen, for reconnection."""
        return self._last_id

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode a chunk of bytes; return the events completed by it."""
        return self._feed_text(self._decoder.decode(chunk, False))

    def feed_text(self, text: str) -> list[ServerSentEvent]:
        """Decode already-decoded text (for callers that hold ``str``)."""
        return self._feed_text(text)

    def close(self) -> list[ServerSentEvent]:
        """End of stream: flush the decoder and, unless strict, the unterminated last event."""
        events = self._feed_text(self._decoder.decode(b"", True))
        if self.strict:
            self._pending = ""
            self._pending_parts = []
            self._reset_event()
            return events
        if self._pending_parts:
            self._pending += "".join(self._pending_parts)
            self._pending_parts = []
        if self._pending:
            line, self._pending = self._pending, ""
            self._process_line(line, events)
        self._dispatch(events)
        return events

    # -- internals

    def _feed_text(self, text: str) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        if not text:
            return events
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
                if not text:
                    return events
        if self._skip_lf:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        if "\n" not in text and "\r" not in text:
            # No line end: keep the piece; joining once per line keeps long lines linear.
            self._pending_parts.append(text)
            return events
        if self._pending_parts:
            self._pending += "".join(self._pending_parts)
            self._pending_parts = []
        buf = self._pending + text if self._pending else text
        if "\r" in buf:
            # A CR ends a line by itself; a CR that ends the chunk may be the first half of a
            # CRLF split across chunks, so an LF that starts the next chunk is skipped.
            if buf[-1] == "\r":
                self._skip_lf = True
            buf = buf.replace("\r\n", "\n").replace("\r", "\n")
        # Only CR and LF end lines here (str.split("\n") never splits on U+2028 and friends,
        # unlike str.splitlines); the last piece has no line end yet and waits for more.
        lines = buf.split("\n")
        self._pending = lines.pop()
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append(
                        ServerSentEvent(
                            "\n".join(data), self._event or "message", self._last_id, self._retry
                        )
                    )
                    data = self._data = []
                self._event = ""
                self._retry = None
            elif line.startswith("data:"):
                data.append(line[6:] if line.startswith("data: ") else line[5:])
            else:
                self._process_line(line, events)
                data = self._data
        return events

    def _process_line(self, line: str, events: list[ServerSentEvent]) -> None:
        if not line:
            self._dispatch(events)
            return
        colon = line.find(":")
        if colon == 0:
            return  # comment
        if colon < 0:
            name, value = line, ""
        else:
            name = line[:colon]
            value = line[colon + 1 :]
            if value[:1] == " ":
                value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = self.reconnection_time = int(value)
        # any other field is ignored, as the spec says

    def _dispatch(self, events: list[ServerSentEvent]) -> None:
        if self._data:
            events.append(
                ServerSentEvent(
                    "\n".join(self._data), self._event or "message", self._last_id, self._retry
                )
            )
        self._reset_event()

    def _reset_event(self) -> None:
        self._data = []
        self._event = ""
        self._retry = None
