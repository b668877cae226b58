"""The OpenAI Responses translator: Codex's requests in, well-formed event sequences out
(checked by the real ``openai`` SDK's own stream state and by lmbridge's Responses decoder)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai import omit
from openai._models import construct_type
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent

from lmbridge.client.classify import ChatRequestError, ErrorKind
from lmbridge.client.endpoint.apis.responses import (
    ResponsesStream,
    error_for,
    model_entry,
    parse_responses_request,
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

PNG_URL = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 8).decode()


def codex_body() -> dict[str, Any]:
    """The shape Codex sends (trimmed): everything the endpoint must accept."""
    return {
        "model": "gpt-5-codex",
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"effort": "medium", "summary": "auto"},
        "prompt_cache_key": "0199-abc",
        "client_metadata": {"x": "y"},
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "input": [
            {
                "type": "message",
                "id": "m1",
                "role": "developer",
                "content": [{"type": "input_text", "text": "You are Codex."}],
            },
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "Sandbox: on."}],
            },
            {
                "type": "message",
                "id": "m3",
                "role": "user",
                "content": [{"type": "input_text", "text": "<env/>"}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "list files"},
                    {"type": "input_image", "image_url": PNG_URL},
                ],
            },
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Use ls."}],
                "encrypted_content": "ENC",
            },
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "shell",
                "arguments": '{"cmd":["ls"]}',
            },
            {
                "type": "function_call",
                "call_id": "call_2",
                "name": "read",
                "namespace": "fs",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
            {
                "type": "function_call_output",
                "call_id": "call_2",
                "output": [{"type": "input_text", "text": "x"}],
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Done."}],
            },
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {"role": "user", "content": "thanks"},
        ],
        "tools": [
            {
                "type": "function",
                "name": "shell",
                "description": "Run",
                "parameters": {"type": "object"},
                "strict": False,
            },
            {
                "type": "namespace",
                "name": "fs",
                "description": "Files",
                "tools": [{"type": "function", "name": "read", "parameters": {"type": "object"}}],
            },
            {
                "type": "custom",
                "name": "apply_patch",
                "description": "Patch",
                "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"},
            },
            {"type": "web_search"},
        ],
        "text": {"verbosity": "low"},
    }


# --------------------------------------------------------------------------- requests


def test_codex_request_is_accepted_and_mapped() -> None:
    req = parse_responses_request(codex_body())
    assert req.model == "gpt-5-codex" and req.stream and req.parallel_tool_calls is False
    roles = [m.role for m in req.messages]
    assert roles == [
        ChatRole.ASSISTANT,
        ChatRole.USER,
        ChatRole.ASSISTANT,
        ChatRole.USER,
        ChatRole.ASSISTANT,
        ChatRole.USER,
    ]
    assert req.messages[0].text == "You are Codex.\n\nSandbox: on."
    user = req.messages[1].content
    assert [type(p) for p in user] == [TextPart, TextPart, DataPart]
    assistant = req.messages[2].content
    assert assistant[0] == ThinkingPart(
        "Use ls.", "rs_1", {"itemId": "rs_1", "encryptedContent": "ENC"}
    )
    assert assistant[1] == ToolCallPart("call_1", "shell", {"cmd": ["ls"]})
    assert assistant[2] == ToolCallPart("call_2", "read", {})
    results = req.messages[3].content
    assert [r.call_id for r in results if isinstance(r, ToolResultPart)] == ["call_1", "call_2"]
    assert req.messages[4].text == "Done." and req.messages[5].text == "thanks"
    tools = {t.name: t for t in req.options.tools}
    assert list(tools) == ["shell", "read", "apply_patch"]
    assert "start: x" in tools["apply_patch"].description
    assert req.left_out_tools == ["web_search"]
    assert req.tool_names["read"].namespace == "fs" and req.tool_names["apply_patch"].custom
    assert req.options.model_options == {"reasoning": {"effort": "medium", "summary": "auto"}}


def test_empty_reasoning_items_are_left_out() -> None:
    req = parse_responses_request(
        {
            "model": "m",
            "input": [
                {"role": "user", "content": "a"},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": None},
                {"role": "assistant", "content": "b"},
            ],
        }
    )
    assert [p for m in req.messages for p in m.content if isinstance(p, ThinkingPart)] == []


def test_instructions_text_input_and_sampling_options() -> None:
    req = parse_responses_request(
        {
            "model": "gpt-5",
            "instructions": "Be brief.",
            "input": "hi",
            "temperature": 0.2,
            "max_output_tokens": 50,
        }
    )
    assert [(m.role, m.text) for m in req.messages] == [
        (ChatRole.ASSISTANT, "Be brief."),
        (ChatRole.USER, "hi"),
    ]
    assert req.options.model_options == {"temperature": 0.2, "max_output_tokens": 50}
    assert not req.stream


def test_a_later_developer_message_is_user_text_in_place() -> None:
    req = parse_responses_request(
        {
            "model": "m",
            "input": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "b"},
                {"role": "developer", "content": "c"},
            ],
        }
    )
    assert [(m.role, m.text) for m in req.messages] == [
        (ChatRole.USER, "a"),
        (ChatRole.ASSISTANT, "b"),
        (ChatRole.USER, "c"),
    ]


def test_namespace_names_that_clash_get_their_namespace() -> None:
    req = parse_responses_request(
        {
            "model": "m",
            "input": "x",
            "tools": [
                {
                    "type": "namespace",
                    "name": "a",
                    "description": "",
                    "tools": [{"type": "function", "name": "get"}],
                },
                {
                    "type": "namespace",
                    "name": "b",
                    "description": "",
                    "tools": [{"type": "function", "name": "get"}],
                },
            ],
            "tool_choice": {"type": "function", "name": "get", "namespace": "b"},
        }
    )
    assert [t.name for t in req.options.tools] == ["b__get"]
    assert req.options.tool_mode == ToolMode.REQUIRED
    assert req.tool_names["a__get"].namespace == "a"


@pytest.mark.parametrize(
    ("mode", "expected"), [("required", ToolMode.REQUIRED), ("auto", ToolMode.AUTO), (None, ToolMode.AUTO)]
)
def test_allowed_tools_keep_the_listed_tools_with_their_mode(
    mode: str | None, expected: ToolMode
) -> None:
    choice: dict[str, Any] = {"type": "allowed_tools", "tools": [{"type": "function", "name": "b"}]}
    if mode is not None:
        choice["mode"] = mode
    req = parse_responses_request(
        {
            "model": "m",
            "input": "x",
            "tools": [{"type": "function", "name": n} for n in ("a", "b", "c")],
            "tool_choice": choice,
        }
    )
    assert [t.name for t in req.options.tools] == ["b"]
    assert req.options.tool_mode == expected


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"previous_response_id": "resp_1"},
            "previous_response_id: this endpoint keeps no responses",
        ),
        ({"conversation": "conv_1"}, "conversation: this endpoint keeps no responses"),
        (
            {"input": [{"type": "item_reference", "id": "x"}]},
            "item_reference needs stored responses",
        ),
        ({"model": ""}, "model: expected a non-empty string"),
        ({"input": None}, "input: expected a string or a list"),
        ({"input": [{"role": "developer", "content": "only"}]}, "no message to answer"),
        ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role"),
        (
            {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{"}]},
            "not valid JSON",
        ),
        ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_video"}]}]},
            "unsupported content part type",
        ),
        ({"tool_choice": "sometimes"}, "tool_choice: expected"),
        ({"tools": [{"type": "function"}]}, "tools[0].name"),
    ],
)
def test_bad_requests_name_the_problem(change: dict[str, Any], message: str) -> None:
    body: dict[str, Any] = {"model": "m", "input": "x"}
    body.update(change)
    with pytest.raises(ConversionError) as info:
        parse_responses_request(body)
    assert message in str(info.value)


# --------------------------------------------------------------------------- streams


def sdk_state(events: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any]]:
    """Feed the events to the openai SDK's stream state (it raises on a bad sequence)."""
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    out = []
    for name, data in events:
        assert name == data["type"]
        event = construct_type(type_=ResponseStreamEvent, value=json.loads(json.dumps(data)))
        out += state.handle_event(event)  # type: ignore[arg-type]
    return out[-1], out


