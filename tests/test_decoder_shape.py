"""Every decoder has the same shape: one constructor signature, one dispatch style, and the JSON
parser without orjson gives json.loads's values and errors."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import pickle
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmbridge import formats
from lmbridge.parts import FinishReason, TextPart, ToolCallPart, Usage
from lmbridge.sse import ServerSentEvent, SSEDecoder
from lmbridge.upstream import (
    AssemblerOptions,
    ByteStreamDecoder,
    StreamDecoder,
    decoder_class,
    stdlib_loads,
)
from lmbridge.upstream._assembler import new_usage

FORMATS = formats.names()


@pytest.mark.parametrize("name", FORMATS)
def test_one_constructor_signature(name: str) -> None:
    """``(options=None, *, <the format's own keyword options with defaults>)``."""
    cls = decoder_class(name)
    params = list(inspect.signature(cls).parameters.values())
    assert params[0].name == "options"
    assert params[0].default is None
    assert params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    for extra in params[1:]:
        assert extra.kind is inspect.Parameter.KEYWORD_ONLY, (name, extra)
        assert extra.default is not inspect.Parameter.empty, (name, extra)
    decoder = cls(AssemblerOptions(thinking="drop"))
    assert decoder.format == name


@pytest.mark.parametrize("name", ["anthropic", "responses", "ai-sdk"])
def test_typed_events_dispatch_through_the_table(name: str) -> None:
    """Formats whose events carry a type dispatch through ``handlers`` (event type -> method),
    not through a handle() of their own."""
    cls = decoder_class(name)
    assert cls.handle is StreamDecoder.handle
    assert cls.handlers, name
    for kind, method in cls.handlers.items():
        assert isinstance(kind, str)
        assert getattr(cls, method.__name__) is method, (name, kind)


def test_the_table_and_the_decode_loop_agree() -> None:
    """The decode loop inlines the table dispatch: the same parts as handle() per event."""
    events = [
        ("message_start", b'{"type":"message_start","message":{"id":"m","model":"x"}}'),
        ("content_block_start", b'{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'),
        ("content_block_delta", b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}'),
        ("content_block_delta", b'{"index":0,"delta":{"type":"text_delta","text":" there"}}'),
        ("ping", b'{"type":"ping"}'),
        ("message_delta", b'{"type":"message_delta","delta":{"stop_reason":"end_turn"}}'),
    ]
    looped = decoder_class("anthropic")()
    parts = looped.feed_raw_events((name, raw, "", None) for name, raw in events)
    one_by_one = decoder_class("anthropic")()
    expected = []
    for name, raw in events:
        expected += one_by_one.feed_json(json.loads(raw), name)
    assert parts == expected
    assert [p.value for p in parts] == ["hi", " there"]  # type: ignore[union-attr]
    assert looped.finish_reason == one_by_one.finish_reason


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(value=_JSON, pad=st.sampled_from(["", " ", "\n", " \t"]), as_bytes=st.booleans())
def test_stdlib_loads_is_json_loads(value: object, pad: str, as_bytes: bool) -> None:
    text = pad + json.dumps(value) + pad
    data = text.encode() if as_bytes else text
    assert stdlib_loads(data) == json.loads(text)


@pytest.mark.parametrize(
    "text", ['{"a": 1} x', '{"a": 1}{"b": 2}', "", "[DONE]", '{"a": ', "\ufeff{}", "nul"]
)
def test_stdlib_loads_refuses_what_json_loads_refuses(text: str) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(text)
    with pytest.raises(ValueError) as got:
        stdlib_loads(text.encode())
    assert str(got.value) == str(expected.value)


class _UserTableDecoder(StreamDecoder):
    """A user's own format, in their own (interpreted) code: typed events through the table."""

    format = "user-table"

    def __init__(self) -> None:
        super().__init__()
        self.closed_by_hook = False

    def _on_say(self, obj: dict[str, Any]) -> None:
        self._assembler.text(obj["text"])

    def _on_call(self, obj: dict[str, Any]) -> None:
        self._assembler.tool_call(obj["id"], obj["name"], obj["args"])

    handlers: ClassVar[dict[str, Callable[[Any, dict[str, Any]], None]]] = {
        "say": _on_say,
        "call": _on_call,
    }

    def on_other(self, obj: dict[str, Any], kind: Any) -> None:
        self._assembler.text(f"<{kind}>")

    def on_close(self) -> None:
        self.closed_by_hook = True


class _UserHandleDecoder(StreamDecoder):
    """A user's own format without types: its own handle()."""

    format = "user-handle"

    def handle(self, obj: dict[str, Any], event_name: str | None) -> None:
        self._assembler.text(f"{event_name}:{obj['n']}")
        if obj.get("last"):
            self._assembler.set_finish(FinishReason.STOP, "done")
            self.close_stream()


class _LoudAnthropic(decoder_class("anthropic")):  # type: ignore[misc]
    """A format's own decoder with one of its methods overridden by the user."""

    def on_close(self) -> None:
        self._assembler.text("[closed]")
        super().on_close()


def test_user_decoders_in_interpreted_code_subclass_the_decoders() -> None:
    """StreamDecoder and the formats' decoders take subclasses from code that is not compiled
    (the compiled build marks them so; a compiled class refuses such a subclass otherwise): the
    table, on_other, handle() and hook overrides all take effect through ByteStreamDecoder."""
    table = _UserTableDecoder()
    body = [
        b'data: {"type":"say","text":"hi"}\n\ndata: {"type":"mystery"}\n',
        b'\ndata: {"type":"call","id":"c1","name":"t","args":{"a":1}}\n\n',
    ]
    result = ByteStreamDecoder(table).decode_all(body)
    assert result.parts == [TextPart("hi"), TextPart("<mystery>"), ToolCallPart("c1", "t", {"a": 1})]
    assert table.closed_by_hook and result.format == "user-table" and result.error is None

    handled = ByteStreamDecoder(_UserHandleDecoder()).decode_all(
        [b"event: a\ndata: {\"n\":1}\n\nevent: b\ndata: {\"n\":2,\"last\":true}\n\n"]
    )
    assert handled.parts == [TextPart("a:1"), TextPart("b:2")]
    assert handled.finish_reason is FinishReason.STOP and handled.raw_finish_reason == "done"

    loud = ByteStreamDecoder(_LoudAnthropic()).decode_all(
        [
            b'event: message_start\ndata: {"type":"message_start","message":{"id":"m"}}\n\n'
            b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
            b'"content_block":{"type":"text","text":""}}\n\n'
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            b'"delta":{"type":"text_delta","text":"yo"}}\n\n'
        ]
    )
    assert loud.parts[:2] == [TextPart("yo"), TextPart("[closed]")]
    assert loud.error is not None  # cut off before message_stop: the format's own check ran


def test_results_options_and_events_pickle_and_copy() -> None:
    """The values the pipeline hands out survive pickle and copy (in the compiled build too,
    where a compiled class cannot be rebuilt the default way), equal to what they were."""
    result = ByteStreamDecoder(_UserHandleDecoder()).decode_all(
        [b'data: {"n":1}\n\ndata: {"n":2,"last":true}\n\n']
    )
    options = AssemblerOptions(thinking="drop", call_id_prefix="lmb-")
    events = [
        ServerSentEvent("text", "e", "7", 30),
        *SSEDecoder().feed(b"event: x\ndata: \xff bytes\n\n"),  # raw bytes, not valid UTF-8
    ]
    for value in (result, options, *events):
        for copied in (pickle.loads(pickle.dumps(value)), copy.copy(value), copy.deepcopy(value)):
            assert type(copied) is type(value) and copied == value
    assert pickle.loads(pickle.dumps(events[1])).raw == b"\xff bytes"
    assert pickle.loads(pickle.dumps(result)).parts == [TextPart("message:1"), TextPart("message:2")]


@given(counts=st.tuples(*[st.none() | st.integers(0, 10**9)] * 5))
def test_new_usage_is_usage(counts: tuple[int | None, ...]) -> None:
    """The decoders' Usage made without its __init__ is the same value, as frozen and hashable."""
    made = new_usage(*counts)
    assert type(made) is Usage and made == Usage(*counts) and hash(made) == hash(Usage(*counts))
    assert repr(made) == repr(Usage(*counts))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.input_tokens = 1  # type: ignore[misc]


UNHANDLED_EVENTS: dict[str, tuple[list[str], str]] = {
    "responses": (['{"type":"response.brand_new","x":1}'], "response.brand_new"),
    "anthropic": (['{"type":"brand_new","x":1}'], "brand_new"),
    "ai-sdk": (['{"type":"brand-new","x":1}'], "brand-new"),
    "gemini": (
        ['{"candidates":[{"content":{"role":"model","parts":[{"brandNew":{"a":1}}]}}]}'],
        "part:brandNew",
    ),
}


@pytest.mark.parametrize("name", sorted(UNHANDLED_EVENTS))
@pytest.mark.parametrize("path", ["raw", "event"])
def test_types_a_decoder_ignores_are_recorded_for_the_log(name: str, path: str) -> None:
    """Ignored event (or part) types produce nothing but are noted in ``unhandled``, by the
    table loop and by ``feed_event`` alike; handled ones are not."""
    lines, kind = UNHANDLED_EVENTS[name]
    decoder = decoder_class(name)()
    for line in lines:
        if path == "raw":
            assert decoder.feed_raw_events([("message", line.encode(), "", None)]) == []
        else:
            assert decoder.feed_event(ServerSentEvent(data=line)) == []
    assert decoder.unhandled == {kind}
    assert decoder.error is None
