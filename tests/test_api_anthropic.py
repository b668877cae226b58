"""The Anthropic Messages translator: Claude Code's requests in, well-formed event sequences out
(checked by the real ``anthropic`` SDK's own accumulator and by lmbridge's Anthropic decoder)."""

from __future__ import annotations

import base64
import json
from typing import Any

import anthropic
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from lmbridge.client.classify import ChatRequestError, ErrorKind
from lmbridge.client.endpoint.apis.anthropic import (
    MessagesStream,
    count_tokens_body,
    error_for,
    model_entry,
    models_list,
    parse_messages_request,
)
from lmbridge.client.guard import PromptTooLongError
from lmbridge.client.testing import fake_model
from lmbridge.errors import ConversionError
from lmbridge.parts import (
    ChatRole,
    DataPart,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolMode,
    ToolResultPart,
)
from lmbridge.upstream import decoder_for

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


def claude_code_body(model: str = "claude-sonnet-4-5-20250929") -> dict[str, Any]:
    """The shape Claude Code sends (trimmed): everything the endpoint must accept."""
    return {
        "model": model,
        "max_tokens": 32000,
        "stream": True,
        "system": [
            {
                "type": "text",
                "text": "You are Claude Code.",
                "cache_control": {"type": "ephemeral"},
            },
            {"type": "text", "text": "Be brief."},
        ],
        "messages": [
            {"role": "system", "content": "Extra system text for other models."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "read a.txt", "cache_control": {"type": "ephemeral"}}
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should read it.", "signature": "sig-1"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    },
                ],
            },
        ],
        "tools": [
            {
                "name": "Read",
                "description": "Read a file",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
            {
                "name": "Later",
                "description": "Loaded on demand",
                "input_schema": {"type": "object"},
                "defer_loading": True,
                "cache_control": {"type": "ephemeral"},
            },
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        ],
        "tool_choice": {"type": "auto"},
        "thinking": {"type": "enabled", "budget_tokens": 4000},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        "metadata": {"user_id": "user_abc"},
        "temperature": 1,
        "a_field_from_the_future": {"x": 1},
    }


# --------------------------------------------------------------------------- requests


def test_claude_code_request_is_accepted_and_mapped() -> None:
    req = parse_messages_request(claude_code_body())
    assert req.model == "claude-sonnet-4-5-20250929" and req.stream
    first = req.messages[0]
    # the system prompt (blocks + the system message in `messages`) leads, as VS Code takes it
    assert first.role == ChatRole.ASSISTANT
    assert first.text == "You are Claude Code.\n\nBe brief.\n\nExtra system text for other models."
    assert [m.role for m in req.messages[1:]] == [ChatRole.USER, ChatRole.ASSISTANT, ChatRole.USER]
    assistant = req.messages[2].content
    assert assistant[0] == ThinkingPart("I should read it.", None, {"signature": "sig-1"})
    assert assistant[1] == ToolCallPart("toolu_1", "Read", {"path": "a"})
    results = req.messages[3].content
    assert isinstance(results[0], ToolResultPart) and results[0].call_id == "toolu_1"
    assert isinstance(results[1], DataPart) and results[1].mime_type == "image/png"
    assert [t.name for t in req.options.tools] == ["Read", "Later"]
    assert req.left_out_tools == ["web_search"]
    assert req.options.tool_mode == ToolMode.AUTO
    assert req.options.model_options == {
        "max_tokens": 32000,
        "temperature": 1,
        "thinking": {"type": "enabled", "budget_tokens": 4000},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    }


def test_adaptive_thinking_and_system_as_text() -> None:
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": 100,
        "system": "Sys",
        "thinking": {"type": "adaptive"},
        "messages": [{"role": "user", "content": "hi"}],
    }
    req = parse_messages_request(body)
    assert req.messages[0].text == "Sys" and req.messages[1].text == "hi"
    assert req.options.model_options["thinking"] == {"type": "adaptive"}
    assert not req.stream


