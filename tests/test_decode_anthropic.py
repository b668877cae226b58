"""The Anthropic Messages decoder: recorded streams, byte-split invariance, bad input."""

from __future__ import annotations

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
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
)
from lmbridge.upstream import AssemblerOptions, ByteStreamDecoder, StreamResult
from lmbridge.upstream._citations import CITATION_MIME
from lmbridge.upstream.anthropic import STOP_REASONS, AnthropicDecoder
from support.streams import chunkings, with_line_ends
from support.streams import sse_body as support_sse_body

FIXTURES = Path(__file__).parent / "fixtures" / "anthropic"
ALL = sorted(FIXTURES.glob("*.chunks.txt"))
SERVER_TOOL_TYPES = {"server_tool_use", "mcp_tool_use"}


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def sse_body(events: list[dict[str, Any]], newline: bytes = b"\n") -> bytes:
    """The HTTP body Anthropic sends: ``event: <type>`` and ``data: <json>`` per event."""
    lines = [json.dumps(e, ensure_ascii=False) for e in events]
    body = support_sse_body(lines, event_lines=True)
    return body if newline == b"\n" else with_line_ends(body, newline)


def decode(body: bytes | list[bytes], options: AssemblerOptions | None = None) -> StreamResult:
    chunks = [body] if isinstance(body, bytes) else body
    return ByteStreamDecoder(AnthropicDecoder(options)).decode_all(chunks)


def decode_events(events: list[dict[str, Any]], **kw: Any) -> StreamResult:
    return decode(sse_body(events), **kw)


def text_of(parts: list[ResponsePart]) -> str:
    return "".join(p.value for p in parts if isinstance(p, TextPart))


def thinking_of(parts: list[ResponsePart]) -> str:
    return "".join(p.text for p in parts if isinstance(p, ThinkingPart))


# -- what each recording says, computed straight from its events ------------------------


def expected(events: list[dict[str, Any]]) -> dict[str, Any]:
    blocks: dict[int, dict[str, Any]] = {}
    text, thinking, calls, citations = [], [], [], 0
    usage: dict[str, int] = {}
    stop = None
    for e in events:
        t = e["type"]
        if t == "message_start":
            usage.update(e["message"]["usage"])
        elif t == "content_block_start":
            b = e["content_block"]
            blocks[e["index"]] = {"block": b, "json": []}
            if b["type"] == "web_search_tool_result":
                citations += len(b["content"])
        elif t == "content_block_delta":
            d = e["delta"]
            if d["type"] == "text_delta":
                text.append(d["text"])
            elif d["type"] == "thinking_delta":
                thinking.append(d["thinking"])
            elif d["type"] == "input_json_delta":
                blocks[e["index"]]["json"].append(d["partial_json"])
            elif d["type"] == "citations_delta":
                citations += 1
        elif t == "content_block_stop":
            b = blocks[e["index"]]
            if b["block"]["type"] == "tool_use":
                raw = "".join(b["json"])
                calls.append((b["block"]["id"], b["block"]["name"], json.loads(raw) if raw else {}))
        elif t == "message_delta":
            stop = e["delta"].get("stop_reason") or stop
            explanation = (e["delta"].get("stop_details") or {}).get("explanation")
            if stop == "refusal" and explanation:  # the refusal's reason is shown as text
                text.append(("\n\n" if text else "") + explanation.strip())
            usage.update({k: v for k, v in e["usage"].items() if isinstance(v, int)})
    cache_read = usage.get("cache_read_input_tokens")
    cache_write = usage.get("cache_creation_input_tokens")
    return {
        "text": "".join(text),
        "thinking": "".join(thinking),
        "calls": calls,
        "citations": citations,
        "input": usage["input_tokens"] + (cache_read or 0) + (cache_write or 0),
        "output": usage["output_tokens"],
        "cache_read": cache_read,
        "cache_write": cache_write,
        "stop": stop,
    }


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_recording_replays_with_its_content_and_no_violation(path: Path) -> None:
    events = load(path)
    want = expected(events)
    result = decode(sse_body(events))
    assert result.error is None
    assert check(result.parts) == []
    assert text_of(result.parts) == want["text"]
    assert thinking_of(result.parts) == want["thinking"]
    calls = [(p.call_id, p.name, p.input) for p in result.parts if isinstance(p, ToolCallPart)]
    assert calls == want["calls"]
    cites = [p for p in result.parts if isinstance(p, DataPart)]
    assert len(cites) == want["citations"]
    assert all(p.mime_type == CITATION_MIME for p in cites)
    assert result.usage is not None
    assert result.usage.input_tokens == want["input"]
    assert result.usage.output_tokens == want["output"]
    assert result.usage.cache_read_tokens == want["cache_read"]
    assert result.usage.cache_write_tokens == want["cache_write"]
    assert result.raw_finish_reason == want["stop"]
    assert result.finish_reason == STOP_REASONS[want["stop"]]


