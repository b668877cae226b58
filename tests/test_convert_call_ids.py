"""A conversation that switched between upstreams never mixes its tool calls up.

lmbridge's decoders make call ids unique within one answer (an upstream that sends none gets
``call_1``, ``call_2`` ...), so two answers, from one upstream or from two after the user
switched models, can hold the same id. Every converter then sends each call under an id no
other call has, with its own result right after it, named by its own tool.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lmbridge.convert import to_anthropic, to_chat_completions, to_gemini, to_responses
from lmbridge.parts import ChatMessage, ChatRequestOptions, TextPart, ToolResultPart
from support.streams import decode_body, sse_body


def gemini_call(name: str, args: dict[str, Any]) -> list[Any]:
    chunk = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"functionCall": {"name": name, "args": args}}]},
                "finishReason": "STOP",
            }
        ]
    }
    return decode_body("gemini", [sse_body([json.dumps(chunk)])]).parts


def chat_call(name: str, arguments: str) -> list[Any]:
    chunk = {
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"name": name, "arguments": arguments}}]},
                "finish_reason": "tool_calls",
            }
        ]
    }
    return decode_body("chat-completions", [sse_body([json.dumps(chunk)], done=True)]).parts


def switched_conversation() -> list[ChatMessage]:
    """Gemini answers the first turn, a local Chat Completions server the second (neither
    sends call ids): both calls come out as ``call_1``."""
    first, second = gemini_call("read_file", {"path": "a.py"}), chat_call("grep", '{"q":"TODO"}')
    assert first[0].call_id == second[0].call_id == "call_1"
    return [
        ChatMessage.user("Look at a.py"),
        ChatMessage.assistant(first),
        ChatMessage.user([ToolResultPart(first[0].call_id, [TextPart("print('a')")])]),
        ChatMessage.assistant(second),
        ChatMessage.user([ToolResultPart(second[0].call_id, [TextPart("3 matches")])]),
    ]


def test_anthropic_gets_unique_tool_use_ids_each_answered_by_its_own_result() -> None:
    body = to_anthropic(switched_conversation(), ChatRequestOptions(), model="m", max_tokens=100)
    pairs = []
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block["type"] == "tool_use":
                pairs.append(("call", block["id"], block["name"]))
            elif block["type"] == "tool_result":
                text = block["content"] if isinstance(block["content"], str) else block["content"][0]["text"]
                pairs.append(("result", block["tool_use_id"], text))
    calls = [p for p in pairs if p[0] == "call"]
    assert len({c[1] for c in calls}) == 2
    assert pairs == [
        ("call", calls[0][1], "read_file"),
        ("result", calls[0][1], "print('a')"),
        ("call", calls[1][1], "grep"),
        ("result", calls[1][1], "3 matches"),
    ]


def test_chat_completions_and_responses_pair_each_result_with_its_call() -> None:
    messages = to_chat_completions(switched_conversation(), ChatRequestOptions(), model="m")["messages"]
    ids = [m["tool_calls"][0]["id"] for m in messages if m.get("tool_calls")]
    results = [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]
    assert len(set(ids)) == 2 and results == [(ids[0], "print('a')"), (ids[1], "3 matches")]
    items = to_responses(switched_conversation(), ChatRequestOptions(), model="m")["input"]
    calls = [(i["call_id"], i["name"]) for i in items if i.get("type") == "function_call"]
    outputs = [(i["call_id"], i["output"]) for i in items if i.get("type") == "function_call_output"]
    assert [c[1] for c in calls] == ["read_file", "grep"] and len({c[0] for c in calls}) == 2
    assert [o[0] for o in outputs] == [c[0] for c in calls]


@pytest.mark.parametrize("target", ["gemini"])
def test_gemini_names_each_result_by_its_own_call(target: str) -> None:
    contents = to_gemini(switched_conversation(), ChatRequestOptions())["contents"]
    responses = [
        p["functionResponse"] for c in contents for p in c["parts"] if "functionResponse" in p
    ]
    assert [r["name"] for r in responses] == ["read_file", "grep"]  # not "grep" twice
    calls = [p["functionCall"] for c in contents for p in c["parts"] if "functionCall" in p]
    assert [r["id"] for r in responses] == [c["id"] for c in calls]
    assert len({c["id"] for c in calls}) == 2


def test_ids_already_unique_are_kept_as_they_are() -> None:
    messages = switched_conversation()
    messages[3].content[0].call_id = "toolu_B"  # type: ignore[union-attr]
    messages[4].content[0].call_id = "toolu_B"  # type: ignore[union-attr]
    body = to_anthropic(messages, ChatRequestOptions(), model="m", max_tokens=100)
    ids = [b["id"] for m in body["messages"] if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use"]
    assert ids == ["call_1", "toolu_B"]
