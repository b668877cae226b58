"""LSP-style message framing, sans-IO: bytes in -> messages out; messages -> bytes.

A frame is ``Content-Length: N\\r\\n`` (other headers such as ``Content-Type`` are accepted and
ignored) ``\\r\\n`` and N bytes of UTF-8 JSON. :class:`FrameDecoder` is fed whatever the pipe
delivers, at any boundary, and returns :class:`Message` and :class:`FrameError` events; after a
bad frame it resynchronises on the next ``Content-Length`` header, so one garbled message never
takes the connection down. :func:`encode_message` is the inverse.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_MESSAGE_BYTES",
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
    """Compact UTF-8 JSON."""
    if _orjson is not None:
        return bytes(_orjson.dumps(obj))
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def loads(data: bytes | str) -> Any:
    """Parse JSON (raises ``ValueError``)."""
    if _orjson is not None:
        return _orjson.loads(data)
    return json.loads(data)


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
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


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
    except ValueError as exc:
        found = _ID.search(body)
        ident: int | str | None = None
        if found is not None:
            try:
                ident = json.loads(found.group(1))
            except ValueError:
                ident = None
        return FrameError(f"message body is not valid UTF-8 JSON: {exc}", ident)
