"""Golden request bodies for the seeds' conversation, one per upstream.

The conversation (tests/data/convert/seed_weather.json) is the seeds' case: a system prompt in
a leading assistant message (fixSystemMessages), tool calls in one message and their results in
the next (the callId -> tool name map), a result made of two text parts (the seeds joined them
with a space) and a JSON result.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmbridge.convert import to_ai_sdk, to_anthropic, to_chat_completions, to_responses
from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    DataPart,
    TextPart,
    ToolCallPart,
    ToolMode,
    ToolResultPart,
    messages_from_wire,
    options_from_wire,
)

DATA = Path(__file__).parent / "data" / "convert"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
SYSTEM = "You are a weather assistant."
ASK = "Weather in Paris and Rome?"
FINAL = "Paris: 18C sunny. Rome: 24C clear."


@pytest.fixture
def seed():
    data = json.loads((DATA / "seed_weather.json").read_text())
    return messages_from_wire(data["messages"]), options_from_wire(data["options"])


def test_ai_sdk_golden(seed):
    assert to_ai_sdk(*seed) == {
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": [{"type": "text", "text": ASK}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me check."},
                    {
                        "type": "tool-call",
                        "toolCallId": "call_paris",
                        "toolName": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool-call",
                        "toolCallId": "call_rome",
                        "toolName": "get_weather",
                        "input": {"city": "Rome"},
                    },
                ],
            },
            {
                "role": "tool",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "call_paris",
                        "toolName": "get_weather",
                        # Text parts concatenate (the seeds' join(" ") gave "18 C, sunny").
                        "output": {"type": "text", "value": "18C, sunny"},
                    },
                    {
                        "type": "tool-result",
                        "toolCallId": "call_rome",
                        "toolName": "get_weather",
                        "output": {"type": "json", "value": {"temp": 24, "sky": "clear"}},
                    },
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": FINAL}]},
            {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
        ],
        "tools": {
            "get_weather": {"description": "Current weather for a city", "inputSchema": SCHEMA}
        },
        "toolChoice": "auto",
        "temperature": 0.3,
        "maxOutputTokens": 512,
    }


def test_ai_sdk_system_as_param_and_no_result_field(seed):
    body = to_ai_sdk(*seed, system_as="param")
    assert body["system"] == SYSTEM
    assert body["messages"][0]["role"] == "user"
    results = [p for m in body["messages"] if m["role"] == "tool" for p in m["content"]]
    # seed 004's broken shape: `result` instead of `output`, and "unknown_tool" names.
    assert all("result" not in p and p["toolName"] == "get_weather" for p in results)


def test_ai_sdk_tool_result_with_image_is_content():
    msgs = [
        ChatMessage.user("shot"),
        ChatMessage.assistant([ToolCallPart("s", "screenshot", {})]),
    ]
    msgs.append(
        ChatMessage.user(
            [ToolResultPart("s", [TextPart("here"), DataPart.image(b"PNG", "image/png")])]
        )
    )
    tool = to_ai_sdk(msgs)["messages"][-1]
    assert tool["content"][0]["output"] == {
        "type": "content",
        "value": [
            {"type": "text", "text": "here"},
            {"type": "media", "data": "UE5H", "mediaType": "image/png"},
        ],
    }


def test_ai_sdk_filters_empty_messages():
    msgs = [
        ChatMessage.user([]),
        ChatMessage.user(""),
        ChatMessage.assistant([]),
        ChatMessage.user("x"),
    ]
    assert to_ai_sdk(msgs)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "x"}]}
    ]


def test_chat_completions_golden(seed):
    assert to_chat_completions(*seed, model="gpt-4o-mini") == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": ASK},
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "call_paris",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "call_rome",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_paris", "content": "18C, sunny"},
            {"role": "tool", "tool_call_id": "call_rome", "content": '{"temp":24,"sky":"clear"}'},
            {"role": "assistant", "content": FINAL},
            {"role": "user", "content": "Thanks!"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather for a city",
                    "parameters": SCHEMA,
                },
            }
        ],
        "tool_choice": "auto",
        "temperature": 0.3,
        "max_tokens": 512,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_chat_completions_required_and_max_completion_tokens(seed):
    msgs, opts = seed
    opts = ChatRequestOptions(
        opts.tools, ToolMode.REQUIRED, {"max_output_tokens": 99, "topP": 0.5, "stop": "END"}
    )
    body = to_chat_completions(
        msgs, opts, model="o4-mini", max_tokens_field="max_completion_tokens"
    )
    assert body["tool_choice"] == "required"
    assert body["max_completion_tokens"] == 99 and "max_tokens" not in body
    assert body["top_p"] == 0.5 and body["stop"] == ["END"]


def test_no_tools_means_no_tool_choice():
    for body in (
        to_chat_completions(
            [ChatMessage.user("x")], ChatRequestOptions(tool_mode=ToolMode.REQUIRED), model="m"
        ),
        to_responses(
            [ChatMessage.user("x")], ChatRequestOptions(tool_mode=ToolMode.REQUIRED), model="m"
        ),
        to_anthropic(
            [ChatMessage.user("x")],
            ChatRequestOptions(tool_mode=ToolMode.REQUIRED),
            model="m",
            max_tokens=5,
        ),
    ):
        assert "tools" not in body and "tool_choice" not in body


def test_responses_golden(seed):
    assert to_responses(*seed, model="gpt-5") == {
        "model": "gpt-5",
        "input": [
            {"role": "developer", "content": SYSTEM},
            {"role": "user", "content": [{"type": "input_text", "text": ASK}]},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Let me check."}]},
            {
                "type": "function_call",
                "call_id": "call_paris",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {
                "type": "function_call",
                "call_id": "call_rome",
                "name": "get_weather",
                "arguments": '{"city":"Rome"}',
            },
            {"type": "function_call_output", "call_id": "call_paris", "output": "18C, sunny"},
            {
                "type": "function_call_output",
                "call_id": "call_rome",
                "output": '{"temp":24,"sky":"clear"}',
            },
            {"role": "assistant", "content": [{"type": "output_text", "text": FINAL}]},
            {"role": "user", "content": [{"type": "input_text", "text": "Thanks!"}]},
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": SCHEMA,
                "strict": False,
            }
        ],
        "tool_choice": "auto",
        "temperature": 0.3,
        "max_output_tokens": 512,
        "stream": True,
    }


def test_responses_tool_result_with_image():
    msgs = [
        ChatMessage.user("q"),
        ChatMessage.assistant([ToolCallPart("s", "shot", {})]),
        ChatMessage.user(
            [ToolResultPart("s", [TextPart("see"), DataPart.image(b"PNG", "image/png")])]
        ),
    ]
    out = to_responses(msgs, None, model="m", system_as="system")["input"][-1]
    assert out["output"] == [
        {"type": "input_text", "text": "see"},
        {"type": "input_image", "image_url": "data:image/png;base64,UE5H", "detail": "auto"},
    ]


def test_anthropic_golden(seed):
    assert to_anthropic(*seed, model="claude-sonnet-4-5", max_tokens=8192) == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 512,
        "system": SYSTEM,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": ASK}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me check."},
                    {
                        "type": "tool_use",
                        "id": "call_paris",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "call_rome",
                        "name": "get_weather",
                        "input": {"city": "Rome"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_paris",
                        "content": [
                            {"type": "text", "text": "18"},
                            {"type": "text", "text": "C, sunny"},
                        ],
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_rome",
                        "content": [{"type": "text", "text": '{"temp":24,"sky":"clear"}'}],
                    },
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": FINAL}]},
            {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather for a city",
                "input_schema": SCHEMA,
            }
        ],
        "tool_choice": {"type": "auto"},
        "temperature": 0.3,
        "stream": True,
    }


def test_anthropic_required_tools_and_defaults():
    opts = ChatRequestOptions([ChatTool("noargs")], ToolMode.REQUIRED)
    body = to_anthropic([ChatMessage.user("x")], opts, model="m", max_tokens=10)
    assert body["tool_choice"] == {"type": "any"}
    assert body["tools"] == [
        {"name": "noargs", "description": "", "input_schema": {"type": "object", "properties": {}}}
    ]
    assert body["max_tokens"] == 10


def test_anthropic_merges_consecutive_roles_and_drops_blank_text():
    msgs = [
        ChatMessage.user("a"),
        ChatMessage.user("  "),
        ChatMessage.user("b"),
        ChatMessage.assistant("c"),
    ]
    body = to_anthropic(msgs, None, model="m", max_tokens=10)
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "\n\nb"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "c"}]},
    ]


def test_anthropic_image_types():
    msgs = [
        ChatMessage.user([DataPart.image(b"GIF8", "image/gif"), DataPart.image(b"BM", "image/bmp")])
    ]
    content = to_anthropic(msgs, None, model="m", max_tokens=10)["messages"][0]["content"]
    assert content == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/gif", "data": "R0lGOA=="},
        },
        {"type": "text", "text": "[image omitted: image/bmp, 2 bytes]"},
    ]
