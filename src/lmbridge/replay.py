"""Replaying recorded upstream streams: reading recordings, detecting their format, decoding.

Three recording shapes are read:

- ``*.chunks.txt``: one SSE ``data:`` payload (a JSON object) per line, the fixture format of the
  recorded provider streams;
- raw SSE bodies (``data:`` / ``event:`` lines and blank lines, e.g. ``*.sse``);
- JSON lines of AI SDK stream parts (``*.jsonl``);
- a JSON array of objects (Gemini's ``streamGenerateContent`` without ``alt=sse``), read
  with :class:`~lmbridge.upstream.gemini.JSONArrayStream`.

The format (one of :data:`lmbridge.formats.FORMATS`) is detected from the events when not
given. A few recordings ship inside the package (:func:`bundled_recordings`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from . import formats
from .contract import Violation, check
from .parts import ResponsePart, TextPart, part_to_wire, usage_to_wire
from .sse import ServerSentEvent, SSEDecoder
from .upstream import AssemblerOptions, StreamResult, decoder_for

__all__ = [
    "Recording",
    "RecordingError",
    "ReplayReport",
    "bundled_recordings",
    "detect_format",
    "load_recording",
    "merge_text",
    "parse_recording",
    "replay",
]

Shape = Literal["chunks", "sse", "jsonl", "json-array"]

class RecordingError(ValueError):
    """A recording cannot be read or its format cannot be told."""


@dataclass(frozen=True, slots=True)
class Recording:
    """A recorded stream as a sequence of SSE events."""

    shape: Shape
    events: list[ServerSentEvent]


@dataclass(slots=True)
class ReplayReport:
    """What replaying a recording produced, with the contract verdict."""

    format: str
    result: StreamResult
    violations: list[Violation]

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` form: parts with adjacent text merged, usage, finish, error, violations."""
        error = self.result.error
        return {
            "format": self.format,
            "parts": [part_to_wire(p) for p in merge_text(self.result.parts)],
            "usage": usage_to_wire(self.result.usage) if self.result.usage else None,
            "finishReason": self.result.finish_reason.value if self.result.finish_reason else None,
            "error": None
            if error is None
            else {"type": type(error).__name__, "message": str(error)},
            "violations": [
                {"index": v.index, "rule": v.rule, "message": v.message} for v in self.violations
            ],
        }


def merge_text(parts: Iterable[ResponsePart]) -> list[ResponsePart]:
    """Parts with each run of adjacent text parts joined into one."""
    out: list[ResponsePart] = []
    run: list[str] = []  # the text run being joined (joined once: linear in its length)
    for part in parts:
        if isinstance(part, TextPart):
            run.append(part.value)
            continue
        if run:
            out.append(TextPart("".join(run)))
            run = []
        out.append(part)
    if run:
        out.append(TextPart("".join(run)))
    return out


def parse_recording(text: str, name: str = "") -> Recording:
    """Read a recording's text, telling its shape from the name and content."""
    # one payload per line: split on LF only (splitlines would also split on U+2028 in JSON)
    lines = [ln.rstrip("\r") for ln in text.split("\n") if ln.strip()]
    if not lines:
        raise RecordingError(f"{name or 'recording'}: it is empty")
    if lines[0].lstrip().startswith("["):
        return Recording("json-array", _array_events(text, name))
    if name.endswith(".sse") or any(
        ln.startswith(("data:", "event:", "id:", ":")) for ln in lines[:5]
    ):
        decoder = SSEDecoder()
        events = decoder.feed(text.encode("utf-8")) + decoder.close()
        return Recording("sse", events)
    shape: Shape = "jsonl" if name.endswith(".jsonl") else "chunks"
    return Recording(shape, [ServerSentEvent(ln) for ln in lines])


def _array_events(text: str, name: str) -> list[ServerSentEvent]:
    from .errors import UpstreamProtocolError
    from .upstream.gemini import JSONArrayStream

    array = JSONArrayStream()
    try:
        elements = array.feed(text.encode("utf-8"))
        array.close()
    except UpstreamProtocolError as exc:
        raise RecordingError(f"{name or 'recording'}: {exc}") from None
    return [ServerSentEvent(raw=e) for e in elements]


def detect_format(events: Sequence[ServerSentEvent]) -> str:
    """The wire format of a stream, told from its first events by the registered rules
    (:func:`lmbridge.formats.detect`)."""
    for event in events[:50]:
        if event.is_done:
            continue
        try:
            obj = json.loads(event.data)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        found = formats.detect(obj, event.event)
        if found is not None:
            return found
    raise RecordingError(
        "cannot tell the stream format from its events; give it with --format "
        f"({', '.join(formats.names())})"
    )


def replay(
    recording: Recording, format: str | None = None, options: AssemblerOptions | None = None
) -> ReplayReport:
    """Decode a recording and check the result against the stream contract."""
    fmt = format or detect_format(recording.events)
    decoder = decoder_for(fmt, options)
    parts: list[ResponsePart] = []
    for event in recording.events:
        parts.extend(decoder.feed_event(event))
    parts.extend(decoder.close())
    result = decoder.result(parts)
    return ReplayReport(fmt, result, check(parts))


def bundled_recordings() -> dict[str, str]:
    """Recordings that ship with the package: name -> file name."""
    folder = resources.files("lmbridge") / "_data" / "streams"
    names = {}
    for entry in folder.iterdir():
        if entry.name.endswith((".chunks.txt", ".sse", ".jsonl")):
            names[entry.name.split(".")[0]] = entry.name
    return dict(sorted(names.items()))


def load_recording(path_or_name: str) -> tuple[str, str]:
    """The text and file name of a recording: a path, ``-`` (standard input), or the name of a
    bundled one. A file that is not UTF-8 text (a binary file) is a :class:`RecordingError`
    that shows none of its bytes."""
    bundled = bundled_recordings()
    if path_or_name in bundled:
        file_name = bundled[path_or_name]
        resource = resources.files("lmbridge") / "_data" / "streams" / file_name
        return resource.read_text(encoding="utf-8"), file_name
    try:
        if path_or_name == "-":
            data, name = sys.stdin.buffer.read(), "<stdin>"
        else:
            with open(path_or_name, "rb") as fh:
                data, name = fh.read(), path_or_name
    except OSError as exc:
        known = ", ".join(bundled) or "none"
        raise RecordingError(
            f"cannot read {path_or_name!r}: {exc.strerror or exc}; bundled recordings: {known}"
        ) from None
    try:
        return data.decode("utf-8"), name  # bytes as they are: a recorded CR LF stays
    except UnicodeDecodeError as exc:
        raise RecordingError(
            f"{name} is not UTF-8 text (byte {exc.start}: {exc.reason}), so not a recorded "
            "stream (SSE, chunks, JSON lines or a JSON array): is it a binary file?"
        ) from None
