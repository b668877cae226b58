"""Reloading the host's configuration (``configure``) while requests run, repeated provider
names, the ``logLevel`` setting and models that cannot be listed: the real :class:`HostServer`
over in-memory JSON-RPC, with the extension played by a :class:`JsonRpcConnection`."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lmbridge.config import ProviderContext
from lmbridge.gateway import UpstreamProvider
from lmbridge.host.client import HostClient
from lmbridge.host.jsonrpc import JsonRpcConnection, RemoteError
from lmbridge.host.logs import LogLevels
from lmbridge.host.server import HostConnection, HostServer
from lmbridge.parts import ChatMessage, ChatRequestOptions, ModelInfo, TextPart, message_to_wire
from lmbridge.provider import (
    CancellationToken,
    LanguageModelChatProvider,
    ResponseItem,
    ResponseProgress,
    model_info,
)
from support.replay_server import ReplayServer, Reply

GATES: dict[str, asyncio.Event] = {}
"""Named events the gate model waits on (the tests open them)."""
CLOSED: list[tuple[str, int]] = []
"""(tag, streams still running) for every GateProvider closed."""


class GateProvider(LanguageModelChatProvider):
    """Says ``<tag>:start``, waits for the gate named in the prompt, then says ``<tag>:end``."""

    def __init__(self, tag: str = "", *, context: ProviderContext) -> None:
        super().__init__()
        self.tag = tag
        self.running = 0
        self.closed = False
        self.models = (model_info("gate"),)

    async def provide_language_model_chat_response(
        self,
        model: ModelInfo,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        progress: ResponseProgress,
        token: CancellationToken,
    ) -> AsyncIterator[ResponseItem]:
        assert not self.closed, "a closed provider was asked to respond"
        self.running += 1
        try:
            yield TextPart(f"{self.tag}:start ")
            await GATES[messages[-1].text].wait()
            assert not self.closed, "the provider was closed under a running request"
            yield TextPart(f"{self.tag}:end")
        finally:
            self.running -= 1

    async def aclose(self) -> None:
        self.closed = True
        CLOSED.append((self.tag, self.running))


def gate(tag: str, name: str = "g") -> dict[str, Any]:
    return {"name": name, "provider": "test_host_reload:GateProvider", "tag": tag}


@dataclass
class Rig:
    server: HostServer
    extension: JsonRpcConnection
    parts: dict[Any, list[dict[str, Any]]] = field(default_factory=dict)
    logs: list[dict[str, Any]] = field(default_factory=list)

    async def init(
        self,
        providers: list[Any],
        secrets: dict[str, str] | None = None,
        method: str = "initialize",
        **settings: Any,
    ) -> Any:
        return await self.extension.request(
            method, {"providers": providers, "secrets": secrets or {}, "settings": settings}
        )  # fmt: skip

    async def configure(
        self, providers: list[Any], secrets: dict[str, str] | None = None, **settings: Any
    ) -> Any:
        return await self.init(providers, secrets, "configure", **settings)  # fmt: skip

    def start(self, model_id: str, text: str) -> tuple[Any, asyncio.Future[Any]]:
        ident, fut = self.extension.send_request(
            "chat/response",
            {"modelId": model_id, "messages": [message_to_wire(ChatMessage.user(text))],
             "options": {}},
        )  # fmt: skip
        self.parts[ident] = []
        return ident, fut

    def text(self, ident: Any) -> str:
        return "".join(p["value"] for p in self.parts[ident] if p["kind"] == "text")

    async def chat(self, model_id: str, text: str) -> str:
        ident, fut = self.start(model_id, text)
        await fut
        return self.text(ident)

    def errors(self) -> list[str]:
        return [m["message"] for m in self.logs if m["level"] == "error"]


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    loop = asyncio.get_running_loop()
    host: HostConnection
    extension: JsonRpcConnection
    host = HostConnection(lambda data: loop.call_soon(extension.feed, data), name="extension")
    extension = JsonRpcConnection(lambda data: loop.call_soon(host.feed, data), name="host")
    logger = logging.getLogger("lmbridge.test.levels")
    logger.setLevel(logging.INFO)
    server = HostServer(host, log_levels=LogLevels(logger))
    r = Rig(server, extension)

    def on_parts(params: Any) -> None:
        r.parts.setdefault(params["requestId"], []).extend(params["parts"])

    extension.on_notification("chat/parts", on_parts)
    extension.on_notification("log", r.logs.append)
    extension.on_notification("models/changed", lambda _p: None)
    GATES.clear()
    CLOSED.clear()
    yield r
    for event in GATES.values():
        event.set()
    await server.aclose()
    host.connection_lost()
    extension.connection_lost()


async def wait_for(check: Callable[[], Any], timeout: float = 5.0) -> Any:
    end = asyncio.get_running_loop().time() + timeout
    while not (value := check()):
        if asyncio.get_running_loop().time() > end:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.005)
    return value


def provider_of(rig: Rig, name: str) -> Any:
    return rig.server._slots[name].loaded.provider


# ---------------------------------------------------------------------------- configure


async def test_configure_lets_running_requests_finish_on_their_provider(rig: Rig) -> None:
    await rig.init([gate("old")])
    old = provider_of(rig, "g")
    GATES["first"] = asyncio.Event()
    first, first_done = rig.start("g/gate", "first")
    await wait_for(lambda: rig.text(first) == "old:start ")

    await rig.configure([gate("new")])  # a changed entry: a new provider
    assert provider_of(rig, "g") is not old
    assert not old.closed, "closed under the running request"
    GATES["second"] = asyncio.Event()
    GATES["second"].set()
    assert await rig.chat("g/gate", "second") == "new:start new:end"  # new requests: new config

    GATES["first"].set()
    await first_done
    assert rig.text(first) == "old:start old:end"
    await wait_for(lambda: old.closed)  # closed once its last request ended, not before
    assert CLOSED == [("old", 0)]


async def test_a_removed_provider_is_closed_after_its_requests_and_refuses_new_ones(
    rig: Rig,
) -> None:
    await rig.init(
        [gate("old"), {"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider"}]
    )
    old = provider_of(rig, "g")
    GATES["a"], GATES["b"] = asyncio.Event(), asyncio.Event()
    a, a_done = rig.start("g/gate", "a")
    b, b_done = rig.start("g/gate", "b")
    await wait_for(lambda: rig.text(a) and rig.text(b))
    await rig.configure([{"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider"}])
    with pytest.raises(RemoteError, match="no provider named 'g'"):
        await rig.chat("g/gate", "c")
    GATES["a"].set()
    await a_done
    await asyncio.sleep(0.02)
    assert not old.closed, "one request still runs"
    GATES["b"].set()
    await b_done
    await wait_for(lambda: old.closed)
    assert CLOSED == [("old", 0)]
    assert rig.text(b) == "old:start old:end"


async def test_an_unchanged_provider_is_kept_with_its_catalog(rig: Rig) -> None:
    with ReplayServer() as up:
        up.route("GET", "/v1/models", Reply.json({"data": [{"id": "m"}]}))
        up.route("POST", "/v1/chat/completions", Reply.sse(_sse(["a", "b"])))
        entry = {"name": "p", "format": "chat-completions", "baseUrl": up.url + "/v1",
                 "apiKeyEnv": "LMB_RELOAD_UNSET"}  # fmt: skip
        await rig.init([entry, gate("x")], {"p": "sk-one"}, logLevel="info")
        listed = await rig.extension.request("models/list", {"silent": True})
        assert [m["id"] for m in listed["models"]] == ["p/m", "g/gate"]
        kept, gated = provider_of(rig, "p"), provider_of(rig, "g")
        assert isinstance(kept, UpstreamProvider)
        assert await rig.chat("p/m", "hi") == "ab"
        estimators = dict(kept._estimators)
        # the same entries and secrets; only the host's own settings and the order differ
        await rig.configure([gate("x"), entry], {"p": "sk-one"}, logLevel="debug", apps=[])
        assert provider_of(rig, "p") is kept and provider_of(rig, "g") is gated
        assert not kept.client.http.is_closed and not gated.closed
        await rig.extension.request("models/list", {"silent": True})
        assert await rig.chat("p/m", "again") == "ab"
        assert len(up.requests_to("/v1/models")) == 1, "the catalog was kept, not fetched again"
        assert kept._estimators == estimators
        # a new secret is a new provider; the old one is closed (nothing runs on it)
        await rig.configure([gate("x"), entry], {"p": "sk-two"})
        assert provider_of(rig, "p") is not kept
        assert kept.client.http.is_closed
        assert await rig.chat("p/m", "with the new key") == "ab"
        keys = [r.headers.get("authorization") for r in up.requests_to("/v1/chat/completions")]
        assert keys == ["Bearer sk-one", "Bearer sk-one", "Bearer sk-two"]


async def test_an_upstream_stream_survives_a_configure_with_a_new_key(rig: Rig) -> None:
    words = [f"w{i} " for i in range(30)]
    with ReplayServer() as up:
        up.route("POST", "/v1/chat/completions", Reply.sse(_sse(words), delay=0.02))
        entry = {"name": "p", "format": "chat-completions", "baseUrl": up.url + "/v1",
                 "models": ["m"]}  # fmt: skip
        await rig.init([entry], {"p": "sk-one"})
        old = provider_of(rig, "p")
        ident, done = rig.start("p/m", "hi")
        await wait_for(lambda: len(rig.parts[ident]) >= 3)
        await rig.configure([entry], {"p": "sk-two"})
        result = await asyncio.wait_for(done, 10)
        assert result["finishReason"] == "stop"
        assert rig.text(ident) == "".join(words)
        await wait_for(lambda: old.client.http.is_closed)
        (request,) = up.requests_to("/v1/chat/completions")
        assert not request.closed_early


# ---------------------------------------------------------------------------- names


async def test_a_repeated_name_keeps_the_first_provider_working(rig: Rig) -> None:
    echo = {"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider", "delay": 0}
    init = await rig.init([gate("first"), echo, gate("second")])
    assert init["providers"][0] == {"name": "g", "ok": True}
    dup = init["providers"][2]
    assert dup["name"] == "g" and not dup["ok"]
    assert "providers[2] ('g'): the name 'g' is already used by providers[0]" in dup["error"]
    assert any("already used by providers[0]" in m for m in rig.errors())
    listed = await rig.extension.request("models/list", {"silent": True})
    assert [m["id"] for m in listed["models"]] == ["g/gate", "echo/echo"]
    GATES["go"] = asyncio.Event()
    GATES["go"].set()
    assert await rig.chat("g/gate", "go") == "first:start first:end"
    first = provider_of(rig, "g")
    await rig.configure([echo])  # the first one is still the host's to close
    assert first.closed and CLOSED == [("first", 0)]


# ---------------------------------------------------------------------------- listing errors


async def test_a_model_list_that_failed_is_the_error_of_requests_to_its_models(rig: Rig) -> None:
    with ReplayServer() as up:
        up.route("GET", "/v1/models", Reply.error(401, {"error": {"message": "Unauthorized"}}))
        entry = {"name": "p", "format": "chat-completions", "baseUrl": up.url + "/v1"}
        await rig.init([entry])
        listed = await rig.extension.request("models/list", {"silent": True})
        assert listed["models"] == []
        (reported,) = [m for m in rig.errors() if "could not list its models" in m]
        assert "provider 'p'" in reported and "401" in reported
        for method, params in (
            ("chat/response", {"modelId": "p/m", "messages": [], "options": {}}),
            ("tokens/count", {"modelId": "p/m", "text": "x"}),
        ):
            with pytest.raises(RemoteError) as info:
                await rig.extension.request(method, params)
            assert info.value.data == {"languageModelError": "NoPermissions"}
            assert "401" in str(info.value) and "offers: none" not in str(info.value)
            assert "lmbridge: Set API Key" in str(info.value)
        await rig.extension.request("models/list", {"silent": True})
        assert len([m for m in rig.errors() if "could not list" in m]) == 1, "reported once"


# ---------------------------------------------------------------------------- log level


async def test_the_log_level_setting_applies_at_initialize_and_configure(rig: Rig) -> None:
    logger = rig.server.log_levels.logger
    await rig.init([], logLevel="debug")
    assert logger.level == logging.DEBUG
    await rig.configure([], logLevel="error")
    assert logger.level == logging.ERROR
    await rig.configure([])  # not sent: left as it is
    assert logger.level == logging.ERROR
    await rig.configure([], logLevel="loud")
    assert logger.level == logging.ERROR
    assert any(m.startswith("lmbridge.logLevel: 'loud' is not a log level") for m in rig.errors())
    rig.server.log_levels.pinned = True  # --log-level was given
    await rig.configure([], logLevel="debug")
    assert logger.level == logging.ERROR


# ---------------------------------------------------------------------------- the process

KEY = "sk-loglevel-secret-3c1f9a"


async def _host_stderr(tmp_path: Path, args: list[str], env_level: str | None,
                       settings: dict[str, Any]) -> str:  # fmt: skip
    env = dict(os.environ)
    env.pop("LMBRIDGE_LOG_LEVEL", None)
    if env_level is not None:
        env["LMBRIDGE_LOG_LEVEL"] = env_level
    path = tmp_path / "stderr.txt"
    with ReplayServer() as up:
        up.route("POST", "/v1/chat/completions", Reply.error(401, {"error": {"message": "bad"}}))
        entry = {"name": "p", "format": "chat-completions", "baseUrl": up.url + "/v1",
                 "models": ["m"]}  # fmt: skip
        with path.open("wb") as err:
            async with HostClient.start(args, env=env, stderr=err, record=True) as host:
                await host.initialize(providers=[entry], secrets={"p": KEY}, settings=settings)
                with pytest.raises(RemoteError):
                    await host.chat("p/m", [ChatMessage.user("hello")])
                out = bytes(host.received or b"")
        assert up.requests_to("/v1/chat/completions")[0].headers["authorization"] == f"Bearer {KEY}"
    text = path.read_text(errors="replace")
    assert KEY not in text and KEY.encode() not in out  # whatever the level
    return text


async def test_the_host_process_honours_log_level_setting_env_and_flag(tmp_path: Path) -> None:
    by_setting = await _host_stderr(tmp_path, [], "error", {"logLevel": "debug"})
    assert " DEBUG lmbridge" in by_setting and "log level: debug (lmbridge.logLevel)" in by_setting
    assert "lmbridge host ready" not in by_setting  # at "error" until initialize
    by_env = await _host_stderr(tmp_path, [], "debug", {})
    assert " DEBUG lmbridge" in by_env
    quiet = await _host_stderr(tmp_path, [], "info", {"logLevel": "error"})
    assert "lmbridge host ready" in quiet  # at "info" until initialize
    after = quiet.split("log level: error (lmbridge.logLevel)")[1]
    assert after.strip() == "", after
    pinned = await _host_stderr(
        tmp_path, ["--log-level", "warning"], "debug", {"logLevel": "debug"}
    )
    assert " DEBUG " not in pinned and " INFO " not in pinned


def _sse(words: list[str]) -> bytes:
    events = [
        {"id": "c", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]}
        for w in words
    ]  # fmt: skip
    events.append(
        {"id": "c", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    )  # fmt: skip
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return body.encode()
