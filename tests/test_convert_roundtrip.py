"""Property tests: VS Code -> X -> VS Code keeps the content X can represent, and any
conversation, however broken its tool sequence, becomes a request the upstream accepts."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmbridge.convert import (
    from_anthropic,
    from_chat_completions,
    to_ai_sdk,
    to_anthropic,
    to_chat_completions,
    to_responses,
)
from lmbridge.parts import (
    ChatMessage,
    ChatRole,
    DataPart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text an upstream keeps as is: not blank (Anthropic rejects blank text blocks).
text = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=20).filter(
    lambda s: s.strip() != ""
)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
tool_input = st.dictionaries(st.text(max_size=6), json_value, max_size=3)
image = st.builds(
    DataPart.image, st.binary(min_size=1, max_size=16), st.sampled_from(["image/png", "image/jpeg"])
)
name = st.sampled_from(["read_file", "search", "run"])


@st.composite
def conversations(draw: Any, *, for_openai: bool) -> list[ChatMessage]:
    """Well-formed conversations in the canonical form both directions agree on."""
    msgs: list[ChatMessage] = []
    if draw(st.booleans()):
        msgs.append(ChatMessage.system(draw(text)))
    counter = 0
    pending: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        user: list[Part] = []
        for call_id in pending:
            if for_openai:
                content: list[Any] = draw(st.lists(text.map(TextPart), max_size=1))
            else:
                content = draw(st.lists(text.map(TextPart) | image, max_size=3))
            user.append(ToolResultPart(call_id, content))
        extra = draw(st.lists(text.map(TextPart) | image, min_size=0 if pending else 1, max_size=3))
        user.extend(extra)
        msgs.append(ChatMessage.user(user))
        assistant: list[Part] = []
        if for_openai:
            if draw(st.booleans()):
                assistant.append(ThinkingPart(draw(text)))
            if draw(st.booleans()):
                assistant.append(TextPart(draw(text)))
        else:
            for _ in range(draw(st.integers(0, 2))):
                assistant.append(ThinkingPart(draw(text), None, {"signature": draw(text)}))
        calls = []
        for _ in range(draw(st.integers(0, 2))):
            counter += 1
            calls.append(ToolCallPart(f"call_{counter}", draw(name), draw(tool_input)))
        if for_openai:
            assistant.extend(calls)
        else:
            # Anthropic keeps blocks in order: text and calls may interleave.
            assistant.extend(
                draw(
                    st.permutations(
                        [*calls, *[TextPart(t) for t in draw(st.lists(text, max_size=2))]]
                    )
                )
            )
        if not any(isinstance(p, (TextPart, ToolCallPart)) for p in assistant):
            assistant.append(TextPart(draw(text)))
        msgs.append(ChatMessage.assistant(assistant))
        pending = [p.call_id for p in assistant if isinstance(p, ToolCallPart)]
    final: list[Part] = [ToolResultPart(c, [TextPart("done")]) for c in pending]
    final.append(TextPart(draw(text)))
    msgs.append(ChatMessage.user(final))
    return msgs


def _json_roundtrip(body: dict[str, Any]) -> dict[str, Any]:
    # What goes over HTTP: the body must survive JSON as is.
    out: dict[str, Any] = json.loads(json.dumps(body))
    assert out == body
    return out


@SETTINGS
@given(conversations(for_openai=False))
def test_anthropic_roundtrip(msgs: list[ChatMessage]) -> None:
    body = _json_roundtrip(to_anthropic(msgs, None, model="m", max_tokens=10))
    back = from_anthropic(body["messages"], body.get("system"), system_as="system")
    assert back == msgs


@SETTINGS
@given(conversations(for_openai=True))
def test_chat_completions_roundtrip(msgs: list[ChatMessage]) -> None:
    body = _json_roundtrip(to_chat_completions(msgs, None, model="m", reasoning_content="always"))
    back = from_chat_completions(body["messages"], system_as="system")
    assert back == msgs


# --------------------------------------------------------------------------- broken histories

call_id = st.sampled_from(["a", "b", "c", "d"])
any_part = st.one_of(
    text.map(TextPart),
    image,
    st.builds(ThinkingPart, text, st.none() | st.sampled_from(["r1", "r2"])),
    st.builds(ToolCallPart, call_id, name, tool_input),
    st.builds(ToolResultPart, call_id, st.lists(text.map(TextPart), max_size=2)),
)


@st.composite
def messy(draw: Any) -> list[ChatMessage]:
    """Any sequence of messages, tool calls and results in any place (calls in assistant only)."""
    out = []
    # Call ids are unique in a conversation (VS Code's contract); duplicates are a separate,
    # clear error (test_convert_common).
    seen: set[str] = set()
    for _ in range(draw(st.integers(0, 7))):
        role = draw(st.sampled_from([ChatRole.USER, ChatRole.ASSISTANT, ChatRole.SYSTEM]))
        parts = draw(st.lists(any_part, max_size=4))
        if role != ChatRole.ASSISTANT:
            parts = [p for p in parts if not isinstance(p, ToolCallPart)]
        else:
            unique = []
            for p in parts:
                if isinstance(p, ToolCallPart):
                    if p.call_id in seen:
                        continue
                    seen.add(p.call_id)
                unique.append(p)
            parts = unique
        out.append(ChatMessage(role, parts))
    return out


def _texts(msgs: list[ChatMessage]) -> list[str]:
    out = []
    for m in msgs:
        for p in m.content:
            if isinstance(p, TextPart):
                out.append(p.value)
            elif isinstance(p, ToolResultPart):
                out.extend(q.value for q in p.content if isinstance(q, TextPart))
    return out


@SETTINGS
@given(messy())
def test_chat_completions_tool_sequence_is_always_valid(msgs: list[ChatMessage]) -> None:
    out = _json_roundtrip(to_chat_completions(msgs, None, model="m"))["messages"]
    for i, m in enumerate(out):
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            following = out[i + 1 : i + 1 + len(ids)]
            assert [f["role"] for f in following] == ["tool"] * len(ids)
            assert [f["tool_call_id"] for f in following] == ids
        if m["role"] == "tool":
            prev = out[i - 1]
            assert prev["role"] in ("assistant", "tool")
    # Every text is still somewhere in the request (results kept as text are not lost).
    dumped = json.dumps(out, ensure_ascii=False)
    for t in _texts(msgs):
        assert json.dumps(t, ensure_ascii=False)[1:-1] in dumped


@SETTINGS
@given(messy())
def test_anthropic_request_is_always_valid(msgs: list[ChatMessage]) -> None:
    body = _json_roundtrip(to_anthropic(msgs, None, model="m", max_tokens=10))
    out = body["messages"]
    roles = [m["role"] for m in out]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
    for i, m in enumerate(out):
        assert m["content"], m
        uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        results = [b for b in m["content"] if b["type"] == "tool_result"]
        if m["role"] == "assistant":
            assert not results
            if uses:
                nxt = out[i + 1]["content"]
                assert [b.get("tool_use_id") for b in nxt[: len(uses)]] == uses
        else:
            # Results come first in a user turn and answer the assistant turn before it.
            kinds = [b["type"] for b in m["content"]]
            assert kinds == sorted(kinds, key=lambda k: k != "tool_result")
            if results:
                prev_uses = [b["id"] for b in out[i - 1]["content"] if b["type"] == "tool_use"]
                assert [r["tool_use_id"] for r in results] == prev_uses
        for b in m["content"]:
            if b["type"] == "text":
                assert b["text"].strip()
            if b["type"] == "thinking":
                assert b["signature"]


@SETTINGS
@given(messy())
def test_responses_and_ai_sdk_never_fail_and_pair_calls(msgs: list[ChatMessage]) -> None:
    items = _json_roundtrip(to_responses(msgs, None, model="m"))["input"]
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert sorted(calls) == sorted(outputs)
    body = _json_roundtrip(to_ai_sdk(msgs))
    sdk_calls = [
        p["toolCallId"]
        for m in body["messages"]
        if m["role"] == "assistant"
        for p in m["content"]
        if p["type"] == "tool-call"
    ]
    sdk_results = [
        p["toolCallId"] for m in body["messages"] if m["role"] == "tool" for p in m["content"]
    ]
    assert sorted(sdk_calls) == sorted(sdk_results)
    assert all(m["content"] for m in body["messages"])
