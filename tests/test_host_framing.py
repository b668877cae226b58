"""Content-Length framing (sans-IO) and the JSON-RPC peer, in memory."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lmbridge.host.framing import FrameDecoder, FrameError, Message, encode_message
from lmbridge.host.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    IncomingRequest,
    JsonRpcConnection,
    RemoteError,
)
from lmbridge.primitives import CancellationTokenSource

MESSAGES = [
    {"jsonrpc": "2.0", "id": 1, "method": "a", "params": {"text": "héllo ✓ \r\n\r\n"}},
    {"jsonrpc": "2.0", "method": "n"},
    {"jsonrpc": "2.0", "id": "x", "result": [1, 2, {"k": None}]},
]
STREAM = b"".join(encode_message(m) for m in MESSAGES)


class _AnyText(str):
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and bool(other)

    __hash__ = str.__hash__


ANY_TEXT = _AnyText()


def values(events: list[Message | FrameError]) -> list[Any]:
    return [e.value for e in events if isinstance(e, Message)]


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_chunking_decodes_the_same_messages(cuts: list[int]) -> None:
    decoder = FrameDecoder()
    events: list[Message | FrameError] = []
    last = 0
    for cut in [*sorted(cuts), len(STREAM)]:
        events += decoder.feed(STREAM[last:cut])
        last = cut
    assert values(events) == MESSAGES
    assert decoder.pending == 0


def test_content_type_header_is_accepted() -> None:
    body = b'{"jsonrpc":"2.0","method":"n"}'
    frame = (
        b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: %d\r\n\r\n%s"
    )
    assert values(FrameDecoder().feed(frame % (len(body), body))) == [json.loads(body)]


@pytest.mark.parametrize(
    ("garbage", "problem"),
    [
        (b"Content-Length: abc\r\n\r\n", "not a number"),
        (b"X-Other: 1\r\n\r\n", "no Content-Length"),
        (b"nonsense without colon\r\n\r\n", "malformed frame header"),
        (b"Content-Length: 5\r\n\r\n{nope", "not valid UTF-8 JSON"),
    ],
)
def test_a_bad_frame_is_reported_and_the_next_one_decodes(garbage: bytes, problem: str) -> None:
    events = FrameDecoder().feed(garbage + STREAM)
    errors = [e for e in events if isinstance(e, FrameError)]
    assert len(errors) == 1 and problem in errors[0].message
    assert values(events) == MESSAGES


def test_bad_json_error_carries_the_request_id_when_visible() -> None:
    body = b'{"jsonrpc":"2.0","id":17,"method":"x","params":{'
    (event,) = FrameDecoder().feed(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    assert isinstance(event, FrameError) and event.id == 17


def test_oversized_frames_are_refused() -> None:
    events = FrameDecoder(max_bytes=10).feed(b"Content-Length: 11\r\n\r\n" + b"x" * 11)
    assert isinstance(events[0], FrameError) and "exceeds the limit" in events[0].message


def test_endless_garbage_without_header_is_skipped() -> None:
    decoder = FrameDecoder()
    events = decoder.feed(b"x" * 10000)
    assert any(isinstance(e, FrameError) for e in events)
    assert decoder.pending < 100
    assert values(decoder.feed(STREAM)) == MESSAGES


# --------------------------------------------------------------------------- the peer


def pair() -> tuple[JsonRpcConnection, JsonRpcConnection]:
    """Two peers wired back to back through the event loop."""
    loop = asyncio.get_running_loop()
    a: JsonRpcConnection
    b: JsonRpcConnection
    a = JsonRpcConnection(lambda data: loop.call_soon(b.feed, data), name="b")
    b = JsonRpcConnection(lambda data: loop.call_soon(a.feed, data), name="a")
    return a, b


async def test_requests_both_ways_and_errors() -> None:
    a, b = pair()

    async def double(params: Any, request: IncomingRequest) -> Any:
        return params["x"] * 2

    b.on_request("double", double)
    a.on_request("ping", lambda params, request: asyncio.sleep(0, "pong"))
    assert await a.request("double", {"x": 21}) == 42
    assert await b.request("ping") == "pong"
    with pytest.raises(RemoteError) as info:
        await a.request("nope")
    assert info.value.code == METHOD_NOT_FOUND


async def test_cancelling_the_caller_cancels_the_remote_task() -> None:
    a, b = pair()
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow(params: Any, request: IncomingRequest) -> Any:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    b.on_request("slow", slow)
    caller = asyncio.ensure_future(a.request("slow"))
    await started.wait()
    caller.cancel()
    await asyncio.wait_for(cancelled.wait(), 2)
    assert not b.inflight


async def test_cancel_request_answers_request_cancelled() -> None:
    a, b = pair()

    async def slow(params: Any, request: IncomingRequest) -> Any:
        await asyncio.sleep(30)

    b.on_request("slow", slow)
    ident, fut = a.send_request("slow")
    await asyncio.sleep(0.01)
    a.cancel_request(ident)
    with pytest.raises(RemoteError) as info:
        await asyncio.wait_for(fut, 2)
    assert info.value.code == REQUEST_CANCELLED


@pytest.mark.parametrize("same_read", [True, False])
async def test_a_cancel_right_behind_its_request_is_answered_and_frees_the_slot(
    same_read: bool,
) -> None:
    """VS Code sends ``$/cancelRequest`` as soon as a token fires: the cancel can arrive before
    the request's task has run a single step (in the same read, or in the next one before the
    loop turns). The request must still answer -32800 and leave the in-flight table."""
    written: list[bytes] = []
    c = JsonRpcConnection(written.append)
    ran: list[int] = []

    async def handler(params: Any, request: IncomingRequest) -> Any:
        ran.append(1)
        await asyncio.sleep(30)

    c.on_request("slow", handler)
    request = encode_message({"jsonrpc": "2.0", "id": 7, "method": "slow"})
    cancel = encode_message({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}})
    if same_read:
        c.feed(request + cancel)
    else:
        c.feed(request)
        c.feed(cancel)
    for _ in range(5):
        await asyncio.sleep(0)
    replies = values(FrameDecoder().feed(b"".join(written)))
    assert replies == [
        {"jsonrpc": "2.0", "id": 7, "error": {"code": REQUEST_CANCELLED, "message": ANY_TEXT}}
    ]
    assert not c.inflight
    assert ran == []


async def test_a_request_is_cancelled_once_so_its_clean_up_runs_to_the_end() -> None:
    """A second ``$/cancelRequest`` and then a shutdown (which cancels every request) must
    not cancel the handler again while it cleans up (closing an upstream connection, say)."""
    a, b = pair()
    started, cleaning, release = asyncio.Event(), asyncio.Event(), asyncio.Event()
    cleaned: list[str] = []

    async def slow(params: Any, request: IncomingRequest) -> Any:
        started.set()
        try:
            await asyncio.sleep(30)
        finally:
            cleaning.set()
            await release.wait()  # the clean-up takes a while
            cleaned.append("done")

    async def ping(params: Any, request: IncomingRequest) -> Any:
        return "pong"

    b.on_request("slow", slow)
    b.on_request("ping", ping)
    ident, fut = a.send_request("slow")
    await started.wait()
    a.cancel_request(ident)
    await cleaning.wait()  # the handler is cleaning up
    a.cancel_request(ident)
    # messages are handled in order: once the ping is answered, the second cancel was read
    assert await asyncio.wait_for(a.request("ping"), 5) == "pong"
    b.cancel_all()
    assert not fut.done() and cleaned == []  # still cleaning up, not cancelled again
    release.set()
    with pytest.raises(RemoteError) as info:
        await asyncio.wait_for(fut, 2)
    assert info.value.code == REQUEST_CANCELLED
    assert cleaned == ["done"]


async def test_malformed_messages_get_parse_errors_and_the_peer_stays_up() -> None:
    written: list[bytes] = []
    c = JsonRpcConnection(written.append)
    body = b'{"jsonrpc":"2.0","id":3,"method":"x",'
    c.feed(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    c.feed(encode_message([1, 2]))
    replies = values(FrameDecoder().feed(b"".join(written)))
    assert replies[0]["id"] == 3 and replies[0]["error"]["code"] == PARSE_ERROR
    assert replies[1]["error"]["code"] == -32600
    assert c.malformed == 2


def test_a_lone_surrogate_is_written_as_its_escape() -> None:
    # UTF-8 cannot carry a lone surrogate (what "\\ud83d" without its pair reads as)
    value = {"id": "\ud83d", "text": "caf\u00e9 \U0001f600"}
    frame = encode_message(value)
    head, body = frame.split(b"\r\n\r\n")
    assert head == b"Content-Length: %d" % len(body)
    assert b'"\\ud83d"' in body and json.loads(body) == value  # (orjson refuses to read it)


async def test_a_bad_frame_whose_id_is_a_lone_surrogate_is_answered() -> None:
    # found by fuzzing: the parse error's answer could not be encoded, and the exception
    # escaped feed() (the host's reader)
    written: list[bytes] = []
    c = JsonRpcConnection(written.append)
    body = b'{"jsonrpc":"2.0","id":"\\ud83d","method":"x",'
    c.feed(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    (frame,) = written
    reply = json.loads(frame.split(b"\r\n\r\n", 1)[1])
    assert reply["id"] == "\ud83d" and reply["error"]["code"] == PARSE_ERROR


async def test_connection_lost_fails_pending_requests() -> None:
    c = JsonRpcConnection(lambda data: None)
    _, fut = c.send_request("x")
    c.connection_lost()
    with pytest.raises(ConnectionError):
        await fut


@pytest.mark.parametrize("code", ["usage", None, 1.5, True, [1], 1e300])
async def test_an_error_answer_with_a_malformed_code_still_ends_the_request(code: Any) -> None:
    c = JsonRpcConnection(lambda data: None)
    ident, fut = c.send_request("ask")
    answer = {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": "no"}}
    c.feed(encode_message(answer))  # must not raise out of feed()
    with pytest.raises(RemoteError) as failed:
        await asyncio.wait_for(fut, 5)
    assert failed.value.code == INTERNAL_ERROR
    assert failed.value.message.startswith("no (the peer's error code was not an integer")


async def test_a_request_id_already_in_flight_is_refused_and_the_first_still_answers() -> None:
    written: list[bytes] = []
    c = JsonRpcConnection(written.append)
    release = asyncio.Event()

    async def slow(params: Any, request: IncomingRequest) -> Any:
        await release.wait()
        return params

    c.on_request("slow", slow)
    c.feed(encode_message({"jsonrpc": "2.0", "id": 5, "method": "slow", "params": "first"}))
    await asyncio.sleep(0)  # the first is being served
    c.feed(encode_message({"jsonrpc": "2.0", "id": 5, "method": "slow", "params": "second"}))
    replies = values(FrameDecoder().feed(b"".join(written)))
    assert replies == [
        {"jsonrpc": "2.0", "id": 5, "error": {"code": INVALID_REQUEST, "message": ANY_TEXT}}
    ]
    assert "already in use" in replies[0]["error"]["message"]
    assert list(c.inflight) == [5]
    task = c.inflight[5].task
    assert task is not None
    release.set()
    await task
    replies = values(FrameDecoder().feed(b"".join(written)))
    assert replies[1] == {"jsonrpc": "2.0", "id": 5, "result": "first"}  # not "second"
    assert len(replies) == 2


async def test_a_handler_that_swallows_the_cancel_still_answers_cancelled() -> None:
    a, b = pair()
    started = asyncio.Event()

    async def stubborn(params: Any, request: IncomingRequest) -> Any:
        started.set()
        with contextlib.suppress(asyncio.CancelledError):  # carries on as if nothing happened
            await asyncio.sleep(30)
        return "finished anyway"

    b.on_request("stubborn", stubborn)
    ident, fut = a.send_request("stubborn")
    await started.wait()
    a.cancel_request(ident)
    with pytest.raises(RemoteError) as info:
        await asyncio.wait_for(fut, 5)
    assert info.value.code == REQUEST_CANCELLED
    assert not b.inflight


async def test_a_cancel_from_a_plain_thread_wakes_the_waiting_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A plain thread (not an executor's, whose end wakes the loop by itself) cancels while
    the loop sleeps in its selector: the waiter must be woken by the cancel itself. In debug
    mode a thread that schedules on the loop without ``call_soon_threadsafe`` is refused, so
    a waiter woken the unsafe way never wakes here."""
    loop = asyncio.get_running_loop()
    debug = loop.get_debug()
    loop.set_debug(True)
    try:
        source = CancellationTokenSource()
        waiter = asyncio.ensure_future(source.token.wait())
        await asyncio.sleep(0)  # the waiter subscribed
        thread = threading.Thread(target=source.cancel)
        thread.start()
        await asyncio.wait_for(waiter, 10)
        thread.join()
    finally:
        loop.set_debug(debug)
    assert "cancellation callback failed" not in caplog.text