def test_data_lines_without_event_lines_decode_the_same() -> None:
    # The shared fixtures' own form: only data lines; the event type is in the JSON.
    path = FIXTURES / "anthropic-json-tool.2.chunks.txt"
    bare = b"".join(b"data: " + line.encode() + b"\n\n" for line in path.read_text().splitlines())
    assert decode(bare).parts == decode(sse_body(load(path))).parts


def test_message_delta_input_tokens_win_over_message_start() -> None:
    result = decode(sse_body(load(FIXTURES / "anthropic-message-delta-input-tokens.chunks.txt")))
    assert result.usage == Usage(input_tokens=61, output_tokens=2)  # 43 at start, 61 at the end
    assert text_of(result.parts) == "pong"


def test_signature_is_kept_on_a_final_thinking_part_of_the_same_block() -> None:
    events = load(FIXTURES / "anthropic-clear-thinking.1.chunks.txt")
    signature = next(
        e["delta"]["signature"]
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "signature_delta"
    )
    parts = decode(sse_body(events)).parts
    thinking = [p for p in parts if isinstance(p, ThinkingPart)]
    assert thinking[-1] == ThinkingPart("", thinking[0].id, {"signature": signature})
    assert len({p.id for p in thinking}) == 1
    assert thinking[0].id == "msg_01Y6V41gqPaKWEw7iPouH7iW:0"
    # all thinking comes before the answer text
    first_text = next(i for i, p in enumerate(parts) if isinstance(p, TextPart))
    assert all(isinstance(p, ThinkingPart) for p in parts[:first_text])


def test_server_tools_are_never_tool_calls_but_their_citations_come_through() -> None:
    for name in ("anthropic-web-search-tool.1.chunks.txt", "anthropic-mcp.1.chunks.txt"):
        events = load(FIXTURES / name)
        assert any(
            e["type"] == "content_block_start" and e["content_block"]["type"] in SERVER_TOOL_TYPES
            for e in events
        )
        result = decode(sse_body(events))
        assert not [p for p in result.parts if isinstance(p, ToolCallPart)]
    cites = [
        p.decode_json()
        for p in decode(sse_body(load(FIXTURES / "anthropic-web-search-tool.1.chunks.txt"))).parts
        if isinstance(p, DataPart)
    ]
    urls = {c["url"] for c in cites}
    assert "https://9to5mac.com/2025/09/22/ios-26-1-beta-1/" in urls
    with_text = [c for c in cites if "citedText" in c]
    assert with_text and all(c["kind"] == "web_search_result_location" for c in with_text)
    assert all(not any(k.startswith("encrypted") for k in c) for c in cites)


def test_refusal_shows_its_explanation_and_finishes_as_content_filter() -> None:
    events = load(FIXTURES / "anthropic-refusal.chunks.txt")
    explanation = next(
        e["delta"]["stop_details"]["explanation"] for e in events if e["type"] == "message_delta"
    )
    result = decode(sse_body(events))
    assert result.parts == [TextPart(explanation)]  # not an empty answer
    assert result.finish_reason is FinishReason.CONTENT_FILTER
    assert result.error is None


# -- split invariance ---------------------------------------------------------------------

