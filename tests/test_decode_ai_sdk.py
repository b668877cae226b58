"""The Vercel AI SDK decoder: every recorded shape, byte-split invariance, versions, bad input.

The recordings (tests/fixtures/ai-sdk, see its README) are the AI SDK's own test expectations;
the v4 and provider-level V1/V2 streams below are hand-written from the SDK's type definitions,
because no recording of those versions is at hand.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmbridge.contract import check
from lmbridge.errors import ToolArgumentsError, UpstreamProtocolError, UpstreamReportedError
from lmbridge.parts import (
    DataPart,
    FinishReason,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
)
from lmbridge.upstream import StreamResult
from lmbridge.upstream._citations import CITATION_MIME
from lmbridge.upstream.ai_sdk import FILE_URL_MIME, AISDKDecoder, decode_base64
from support.streams import (
    FIXTURES,
    chunkings,
    data_parts,
    decode_body,
    fixture_body,
    join_text,
    join_thinking,
    sse_body,
    tool_calls,
    with_line_ends,
)

AI_SDK = FIXTURES / "ai-sdk"
JSONL = sorted(str(p.relative_to(FIXTURES)) for p in AI_SDK.glob("*/*.jsonl"))
SSE = sorted(str(p.relative_to(FIXTURES)) for p in AI_SDK.glob("*/*.sse"))

REASONS = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool-calls": FinishReason.TOOL_CALLS,
    "content-filter": FinishReason.CONTENT_FILTER,
    "error": FinishReason.ERROR,
    "other": FinishReason.OTHER,
}
RESOLVING = {"tool-result", "tool-error", "tool-output-available", "tool-output-error"}


def load(rel: str) -> list[dict[str, Any]]:
    text = (FIXTURES / rel).read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def feed(objs: list[dict[str, Any]], **kw: Any) -> StreamResult:
    d = AISDKDecoder(**kw)
    parts = []
    for obj in objs:
        parts += d.feed_json(obj)
    parts += d.close()
    return d.result(parts)


def body_of(objs: list[dict[str, Any]], done: bool = True) -> bytes:
    return sse_body([json.dumps(o, ensure_ascii=False) for o in objs], done=done)


# -- what each recording says, computed straight from its parts --------------------------


def expected(objs: list[dict[str, Any]]) -> dict[str, Any]:
    text: list[str] = []
    thinking: list[str] = []
    calls: dict[str, tuple[str, Any]] = {}
    resolved: set[str] = set()
    ended = None
    finish = None
    steps: list[dict[str, Any]] = []
    for o in objs:
        t = o["type"]
        if t in ("error", "abort"):
            ended = t
            break
        if t == "text-delta":
            text.append(o.get("delta", o.get("text")))
        elif t == "reasoning-delta":
            thinking.append(o.get("delta", o.get("text")))
        elif t in ("tool-call", "tool-input-available") and not o.get("providerExecuted"):
            raw = o["input"]
            calls[o["toolCallId"]] = (
                o["toolName"],
                json.loads(raw) if isinstance(raw, str) else raw,
            )
        elif t in RESOLVING:
            resolved.add(o["toolCallId"])
        elif t == "finish":
            finish = o
        elif t == "finish-step" and "usage" in o:
            steps.append(o["usage"])
    usage = None
    if finish and "totalUsage" in finish:
        usage = (finish["totalUsage"]["inputTokens"], finish["totalUsage"]["outputTokens"])
    elif finish and "usage" in finish:  # provider level: {total, ...} objects
        usage = (finish["usage"]["inputTokens"]["total"], finish["usage"]["outputTokens"]["total"])
    elif steps:
        usage = (sum(u["inputTokens"] for u in steps), sum(u["outputTokens"] for u in steps))
    if ended == "error":
        reason = FinishReason.ERROR
    elif ended == "abort":
        reason = FinishReason.CANCELLED
    else:
        raw_reason = finish["finishReason"] if finish else None
        if isinstance(raw_reason, dict):
            raw_reason = raw_reason["unified"]
        reason = REASONS[raw_reason] if raw_reason else None
    return {
        "text": "".join(text),
        "thinking": "".join(thinking),
        "calls": [] if ended else [(k, *v) for k, v in calls.items() if k not in resolved],
        "usage": usage,
        "reason": reason,
        "ended": ended,
        "sources": sum(o["type"] in ("source", "source-url", "source-document") for o in objs),
        "files": sum(o["type"] == "file" for o in objs),
    }


def assert_matches(result: StreamResult, want: dict[str, Any]) -> None:
    assert check(result.parts) == []
    assert join_text(result.parts) == want["text"]
    assert join_thinking(result.parts) == want["thinking"]
    assert tool_calls(result.parts) == want["calls"]
    got_usage = result.usage and (result.usage.input_tokens, result.usage.output_tokens)
    assert got_usage == want["usage"]
    assert result.finish_reason == want["reason"]
    if want["ended"] == "error":
        assert isinstance(result.error, UpstreamReportedError)
    else:
        assert result.error is None
    data = data_parts(result.parts)
    assert sum(p.mime_type == CITATION_MIME for p in data) == want["sources"]
    assert sum(p.mime_type != CITATION_MIME for p in data) == want["files"]


@pytest.mark.parametrize("rel", JSONL)
def test_recording_as_json_lines_replays_with_its_content(rel: str) -> None:
    objs = load(rel)
    assert_matches(feed(objs), expected(objs))


@pytest.mark.parametrize("rel", JSONL)
def test_recording_as_sse_body_gives_the_same_parts(rel: str) -> None:
    objs = load(rel)
    from_lines = feed(objs)
    from_body = decode_body("ai-sdk", [fixture_body(rel)])
    assert from_body.parts == from_lines.parts
    assert (from_body.usage, from_body.finish_reason) == (
        from_lines.usage,
        from_lines.finish_reason,
    )


@pytest.mark.parametrize("rel", SSE)
def test_raw_ui_stream_bodies_match_their_json_lines(rel: str) -> None:
    result = decode_body("ai-sdk", [fixture_body(rel)])
    assert_matches(result, expected(load(rel[:-4] + ".jsonl")))
    assert result.parts == feed(load(rel[:-4] + ".jsonl")).parts


def test_tools_the_sdk_ran_are_not_handed_to_vs_code() -> None:
    for rel in (
        "ai-sdk/fullstream/multi-step-tool-then-text.jsonl",
        "ai-sdk/fullstream/tool-error.jsonl",
        "ai-sdk/ui-message-stream/tool-input-streaming.jsonl",
        "ai-sdk/ui-message-stream/multi-step-tool-then-text.jsonl",
        "ai-sdk/provider-parts/anthropic-web-search-sources.jsonl",  # providerExecuted
        "ai-sdk/provider-parts/openai-responses-mcp-approval-request.jsonl",  # providerExecuted
    ):
        objs = load(rel)
        assert any(o["type"] in ("tool-call", "tool-input-available") for o in objs)
        assert tool_calls(feed(objs).parts) == [], rel


def test_streamed_tool_input_becomes_one_call() -> None:
    result = feed(load("ai-sdk/fullstream/tool-input-deltas.jsonl"))
    assert result.parts == [
        ToolCallPart("call_O17Uplv4lJvD6DVdIvFFeRMw", "test-tool", {"value": "Sparkle Day"})
    ]
    assert result.finish_reason is FinishReason.TOOL_CALLS
    assert result.usage == Usage(3, 10, 0, 0, 10)


def test_provider_level_calls_come_at_once_with_json_string_input() -> None:
    result = feed(load("ai-sdk/provider-parts/openai-responses-reasoning-tool-calls.jsonl"))
    calls = [p for p in result.parts if isinstance(p, ToolCallPart)]
    assert [c.input for c in calls] == [
        {"a": 12, "b": 7, "op": "add"},
        {"a": 19, "b": 3, "op": "multiply"},
        {"a": 57, "b": 10, "op": "multiply"},
    ]
    last_call = result.parts.index(calls[-1])
    assert all(isinstance(p, TextPart) for p in result.parts[last_call + 1 :])  # order kept
    thinking = [p for p in result.parts if isinstance(p, ThinkingPart)]
    assert thinking[0].metadata and thinking[0].metadata["encryptedContent"].startswith("gAAAA")
    assert {p.metadata["itemId"] for p in thinking if p.metadata} == {
        "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9"
    }
    assert result.usage == Usage(299, 12, 0, None, 0)


def test_reasoning_metadata_keeps_signatures_and_redacted_data() -> None:
    parts = feed(load("ai-sdk/fullstream/reasoning-deltas.jsonl")).parts
    metas = [(p.id, dict(p.metadata)) for p in parts if isinstance(p, ThinkingPart) and p.metadata]
    assert metas == [
        ("1", {"signature": "1234567890"}),
        ("2", {"redactedData": "redacted-reasoning-data"}),
        ("3", {"signature": "1234567890"}),
        ("4", {"signature": "1234567890"}),
        ("5", {"signature": "1234567890"}),
        ("4", {"signature": "0987654321"}),
        ("5", {"signature": "0987654321"}),
    ]
    assert [p.id for p in parts if isinstance(p, ThinkingPart) and p.text][:2] == ["1", "1"]


def test_files_become_data_parts_by_media_type() -> None:
    # "Hello World" is the SDK test's mock base64: decoded as atob does (spaces ignored)
    mock = base64.b64decode("HelloWorld==")
    for rel in ("ai-sdk/fullstream/files.jsonl", "ai-sdk/ui-message-stream/files.jsonl"):
        files = [p for p in feed(load(rel)).parts if isinstance(p, DataPart)]
        assert files == [DataPart(mock, "text/plain"), DataPart(b"BAUG", "image/jpeg")], rel


def test_sources_become_citations() -> None:
    cites = [p.decode_json() for p in feed(load("ai-sdk/fullstream/sources.jsonl")).parts[:1]]
    assert cites == [
        {
            "type": "citation",
            "url": "https://example.com",
            "title": "Example",
            "sourceId": "123",
            "sourceType": "url",
        }
    ]
    web = feed(load("ai-sdk/provider-parts/anthropic-web-search-sources.jsonl")).parts
    quoted = [p.decode_json() for p in data_parts(web) if "citedText" in p.decode_json()]
    assert quoted and quoted[0]["citedText"].startswith("Apple today announced")


def test_abort_ends_the_stream_cancelled_without_error() -> None:
    for rel in ("ai-sdk/fullstream/abort-in-second-step.jsonl", *SSE[:1]):
        result = (
            feed(load(rel))
            if rel.endswith(".jsonl")
            else decode_body("ai-sdk", [fixture_body(rel)])
        )
        assert result.finish_reason is FinishReason.CANCELLED
        assert result.raw_finish_reason == "AbortError: This operation was aborted"
        assert result.error is None
        assert result.parts == []


# -- split invariance ---------------------------------------------------------------------

SPLIT_BODIES = {
    "ui-files": fixture_body("ai-sdk/ui-message-stream/files.sse"),
    "ui-reasoning-crlf": with_line_ends(
        fixture_body("ai-sdk/ui-message-stream/reasoning-with-provider-metadata.sse"), b"\r\n"
    ),
    "fullstream-tool-cr": with_line_ends(
        body_of(load("ai-sdk/fullstream/tool-input-deltas.jsonl")), b"\r"
    ),
    "provider-multibyte": body_of(load("ai-sdk/provider-parts/anthropic-web-search-sources.jsonl")),
}
WHOLE = {k: decode_body("ai-sdk", [v]) for k, v in SPLIT_BODIES.items()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(sorted(SPLIT_BODIES)))
def test_parts_do_not_depend_on_how_the_bytes_are_split(data: st.DataObject, name: str) -> None:
    chunks = data.draw(chunkings(SPLIT_BODIES[name]))
    result = decode_body("ai-sdk", chunks)
    assert result.parts == WHOLE[name].parts
    assert (result.usage, result.finish_reason) == (WHOLE[name].usage, WHOLE[name].finish_reason)


def test_multibyte_body_in_one_byte_chunks() -> None:
    body = SPLIT_BODIES["provider-multibyte"]
    assert "📰".encode() in body
    chunks = [body[i : i + 1] for i in range(len(body))]
    assert decode_body("ai-sdk", chunks).parts == WHOLE["provider-multibyte"].parts


# -- other versions (hand-written from the SDK's type definitions) -------------------------


def test_handwritten_v4_fullstream() -> None:
    objs = [
        {"type": "step-start", "messageId": "msg-1", "request": {}, "warnings": []},
        {"type": "reasoning", "textDelta": "Let me think."},
        {"type": "reasoning-signature", "signature": "sig-1"},
        {"type": "redacted-reasoning", "data": "opaque"},
        {"type": "text-delta", "textDelta": "Reading "},
        {"type": "text-delta", "textDelta": "the file."},
        {"type": "source", "source": {"sourceType": "url", "id": "s1", "url": "https://a.b"}},
        {"type": "file", "mimeType": "image/png", "base64": "iVBORw0K", "uint8Array": {}},
        {"type": "tool-call-streaming-start", "toolCallId": "c1", "toolName": "read"},
        {"type": "tool-call-delta", "toolCallId": "c1", "toolName": "read", "argsTextDelta": '{"p'},
        {"type": "tool-call-delta", "toolCallId": "c1", "toolName": "read", "argsTextDelta": 'ath":"a"}'},
        {"type": "tool-call", "toolCallType": "function", "toolCallId": "c1", "toolName": "read",
         "args": {"path": "a"}},
        {"type": "step-finish", "finishReason": "tool-calls", "isContinued": False,
         "usage": {"promptTokens": 7, "completionTokens": 3, "totalTokens": 10}},
        {"type": "finish", "finishReason": "tool-calls",
         "usage": {"promptTokens": 7, "completionTokens": 3, "totalTokens": 10}},
    ]  # fmt: skip
    result = feed(objs)
    assert result.parts == [
        ThinkingPart("Let me think."),
        ThinkingPart("", None, {"signature": "sig-1"}),
        ThinkingPart("", None, {"redactedData": "opaque"}),
        TextPart("Reading "),
        TextPart("the file."),
        DataPart.json(
            {"type": "citation", "url": "https://a.b", "sourceId": "s1", "sourceType": "url"},
            CITATION_MIME,
        ),
        DataPart(base64.b64decode("iVBORw0K"), "image/png"),
        ToolCallPart("c1", "read", {"path": "a"}),
    ]
    assert result.usage == Usage(7, 3)
    assert result.finish_reason is FinishReason.TOOL_CALLS
    assert check(result.parts) == []


def test_text_parts_shaped_type_text_with_text() -> None:
    """A whole text given as ``{type: "text", text}`` (the shape of a finished step's text
    content, which some routes stream as is) is text like a delta, also beside deltas."""
    result = feed(
        [
            {"type": "text", "text": "Whole answer. "},
            {"type": "text-delta", "delta": "And more."},
            {"type": "text", "text": "h\u00e9 \u2713"},
            {"type": "finish", "finishReason": "stop"},
        ]
    )
    assert [p for p in result.parts if isinstance(p, TextPart)] == [
        TextPart("Whole answer. "),
        TextPart("And more."),
        TextPart("hé ✓"),
    ]
    assert result.finish_reason is FinishReason.STOP


def test_handwritten_v4_provider_level_json_string_args() -> None:
    objs = [
        {"type": "response-metadata", "id": "r1", "modelId": "m"},
        {"type": "text-delta", "textDelta": "ok"},
        {"type": "tool-call-delta", "toolCallType": "function", "toolCallId": "c9",
         "toolName": "grep", "argsTextDelta": '{"q": "x"}'},
        {"type": "tool-call", "toolCallType": "function", "toolCallId": "c9", "toolName": "grep",
         "args": '{"q": "x"}'},
        {"type": "finish", "finishReason": "tool-calls",
         "usage": {"promptTokens": 4, "completionTokens": 2}},
    ]  # fmt: skip
    result = feed(objs)
    assert result.parts == [TextPart("ok"), ToolCallPart("c9", "grep", {"q": "x"})]
    assert result.usage == Usage(4, 2)


def test_handwritten_v5_provider_level_numeric_usage() -> None:
    objs = [
        {"type": "stream-start", "warnings": []},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "hi"},
        {"type": "text-end", "id": "t"},
        {"type": "finish", "finishReason": "length",
         "usage": {"inputTokens": 11, "outputTokens": 5, "totalTokens": 16,
                   "reasoningTokens": 2, "cachedInputTokens": 8}},
    ]  # fmt: skip
    result = feed(objs)
    assert result.parts == [TextPart("hi")]
    assert result.usage == Usage(11, 5, cache_read_tokens=8, reasoning_tokens=2)
    assert result.finish_reason is FinishReason.LENGTH


def test_handwritten_usage_of_steps_adds_up_until_the_total_arrives() -> None:
    step = {"type": "finish-step", "finishReason": "tool-calls",
            "usage": {"inputTokens": 10, "outputTokens": 2, "totalTokens": 12}}  # fmt: skip
    two_steps = feed([step, step])
    assert two_steps.usage == Usage(20, 4)
    total = {"type": "finish", "finishReason": "stop", "totalUsage": {"inputTokens": 25,
             "outputTokens": 5, "inputTokenDetails": {"cacheReadTokens": 3,
             "cacheWriteTokens": 1}, "outputTokenDetails": {"reasoningTokens": 2}}}  # fmt: skip
    assert feed([step, step, total]).usage == Usage(25, 5, 3, 1, 2)


def test_handwritten_ui_stream_data_sources_and_files_by_url() -> None:
    objs = [
        {"type": "start", "messageId": "m1", "messageMetadata": {"x": 1}},
        {"type": "data-weather", "id": "w", "data": {"city": "Oslo", "temp": -3}},
        {"type": "data-my report/v2", "data": [1, 2]},
        {"type": "source-url", "sourceId": "u1", "url": "https://x.y", "title": "X"},
        {"type": "source-document", "sourceId": "d1", "mediaType": "application/pdf",
         "title": "Doc", "filename": "d.pdf"},
        {"type": "file", "url": "https://cdn.example/cat.png", "mediaType": "image/png"},
        {"type": "file", "url": "data:,caf%C3%A9%20au%20lait", "mediaType": "text/plain"},
        {"type": "message-metadata", "messageMetadata": {"usage": 5}},
        {"type": "finish"},
    ]  # fmt: skip
    result = feed(objs)
    data = data_parts(result.parts)
    assert len(result.parts) == len(data) == 6
    assert (data[0].mime_type, data[0].decode_json()) == (
        "application/vnd.vercel.weather+json",
        {"city": "Oslo", "temp": -3},
    )
    assert data[1].mime_type == "application/vnd.vercel.my-report-v2+json"
    assert data[2].decode_json() == {
        "type": "citation", "url": "https://x.y", "title": "X", "sourceId": "u1",
        "sourceType": "url",
    }  # fmt: skip
    assert data[3].decode_json()["filename"] == "d.pdf"
    assert data[3].decode_json()["sourceType"] == "document"
    # a remote file stays a reference: never fetched, never a markdown image link
    assert (data[4].mime_type, data[4].decode_json()) == (
        FILE_URL_MIME,
        {"url": "https://cdn.example/cat.png", "mediaType": "image/png"},
    )
    assert data[5] == DataPart.text("café au lait", "text/plain")
    assert check(result.parts) == []
    assert result.finish_reason is FinishReason.STOP


@pytest.mark.parametrize(
    "payload",
    [
        {"uint8Array": [104, 105]},
        {"uint8ArrayData": {"0": 104, "1": 105}},
        {"data": "aGk="},
        {"data": "aGk"},  # unpadded
        {"data": {"type": "data", "data": "aGk="}},
    ],
)
def test_handwritten_file_byte_forms(payload: dict[str, Any]) -> None:
    parts = feed([{"type": "file", "mediaType": "text/plain", **payload}]).parts
    assert parts == [DataPart.text("hi", "text/plain")]


def test_base64_is_forgiving_like_atob_but_not_lenient() -> None:
    assert decode_base64(" aG\nk= ") == b"hi"
    assert decode_base64("-_8") == b"\xfb\xff"
    with pytest.raises(ValueError, match="base64"):
        decode_base64("abcde")
    with pytest.raises(ValueError, match="base64"):
        decode_base64("a*b=")


def test_handwritten_held_call_waits_for_its_step_and_executed_calls_vanish() -> None:
    objs = [
        {"type": "start-step"},
        {"type": "tool-call", "toolCallId": "a", "toolName": "ask", "input": {"q": 1}},
        {"type": "tool-call", "toolCallId": "b", "toolName": "run", "input": {}},
        {"type": "tool-result", "toolCallId": "b", "toolName": "run", "output": "done"},
        {"type": "text-delta", "id": "1", "text": "and then"},
        {"type": "tool-call", "toolCallId": "x", "toolName": "bad", "input": "{oops",
         "invalid": True},
        {"type": "finish-step", "finishReason": "tool-calls"},
        {"type": "start-step"},
        {"type": "text-delta", "id": "2", "text": "!"},
    ]  # fmt: skip
    result = feed(objs)
    assert result.parts == [TextPart("and then"), ToolCallPart("a", "ask", {"q": 1}), TextPart("!")]
    assert result.error is None


def test_handwritten_abort_drops_pending_calls_and_ignores_what_follows() -> None:
    objs = [
        {"type": "text-delta", "delta": "so far"},
        {"type": "tool-call", "toolCallId": "a", "toolName": "ask", "input": {"q": 1}},
        {"type": "tool-input-start", "toolCallId": "b", "toolName": "other"},
        {"type": "tool-input-delta", "toolCallId": "b", "inputTextDelta": "{}"},
        {"type": "abort"},
        {"type": "text-delta", "delta": "ignored"},
    ]
    result = feed(objs)
    assert result.parts == [TextPart("so far")]
    assert (result.finish_reason, result.error) == (FinishReason.CANCELLED, None)


@pytest.mark.parametrize(
    ("reason", "raw", "want"),
    [
        ("stop", None, FinishReason.STOP),
        ("content-filter", None, FinishReason.CONTENT_FILTER),
        ("unknown", None, FinishReason.OTHER),
        ("something-new", None, FinishReason.OTHER),
        ({"unified": "length", "raw": "max_tokens"}, "max_tokens", FinishReason.LENGTH),
    ],
)
def test_finish_reasons_are_normalised(reason: Any, raw: str | None, want: FinishReason) -> None:
    result = feed([{"type": "finish", "finishReason": reason}])
    assert result.finish_reason is want
    assert result.raw_finish_reason == (raw or reason)


def test_finish_without_a_reason_says_whether_calls_were_made() -> None:
    call = {"type": "tool-input-available", "toolCallId": "a", "toolName": "t", "input": {}}
    assert feed([call, {"type": "finish"}]).finish_reason is FinishReason.TOOL_CALLS
    assert feed([{"type": "finish"}]).finish_reason is FinishReason.STOP


# -- errors and bad input ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("part", "message", "etype", "code"),
    [
        ({"type": "error", "error": "boom"}, "ai-sdk: boom", None, None),
        (
            {"type": "error", "error": {"name": "AI_APICallError", "message": "Too many",
                                        "statusCode": 429}},
            "ai-sdk: AI_APICallError: Too many", "AI_APICallError", "429",
        ),
        ({"type": "error", "errorText": "An error occurred."}, "ai-sdk: An error occurred.", None,
         None),
        ({"type": "error"}, "without a message", None, None),
    ],
)  # fmt: skip
def test_error_parts_end_the_stream_with_a_reported_error(
    part: dict[str, Any], message: str, etype: str | None, code: str | None
) -> None:
    held = {"type": "tool-call", "toolCallId": "a", "toolName": "t", "input": {}}
    result = feed([{"type": "text-delta", "delta": "kept"}, held, part, {"type": "finish"}])
    assert result.parts == [TextPart("kept")]
    assert isinstance(result.error, UpstreamReportedError)
    assert message in str(result.error)
    assert (result.error.error_type, result.error.code) == (etype, code)
    assert result.finish_reason is FinishReason.ERROR


def test_unknown_and_lifecycle_parts_produce_nothing() -> None:
    objs = [
        {"type": t}
        for t in ("start", "start-step", "text-start", "text-end", "reasoning-part-finish",
                  "raw", "custom", "reasoning-file", "tool-approval-request", "tool-input-end",
                  "response-metadata", "stream-start", "totally-new-part", "finish-step")
    ]  # fmt: skip
    result = feed(objs)
    assert result.parts == []
    assert result.error is None


def test_tool_input_that_never_completes_is_an_error_naming_the_tool() -> None:
    objs = [
        {"type": "text-delta", "delta": "calling"},
        {"type": "tool-input-start", "id": "c1", "toolName": "write_file"},
        {"type": "tool-input-delta", "id": "c1", "delta": '{"path": "a.py", "body": "'},
    ]
    result = feed(objs)
    assert result.parts == [TextPart("calling")]
    assert isinstance(result.error, ToolArgumentsError)
    assert result.error.tool_name == "write_file"
    assert '"path": "a.py"' in str(result.error)


def test_stream_without_finish_still_hands_over_complete_calls() -> None:
    call = {"type": "tool-call", "toolCallId": "a", "toolName": "t", "input": {"k": 1}}
    result = feed([{"type": "text-delta", "text": "x"}, call])
    assert result.parts == [TextPart("x"), ToolCallPart("a", "t", {"k": 1})]
    assert (result.error, result.finish_reason) == (None, None)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b'data: {"type":"text-delta","delta":"a"}\n\ndata: not json\n\n', "not valid JSON"),
        (b'data: {"type":"text-delta","delta":"a"}\n\ndata: {"type":"text-de', "not valid JSON"),
        (b'data: {"type":"text-delta","delta":"a"}\n\ndata: {"delta":"b"}\n\n', "'type'"),
        (b'data: {"type":"text-delta","delta":"a"}\n\ndata: {"type":"text-delta"}\n\n',
         "'delta', 'text' or 'textDelta'"),
        (b'data: {"type":"text-delta","delta":"a"}\n\ndata: [1,2]\n\n', "expected a JSON object"),
        (b'data: {"type":"text-delta","delta":"a"}\n\n'
         b'data: {"type":"file","mediaType":"image/png","data":"@@@@"}\n\n', "base64"),
        (b'data: {"type":"text-delta","delta":"a"}\n\ndata: {"type":"file","data":"aGk="}\n\n',
         "mediaType"),
        (b'data: {"type":"text-delta","delta":"a"}\n\n'
         b'data: {"type":"tool-input-delta","delta":"{"}\n\n', "toolCallId"),
    ],
)  # fmt: skip
def test_bad_input_is_a_clear_protocol_error_that_keeps_the_parts(body: bytes, needle: str) -> None:
    result = decode_body("ai-sdk", [body + b'data: {"type":"text-delta","delta":"never"}\n\n'])
    assert result.parts == [TextPart("a")]
    assert isinstance(result.error, UpstreamProtocolError)
    assert needle in str(result.error)


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    body = b'data: {"type":"text-delta","delta":"caf\xc3"}\n\ndata: [DONE]\n\n'
    result = decode_body("ai-sdk", [body])
    assert result.parts == [TextPart("caf\ufffd")]
    assert result.error is None


def test_nothing_follows_the_done_sentinel() -> None:
    body = (
        body_of([{"type": "text-delta", "delta": "a"}])
        + b'data: {"type":"text-delta","delta":"b"}\n\n'
    )
    assert decode_body("ai-sdk", [body]).parts == [TextPart("a")]


def test_fixture_readme_is_kept_with_the_recordings() -> None:
    assert (Path(AI_SDK) / "README.md").is_file()


def test_deeply_nested_json_is_a_protocol_error_not_a_crash() -> None:
    # shared core: json.loads raises RecursionError (not ValueError) on deep nesting
    body = b'data: {"type":"text-delta","delta":"a"}\n\ndata: ' + b"[" * 100_000 + b"\n\n"
    result = decode_body("ai-sdk", [body])
    assert result.parts == [TextPart("a")]
    assert isinstance(result.error, UpstreamProtocolError)
    assert "not valid JSON" in str(result.error)


def test_interleaved_tool_inputs_by_id_become_one_call_each() -> None:
    """Calls are told apart by their id: streamed input fragments of two calls interleave, and
    the whole input that follows (``tool-input-available``) does not make a second call."""
    result = feed(
        [
            {"type": "start"},
            {"type": "text-start", "id": "t"},
            {"type": "text-delta", "id": "t", "delta": "Hi"},
            {"type": "tool-input-start", "toolCallId": "c1", "toolName": "read"},
            {"type": "tool-input-start", "toolCallId": "c2", "toolName": "list"},
            {"type": "tool-input-delta", "toolCallId": "c2", "inputTextDelta": '{"dir":'},
            {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"path": "a"}'},
            {"type": "tool-input-delta", "toolCallId": "c2", "inputTextDelta": ' "."}'},
            {
                "type": "tool-input-available",
                "toolCallId": "c1",
                "toolName": "read",
                "input": {"path": "a"},
            },
            {
                "type": "tool-input-available",
                "toolCallId": "c2",
                "toolName": "list",
                "input": {"dir": "."},
            },
            {"type": "text-end", "id": "t"},
            {"type": "finish-step"},
            {"type": "finish"},
        ]
    )
    assert [p for p in result.parts if isinstance(p, TextPart)] == [TextPart("Hi")]
    assert tool_calls(result.parts) == [("c1", "read", {"path": "a"}), ("c2", "list", {"dir": "."})]
