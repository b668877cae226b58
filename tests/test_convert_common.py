"""The rules every converter shares: system prompt, tool-sequence repair, images, thinking, MIME."""

from __future__ import annotations

import pytest

import lmbridge.convert as convert
from lmbridge.convert import (
    MISSING_RESULT_TEXT,
    clean_terminal_output,
    parse_data_url,
    to_ai_sdk,
    to_anthropic,
    to_chat_completions,
    to_responses,
)
from lmbridge.errors import ConversionError
from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    DataPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

PNG = b"\x89PNG\r\n\x1a\nfake"


def cc(messages, **kw):
    return to_chat_completions(messages, ChatRequestOptions(), model="m", **kw)["messages"]


def anth(messages, **kw):
    return to_anthropic(messages, ChatRequestOptions(), model="m", max_tokens=100, **kw)


def test_public_names():
    assert set(convert.__all__) >= {
        "to_chat_completions",
        "to_responses",
        "to_anthropic",
        "to_ai_sdk",
        "to_gemini",
        "from_anthropic",
        "from_gemini",
        "from_chat_completions",
        "to_anthropic_message",
        "to_chat_completions_message",
        "ConversionPolicy",
        "sampling_options",
    }
    for name in convert.__all__:
        assert hasattr(convert, name)
    assert convert.THINKING_METADATA_KEYS == (
        "signature",
        "redactedData",
        "encryptedContent",
        "itemId",
        "thoughtSignature",
        "signedPart",
    )
    for key in convert.THINKING_METADATA_KEYS:
        assert f"``{key}``" in (convert.__doc__ or "")


# --------------------------------------------------------------------------- system prompt


def test_role_3_is_the_system_prompt_wherever_it_is():
    msgs = [
        ChatMessage.system("be brief"),
        ChatMessage.user("hi"),
        ChatMessage.assistant("hello"),
        ChatMessage.system("now be verbose"),
        ChatMessage.user("again"),
    ]
    out = cc(msgs)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "system", "user"]
    assert anth(msgs)["system"] == "be brief\n\nnow be verbose"


def test_role_3_present_disables_the_leading_assistant_rule():
    msgs = [ChatMessage.assistant("greeting"), ChatMessage.system("sys"), ChatMessage.user("hi")]
    out = cc(msgs)
    assert [m["role"] for m in out] == ["assistant", "system", "user"]


def test_leading_assistant_messages_become_the_system_prompt():
    msgs = [
        ChatMessage.assistant("part one"),
        ChatMessage.assistant("part two"),
        ChatMessage.user("hi"),
        ChatMessage.assistant("not a system prompt"),
    ]
    out = cc(msgs)
    assert out[0] == {"role": "system", "content": "part one\n\npart two"}
    assert out[-1] == {"role": "assistant", "content": "not a system prompt"}
    assert anth(msgs)["system"] == "part one\n\npart two"
    resp = to_responses(msgs, None, model="m", system_as="instructions")
    assert resp["instructions"] == "part one\n\npart two"
    assert resp["input"][0] == {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}


def test_leading_assistant_rule_can_be_turned_off():
    msgs = [ChatMessage.assistant("greeting"), ChatMessage.user("hi")]
    out = cc(msgs, leading_assistant_as_system=False)
    assert [m["role"] for m in out] == ["assistant", "user"]


def test_leading_assistant_with_a_tool_call_is_a_turn():
    msgs = [
        ChatMessage.assistant([ToolCallPart("c1", "t", {})]),
        ChatMessage.user([ToolResultPart("c1", [TextPart("ok")])]),
    ]
    out = cc(msgs)
    assert out[0]["role"] == "assistant" and out[0]["tool_calls"][0]["id"] == "c1"
    assert out[1] == {"role": "tool", "tool_call_id": "c1", "content": "ok"}


def test_developer_role_option():
    out = cc([ChatMessage.system("s"), ChatMessage.user("u")], system_role="developer")
    assert out[0] == {"role": "developer", "content": "s"}