SPLIT_BODIES = {
    "thinking": sse_body(load(FIXTURES / "anthropic-clear-thinking.1.chunks.txt")),
    "tool-crlf": sse_body(load(FIXTURES / "anthropic-json-tool.2.chunks.txt"), b"\r\n"),
    "multibyte-cr": sse_body(load(FIXTURES / "anthropic-clear-tool-uses.1.chunks.txt"), b"\r"),
}
WHOLE = {k: decode(v) for k, v in SPLIT_BODIES.items()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(SPLIT_BODIES)), data=st.data())
def test_parts_do_not_depend_on_how_the_bytes_are_split(name: str, data: st.DataObject) -> None:
    chunks = data.draw(chunkings(SPLIT_BODIES[name]))
    result = decode(chunks)
    assert result.parts == WHOLE[name].parts
    assert result.usage == WHOLE[name].usage
    assert result.finish_reason == WHOLE[name].finish_reason


def test_one_byte_chunks_including_inside_multibyte_characters() -> None:
    body = SPLIT_BODIES["multibyte-cr"]
    assert "°".encode() in body
    assert decode([body[i : i + 1] for i in range(len(body))]).parts == WHOLE["multibyte-cr"].parts


# -- hand-written streams: behaviour the recordings do not show ---------------------------


def start(msg_id: str = "msg_1", **usage: int) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "usage": usage or {"input_tokens": 10, "output_tokens": 1},
        },
    }


def text_block(index: int, *deltas: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        },
        *(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": d},
            }
            for d in deltas
        ),
        {"type": "content_block_stop", "index": index},
    ]


def tool_block(
    index: int, name: str, *fragments: str, stop: bool = True, initial: Any = None
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {
                "type": "tool_use",
                "id": f"toolu_{index}",
                "name": name,
                "input": {} if initial is None else initial,
            },
        }
    ]
    out += [
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": f},
        }
        for f in fragments
    ]
    if stop:
        out.append({"type": "content_block_stop", "index": index})
    return out


def end(reason: str = "end_turn", **usage: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": reason},
            "usage": usage or {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]


def test_handwritten_cache_usage_counts_cached_input_in_the_total() -> None:
    events = [
        start(
            input_tokens=5,
            cache_read_input_tokens=100,
            cache_creation_input_tokens=20,
            output_tokens=1,
        ),
        *text_block(0, "hi"),
        *end(output_tokens=7),
    ]
    assert decode_events(events).usage == Usage(
        input_tokens=125, output_tokens=7, cache_read_tokens=100, cache_write_tokens=20
    )


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("end_turn", FinishReason.STOP),
        ("stop_sequence", FinishReason.STOP),
        ("max_tokens", FinishReason.LENGTH),
        ("tool_use", FinishReason.TOOL_CALLS),
        ("refusal", FinishReason.CONTENT_FILTER),
        ("pause_turn", FinishReason.OTHER),
        ("model_context_window_exceeded", FinishReason.LENGTH),
        ("brand_new", FinishReason.OTHER),
    ],
)
def test_handwritten_stop_reasons_are_normalised(reason: str, finish: FinishReason) -> None:
    result = decode_events([start(), *text_block(0, "x"), *end(reason)])
    assert (result.finish_reason, result.raw_finish_reason) == (finish, reason)


def test_handwritten_tool_input_given_whole_at_block_start() -> None:
    events = [start(), *tool_block(0, "read", initial={"path": "a.py"}), *end("tool_use")]
    assert decode_events(events).parts == [ToolCallPart("toolu_0", "read", {"path": "a.py"})]


def test_handwritten_redacted_thinking_keeps_its_data() -> None:
    events = [
        start(),
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "redacted_thinking", "data": "EmwKAhgB"},
        },
        {"type": "content_block_stop", "index": 0},
        *text_block(1, "ok"),
        *end(),
    ]
    parts = decode_events(events).parts
    assert parts == [ThinkingPart("", "msg_1:0", {"redactedData": "EmwKAhgB"}), TextPart("ok")]
    assert check(parts) == []