def test_a_later_system_message_stays_in_place_as_user_text() -> None:
    body = {
        "model": "m",
        "max_tokens": 10,
        "system": "S",
        "messages": [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "two"},
            {"role": "system", "content": [{"type": "text", "text": "reminder"}]},
            {"role": "user", "content": "three"},
        ],
    }
    req = parse_messages_request(body)
    assert [(m.role, m.text) for m in req.messages] == [
        (ChatRole.ASSISTANT, "S"),
        (ChatRole.USER, "one"),
        (ChatRole.ASSISTANT, "two"),
        (ChatRole.USER, "reminder"),
        (ChatRole.USER, "three"),
    ]


@pytest.mark.parametrize(
    ("choice", "names", "mode"),
    [
        ({"type": "auto"}, ["a", "b"], ToolMode.AUTO),
        ({"type": "any"}, ["a", "b"], ToolMode.REQUIRED),
        ({"type": "tool", "name": "b"}, ["b"], ToolMode.REQUIRED),
        ({"type": "none"}, [], ToolMode.AUTO),
        ({"type": "auto", "disable_parallel_tool_use": True}, ["a", "b"], ToolMode.AUTO),
    ],
)
def test_tool_choice(choice: dict[str, Any], names: list[str], mode: ToolMode) -> None:
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "x"}],
        "tools": [{"name": n, "input_schema": {"type": "object"}} for n in ("a", "b")],
        "tool_choice": choice,
    }
    req = parse_messages_request(body)
    assert [t.name for t in req.options.tools] == names and req.options.tool_mode == mode


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model": None}, "model: expected a non-empty string"),
        ({"messages": "hi"}, "messages: expected a list"),
        ({"messages": []}, "at least one user or assistant message"),
        ({"max_tokens": 0}, "max_tokens: expected a positive integer"),
        ({"max_tokens": "9"}, "max_tokens: expected a positive integer"),
        ({"system": 5}, "system: expected a string"),
        ({"tools": {}}, "tools: expected a list"),
        ({"tool_choice": {"type": "tool", "name": "nope"}}, "no tool named 'nope'"),
        ({"tool_choice": "auto"}, "tool_choice: expected an object"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "hologram"}]}]},
            "unsupported content block type 'hologram'",
        ),
        (
            {"messages": [{"role": "system", "content": [{"type": "image"}]}]},
            "messages[0].content[0]: expected a text block",
        ),
    ],
)
def test_bad_requests_name_the_problem(change: dict[str, Any], message: str) -> None:
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "x"}],
    }
    body.update(change)
    with pytest.raises(ConversionError) as info:
        parse_messages_request(body)
    assert message in str(info.value)


def test_count_tokens_body_needs_no_max_tokens() -> None:
    req = parse_messages_request(
        {"model": "m", "messages": [{"role": "user", "content": "x"}]}, count_only=True
    )
    assert req.messages[0].text == "x"
    assert count_tokens_body(12) == {"input_tokens": 12}


# --------------------------------------------------------------------------- streams


def sdk_accumulate(events: list[tuple[str, dict[str, Any]]]) -> Any:
    """What the anthropic SDK's stream helper makes of the events (it raises on a bad order)."""
    snapshot = None
    json_bufs: dict[int, bytes] = {}
    for name, data in events:
        assert name == data["type"]
        if name in ("ping", "error"):
            continue
        snapshot = accumulate_event(
            event=json.loads(json.dumps(data)), current_snapshot=snapshot, json_bufs=json_bufs
        )
    return snapshot


def same(snapshot: Any, message: dict[str, Any]) -> bool:
    """The SDK's snapshot equals the message, fields the SDK adds as null aside."""
    return bool(snapshot.to_dict(exclude_none=True) == drop_none(message))


def drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_none(v) for v in value]
    return value


def run(parts: list[ResponsePart], output_tokens: int = 7) -> tuple[MessagesStream, list[Any]]:
    stream = MessagesStream(model="claude-x", input_tokens=42, message_id="msg_1")
    events = stream.start()
    for part in parts:
        events += stream.feed(part)
    events += stream.finish(output_tokens)
    return stream, events