# --------------------------------------------------------------------------- tool sequence repair


def _calls_then(user_parts):
    return [
        ChatMessage.user("go"),
        ChatMessage.assistant(
            [TextPart("calling"), ToolCallPart("a", "ta", {"x": 1}), ToolCallPart("b", "tb", {})]
        ),
        ChatMessage.user(user_parts),
    ]


def test_missing_result_gets_a_placeholder_everywhere():
    msgs = _calls_then([ToolResultPart("a", [TextPart("A")]), TextPart("next")])
    out = cc(msgs)
    assert out[2:] == [
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "tool", "tool_call_id": "b", "content": MISSING_RESULT_TEXT},
        {"role": "user", "content": "next"},
    ]
    a = anth(msgs)["messages"][-1]["content"]
    assert a[1] == {
        "type": "tool_result",
        "tool_use_id": "b",
        "content": [{"type": "text", "text": MISSING_RESULT_TEXT}],
        "is_error": True,
    }
    r = to_responses(msgs, None, model="m")["input"]
    assert {"type": "function_call_output", "call_id": "b", "output": MISSING_RESULT_TEXT} in r
    s = to_ai_sdk(msgs)["messages"]
    tool = next(m for m in s if m["role"] == "tool")
    assert tool["content"][1]["output"] == {"type": "error-text", "value": MISSING_RESULT_TEXT}
    assert tool["content"][1]["toolName"] == "tb"


def test_calls_unanswered_at_the_end_or_before_an_assistant_turn():
    msgs = [
        ChatMessage.user("go"),
        ChatMessage.assistant([ToolCallPart("a", "ta", {})]),
        ChatMessage.assistant("and then"),
    ]
    out = cc(msgs)
    # The two assistant messages merge; the placeholder answers the call at the end.
    assert [m["role"] for m in out] == ["user", "assistant", "tool"]
    assert out[1]["content"] == "and then"
    out = cc([ChatMessage.user("go"), ChatMessage.assistant([ToolCallPart("a", "ta", {})])])
    assert out[-1] == {"role": "tool", "tool_call_id": "a", "content": MISSING_RESULT_TEXT}


def test_missing_result_drop_policy_removes_the_call():
    msgs = _calls_then([ToolResultPart("a", [TextPart("A")])])
    out = cc(msgs, missing_tool_result="drop")
    assert [c["id"] for c in out[1]["tool_calls"]] == ["a"]
    assert out[-1] == {"role": "tool", "tool_call_id": "a", "content": "A"}
    # An assistant turn left empty by dropping disappears, and the user turns around it merge.
    msgs = [
        ChatMessage.user("q"),
        ChatMessage.assistant([ToolCallPart("z", "t", {})]),
        ChatMessage.user("r"),
    ]
    assert cc(msgs, missing_tool_result="drop") == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "\n\nr"}],
        }
    ]


def test_orphan_result_is_kept_as_text_with_its_tool_name():
    msgs = [
        ChatMessage.user("go"),
        ChatMessage.assistant([ToolCallPart("old", "search", {})]),
        ChatMessage.user([ToolResultPart("old", [TextPart("first")])]),
        ChatMessage.assistant("done"),
        ChatMessage.user([ToolResultPart("old", [TextPart("late")]), ToolResultPart("ghost", [])]),
    ]
    out = cc(msgs)
    last = out[-1]
    assert last["role"] == "user"
    texts = [p["text"] for p in last["content"]]
    assert texts[0].startswith("[tool result for call old (search)") and texts[0].endswith("\nlate")
    assert texts[1].startswith("[tool result for call ghost,")
    assert not any(m["role"] == "tool" and m["tool_call_id"] == "ghost" for m in out)


def test_orphan_result_error_policy():
    msgs = [ChatMessage.user([ToolResultPart("ghost", [TextPart("x")])])]
    with pytest.raises(ConversionError, match="ghost"):
        cc(msgs, orphan_tool_result="error")


