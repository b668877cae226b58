"""HostTransport over the host's real JSON-RPC peer, with a Python stand-in for the extension's
``lm/*`` handlers on the other end: parts by streamId, errors, $/cancelRequest, events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from lmbridge.client.api import LanguageModelClient
from lmbridge.client.classify import ChatRequestError, ErrorKind
from lmbridge.client.selectors import ModelSelector
from lmbridge.client.testing import FakeBridge, fake_model, serve_bridge_over_rpc
from lmbridge.client.transport import HostTransport
from lmbridge.errors import LanguageModelError
from lmbridge.host.jsonrpc import JsonRpcConnection
from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    DataPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)

GPT = fake_model("gpt-4o-id", vendor="copilot", family="gpt-4o")
CLAUDE = fake_model("claude-id", vendor="copilot", family="claude-sonnet")


@dataclass
class Pair:
    bridge: FakeBridge
    host: JsonRpcConnection
    extension: JsonRpcConnection
    transport: HostTransport
    sent: list[dict[str, object]]


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    loop = asyncio.get_running_loop()
    sent: list[dict[str, object]] = []
    host: JsonRpcConnection
    extension: JsonRpcConnection

    def to_extension(data: bytes) -> None:
        loop.call_soon(extension.feed, data)
        sent.append({"bytes": data})

    host = JsonRpcConnection(to_extension, name="extension")
    extension = JsonRpcConnection(lambda data: loop.call_soon(host.feed, data), name="host")
    bridge = FakeBridge([GPT, CLAUDE])
    serve_bridge_over_rpc(extension, bridge)
    yield Pair(bridge, host, extension, HostTransport(host), sent)
    host.connection_lost()
    extension.connection_lost()


async def test_select_count_and_stream(pair: Pair) -> None:
    t = pair.transport
    assert await t.select_chat_models(ModelSelector(family="claude-sonnet")) == [CLAUDE]
    assert await t.select_chat_models(ModelSelector()) == [GPT, CLAUDE]
    assert await t.count_tokens(GPT, "12345678") == 2
    assert await t.count_tokens(GPT, ChatMessage.user("1234")) == 1
    parts = [
        ThinkingPart("t"),
        TextPart("a"),
        ToolCallPart("c1", "f", {"x": 1}),
        DataPart.json({"k": 1}),
        TextPart("b"),
    ]
    pair.bridge.script(GPT.id, parts)
    client = LanguageModelClient(t)
    response = await client.send_request([ChatMessage.user("hi")], tools=[ChatTool("f")])
    assert [p async for p in response] == parts
    assert pair.bridge.requests[0].options.tools == [ChatTool("f")]
    assert pair.bridge.requests[0].justification


async def test_concurrent_streams_are_kept_apart(pair: Pair) -> None:
    pair.bridge.script(GPT.id, [TextPart("g1"), 0.01, TextPart("g2")])
    pair.bridge.script(CLAUDE.id, [TextPart("c1"), 0.01, TextPart("c2")])
    client_a = LanguageModelClient(pair.transport, selector="vscodelm/copilot/gpt-4o")
    client_b = LanguageModelClient(pair.transport, selector="vscodelm/copilot/claude-sonnet")
    texts = await asyncio.gather(
        *[
            (await c.send_request([ChatMessage.user("x")])).text()
            for c in (client_a, client_b, client_a)
        ]
    )
    assert texts == ["g1g2", "c1c2", "g1g2"]


async def test_errors_keep_the_language_model_error_code(pair: Pair) -> None:
    pair.bridge.script(
        GPT.id,
        [TextPart("partial"), LanguageModelError("You have exceeded your rate limit", "Blocked")],
    )
    response = await LanguageModelClient(pair.transport).send_request([ChatMessage.user("x")])
    with pytest.raises(ChatRequestError) as info:
        await response.text()
    assert info.value.kind is ErrorKind.RATE_LIMITED and info.value.raw_code == "Blocked"
    assert response.parts == [TextPart("partial")]
    with pytest.raises(ChatRequestError) as info:
        async for _ in pair.transport.send_request(
            fake_model("gone"), [ChatMessage.user("x")], options=ChatRequestOptions()
        ):
            pass
    assert info.value.kind is ErrorKind.MODEL_NOT_FOUND and info.value.raw_code == "NotFound"


async def test_select_failure_degrades_to_the_fallback(pair: Pair) -> None:
    pair.bridge.select_error = LanguageModelError("Not signed in to GitHub", "NoPermissions")
    response = await LanguageModelClient(pair.transport).send_request([ChatMessage.user("x")])
    text = await response.text()
    assert response.degraded and "sign in to GitHub Copilot" in text


async def _settle() -> None:
    # the pair's connections deliver with call_soon: a few loop turns pass every message on
    for _ in range(10):
        await asyncio.sleep(0)


async def test_degraded_answers_ask_the_extension_to_tell_the_user_once(pair: Pair) -> None:
    """The user must see that an app runs without a model (a notification in VS Code), once,
    and again only after VS Code's models changed; the fallback text still answers."""
    told: list[object] = []
    pair.extension.on_notification("lm/degraded", told.append)
    pair.bridge.select_error = LanguageModelError("Not signed in to GitHub", "NoPermissions")
    client = LanguageModelClient(pair.transport, debounce=0)
    for _ in range(2):
        response = await client.send_request([ChatMessage.user("x")])
        assert response.degraded and await response.text()
    await _settle()
    assert len(told) == 1
    assert isinstance(told[0], dict) and "Not signed in to GitHub" in str(told[0]["cause"])
    pair.transport.handle_models_changed({})  # e.g. the user signed in: news if still degraded
    response = await LanguageModelClient(pair.transport).send_request([ChatMessage.user("x")])
    await response.text()
    await _settle()
    assert len(told) == 2
    pair.bridge.select_error = None  # a real model: no notification
    response = await LanguageModelClient(pair.transport).send_request([ChatMessage.user("x")])
    assert not response.degraded
    await response.text()
    await _settle()
    assert len(told) == 2


