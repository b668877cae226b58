"""LSP-style message framing, sans-IO: bytes in -> messages out; messages -> bytes.

A frame is ``Content-Length: N\\r\\n`` (other headers such as ``Content-Type`` are accepted and
ignored) ``\\r\\n`` and N bytes of UTF-8 JSON. :class:`FrameDecoder` is fed whatever the pipe
delivers, at any boundary, and returns :class:`Message` and :class:`FrameError` events; after a
bad frame it resynchronises on the next ``Content-Length`` header, so one garbled message never
takes the connection down. :func:`encode_message` is the inverse.

Nesting is limited to :data:`MAX_NESTING` levels whichever parser runs: orjson stops at 1024,
the standard library at Python's recursion limit (about 1000, less the stack in use, and then
with a ``RecursionError`` rather than a ``ValueError``). The limit is checked on the bytes
before parsing, so a frame nested too deep is a :class:`FrameError` with the request's id in
both cases, and every other message of the same read is still decoded.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .._json import loads
from .._nesting import MAX_NESTING

__all__ = [
    "MAX_MESSAGE_BYTES",
    "MAX_NESTING",
    "FrameDecoder",
    "FrameError",
    "Message",
    "dumps",
    "encode_message",
    "loads",
]

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Largest body accepted (images in prompts are big, but not this big)."""


_orjson: Any
try:  # orjson is the optional "fast" extra: several times faster on part batches
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON (a lone surrogate, which UTF-8 cannot carry, as a ``\\u`` escape)."""
    if _orjson is not None:
        try:
            return bytes(_orjson.dumps(obj))
        except TypeError:  # deeper than orjson's encoder goes, or a lone surrogate
            pass
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A string read from a JSON escape such as "\ud83d" without its pair (a request id
        # echoed in the answer, say): JSON text carries it as the same escape, so the peer
        # reads back exactly the string it sent.
        return json.dumps(obj, separators=(",", ":")).encode("ascii")


def encode_message(obj: Any) -> bytes:
    """One frame holding ``obj`` as JSON."""
    body = dumps(obj)
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


@dataclass(frozen=True, slots=True)
class Message:
    """A decoded JSON value (normally a JSON-RPC object)."""

    value: Any


@dataclass(frozen=True, slots=True)
class FrameError:
    """A frame that could not be decoded; ``id`` is the request id when one could be found."""

    message: str
    id: int | str | None = None


_HEADER_END = b"\r\n\r\n"
_CONTENT_LENGTH = re.compile(rb"content-length", re.IGNORECASE)
_ID_VALUE = re.compile(rb'\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


class FrameDecoder:
    """Incremental decoder of Content-Length frames."""

    def __init__(self, max_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self._buf = bytearray()
        self._need: int | None = None  # body length once the header is read
        self._max = max_bytes

    def feed(self, data: bytes) -> list[Message | FrameError]:
        """Add bytes; return every event they complete, in order."""
        self._buf += data
        out: list[Message | FrameError] = []
        while True:
            if self._need is None:
                end = self._buf.find(_HEADER_END)
                if end < 0:
                    if len(self._buf) > 8192:  # no header is this long: garbage before a frame
                        out.append(FrameError("no frame header in 8 KiB of input; skipped"))
                        self._resync(len(self._buf) - 16)
                    return out
                header = bytes(self._buf[:end])
                length, problem = _parse_header(header, self._max)
                if problem is not None:
                    out.append(FrameError(problem))
                    # from 1, not past the header: garbage glued to a real header's front
                    # ("xxContent-Length: 5") must not cost that frame
                    self._resync(1)
                    continue
                del self._buf[: end + len(_HEADER_END)]
                self._need = length
            if len(self._buf) < self._need:
                return out
            body = bytes(self._buf[: self._need])
            del self._buf[: self._need]
            self._need = None
            out.append(_decode_body(body))

    @property
    def pending(self) -> int:
        """Bytes buffered but not yet decoded (non-zero at EOF: a truncated frame)."""
        return len(self._buf)

    def _resync(self, start: int) -> None:
        # Skip to the next thing that looks like a header, or keep a short tail that might
        # be the beginning of one.
        start = max(start, 0)
        match = _CONTENT_LENGTH.search(self._buf, start)
        if match is not None:
            del self._buf[: match.start()]
        else:
            del self._buf[: max(start, len(self._buf) - 15)]


def _parse_header(header: bytes, max_bytes: int) -> tuple[int, str | None]:
    length: int | None = None
    try:
        text = header.decode("ascii")
    except UnicodeDecodeError:
        return 0, "frame header is not ASCII"
    for line in text.split("\r\n"):
        name, sep, value = line.partition(":")
        if not sep:
            return 0, f"malformed frame header line {line[:80]!r}"
        if name.strip().lower() == "content-length":
            value = value.strip()
            if not value.isdigit():
                return 0, f"Content-Length is not a number: {value[:40]!r}"
            length = int(value)
    if length is None:
        return 0, "frame header has no Content-Length"
    if length > max_bytes:
        return 0, f"frame of {length} bytes exceeds the limit of {max_bytes}"
    return length, None


def _decode_body(body: bytes) -> Message | FrameError:
    try:
        return Message(loads(body))
    except Exception as exc:  # whatever the parser raises, this frame alone is lost
        return FrameError(f"message body is not valid UTF-8 JSON: {exc}", _top_level_id(body))


_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def _top_level_id(body: bytes) -> int | str | None:
    """The ``id`` member of the outermost object, read without parsing the body (an ``"id"``
    nested in the params, such as a tool call's, is not the request's)."""
    depth = 0
    for token in _TOKEN.finditer(body):
        text = token.group()
        if text in (b"[", b"{"):
            depth += 1
        elif text in (b"]", b"}"):
            depth -= 1
        elif depth == 1 and text == b'"id"':
            found = _ID_VALUE.match(body, token.end())
            if found is not None:
                try:
                    value = json.loads(found.group(1))
                except ValueError:
                    return None
                return value if isinstance(value, (int, str)) else None
    return None