def test_event_sequence_for_text_thinking_and_a_tool_call() -> None:
    stream, events = run(
        [
            ThinkingPart("Let me ", "r1"),
            ThinkingPart("think.", "r1"),
            ThinkingPart("", "r1", {"signature": "SIG"}),
            TextPart("Hello "),
            TextPart("world"),
            ToolCallPart("call_1", "Read", {"path": "a.txt"}),
        ]
    )
    assert [(n, d.get("index"), d.get("delta", {}).get("type")) for n, d in events] == [
        ("message_start", None, None),
        ("content_block_start", 0, None),
        ("content_block_delta", 0, "thinking_delta"),
        ("content_block_delta", 0, "thinking_delta"),
        ("content_block_delta", 0, "signature_delta"),
        ("content_block_stop", 0, None),
        ("content_block_start", 1, None),
        ("content_block_delta", 1, "text_delta"),
        ("content_block_delta", 1, "text_delta"),
        ("content_block_stop", 1, None),
        ("content_block_start", 2, None),
        ("content_block_delta", 2, "input_json_delta"),
        ("content_block_stop", 2, None),
        ("message_delta", None, None),
        ("message_stop", None, None),
    ]
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert events[-2][1]["usage"]["output_tokens"] == 7
    final = sdk_accumulate(events)
    assert same(final, stream.message())
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[0].signature == "SIG" and final.content[0].thinking == "Let me think."
    assert final.content[2].input == {"path": "a.txt"}
    assert final.usage.input_tokens == 42 and final.stop_reason == "tool_use"
    # the non-streamed body is a valid Message for the SDK too
    assert Message.model_validate(stream.message()).content[1].text == "Hello world"  # type: ignore[union-attr]


def test_unsigned_thinking_has_no_signature_delta_and_redacted_is_its_own_block() -> None:
    stream, events = run(
        [ThinkingPart("plain"), ThinkingPart("", None, {"redactedData": "ENC"}), TextPart("ok")]
    )
    assert not any(d.get("delta", {}).get("type") == "signature_delta" for _, d in events)
    assert [b["type"] for b in stream.message()["content"]] == [
        "thinking",
        "redacted_thinking",
        "text",
    ]
    assert stream.message()["content"][1]["data"] == "ENC"
    assert stream.message()["stop_reason"] == "end_turn"
    assert same(sdk_accumulate(events), stream.message())


def test_empty_answer_and_data_parts() -> None:
    stream, events = run([TextPart(""), DataPart.json({"a": 1})], output_tokens=0)
    assert [n for n, _ in events] == ["message_start", "message_delta", "message_stop"]
    assert stream.message()["content"] == []


def test_error_mid_stream_keeps_what_was_sent() -> None:
    stream = MessagesStream(model="m")
    events = stream.start() + stream.feed(TextPart("part"))
    events += stream.fail(ChatRequestError(ErrorKind.RATE_LIMITED, "429"))
    name, data = events[-1]
    assert name == "error" and data["error"]["type"] == "rate_limit_error"
    assert sdk_accumulate(events).content[0].text == "part"
    assert stream.feed is not None and stream.finish() == []


def test_feed_before_start_is_a_programming_error() -> None:
    with pytest.raises(RuntimeError, match="start"):
        MessagesStream(model="m").feed(TextPart("x"))


_TEXT = st.text(max_size=12)
_PARTS = st.one_of(
    st.builds(TextPart, _TEXT),
    st.builds(
        ThinkingPart,
        _TEXT,
        st.sampled_from([None, "a", "b"]),
        st.one_of(
            st.none(), st.builds(lambda s: {"signature": s}, st.text(min_size=1, max_size=5))
        ),
    ),
    st.builds(
        ToolCallPart,
        st.uuids().map(lambda u: f"call_{u.hex[:8]}"),
        st.sampled_from(["f", "g"]),
        st.dictionaries(st.text(max_size=4), st.one_of(st.integers(), _TEXT), max_size=3),
    ),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_PARTS, max_size=12))