async def test_cancelling_the_task_sends_cancel_request(pair: Pair) -> None:
    pair.bridge.script(GPT.id, [TextPart("one"), 30.0, TextPart("never")])
    response = await LanguageModelClient(pair.transport).send_request([ChatMessage.user("x")])
    first = asyncio.Event()

    async def read() -> None:
        async for _ in response:
            first.set()

    task = asyncio.create_task(read())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(200):
        if pair.bridge.active_streams == 0:
            break
        await asyncio.sleep(0.005)
    assert pair.bridge.active_streams == 0 and pair.bridge.requests[0].cancelled
    assert any(b"$/cancelRequest" in m["bytes"] for m in pair.sent)  # type: ignore[operator]
    assert pair.transport._streams == {}


async def test_abort_event_sends_cancel_request(pair: Pair) -> None:
    pair.bridge.script(GPT.id, [TextPart("one"), 30.0, TextPart("never")])
    abort = asyncio.Event()
    response = await LanguageModelClient(pair.transport).send_request(
        [ChatMessage.user("x")], cancel=abort
    )
    with pytest.raises(ChatRequestError) as info:
        async for _ in response:
            abort.set()
    assert info.value.kind is ErrorKind.CANCELLED
    for _ in range(200):
        if pair.bridge.active_streams == 0:
            break
        await asyncio.sleep(0.005)
    assert pair.bridge.requests[0].cancelled
    assert any(b"$/cancelRequest" in m["bytes"] for m in pair.sent)  # type: ignore[operator]


async def test_events_invalidate_the_client(pair: Pair) -> None:
    client = LanguageModelClient(pair.transport, debounce=0.01)
    assert await client.model() == GPT
    pair.bridge.models = [CLAUDE]
    pair.bridge.fire_models_changed()
    await asyncio.sleep(0.01)
    assert client.current_model is None
    assert await client.model() == CLAUDE
    pair.bridge.models = [GPT]
    pair.bridge.fire_config_changed("lmbridge")
    await asyncio.sleep(0.01)
    assert await client.model() == GPT


async def test_late_parts_of_unknown_streams_are_ignored(pair: Pair) -> None:
    t = pair.transport
    pair.bridge.script(GPT.id, [TextPart("a"), TextPart("b")])
    client = LanguageModelClient(t)
    response = await client.send_request([ChatMessage.user("hi")])
    stream = aiter(response)
    assert await anext(stream) == TextPart("a")
    (finished,) = t._streams  # the stream in progress, by its id
    assert [p async for p in stream] == [TextPart("b")]
    assert t._streams == {}  # a finished stream is forgotten
    late = [{"kind": "text", "value": "late"}]
    t.handle_parts({"streamId": finished, "parts": late})  # after its end
    t.handle_parts({"streamId": "nope", "parts": late})  # never was
    t.handle_parts({"streamId": 7, "parts": late})
    t.handle_parts("garbage")
    assert t._streams == {}  # nothing queued for them, nothing kept
    # the next stream gets its own parts only
    again = await client.send_request([ChatMessage.user("hi")])
    assert [p async for p in again] == [TextPart("a"), TextPart("b")]
    assert t._streams == {}