def test_handwritten_web_fetch_result_is_a_citation_and_server_input_is_not_a_call() -> None:
    events = [
        start(),
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_fetch",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"url": "https://e.com"}'},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "web_fetch_tool_result",
                "tool_use_id": "srvtoolu_1",
                "content": {
                    "type": "web_fetch_result",
                    "url": "https://e.com",
                    "content": {"type": "document", "title": "E"},
                },
            },
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {
                "type": "code_execution_tool_result",
                "tool_use_id": "srvtoolu_2",
                "content": {},
            },
        },
        {"type": "content_block_stop", "index": 2},
        *end(),
    ]
    parts = decode_events(events).parts
    assert len(parts) == 1 and isinstance(parts[0], DataPart)
    assert parts[0].decode_json() == {
        "type": "citation",
        "url": "https://e.com",
        "title": "E",
        "sourceId": "srvtoolu_1",
    }


@pytest.mark.parametrize(
    ("policy", "kinds"), [("part", {"thinking", "text"}), ("text", {"text"}), ("drop", {"text"})]
)
def test_thinking_policy_applies(policy: Any, kinds: set[str]) -> None:
    events = load(FIXTURES / "anthropic-clear-thinking.1.chunks.txt")
    parts = decode_events(events, options=AssemblerOptions(thinking=policy)).parts
    assert {p.kind for p in parts} == kinds
    if policy == "text":
        assert text_of(parts).startswith("The previous result was 925.")


def test_ping_and_unknown_events_produce_nothing() -> None:
    events = [
        start(),
        {"type": "ping"},
        {"type": "brand_new_event", "x": 1},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "future_block"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "future_delta", "v": 1}},
        {"type": "content_block_stop", "index": 0},
        *text_block(1, "hi"),
        *end(),
    ]
    result = decode_events(events)
    assert result.parts == [TextPart("hi")]
    assert result.error is None


# -- bad input ------------------------------------------------------------------------------


def test_error_event_is_a_reported_error_that_keeps_the_parts() -> None:
    events = [
        start(),
        *text_block(0, "partial "),
        *tool_block(1, "t", '{"a": 1', stop=False),
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
    result = decode_events(events)
    assert result.parts == [TextPart("partial ")]
    assert isinstance(result.error, UpstreamReportedError)
    assert result.error.error_type == "overloaded_error"
    assert "Overloaded" in str(result.error)
    assert result.finish_reason is FinishReason.ERROR


def test_duplicate_message_start_for_the_open_message_is_ignored() -> None:
    events = [start(), *text_block(0, "a"), start(), *text_block(1, "b"), *end()]
    result = decode_events(events)
    assert result.error is None
    assert result.parts == [TextPart("a"), TextPart("b")]


def test_message_start_for_another_message_is_a_protocol_error() -> None:
    events = [
        start("msg_1"),
        *text_block(0, "kept"),
        *tool_block(1, "t", '{"x": 1}', stop=False),
        start("msg_2"),
        *text_block(0, "never"),
        *end(),
    ]
    result = decode_events(events)
    assert isinstance(result.error, UpstreamProtocolError)
    assert "msg_2" in str(result.error) and "msg_1" in str(result.error)
    assert result.parts == [TextPart("kept")]  # no half-received tool call, nothing after


def test_stream_cut_off_without_stop_is_an_error_and_drops_the_open_call() -> None:
    events = [
        start(),
        *text_block(0, "so far"),
        *tool_block(1, "write", '{"path": "a"}', stop=False),
    ]
    result = decode_events(events)
    assert result.parts == [TextPart("so far")]
    assert isinstance(result.error, UpstreamProtocolError)
    assert "message_stop" in str(result.error) and "1 (tool)" in str(result.error)


def test_stream_with_stop_reason_but_no_message_stop_is_complete() -> None:
    events = [start(), *text_block(0, "done"), *end("end_turn")[:1]]
    result = decode_events(events)
    assert result.error is None
    assert result.parts == [TextPart("done")]
    assert result.finish_reason is FinishReason.STOP


@pytest.mark.parametrize(
    ("fragments", "reason"),
    [
        (['{"a": '], "not valid JSON"),
        (["[1, 2]"], "a JSON list"),
        (['"just a string"'], "a JSON str"),
    ],
)
def test_tool_arguments_that_are_not_an_object_name_the_tool(
    fragments: list[str], reason: str
) -> None:
    events = [
        start(),
        *text_block(0, "calling"),
        *tool_block(1, "edit_file", *fragments),
        *end("tool_use"),
    ]
    result = decode_events(events)
    assert result.parts == [TextPart("calling")]
    assert isinstance(result.error, ToolArgumentsError)
    assert result.error.tool_name == "edit_file"
    assert reason in str(result.error)
    assert "".join(fragments) in str(result.error)


def test_truncated_json_data_line_keeps_the_parts() -> None:
    body = sse_body([start(), *text_block(0, "before")])
    body += (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"ty'
    )
    result = decode(body)
    assert result.parts == [TextPart("before")]
    assert isinstance(result.error, UpstreamProtocolError)
    assert "not valid JSON" in str(result.error)


def test_non_json_data_line_is_a_clear_error() -> None:
    body = (
        sse_body([start(), *text_block(0, "x")])
        + b"event: message_delta\ndata: <html>502</html>\n\n"
    )
    result = decode(body)
    assert result.parts == [TextPart("x")]
    assert isinstance(result.error, UpstreamProtocolError)
    assert "<html>502</html>" in str(result.error)


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "content_block_delta", "index": 0},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}},
        {"type": "content_block_start", "index": 1},
        {"type": "message_start"},
    ],
)
def test_missing_fields_are_a_protocol_error_naming_the_event(bad: dict[str, Any]) -> None:
    events = [start(), *text_block(0, "ok")] if bad["type"] != "message_start" else []
    result = decode_events([*events, bad, *text_block(2, "never"), *end()])
    assert isinstance(result.error, UpstreamProtocolError)
    assert bad["type"] in str(result.error)
    assert text_of(result.parts) == ("ok" if events else "")


