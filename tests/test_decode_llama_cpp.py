"""llama.cpp's ``llama-server`` streams, recorded (``tests/fixtures/llama-cpp``), in every format.

What ``tests/test_llama_server.py`` checks against the live server, kept for the fast suite:
each recording's text comes out exactly once (llama-server's Responses events carry ``item_id``
but no ``output_index`` / ``content_index``, and their done events repeat the whole text), with
the usage and finish reason the stream gave, however the bytes are split. Re-record with
``python tests/support/llama_server.py tests/fixtures/llama-cpp`` after ``scripts/llama-setup``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmbridge.contract import check
from lmbridge.parts import FinishReason
from support.streams import chunkings, decode_body, fixture_lines, join_text, sse_body

RECORDINGS = {
    "chat-completions": "llama-cpp/chat-completions-text.chunks.txt",
    "responses": "llama-cpp/responses-text.chunks.txt",
    "anthropic": "llama-cpp/anthropic-text.chunks.txt",
}
FINISH = {
    "chat-completions": FinishReason.LENGTH,
    "responses": FinishReason.STOP,
    "anthropic": FinishReason.LENGTH,
}


def _events(fmt: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in fixture_lines(RECORDINGS[fmt])]


def _body(fmt: str) -> bytes:
    # as llama-server sends them: event lines for Responses and Anthropic, [DONE] for Chat
    lines = fixture_lines(RECORDINGS[fmt])
    return sse_body(lines, event_lines=fmt != "chat-completions", done=fmt == "chat-completions")


def _streamed_text(fmt: str) -> str:
    """The text the recording's deltas carry, read with plain json."""
    events = _events(fmt)
    if fmt == "chat-completions":
        return "".join(
            c["delta"].get("content") or "" for e in events for c in e.get("choices", [])
        )
    if fmt == "responses":
        return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    return "".join(
        e["delta"]["text"]
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta"
    )


def test_the_responses_recording_repeats_its_text_in_done_events_without_indexes() -> None:
    """The shape that doubled the text: item ids, no indexes, the whole text in three done events."""
    events = _events("responses")
    text = _streamed_text("responses")
    assert text
    assert not any("output_index" in e or "content_index" in e for e in events)
    assert all("item_id" in e for e in events if e["type"] == "response.output_text.delta")
    dones = [e for e in events if e["type"].endswith(".done")]
    assert {e["type"] for e in dones} >= {
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    }
    assert json.dumps(dones).count(json.dumps(text)) == 3


@pytest.mark.parametrize("fmt", list(RECORDINGS))
def test_text_appears_once_with_usage_and_finish(fmt: str) -> None:
    result = decode_body(fmt, [_body(fmt)])
    assert result.error is None
    assert check(result.parts) == []
    assert join_text(result.parts) == _streamed_text(fmt)
    assert result.usage.input_tokens and result.usage.output_tokens
    # the 24-token limit was hit; llama-server's Responses stream says "completed" regardless
    assert result.finish_reason is FINISH[fmt]


@pytest.mark.parametrize("fmt", list(RECORDINGS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_chunking_gives_the_same_parts(fmt: str, data: st.DataObject) -> None:
    body = _body(fmt)
    assert decode_body(fmt, data.draw(chunkings(body))).parts == decode_body(fmt, [body]).parts