def test_results_come_first_and_in_call_order():
    msgs = _calls_then(
        [
            TextPart("text first"),
            ToolResultPart("b", [TextPart("B")]),
            ToolResultPart("a", [TextPart("A")]),
        ]
    )
    content = anth(msgs)["messages"][-1]["content"]
    assert [b["type"] for b in content] == ["tool_result", "tool_result", "text"]
    assert [b.get("tool_use_id") for b in content[:2]] == ["a", "b"]


def test_results_split_over_two_user_messages_still_answer():
    msgs = [
        ChatMessage.user("go"),
        ChatMessage.assistant([ToolCallPart("a", "ta", {}), ToolCallPart("b", "tb", {})]),
        ChatMessage.user([ToolResultPart("a", [TextPart("A")])]),
        ChatMessage.user([ToolResultPart("b", [TextPart("B")]), TextPart("more")]),
    ]
    out = cc(msgs)
    assert out[2:] == [
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "tool", "tool_call_id": "b", "content": "B"},
        {"role": "user", "content": "more"},
    ]


def test_duplicate_call_ids_in_one_turn_are_an_error():
    msgs = [
        ChatMessage.user("q"),
        ChatMessage.assistant([ToolCallPart("a", "t", {}), ToolCallPart("a", "t", {})]),
    ]
    with pytest.raises(ConversionError, match=r"'a'.*twice"):
        cc(msgs)


# --------------------------------------------------------------------------- images and data


def test_images_in_user_messages_go_as_images():
    msgs = [ChatMessage.user([TextPart("see"), DataPart.image(PNG, "image/png")])]
    part = cc(msgs)[0]["content"][1]
    assert part["type"] == "image_url"
    assert parse_data_url(part["image_url"]["url"], "x") == (PNG, "image/png")


def test_images_become_placeholders_when_the_model_takes_none():
    msgs = [ChatMessage.user([TextPart("see"), DataPart.image(PNG, "image/png")])]
    out = cc(msgs, image_input=False)
    assert out[0]["content"][1] == {
        "type": "text",
        "text": f"[image omitted: image/png, {len(PNG)} bytes]",
    }


@pytest.mark.parametrize("policy", ["placeholder", "skip", "error"])
def test_image_in_assistant_message_policy(policy):
    msgs = [
        ChatMessage.user("draw"),
        ChatMessage.assistant([TextPart("here"), DataPart.image(PNG, "image/png")]),
    ]
    if policy == "error":
        with pytest.raises(ConversionError, match=r"messages\[1\]\.content\[1\].*image/png"):
            cc(msgs, image_in_non_user=policy)
        return
    out = cc(msgs, image_in_non_user=policy)
    expected = "here" + (
        f"[image omitted: image/png, {len(PNG)} bytes]" if policy == "placeholder" else ""
    )
    assert out[1] == {"role": "assistant", "content": expected}


def test_image_policy_default_is_placeholder_for_every_target():
    msgs = [ChatMessage.user("draw"), ChatMessage.assistant([DataPart.image(PNG, "image/jpeg")])]
    text = f"[image omitted: image/jpeg, {len(PNG)} bytes]"
    assert anth(msgs)["messages"][1]["content"] == [{"type": "text", "text": text}]
    assert to_ai_sdk(msgs)["messages"][1]["content"] == [{"type": "text", "text": text}]


def test_json_and_text_data_parts_are_text():
    msgs = [
        ChatMessage.user(
            [
                DataPart.json({"a": 1}),
                DataPart.text("plain", "text/markdown"),
                DataPart(b"{bad", "application/json"),
            ]
        )
    ]
    parts = cc(msgs)[0]["content"]
    assert [p["text"] for p in parts] == ['{"a":1}', "plain", "{bad"]