def test_handwritten_interleaved_blocks_by_index_each_once() -> None:
    """Blocks are told apart by index: interleaved tool inputs stay apart, and a block's input
    given at its start is not added to the deltas that stream it (nothing is emitted twice)."""
    t0, t1 = (
        tool_block(1, "read", '{"path": "a"}', initial={}),
        tool_block(2, "list", '{"dir": "."}', initial={}),
    )
    text = text_block(0, "Let me ", "look.")
    events = [
        start(),
        text[0],
        text[1],
        t0[0],
        t1[0],
        t1[1],
        t0[1],
        text[2],
        text[3],
        t1[2],
        t0[2],
        *end("tool_use"),
    ]
    result = decode_events(events)
    assert text_of(result.parts) == "Let me look."
    assert [p for p in result.parts if isinstance(p, ToolCallPart)] == [
        ToolCallPart("toolu_2", "list", {"dir": "."}),
        ToolCallPart("toolu_1", "read", {"path": "a"}),
    ]


def _message(*blocks: dict[str, Any]) -> list[dict[str, Any]]:
    start = {"id": "msg_1", "role": "assistant", "content": [], "usage": {"input_tokens": 3}}
    return [
        {"type": "message_start", "message": start},
        *blocks,
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]


def test_a_thinking_signature_split_over_two_deltas_is_joined() -> None:
    result = decode_events(
        _message(
            {"type": "content_block_start", "index": 0,
             "content_block": {"type": "thinking", "thinking": ""}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "thinking_delta", "thinking": "hmm"}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "signature_delta", "signature": "EqQB"}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "signature_delta", "signature": "Cj8Y"}},
            {"type": "content_block_stop", "index": 0},
        )
    )
    assert result.error is None
    signatures = [
        p.metadata["signature"]
        for p in result.parts
        if isinstance(p, ThinkingPart) and p.metadata and "signature" in p.metadata
    ]
    assert signatures == ["EqQBCj8Y"]
    assert thinking_of(result.parts) == "hmm"


def test_deltas_for_a_block_index_never_started_emit_no_call_and_do_not_fail() -> None:
    result = decode_events(
        _message(
            {"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "text_delta", "text": "ok"}},
            {"type": "content_block_delta", "index": 7,
             "delta": {"type": "input_json_delta", "partial_json": '{"path": "x"}'}},
            {"type": "content_block_delta", "index": 8,
             "delta": {"type": "signature_delta", "signature": "zz"}},
            {"type": "content_block_stop", "index": 7},
            {"type": "content_block_stop", "index": 0},
        )
    )
    assert result.error is None
    assert result.parts == [TextPart("ok")]
    assert result.finish_reason is FinishReason.STOP
