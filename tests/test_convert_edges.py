"""Edge cases of the provider-side converters: valid Unicode, image types each API takes,
reasoning blocks streamed in pieces, merged messages kept apart, and a last user turn."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmbridge.convert import (
    ConversionPolicy,
    from_anthropic,
    from_chat_completions,
    to_ai_sdk,
    to_anthropic,
    to_anthropic_message,
    to_chat_completions,
    to_chat_completions_message,
    to_responses,
    valid_unicode,
)
from lmbridge.convert.anthropic import EMPTY_TURN_TEXT
from lmbridge.errors import ConversionError
from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    DataPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from lmbridge.upstream import decoder_for

FIXTURES = Path(__file__).parent / "fixtures"


def bodies(
    messages: list[ChatMessage], options: ChatRequestOptions | None = None
) -> dict[str, Any]:
    return {
        "ai-sdk": to_ai_sdk(messages, options),
        "chat-completions": to_chat_completions(
            messages, options, model="m", reasoning_content="always"
        ),
        "responses": to_responses(messages, options, model="m"),
        "anthropic": to_anthropic(messages, options, model="m", max_tokens=10),
    }


def strings(value: Any) -> list[str]:
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            out.extend(k for k in v if isinstance(k, str))
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


def assert_valid_utf8(body: Any) -> None:
    for s in strings(body):
        s.encode("utf-8")  # strict: raises on a lone surrogate


# --------------------------------------------------------------------------- valid Unicode

LONE = "bad \ud800 and \udfff end"


def surrogate_conversation() -> tuple[list[ChatMessage], ChatRequestOptions]:
    msgs = [
        ChatMessage.system(f"sys {LONE}"),
        ChatMessage.user([TextPart(LONE), TextPart("pair \ud83d\ude00 ok")]),
        ChatMessage.assistant(
            [
                ThinkingPart(f"think {LONE}", "t1", {"signature": "s", "itemId": "rs_1"}),
                TextPart(f"answer {LONE}"),
                ToolCallPart("c\ud800", "tool\udc00", {"k\ud800": [f"v {LONE}", {"n": "\udbff"}]}),
            ]
        ),
        ChatMessage.user([ToolResultPart("c\ud800", [TextPart(f"result {LONE}")])]),
    ]
    opts = ChatRequestOptions(
        [ChatTool("tool\udc00", f"desc {LONE}", {"type": "object", "description": LONE})]
    )
    return msgs, opts


@pytest.mark.parametrize("target", ["ai-sdk", "chat-completions", "responses", "anthropic"])
def test_request_bodies_hold_no_lone_surrogates(target):
    msgs, opts = surrogate_conversation()
    before = copy.deepcopy(msgs)
    body = bodies(msgs, opts)[target]
    assert_valid_utf8(body)
    text = json.dumps(body, ensure_ascii=False)
    assert "bad \ufffd and \ufffd end" in text
    assert "pair \U0001f600 ok" in text  # a pair written as two escapes is one character
    assert msgs == before  # the caller's messages are not changed


def test_assistant_messages_hold_no_lone_surrogates():
    parts = [ThinkingPart(LONE, None, {"signature": "s"}), TextPart(LONE)]
    for msg in (
        to_anthropic_message(parts),
        to_chat_completions_message(parts, reasoning_field="reasoning_content"),
    ):
        assert_valid_utf8(msg)
        assert "\ufffd" in json.dumps(msg, ensure_ascii=False)


def test_consumer_side_messages_hold_no_lone_surrogates():
    anth = from_anthropic(
        [
            {"role": "user", "content": LONE},
            {
                "role": "assistant",
                "content": [
                    # A JSON string input whose escapes decode to a lone surrogate.
                    {"type": "tool_use", "id": "t", "name": "f", "input": '{"a": "\\ud800"}'}
                ],
            },
        ],
        f"sys {LONE}",
    )
    assert anth[0].content == [
        TextPart(f"sys {LONE}".replace("\ud800", "\ufffd").replace("\udfff", "\ufffd"))
    ]
    assert anth[1].content == [TextPart("bad \ufffd and \ufffd end")]
    assert anth[2].content[0].input == {"a": "\ufffd"}
    oai = from_chat_completions([{"role": "user", "content": LONE}])
    assert oai[0].content == [TextPart("bad \ufffd and \ufffd end")]


def test_json_string_tool_input_nested_too_deeply_is_a_clear_error():
    deep = '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(ConversionError, match="nested too deeply"):
        from_anthropic(
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "f", "input": deep}],
                }
            ]
        )


def test_valid_unicode_walks_deep_values_without_recursion():
    deep: list[Any] = []
    cur = deep
    for _ in range(50_000):
        nxt: list[Any] = []
        cur.append(nxt)
        cur = nxt
    cur.append("\ud800")
    fixed = valid_unicode(deep)
    for _ in range(50_000):
        fixed = fixed[0]
    assert fixed == ["\ufffd"]


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=12))
def test_any_text_gives_valid_utf8_bodies(text):
    msgs = [
        ChatMessage.user(text or "x"),
        ChatMessage.assistant(text or "y"),
        ChatMessage.user("z"),
    ]
    for body in bodies(msgs).values():
        assert_valid_utf8(body)


# --------------------------------------------------------------------------- image types

OPENAI_REJECTS = ["image/svg+xml", "image/bmp", "image/heic", "image/tiff"]
OPENAI_TAKES = ["image/png", "image/jpeg", "image/gif", "image/webp"]


@pytest.mark.parametrize("mime", OPENAI_REJECTS)
def test_image_types_openai_rejects_become_the_anthropic_placeholder(mime):
    msgs = [ChatMessage.user([TextPart("look"), DataPart(b"12345", mime)])]
    placeholder = f"[image omitted: {mime}, 5 bytes]"
    anth = to_anthropic(msgs, None, model="m", max_tokens=10)["messages"][0]["content"]
    assert anth[1] == {"type": "text", "text": placeholder}
    cc = to_chat_completions(msgs, None, model="m")["messages"][0]["content"]
    assert cc[1] == {"type": "text", "text": placeholder}
    resp = to_responses(msgs, None, model="m")["input"][0]["content"]
    assert resp[1] == {"type": "input_text", "text": placeholder}


@pytest.mark.parametrize("mime", OPENAI_REJECTS)
def test_image_types_openai_rejects_in_responses_tool_results(mime):
    msgs = [
        ChatMessage.user("q"),
        ChatMessage.assistant([ToolCallPart("c", "shot", {})]),
        ChatMessage.user([ToolResultPart("c", [TextPart("see"), DataPart(b"12", mime)])]),
    ]
    items = to_responses(msgs, None, model="m")["input"]
    out = next(i for i in items if i.get("type") == "function_call_output")
    assert out["output"] == [
        {"type": "input_text", "text": "see"},
        {"type": "input_text", "text": f"[image omitted: {mime}, 2 bytes]"},
    ]


@pytest.mark.parametrize("mime", OPENAI_TAKES)
def test_image_types_openai_takes_go_as_images(mime):
    msgs = [ChatMessage.user([DataPart(b"12", mime)])]
    cc = to_chat_completions(msgs, None, model="m")["messages"][0]["content"]
    assert cc == [{"type": "image_url", "image_url": {"url": f"data:{mime};base64,MTI="}}]
    resp = to_responses(msgs, None, model="m")["input"][0]["content"]
    assert resp == [
        {"type": "input_image", "image_url": f"data:{mime};base64,MTI=", "detail": "auto"}
    ]


# --------------------------------------------------------------------------- reasoning blocks


def ai_sdk_reasoning_parts() -> list[Any]:
    decoder = decoder_for("ai-sdk")
    parts: list[Any] = []
    path = FIXTURES / "ai-sdk" / "fullstream" / "reasoning-deltas.jsonl"
    for line in path.read_text().splitlines():
        if line.strip():
            parts += decoder.feed_json(json.loads(line))
    parts += decoder.close()
    return parts


def test_anthropic_joins_each_streamed_thinking_block_with_its_signature():
    parts = ai_sdk_reasoning_parts()
    msgs = [ChatMessage.user("hi"), ChatMessage.assistant(parts), ChatMessage.user("go on")]
    content = to_anthropic(msgs, None, model="m", max_tokens=10)["messages"][1]["content"]
    assert content[:5] == [
        {
            "type": "thinking",
            "thinking": "I will open the conversation with witty banter.",
            "signature": "1234567890",
        },
        {"type": "redacted_thinking", "data": "redacted-reasoning-data"},
        {
            "type": "thinking",
            "thinking": " Once the user has relaxed, I will pry for valuable information.",
            "signature": "1234567890",
        },
        # Blocks 4 and 5 interleave: each ends (with its final signature) after 5 began.
        {
            "type": "thinking",
            "thinking": " I need to think about this problem carefully.",
            "signature": "0987654321",
        },
        {
            "type": "thinking",
            "thinking": " The best solution requires careful consideration of all factors.",
            "signature": "0987654321",
        },
    ]
    assert [b["type"] for b in content[5:]] == ["text", "text"]


def interleaved(meta: dict[str, dict[str, str]]) -> list[Any]:
    return [
        ThinkingPart("first ", "r1"),
        ThinkingPart("second", "r2"),
        ThinkingPart("half", "r1"),
        ThinkingPart("", "r1", meta["r1"]),
        ThinkingPart("", "r2", meta["r2"]),
        TextPart("done"),
    ]


def test_responses_joins_interleaved_reasoning_items():
    parts = interleaved(
        {
            "r1": {"itemId": "rs_1", "encryptedContent": "enc1"},
            "r2": {"itemId": "rs_2", "encryptedContent": "enc2"},
        }
    )
    msgs = [ChatMessage.user("q"), ChatMessage.assistant(parts), ChatMessage.user("again")]
    items = to_responses(msgs, None, model="m")["input"]
    assert items[1:4] == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "encrypted_content": "enc1",
            "summary": [{"type": "summary_text", "text": "first half"}],
        },
        {
            "type": "reasoning",
            "id": "rs_2",
            "encrypted_content": "enc2",
            "summary": [{"type": "summary_text", "text": "second"}],
        },
        {"role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ]


def test_anthropic_joins_interleaved_thinking():
    parts = interleaved({"r1": {"signature": "s1"}, "r2": {"signature": "s2"}})
    msg = to_anthropic_message(parts)
    assert msg["content"] == [
        {"type": "thinking", "thinking": "first half", "signature": "s1"},
        {"type": "thinking", "thinking": "second", "signature": "s2"},
        {"type": "text", "text": "done"},
    ]


def test_chat_completions_reasoning_content_keeps_blocks_whole_and_apart():
    parts = interleaved({"r1": {"signature": "s1"}, "r2": {"signature": "s2"}})
    msg = to_chat_completions_message(parts, reasoning_field="reasoning_content")
    assert msg == {
        "role": "assistant",
        "content": "done",
        "reasoning_content": "first half\n\nsecond",
    }
    # Streamed without ids (Chat Completions' own decoder): one block, chunks joined as sent.
    plain = [ThinkingPart("a "), ThinkingPart("b"), TextPart("x")]
    assert to_chat_completions_message(plain, reasoning_field="r")["r"] == "a b"


def test_same_id_after_text_is_a_new_block():
    # A reasoning block only continues within its run of reasoning parts.
    parts = [
        ThinkingPart("one", "r"),
        ThinkingPart("", "r", {"signature": "s1"}),
        TextPart("t"),
        ThinkingPart("two", "r"),
        ThinkingPart("", "r", {"signature": "s2"}),
    ]
    assert [b.get("signature") for b in to_anthropic_message(parts)["content"]] == [
        "s1",
        None,
        "s2",
    ]


# --------------------------------------------------------------------------- merged messages


def merged_text(target: str, body: dict[str, Any], role: str) -> str:
    if target == "chat-completions":
        msg = next(m for m in body["messages"] if m["role"] == role)
        content = msg["content"]
        return content if isinstance(content, str) else "".join(c["text"] for c in content)
    if target == "responses":
        msg = next(m for m in body["input"] if m.get("role") == role)
        return "".join(c["text"] for c in msg["content"])
    msg = next(m for m in body["messages"] if m["role"] == role)
    return "".join(c["text"] for c in msg["content"] if c["type"] == "text")


@pytest.mark.parametrize("target", ["ai-sdk", "chat-completions", "responses", "anthropic"])
def test_merged_messages_are_kept_apart_by_a_blank_line(target):
    msgs = [
        ChatMessage.user("u1"),
        ChatMessage.user("u2"),
        ChatMessage.assistant([TextPart("a"), TextPart("1")]),  # chunks of one message: joined
        ChatMessage.assistant("a2"),
        ChatMessage.user("next"),
    ]
    body = bodies(msgs)[target]
    assert merged_text(target, body, "user") == "u1\n\nu2"
    assert merged_text(target, body, "assistant") == "a1\n\na2"


def test_merged_messages_apart_across_reasoning_and_existing_newlines():
    msgs = [
        ChatMessage.user("q"),
        ChatMessage.assistant("a1"),
        ChatMessage.assistant([ThinkingPart("hm", "r", {"signature": "s"}), TextPart("a2")]),
        ChatMessage.assistant("\na3"),
        ChatMessage.user("next"),
    ]
    cc = to_chat_completions(msgs, None, model="m")["messages"]
    assert cc[1]["content"] == "a1\n\na2\n\na3"


def test_system_prompt_parts_keep_their_own_join():
    msgs = [ChatMessage.system("s1"), ChatMessage.system("s2"), ChatMessage.user("q")]
    assert to_anthropic(msgs, None, model="m", max_tokens=5)["system"] == "s1\n\ns2"


# --------------------------------------------------------------------------- last user turn


@pytest.mark.parametrize("last", ["   ", "", "\n\t"])
def test_anthropic_keeps_an_empty_last_user_turn(last):
    msgs = [ChatMessage.user("q"), ChatMessage.assistant("a"), ChatMessage.user(last)]
    out = to_anthropic(msgs, None, model="m", max_tokens=10)["messages"]
    assert out[-1] == {"role": "user", "content": [{"type": "text", "text": EMPTY_TURN_TEXT}]}
    assert [m["role"] for m in out] == ["user", "assistant", "user"]


def test_anthropic_empty_only_message_is_still_a_request():
    out = to_anthropic([ChatMessage.user(" ")], None, model="m", max_tokens=10)["messages"]
    assert out == [{"role": "user", "content": [{"type": "text", "text": EMPTY_TURN_TEXT}]}]


def test_anthropic_last_assistant_message_stays_a_prefill():
    msgs = [ChatMessage.user("q"), ChatMessage.assistant("The answer is")]
    out = to_anthropic(msgs, None, model="m", max_tokens=10)["messages"]
    assert out[-1] == {"role": "assistant", "content": [{"type": "text", "text": "The answer is"}]}


def test_anthropic_whitespace_user_turn_in_the_middle_needs_no_placeholder():
    msgs = [
        ChatMessage.user("q"),
        ChatMessage.assistant("a"),
        ChatMessage.user(" "),
        ChatMessage.assistant("b"),
        ChatMessage.user("c"),
    ]
    out = to_anthropic(msgs, None, model="m", max_tokens=10, policy=ConversionPolicy())["messages"]
    assert EMPTY_TURN_TEXT not in json.dumps(out)
    assert out[-1]["role"] == "user"
