"""Every decoder has the same shape: one constructor signature, one dispatch style, and the JSON
parser without orjson gives json.loads's values and errors."""

from __future__ import annotations

import inspect
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmbridge import formats
from lmbridge.upstream import AssemblerOptions, StreamDecoder, decoder_class, stdlib_loads

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
