"""The part model and its JSON wire form."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import lmbridge
from lmbridge.parts import (
    ChatMessage,
    ChatRole,
    DataPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    WireError,
    message_from_wire,
    message_to_wire,
    part_from_wire,
    part_to_wire,
)

json_scalars = st.none() | st.booleans() | st.integers() | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
text_parts = st.builds(TextPart, st.text())
data_parts = st.builds(DataPart, st.binary(), st.sampled_from(["image/png", "text/plain"]))
thinking_parts = st.builds(
    ThinkingPart,
    st.text() | st.lists(st.text(), max_size=3),
    st.none() | st.text(),
    st.none() | st.dictionaries(st.text(), json_values, max_size=3),
)
tool_calls = st.builds(
    ToolCallPart, st.text(min_size=1), st.text(min_size=1), st.dictionaries(st.text(), json_values)
)
tool_results = st.builds(
    ToolResultPart, st.text(min_size=1), st.lists(text_parts | data_parts, max_size=3)
)
any_part = text_parts | data_parts | thinking_parts | tool_calls | tool_results


@given(any_part)
def test_every_part_round_trips_through_the_wire_form(part: lmbridge.parts.Part) -> None:
    assert part_from_wire(part_to_wire(part)) == part


@given(st.sampled_from(list(ChatRole)), st.lists(any_part, max_size=4), st.none() | st.text())
def test_messages_round_trip(role: ChatRole, content: list[lmbridge.parts.Part], name: str | None) -> None:
    msg = ChatMessage(role, content, name)
    assert message_from_wire(message_to_wire(msg)) == msg


def test_wire_form_uses_the_documented_keys() -> None:
    assert part_to_wire(ToolCallPart("c1", "read", {"p": 1})) == {
        "kind": "toolCall", "callId": "c1", "name": "read", "input": {"p": 1}
    }
    assert part_to_wire(DataPart(b"hi", "text/plain")) == {
        "kind": "data", "mimeType": "text/plain", "data": "aGk="
    }
    assert part_to_wire(ThinkingPart("x")) == {"kind": "thinking", "value": "x"}


def test_data_part_constructors_mirror_vscode() -> None:
    assert DataPart.json({"a": 1}).mime_type == "text/x-json"
    assert DataPart.json({"a": 1}).decode_json() == {"a": 1}
    assert DataPart.text("é").data == "é".encode()
    assert DataPart.image(b"\x89PNG", "image/png").mime_type == "image/png"


@pytest.mark.parametrize(
    ("obj", "needle"),
    [
        ({"kind": "nope"}, "unknown part kind 'nope'"),
        ({"kind": "text"}, "part.value: expected a string"),
        ({"kind": "toolCall", "callId": "a", "name": "b", "input": "[]"}, "tool input must be an object"),
        ({"kind": "data", "mimeType": "x/y", "data": "%%%"}, "not valid base64"),
        ({"kind": "toolResult", "callId": "a", "content": [{"kind": "toolCall"}]}, "content[0]"),
        ([1], "expected an object, got list"),
    ],
)
def test_bad_wire_parts_name_the_problem(obj: object, needle: str) -> None:
    with pytest.raises(WireError, match=None) as info:
        part_from_wire(obj)
    assert needle in str(info.value)


def test_bad_role_is_named() -> None:
    with pytest.raises(WireError, match=r"message.role: .* got 7"):
        message_from_wire({"role": 7, "content": []})


def test_public_names_are_exported() -> None:
    for name in lmbridge.__all__:
        assert hasattr(lmbridge, name), name