def run(parts: list[ResponsePart], **kwargs: Any) -> tuple[ResponsesStream, list[Any]]:
    stream = ResponsesStream(
        model="gpt-x", input_tokens=30, response_id="resp_1", created_at=1, **kwargs
    )
    events = stream.start()
    for part in parts:
        events += stream.feed(part)
    events += stream.finish(5)
    return stream, events


def test_event_sequence_for_reasoning_text_and_a_function_call() -> None:
    stream, events = run(
        [
            ThinkingPart("Think", "r1"),
            ThinkingPart("ing.", "r1", {"encryptedContent": "E"}),
            TextPart("Hi "),
            TextPart("there"),
            ToolCallPart("call_9", "shell", {"cmd": ["ls"]}),
        ]
    )
    assert [n for n, _ in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    completed, _ = sdk_state(events)
    final = completed.response
    assert final.status == "completed" and final.output_text == "Hi there"
    assert [o.type for o in final.output] == ["reasoning", "message", "function_call"]
    assert (
        final.output[0].summary[0].text == "Thinking." and final.output[0].encrypted_content == "E"
    )
    assert final.output[2].call_id == "call_9" and json.loads(final.output[2].arguments) == {
        "cmd": ["ls"]
    }
    assert (
        final.usage.input_tokens == 30
        and final.usage.output_tokens == 5
        and final.usage.total_tokens == 35
    )
    # the non-streamed object is a valid Response, equal to what the stream completed with
    body = stream.response()
    assert Response.model_validate(body).output_text == "Hi there"
    assert events[-1][1]["response"] == body


def test_namespaced_and_custom_tool_calls_go_back_under_the_clients_names() -> None:
    req = parse_responses_request(codex_body())
    _, events = run(
        [
            ToolCallPart("c1", "read", {"path": "a"}),
            ToolCallPart("c2", "apply_patch", {"input": "*** Begin"}),
        ],
        tool_names=req.tool_names,
    )
    done = [d["item"] for n, d in events if n == "response.output_item.done"]
    assert (
        done[0]["type"] == "function_call"
        and done[0]["name"] == "read"
        and done[0]["namespace"] == "fs"
    )
    assert done[1] == {
        "id": done[1]["id"],
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": "c2",
        "name": "apply_patch",
        "input": "*** Begin",
    }
    completed, _ = sdk_state(events)
    assert [o.type for o in completed.response.output] == ["function_call", "custom_tool_call"]


def test_failure_mid_stream_ends_with_response_failed() -> None:
    stream = ResponsesStream(model="m", response_id="resp_2")
    events = stream.start() + stream.feed(TextPart("part"))
    events += stream.fail(ChatRequestError(ErrorKind.RATE_LIMITED, "429"))
    names = [n for n, _ in events]
    assert names[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.failed",
    ]
    failed = events[-1][1]["response"]
    assert failed["status"] == "failed" and failed["error"]["code"] == "rate_limit_exceeded"
    last, _ = sdk_state(events)
    assert last.type == "response.failed" and last.response.output[0].content[0].text == "part"
    assert stream.finish() == [] and stream.fail(RuntimeError()) == []


def test_feed_before_start_is_a_programming_error() -> None:
    with pytest.raises(RuntimeError, match="start"):
        ResponsesStream(model="m").feed(TextPart("x"))


_TEXT = st.text(max_size=12)
_PARTS = st.one_of(
    st.builds(TextPart, _TEXT),
    st.builds(ThinkingPart, _TEXT, st.sampled_from([None, "a", "b"])),
    st.builds(
        ToolCallPart,
        st.uuids().map(lambda u: f"call_{u.hex[:8]}"),
        st.sampled_from(["f", "g"]),
        st.dictionaries(st.text(max_size=4), st.one_of(st.integers(), _TEXT), max_size=3),
    ),
    st.just(DataPart.json({"a": 1})),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_PARTS, max_size=12))
