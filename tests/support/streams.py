"""Recorded streams as HTTP bodies, byte chunkings, and decoding helpers for decoder tests.

The fixtures (``tests/fixtures/<folder>/*.chunks.txt``) hold one SSE ``data:`` payload per line.
:func:`sse_body` turns such lines back into the body a server sends: ``data: <line>\\n\\n``
for each line, ``event: <type>`` lines first for the Responses API (the type is read from the
JSON), ``data: [DONE]`` at the end for Chat Completions, nothing more for Gemini. :func:`chunkings` is a hypothesis
strategy that cuts a body anywhere, including inside a multi-byte character and between a CR
and its LF.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from lmbridge.parts import DataPart, ResponsePart, TextPart, ThinkingPart, ToolCallPart
from lmbridge.upstream import ByteStreamDecoder, StreamResult, decoder_for

__all__ = [
    "CHAT_FOLDERS",
    "FIXTURES",
    "RESPONSES_FOLDERS",
    "chunkings",
    "data_parts",
    "decode_body",
    "decode_lines",
    "fixture_body",
    "fixture_files",
    "fixture_lines",
    "join_text",
    "join_thinking",
    "split_at",
    "sse_body",
    "tool_calls",
    "with_line_ends",
]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
"""The fixture tree, ``tests/fixtures``."""

CHAT_FOLDERS = ("openai-chat", "openai-compatible", "deepseek", "groq", "mistral")
"""Folders holding Chat Completions chunks."""
RESPONSES_FOLDERS = ("openai-responses", "open-responses", "xai-responses")
"""Folders holding Responses API / OpenResponses events."""


def fixture_files(folders: Iterable[str], pattern: str = "*.chunks.txt") -> list[str]:
    """Fixture paths relative to ``tests/fixtures``, sorted (handy as pytest ids)."""
    out: list[str] = []
    for folder in folders:
        out.extend(str(p.relative_to(FIXTURES)) for p in sorted((FIXTURES / folder).glob(pattern)))
    return out


def fixture_lines(rel: str) -> list[str]:
    """The non-empty lines of a ``*.chunks.txt`` fixture, as text."""
    text = (FIXTURES / rel).read_text(encoding="utf-8")
    return [line for line in text.split("\n") if line.strip()]


def sse_body(
    lines: Sequence[str],
    *,
    event_lines: bool = False,
    done: bool = False,
) -> bytes:
    """An SSE body: ``data: <line>\\n\\n`` per line; ``event: <type>`` first when
    ``event_lines`` (when the line is JSON with a ``type``); ``data: [DONE]`` when ``done``."""
    out: list[str] = []
    for line in lines:
        if event_lines:
            try:
                kind = json.loads(line).get("type")
            except (ValueError, AttributeError):
                kind = None
            if isinstance(kind, str):
                out.append(f"event: {kind}\n")
        out.append(f"data: {line}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode("utf-8")


def fixture_body(rel: str) -> bytes:
    """The body a server would send for a fixture, by its folder's wire format.

    ``*.sse`` files are raw bodies already and are returned as they are.
    """
    if rel.endswith(".sse"):
        return (FIXTURES / rel).read_bytes()
    folder = rel.split("/", 1)[0]
    lines = fixture_lines(rel)
    if folder in RESPONSES_FOLDERS:
        return sse_body(lines, event_lines=True)
    if folder == "google":  # Gemini's stream just ends after the finishReason
        return sse_body(lines)
    return sse_body(lines, done=True)


def with_line_ends(body: bytes, end: bytes) -> bytes:
    """The body with every LF line end replaced by ``end`` (``b"\\r"`` or ``b"\\r\\n"``).

    Safe for bodies of JSON payloads: JSON text never holds a raw LF.
    """
    return body.replace(b"\n", end)


def split_at(body: bytes, cuts: Iterable[int]) -> list[bytes]:
    """``body`` cut at the given offsets (out-of-range and repeated offsets are ignored)."""
    points = sorted({c for c in cuts if 0 < c < len(body)})
    chunks: list[bytes] = []
    start = 0
    for point in points:
        chunks.append(body[start:point])
        start = point
    chunks.append(body[start:])
    return chunks


@st.composite
def _chunkings(draw: st.DrawFn, body: bytes, max_cuts: int) -> list[bytes]:
    if len(body) < 2:
        return [body]
    cuts = draw(st.lists(st.integers(1, len(body) - 1), max_size=max_cuts))
    # also cut right after some CRs, so that a CR ends one chunk and its LF starts the next
    crs = [i + 1 for i, b in enumerate(body) if b == 0x0D]
    if crs:
        cuts += draw(st.lists(st.sampled_from(crs), max_size=4))
    return split_at(body, cuts)


def chunkings(body: bytes, max_cuts: int = 40) -> st.SearchStrategy[list[bytes]]:
    """A strategy of ways to cut ``body`` into chunks (any offsets, CR/LF splits included)."""
    return _chunkings(body, max_cuts)


def decode_body(
    format: str, chunks: Iterable[bytes], *, strict_sse: bool = False, **kwargs: Any
) -> StreamResult:
    """Decode a body, fed chunk by chunk, with a fresh decoder for ``format``."""
    return ByteStreamDecoder(decoder_for(format, **kwargs), strict_sse=strict_sse).decode_all(
        chunks
    )


def decode_lines(format: str, lines: Sequence[str], **kwargs: Any) -> StreamResult:
    """Decode fixture lines as the SSE body :func:`fixture_body` would build, in one chunk."""
    body = sse_body(lines, event_lines=format == "responses", done=format == "chat-completions")
    return decode_body(format, [body], **kwargs)


def join_text(parts: Iterable[ResponsePart]) -> str:
    """All text parts' values, concatenated."""
    return "".join(p.value for p in parts if isinstance(p, TextPart))


def join_thinking(parts: Iterable[ResponsePart]) -> str:
    """All thinking parts' text, concatenated."""
    return "".join(p.text for p in parts if isinstance(p, ThinkingPart))


def tool_calls(parts: Iterable[ResponsePart]) -> list[tuple[str, str, dict[str, Any]]]:
    """``(call_id, name, input)`` of every tool call part, in order."""
    return [(p.call_id, p.name, p.input) for p in parts if isinstance(p, ToolCallPart)]


def data_parts(parts: Iterable[ResponsePart]) -> list[DataPart]:
    """The data parts, in order."""
    return [p for p in parts if isinstance(p, DataPart)]