def test_pdf_goes_as_a_file_or_document():
    msgs = [ChatMessage.user([DataPart(b"%PDF-1.4", "application/pdf")])]
    assert anth(msgs)["messages"][0]["content"][0]["type"] == "document"
    assert cc(msgs)[0]["content"][0]["type"] == "file"
    assert to_responses(msgs, None, model="m")["input"][0]["content"][0]["type"] == "input_file"
    assert to_ai_sdk(msgs)["messages"][0]["content"][0] == {
        "type": "file",
        "data": "JVBERi0xLjQ=",
        "mediaType": "application/pdf",
    }


def test_unknown_binary_is_a_placeholder():
    msgs = [ChatMessage.user([DataPart(b"\x00\x01", "application/octet-stream")])]
    assert anth(msgs)["messages"][0]["content"][0] == {
        "type": "text",
        "text": "[data omitted: application/octet-stream, 2 bytes]",
    }


def test_malformed_mime_type_names_the_part():
    msgs = [ChatMessage.user([TextPart("x"), DataPart(b"x", "image")])]
    with pytest.raises(
        ConversionError, match=r"messages\[0\]\.content\[1\].*malformed MIME type 'image'"
    ):
        cc(msgs)


def test_copilot_cache_control_marker():
    msgs = [
        ChatMessage.system([TextPart("sys"), DataPart(b"ephemeral", "cache_control")]),
        ChatMessage.user(
            [
                TextPart("q"),
                DataPart(b"ephemeral", "cache_control"),
                DataPart(b"x", "stateful_marker"),
            ]
        ),
    ]
    body = anth(msgs)
    assert body["system"] == [
        {"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}
    ]
    # Other targets do not see the markers at all.
    assert cc(msgs) == [{"role": "system", "content": "sys"}, {"role": "user", "content": "q"}]


# --------------------------------------------------------------------------- thinking


def test_thinking_chunks_of_one_block_are_joined_and_signed():
    msgs = [
        ChatMessage.user("q"),
        ChatMessage.assistant(
            [
                ThinkingPart("Let me ", "r1"),
                ThinkingPart(["think", "."], "r1"),
                ThinkingPart("", "r1", {"signature": "SIG"}),
                ThinkingPart("", "r2", {"redactedData": "REDACTED"}),
                ThinkingPart("unsigned, from another model"),
                TextPart("answer"),
            ]
        ),
    ]
    content = anth(msgs)["messages"][1]["content"]
    assert content == [
        {"type": "thinking", "thinking": "Let me think.", "signature": "SIG"},
        {"type": "redacted_thinking", "data": "REDACTED"},
        {"type": "text", "text": "answer"},
    ]


def test_thinking_without_ids_is_split_at_each_signature():
    msgs = [
        ChatMessage.user("q"),
        ChatMessage.assistant(
            [
                ThinkingPart("a"),
                ThinkingPart("", metadata={"signature": "S1"}),
                ThinkingPart("b"),
                ThinkingPart("", metadata={"signature": "S2"}),
            ]
        ),
    ]
    content = anth(msgs)["messages"][1]["content"]
    assert content == [
        {"type": "thinking", "thinking": "a", "signature": "S1"},
        {"type": "thinking", "thinking": "b", "signature": "S2"},
    ]


def test_reasoning_content_replay_modes():
    msgs = [
        ChatMessage.user("q"),
        ChatMessage.assistant([ThinkingPart("why"), ToolCallPart("a", "t", {})]),
        ChatMessage.user([ToolResultPart("a", [TextPart("r")])]),
        ChatMessage.assistant([ThinkingPart("so"), TextPart("done")]),
        ChatMessage.user("next"),
        ChatMessage.assistant([ToolCallPart("b", "t", {})]),
        ChatMessage.user([ToolResultPart("b", [])]),
    ]
    never = cc(msgs)
    assert not any("reasoning_content" in m for m in never)
    tool_turns = [
        m.get("reasoning_content")
        for m in cc(msgs, reasoning_content="tool-calls")
        if m["role"] == "assistant"
    ]
    assert tool_turns == ["why", None, ""]
    always = [
        m.get("reasoning_content")
        for m in cc(msgs, reasoning_content="always")
        if m["role"] == "assistant"
    ]
    assert always == ["why", "so", ""]
    named = cc(msgs, reasoning_content="always", reasoning_field="reasoning")
    assert named[1]["reasoning"] == "why"


def test_responses_reasoning_items_carry_encrypted_content():
    msgs = [
        ChatMessage.user("q"),
        ChatMessage.assistant(
            [
                ThinkingPart("summary", "rs_1"),
                ThinkingPart("", "rs_1", {"itemId": "rs_1", "encryptedContent": "ENC"}),
                ThinkingPart("plain, not replayable"),
                TextPart("a"),
                ToolCallPart("c", "t", {"k": "v"}),
            ]
        ),
        ChatMessage.user([ToolResultPart("c", [TextPart("r")])]),
    ]
    items = to_responses(msgs, None, model="m")["input"]
    assert items[1] == {
        "type": "reasoning",
        "id": "rs_1",
        "encrypted_content": "ENC",
        "summary": [{"type": "summary_text", "text": "summary"}],
    }
    assert items[2] == {"role": "assistant", "content": [{"type": "output_text", "text": "a"}]}
    assert items[3] == {
        "type": "function_call",
        "call_id": "c",
        "name": "t",
        "arguments": '{"k":"v"}',
    }
    assert items[4] == {"type": "function_call_output", "call_id": "c", "output": "r"}


def test_ai_sdk_reasoning_provider_options():
    msgs = [
        ChatMessage.user("q"),
        ChatMessage.assistant(
            [
                ThinkingPart("t", metadata={"signature": "S"}),
                ThinkingPart("u", "rs", {"itemId": "rs", "encryptedContent": "E"}),
            ]
        ),
    ]
    content = to_ai_sdk(msgs)["messages"][1]["content"]
    assert content == [
        {"type": "reasoning", "text": "t", "providerOptions": {"anthropic": {"signature": "S"}}},
        {
            "type": "reasoning",
            "text": "u",
            "providerOptions": {"openai": {"itemId": "rs", "reasoningEncryptedContent": "E"}},
        },
    ]


def test_thinking_in_user_messages_is_dropped():
    out = cc([ChatMessage.user([ThinkingPart("hmm"), TextPart("q")])], reasoning_content="always")
    assert out == [{"role": "user", "content": "q"}]


# --------------------------------------------------------------------------- terminal output


def test_clean_terminal_output():
    raw = "\x1b[32mok\x1b[0m\tdone\r\n50%\r100%\n\x1b]0;title\x07bell\x07\x00end"
    assert clean_terminal_output(raw) == "ok\tdone\n100%\nbellend"


def test_clean_terminal_policy_applies_to_tool_results():
    msgs = _calls_then(
        [ToolResultPart("a", [TextPart("\x1b[1mbold\x1b[0m")]), ToolResultPart("b", [])]
    )
    out = cc(msgs, clean_terminal=True)
    assert out[2]["content"] == "bold"
    assert cc(msgs)[2]["content"] == "\x1b[1mbold\x1b[0m"


# --------------------------------------------------------------------------- bad input


def test_unknown_part_kind_names_message_and_part():
    class Strange:
        pass

    msgs = [ChatMessage.user([TextPart("x"), Strange()])]  # type: ignore[list-item]
    with pytest.raises(
        ConversionError, match=r"messages\[0\]\.content\[1\]: unknown part kind Strange"
    ):
        cc(msgs)


def test_non_object_tool_input_is_an_error():
    msgs = [
        ChatMessage.user("q"),
        ChatMessage.assistant([ToolCallPart("a", "t", ["not", "object"])]),
    ]  # type: ignore[arg-type]
    with pytest.raises(
        ConversionError, match=r"messages\[1\]\.content\[0\].*'a' \(t\).*JSON object"
    ):
        anth(msgs)


def test_tool_call_in_user_message_is_an_error():
    with pytest.raises(ConversionError, match=r"messages\[0\]\.content\[0\].*user message"):
        cc([ChatMessage.user([ToolCallPart("a", "t", {})])])


def test_not_a_message_list():
    with pytest.raises(ConversionError, match="expected a list"):
        cc("hello")  # type: ignore[arg-type]
    with pytest.raises(ConversionError, match=r"messages\[1\]: expected a ChatMessage"):
        cc([ChatMessage.user("x"), {"role": 1}])  # type: ignore[list-item]


def test_unknown_and_invalid_policy_options():
    with pytest.raises(ConversionError, match=r"unknown conversion option.*image_polcy"):
        cc([ChatMessage.user("x")], image_polcy="skip")
    with pytest.raises(ConversionError, match="image_in_non_user must be one of"):
        cc([ChatMessage.user("x")], image_in_non_user="explode")
    with pytest.raises(ConversionError, match="reasoning_content"):
        cc([ChatMessage.user("x")], reasoning_content="sometimes")


@pytest.mark.parametrize(
    "url",
    [
        "data:image/png",
        "image/png;base64,AAAA",
        "data:image/png;base64,@@@",
        "data:nope;base64,AAAA",
    ],
)
def test_malformed_data_urls(url):
    with pytest.raises(ConversionError, match="where"):
        parse_data_url(url, "where")


def test_data_url_without_base64_is_percent_decoded():
    assert parse_data_url("data:text/plain,a%20b", "x") == (b"a b", "text/plain")
    assert parse_data_url("data:,hi", "x") == (b"hi", "text/plain")


def test_bad_model_options():
    opts = ChatRequestOptions(model_options={"temperature": "hot"})
    with pytest.raises(ConversionError, match=r"modelOptions\.temperature: expected a number"):
        to_chat_completions([ChatMessage.user("x")], opts, model="m")
    opts = ChatRequestOptions(model_options={"maxTokens": -1})
    with pytest.raises(ConversionError, match="maxTokens"):
        to_responses([ChatMessage.user("x")], opts, model="m")
    with pytest.raises(ConversionError, match="max_tokens must be a positive integer"):
        to_anthropic([ChatMessage.user("x")], None, model="m", max_tokens=0)


def test_two_results_for_one_call_keep_the_first_as_the_answer_and_the_second_as_text():
    msgs = [
        ChatMessage.user("go"),
        ChatMessage.assistant([ToolCallPart("a", "t", {})]),
        ChatMessage.user(
            [ToolResultPart("a", [TextPart("first")]), ToolResultPart("a", [TextPart("second")])]
        ),
    ]
    out = cc(msgs)
    assert out[2] == {"role": "tool", "tool_call_id": "a", "content": "first"}
    assert out[3]["role"] == "user" and out[3]["content"].endswith("\nsecond")
    content = anth(msgs)["messages"][-1]["content"]
    assert content[0]["type"] == "tool_result"
    assert content[0]["content"] == [{"type": "text", "text": "first"}]
    assert content[1]["type"] == "text" and content[1]["text"].endswith("\nsecond")


def test_one_cache_breakpoint_among_several_system_blocks_stays_on_its_block():
    marker = DataPart(b"ephemeral", "cache_control")
    ephemeral = {"type": "ephemeral"}
    one_message = [
        ChatMessage.system([TextPart("s1"), TextPart("s2"), marker, TextPart("s3")]),
        ChatMessage.user("q"),
    ]
    several = [
        ChatMessage.system("s1"),
        ChatMessage.system([TextPart("s2"), marker]),
        ChatMessage.system("s3"),
        ChatMessage.user("q"),
    ]
    for msgs in (one_message, several):
        assert anth(msgs)["system"] == [
            {"type": "text", "text": "s1"},
            {"type": "text", "text": "s2", "cache_control": ephemeral},
            {"type": "text", "text": "s3"},
        ]