def test_every_stream_is_well_formed(parts: list[ResponsePart]) -> None:
    stream, events = run(parts)
    completed, _ = sdk_state(events)
    assert completed.type == "response.completed"
    final = completed.response
    text = "".join(p.value for p in parts if isinstance(p, TextPart))
    assert final.output_text == text
    calls = [(p.call_id, p.name, p.input) for p in parts if isinstance(p, ToolCallPart)]
    got = [
        (o.call_id, o.name, json.loads(o.arguments))
        for o in final.output
        if o.type == "function_call"
    ]
    assert got == calls
    assert Response.model_validate(stream.response()).output_text == text
    # lmbridge's own Responses decoder reads back the same text, reasoning and calls
    decoder = decoder_for("responses")
    back: list[ResponsePart] = []
    for name, data in events:
        back += decoder.feed_json(json.loads(json.dumps(data)), name)
    back += decoder.close()
    assert "".join(p.value for p in back if isinstance(p, TextPart)) == text
    assert "".join(p.text for p in back if isinstance(p, ThinkingPart)) == "".join(
        p.text for p in parts if isinstance(p, ThinkingPart)
    )
    assert [(p.call_id, p.name, p.input) for p in back if isinstance(p, ToolCallPart)] == calls


# --------------------------------------------------------------------------- errors and models


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (PromptTooLongError(9000, 8000, "m"), 400, "context_length_exceeded"),
        (ChatRequestError(ErrorKind.RATE_LIMITED, "quota"), 429, "rate_limit_exceeded"),
        (ChatRequestError(ErrorKind.MODEL_NOT_FOUND, "gone"), 404, "model_not_found"),
        (
            ChatRequestError(ErrorKind.INTERNAL, "503 Service Unavailable"),
            503,
            "server_is_overloaded",
        ),
        (ChatRequestError(ErrorKind.INTERNAL, "odd"), 502, "server_error"),
        (ConversionError("input[0]: bad"), 400, None),
    ],
)
def test_errors_in_openai_shape(error: BaseException, status: int, code: str | None) -> None:
    got, body = error_for(error)
    assert got == status and body["error"]["code"] == code and body["error"]["message"]


def test_model_entry() -> None:
    entry = model_entry(fake_model("gpt-4o", vendor="copilot"), "gpt-5")
    assert entry["id"] == "gpt-5" and entry["object"] == "model" and entry["owned_by"] == "copilot"
    assert entry["capabilities"] == {"vision": True, "tool_calling": True}
