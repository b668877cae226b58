"""Frames nested too deep, with and without orjson: the same limit, an answer, nothing lost.

The parser is chosen at import (``lmbridge._json._fast`` for reading, ``framing._orjson`` for
writing); each test runs once with orjson and once with the standard library's ``json`` by
patching those choices.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from lmbridge import _json
from lmbridge._nesting import nesting_depth
from lmbridge.host import framing
from lmbridge.host.framing import (
    MAX_NESTING,
    FrameDecoder,
    FrameError,
    Message,
    encode_message,
)
from lmbridge.host.jsonrpc import PARSE_ERROR, IncomingRequest, JsonRpcConnection


@pytest.fixture(params=["orjson", "json"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "orjson":
        orjson = pytest.importorskip("orjson")
        monkeypatch.setattr(framing, "_orjson", orjson)
        monkeypatch.setattr(_json, "_fast", orjson.loads)
    else:
        monkeypatch.setattr(framing, "_orjson", None)
        monkeypatch.setattr(_json, "_fast", None)
    return str(request.param)


def nested(depth: int) -> Any:
    """A value exactly ``depth`` levels deep (objects and arrays alternating)."""
    value: Any = {"type": "string"}
    for i in range(depth - 1):
        value = {"p": value, "type": "object"} if i % 2 else [value]
    return value


def schema(depth: int) -> Any:
    """A JSON schema ``depth`` levels deep, as MCP servers nest them (2 levels per property)."""
    value: Any = {"type": "string"}
    for _ in range((depth - 1) // 2):
        value = {"type": "object", "properties": {"p": value}}
    return value


def frame(obj: Any) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def raw_frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def deep_request(ident: int, depth: int) -> bytes:
    # the array brackets alone: far deeper than any parser's own limit
    schema = b"[" * depth + b"]" * depth
    tool = b'{"id":"call_1","inputSchema":' + schema + b"}"
    return raw_frame(
        b'{"jsonrpc":"2.0","method":"chat/response","params":{"tools":[' + tool + b'],'
        b'"messages":[]},"id":%d}' % ident
    )


def test_nesting_depth_skips_strings() -> None:
    assert nesting_depth(b'{"a": [1, {"b": "[[[{{{"}], "c": "\\"]]]"}') == 3
    assert nesting_depth(b"1") == 0
    assert nesting_depth(json.dumps(nested(150)).encode()) == 150


@pytest.mark.parametrize("depth", [10_000, 2_000, 1_100, MAX_NESTING + 1])
def test_too_deep_is_an_error_with_the_request_id_and_the_rest_decodes(
    backend: str, depth: int
) -> None:
    before = frame({"jsonrpc": "2.0", "id": 1, "method": "a"})
    after = frame({"jsonrpc": "2.0", "method": "n"})
    events = FrameDecoder().feed(before + deep_request(7, depth) + after)
    assert [type(e) for e in events] == [Message, FrameError, Message]
    error = events[1]
    assert isinstance(error, FrameError)
    assert error.id == 7  # the request's own id, not the tool call's "id" inside the params
    assert f"nested more than {MAX_NESTING} levels deep" in error.message


def test_the_limit_is_the_same_with_both_parsers(backend: str) -> None:
    ok = frame({"jsonrpc": "2.0", "id": 1, "method": "a", "params": nested(MAX_NESTING - 2)})
    too_deep = frame({"jsonrpc": "2.0", "id": 2, "method": "a", "params": [nested(MAX_NESTING)]})
    first, second = FrameDecoder().feed(ok + too_deep)
    assert isinstance(first, Message) and isinstance(second, FrameError)


def test_deep_tool_schemas_of_realistic_depth_pass_both_ways(backend: str) -> None:
    deep = schema(101)
    assert nesting_depth(json.dumps(deep).encode()) == 101
    message = {"jsonrpc": "2.0", "id": 3, "method": "chat/response",
               "params": {"options": {"tools": [{"name": "t", "inputSchema": deep}]}}}  # fmt: skip
    (event,) = FrameDecoder().feed(encode_message(message))
    assert isinstance(event, Message) and event.value == message
    # and out again: orjson's encoder stops at 254 levels; dumps falls back beyond it
    deeper = {"result": nested(300)}
    assert json.loads(framing.dumps(deeper)) == deeper


async def test_the_peer_answers_the_deep_request_and_serves_the_others(backend: str) -> None:
    sent: list[bytes] = []
    peer = JsonRpcConnection(sent.append, name="test")
    served: list[Any] = []

    async def echo(params: Any, request: IncomingRequest) -> Any:
        served.append(params)
        return params

    peer.on_request("echo", echo)
    data = (
        frame({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"n": 1}})
        + deep_request(2, 5_000)
        + b"Content-Length: 9\r\n\r\n{not json"
        + frame({"jsonrpc": "2.0", "id": 3, "method": "echo", "params": {"n": 3}})
    )
    peer.feed(data)  # one read
    for _ in range(5):
        await asyncio.sleep(0)
    answers = {}
    for event in FrameDecoder().feed(b"".join(sent)):
        assert isinstance(event, Message)
        answers[event.value["id"]] = event.value
    assert answers[1]["result"] == {"n": 1} and answers[3]["result"] == {"n": 3}
    assert answers[2]["error"]["code"] == PARSE_ERROR
    assert "nested more than" in answers[2]["error"]["message"]
    assert answers[None]["error"]["code"] == PARSE_ERROR  # no id to answer under
    assert peer.malformed == 2


async def test_a_failing_dispatch_loses_no_other_message(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[bytes] = []
    peer = JsonRpcConnection(sent.append, name="test")
    seen: list[Any] = []
    peer.on_notification("n", seen.append)
    original = peer._dispatch

    def flaky(event: Message) -> None:
        if event.value.get("id") == 1:
            raise RuntimeError("boom")
        original(event)

    monkeypatch.setattr(peer, "_dispatch", flaky)
    peer.feed(
        frame({"jsonrpc": "2.0", "id": 1, "method": "x"})
        + frame({"jsonrpc": "2.0", "method": "n", "params": 2})
    )
    assert seen == [2]
    (answer,) = [e.value for e in FrameDecoder().feed(b"".join(sent)) if isinstance(e, Message)]
    assert answer["id"] == 1 and "boom" in answer["error"]["message"]


def test_a_frame_exactly_at_the_nesting_limit_is_accepted_and_one_over_refused(
    backend: str,
) -> None:
    """The whole message counts, its own object included: params MAX_NESTING - 1 deep make a
    message MAX_NESTING deep. Shallow siblings add brackets, so that the exact depth scan runs
    (it is skipped when the message holds no more brackets than the limit)."""
    siblings = [{"a": []} for _ in range(MAX_NESTING)]
    at_limit = {"jsonrpc": "2.0", "id": 1, "method": "a", "params": nested(MAX_NESTING - 1)}
    at_limit["extra"] = siblings
    over = {"jsonrpc": "2.0", "id": 2, "method": "a", "params": nested(MAX_NESTING)}
    assert nesting_depth(json.dumps(at_limit).encode()) == MAX_NESTING
    assert nesting_depth(json.dumps(over).encode()) == MAX_NESTING + 1
    first, second = FrameDecoder().feed(frame(at_limit) + frame(over))
    assert isinstance(first, Message) and first.value == at_limit
    assert isinstance(second, FrameError) and second.id == 2
    assert framing.loads(json.dumps(at_limit)) == at_limit
    with pytest.raises(ValueError, match="nested"):
        framing.loads(json.dumps(over))
