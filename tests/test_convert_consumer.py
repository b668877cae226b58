"""Consumer side: Anthropic / OpenAI history -> VS Code messages, and VS Code parts back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmbridge.convert import (
    from_anthropic,
    from_chat_completions,
    to_anthropic_message,
    to_chat_completions_message,
)
from lmbridge.errors import ConversionError
from lmbridge.parts import (
    ChatMessage,
    ChatRole,
    DataPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

DATA = Path(__file__).parent / "data" / "convert"
PNG = bytes.fromhex("89504e470d0a1a0a")  # iVBORw0KGgo=


# --------------------------------------------------------------------------- Anthropic


def test_cline_history():
    data = json.loads((DATA / "cline_history.json").read_text())
    assert from_anthropic(data["messages"], data["system"]) == [
        ChatMessage.assistant("You are Cline, a coding agent."),
        ChatMessage.user("List the files."),
        ChatMessage.assistant(
            [TextPart("I'll list them."), ToolCallPart("toolu_01", "list_files", {"path": "."})]
        ),
        # Tool results first, then the text and the image in their order.
        ChatMessage.user(
            [
                ToolResultPart("toolu_01", [TextPart("a.py\nb.py")]),
                TextPart("Here you go."),
                DataPart.image(PNG, "image/png"),
            ]
        ),
        ChatMessage.assistant("Two files: a.py and b.py."),
    ]


def test_system_as_system_role_and_block_list():
    out = from_anthropic(
        [{"role": "user", "content": "hi"}],
        [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        system_as="system",
    )
    assert out[0] == ChatMessage(ChatRole.SYSTEM, [TextPart("one\n\ntwo")])


def test_images_become_placeholders_when_not_accepted():
    msg = {
        "role": "user",
        "content": [
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/webp", "data": "AAAA"},
            },
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
        ],
    }
    out = from_anthropic([msg], image_input=False)
    assert out[0].content == [
        TextPart("[Image (base64): image/webp not supported here]"),
        TextPart("[image (https://example.com/a.png): not fetched]"),
    ]
    # In assistant turns images are placeholders whatever the model takes.
    out = from_anthropic([{**msg, "role": "assistant"}])
    assert out[0].content[0] == TextPart("[Image (base64): image/webp not supported here]")


def test_tool_use_string_input_is_parsed():
    msg = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": '{"a": [1]}'}],
    }
    assert from_anthropic([msg])[0].content == [ToolCallPart("t", "f", {"a": [1]})]


@pytest.mark.parametrize(
    ("value", "match"),
    [('{"a":', "not valid JSON"), ("[1, 2]", "must be a JSON object, got list"), (7, "got int")],
)
def test_tool_use_bad_input(value, match):
    msg = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "x"},
            {"type": "tool_use", "id": "t", "name": "f", "input": value},
        ],
    }
    with pytest.raises(
        ConversionError, match=rf"messages\[0\]\.content\[1\]\.input: input of tool 'f' .*{match}"
    ):
        from_anthropic([msg])


def test_assistant_order_is_kept_and_thinking_has_its_metadata():
    msg = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "SIG"},
            {"type": "redacted_thinking", "data": "RED"},
            {"type": "text", "text": "before"},
            {"type": "tool_use", "id": "t", "name": "f", "input": {}},
            {"type": "text", "text": "after"},
        ],
    }
    assert from_anthropic([msg])[0].content == [
        ThinkingPart("hmm", None, {"signature": "SIG"}),
        ThinkingPart("", None, {"redactedData": "RED"}),
        TextPart("before"),
        ToolCallPart("t", "f", {}),
        TextPart("after"),
    ]


def test_tool_result_variants():
    msg = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "plain"},
            {"type": "tool_result", "tool_use_id": "b"},
            {
                "type": "tool_result",
                "tool_use_id": "c",
                "content": [
                    {"type": "text", "text": "t"},
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": "iVBORw0KGgo=",
                        },
                    },
                ],
            },
        ],
    }
    assert from_anthropic([msg])[0].content == [
        ToolResultPart("a", [TextPart("plain")]),
        ToolResultPart("b", []),
        ToolResultPart("c", [TextPart("t"), DataPart.image(PNG, "image/png")]),
    ]


def test_documents():
    msg = {
        "role": "user",
        "content": [
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERg=="},
            },
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "notes"},
            },
        ],
    }
    assert from_anthropic([msg])[0].content == [
        DataPart(b"%PDF", "application/pdf"),
        TextPart("notes"),
    ]


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        (
            [{"role": "system", "content": "x"}],
            r"messages\[0\]\.role: expected 'user' or 'assistant'",
        ),
        (
            [{"role": "user", "content": [{"type": "video"}]}],
            r"messages\[0\]\.content\[0\]: unsupported content block type 'video'",
        ),
        ([{"role": "user", "content": 5}], r"messages\[0\]\.content: expected a string or a list"),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "png", "data": "AA=="},
                        }
                    ],
                }
            ],
            r"media_type: malformed MIME type 'png'",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "@@"},
                        }
                    ],
                }
            ],
            r"source\.data: not valid base64",
        ),
        (
            [{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "x"}]}],
            "in assistant messages",
        ),
        ("not a list", "messages: expected a list"),
    ],
)
def test_anthropic_bad_input(messages, match):
    with pytest.raises(ConversionError, match=match):
        from_anthropic(messages)


def test_clean_terminal_output_on_the_consumer_side():
    msgs = [
        {"role": "user", "content": "\x1b[31mred\x1b[0m"},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok\x07\r\n"}],
        },
    ]
    out = from_anthropic(msgs, "sys\x1b[0m", clean_terminal=True)
    assert out[0] == ChatMessage.assistant("sys")
    assert out[1] == ChatMessage.user("red")
    assert out[2].content == [ToolResultPart("a", [TextPart("ok\n")])]


# --------------------------------------------------------------------------- OpenAI


def test_openai_history():
    data = json.loads((DATA / "openai_history.json").read_text())
    assert from_chat_completions(data["messages"]) == [
        ChatMessage.assistant("You are terse."),
        ChatMessage.user("Weather in Oslo?"),
        ChatMessage.assistant(
            [
                ThinkingPart("Need the tool."),
                ToolCallPart("call_1", "get_weather", {"city": "Oslo"}),
            ]
        ),
        ChatMessage.user(
            [
                ToolResultPart("call_1", [TextPart("-3C, snow")]),
                TextPart("And this picture?"),
                DataPart.image(PNG, "image/png"),
            ]
        ),
        ChatMessage.assistant("Snowy, and a tiny PNG."),
    ]


def test_openai_system_as_system_and_developer():
    msgs = [
        {"role": "developer", "content": [{"type": "text", "text": "rules"}]},
        {"role": "user", "content": "q"},
    ]
    out = from_chat_completions(msgs, system_as="system")
    assert out[0] == ChatMessage.system("rules")


def test_openai_tool_messages_without_user_after_them():
    msgs = [
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": ""}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "r"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "x"}, {"type": "refusal", "refusal": "no"}],
        },
    ]
    assert from_chat_completions(msgs) == [
        ChatMessage.assistant([ToolCallPart("a", "f", {})]),
        ChatMessage.user([ToolResultPart("a", [TextPart("r")])]),
        ChatMessage.assistant([TextPart("x"), TextPart("no")]),
    ]


def test_openai_images_placeholders():
    msgs = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            ],
        }
    ]
    assert from_chat_completions(msgs, image_input=False)[0].content == [
        TextPart("[image (https://x/y.png): not fetched]"),
        TextPart("[image: image/jpeg not supported here]"),
        TextPart("[audio (wav): not supported here]"),
    ]


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([{"role": "function", "content": "x"}], r"messages\[0\]\.role"),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{nope"}}],
                }
            ],
            r"messages\[0\]\.tool_calls\[0\]\.function\.arguments: input of tool 'f' is not valid JSON",
        ),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "[1]"}}],
                }
            ],
            "must be a JSON object",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,%%%"}}
                    ],
                }
            ],
            r"messages\[0\]\.content\[0\]\.image_url\.url: data URL is not valid base64",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64"}}
                    ],
                }
            ],
            "malformed data URL",
        ),
        ([{"role": "tool", "content": "x"}], r"messages\[0\]\.tool_call_id"),
        (
            [{"role": "user", "content": [{"type": "video"}]}],
            "unsupported content part type 'video'",
        ),
    ],
)
def test_openai_bad_input(messages, match):
    with pytest.raises(ConversionError, match=match):
        from_chat_completions(messages)


# --------------------------------------------------------------------------- response parts


RESPONSE = [
    ThinkingPart("plan", "r"),
    ThinkingPart("", "r", {"signature": "S"}),
    TextPart("Hello "),
    TextPart("world"),
    ToolCallPart("c1", "search", {"q": "x"}),
    DataPart.json({"k": 1}),
]


def test_to_anthropic_message():
    assert to_anthropic_message(RESPONSE) == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "plan", "signature": "S"},
            {"type": "text", "text": "Hello "},
            {"type": "text", "text": "world"},
            {"type": "tool_use", "id": "c1", "name": "search", "input": {"q": "x"}},
            {"type": "text", "text": '{"k":1}'},
        ],
    }
    unsigned = to_anthropic_message([ThinkingPart("t"), TextPart("a")])
    assert unsigned["content"] == [{"type": "text", "text": "a"}]
    kept = to_anthropic_message([ThinkingPart("t"), TextPart("a")], include_unsigned_thinking=True)
    assert kept["content"][0] == {"type": "thinking", "thinking": "t", "signature": ""}


def test_to_chat_completions_message():
    assert to_chat_completions_message(RESPONSE) == {
        "role": "assistant",
        "content": 'Hello world{"k":1}',
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "search", "arguments": '{"q":"x"}'},
            }
        ],
    }
    with_reasoning = to_chat_completions_message(RESPONSE, reasoning_field="reasoning_content")
    assert with_reasoning["reasoning_content"] == "plan"
    assert to_chat_completions_message([ToolCallPart("c", "f", {})])["content"] is None
    assert to_chat_completions_message([]) == {"role": "assistant", "content": ""}


def test_response_messages_read_back():
    assert from_anthropic([to_anthropic_message(RESPONSE)])[0].content[:2] == [
        ThinkingPart("plan", None, {"signature": "S"}),
        TextPart("Hello "),
    ]
    back = from_chat_completions(
        [to_chat_completions_message(RESPONSE, reasoning_field="reasoning_content")]
    )
    assert back[0].content[0] == ThinkingPart("plan")
    assert back[0].content[-1] == ToolCallPart("c1", "search", {"q": "x"})