def test_every_stream_is_well_formed(parts: list[ResponsePart]) -> None:
    stream, events = run(parts)
    # blocks open once, close once, in order; deltas only inside an open block
    open_index = None
    count = 0
    for name, data in events[1:-2]:
        if name == "content_block_start":
            assert open_index is None and data["index"] == count
            open_index = data["index"]
            count += 1
        elif name == "content_block_delta":
            assert data["index"] == open_index
        else:
            assert name == "content_block_stop" and data["index"] == open_index
            open_index = None
    assert open_index is None
    assert [n for n, _ in events[-2:]] == ["message_delta", "message_stop"]
    # the SDK accumulates exactly the non-streamed message
    assert same(sdk_accumulate(events), stream.message())
    # and lmbridge's own Anthropic decoder reads back the same text, reasoning and calls
    decoder = decoder_for("anthropic")
    back: list[ResponsePart] = []
    for name, data in events:
        back += decoder.feed_json(json.loads(json.dumps(data)), name)
    back += decoder.close()
    assert "".join(p.value for p in back if isinstance(p, TextPart)) == "".join(
        p.value for p in parts if isinstance(p, TextPart)
    )
    assert "".join(p.text for p in back if isinstance(p, ThinkingPart)) == "".join(
        p.text for p in parts if isinstance(p, ThinkingPart)
    )
    calls = [(p.call_id, p.name, p.input) for p in parts if isinstance(p, ToolCallPart)]
    assert [(p.call_id, p.name, p.input) for p in back if isinstance(p, ToolCallPart)] == calls


# --------------------------------------------------------------------------- errors and models


@pytest.mark.parametrize(
    ("error", "status", "kind"),
    [
        (ChatRequestError(ErrorKind.RATE_LIMITED, "quota"), 429, "rate_limit_error"),
        (ChatRequestError(ErrorKind.MODEL_NOT_FOUND, "gone"), 404, "not_found_error"),
        (ChatRequestError(ErrorKind.NOT_SIGNED_IN, "sign in"), 403, "permission_error"),
        (ChatRequestError(ErrorKind.INTERNAL, "Server error 503"), 529, "overloaded_error"),
        (ChatRequestError(ErrorKind.INTERNAL, "bad schema"), 500, "api_error"),
        (ConversionError("messages[0]: bad"), 400, "invalid_request_error"),
        (RuntimeError("boom"), 500, "api_error"),
    ],
)
def test_errors_in_anthropic_shape(error: BaseException, status: int, kind: str) -> None:
    got_status, body = error_for(error)
    assert got_status == status
    assert body["type"] == "error" and body["error"]["type"] == kind
    assert body["error"]["message"]


def test_context_length_error_text_is_what_claude_code_looks_for() -> None:
    status, body = error_for(PromptTooLongError(250000, 200000, "m"))
    assert status == 400
    assert body["error"] == {
        "type": "invalid_request_error",
        "message": "prompt is too long: 250000 tokens > 200000 maximum",
    }


def test_model_list_shape_parses_in_the_sdk() -> None:
    page = models_list([model_entry(fake_model("gpt-4o", vendor="copilot"), "claude-x")])
    parsed = anthropic.types.ModelInfo.model_validate(page["data"][0])
    assert parsed.id == "claude-x" and page["first_id"] == page["last_id"] == "claude-x"
    assert parsed.capabilities is not None and parsed.capabilities.image_input.supported
    assert parsed.max_input_tokens == 8000 and page["data"][0]["tool_calling"] is True


def test_blocks_of_anthropics_server_features_are_tolerated() -> None:
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "search_result",
                        "title": "T",
                        "source": "s",
                        "content": [{"type": "text", "text": "found"}],
                    }
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_1",
                        "name": "web_search",
                        "input": {},
                    },
                    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "ToolSearch",
                        "input": {"query": "x"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [
                            {"type": "tool_reference", "tool_name": "Later"},
                            {"type": "hologram"},
                        ],
                    }
                ],
            },
        ],
    }
    req = parse_messages_request(body)
    assert req.messages[0].text == "T\nfound"
    assert req.messages[1].content == [ToolCallPart("toolu_1", "ToolSearch", {"query": "x"})]
    result = req.messages[2].content[0]
    assert isinstance(result, ToolResultPart)
    assert result.content == [TextPart("[tool Later is available]"), TextPart("[hologram block]")]
