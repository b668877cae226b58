"""``models/list`` gives each provider a deadline of its own: one that is slow to list is left
out of that answer and reported, the others are listed, and its models follow (a
``models/changed`` notification) when it answers. The host runs in-process here, over a pair of
JSON-RPC connections, with a short deadline; tests/test_host_hostile_upstream.py runs the real
process against a trickling upstream with the default one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from lmbridge.config import ProviderContext
from lmbridge.host.jsonrpc import JsonRpcConnection
from lmbridge.host.server import LISTING_DEADLINE, HostConnection, HostServer
from lmbridge.parts import ModelInfo
from lmbridge.provider import (
    CancellationToken,
    LanguageModelChatProvider,
    ModelInformationOptions,
    model_info,
)

GATES: dict[str, asyncio.Event] = {}
"""What each slow provider waits for before it lists (by tag)."""


class SlowProvider(LanguageModelChatProvider):
    """Lists ``<tag>-model`` once its gate opens; with ``fail``, raises then instead."""

    def __init__(self, tag: str, fail: bool = False, *, context: ProviderContext) -> None:
        super().__init__()
        self.tag = tag
        self.fail = fail

    async def provide_language_model_chat_information(
        self, options: ModelInformationOptions, token: CancellationToken
    ) -> list[ModelInfo]:
        await GATES.setdefault(self.tag, asyncio.Event()).wait()
        if self.fail:
            raise RuntimeError(f"{self.tag} gave up")
        return [model_info(f"{self.tag}-model")]


def slow(tag: str, **extra: Any) -> dict[str, Any]:
    return {"name": tag, "provider": "test_host_listing:SlowProvider", "tag": tag, **extra}


@dataclass
class Rig:
    server: HostServer
    extension: JsonRpcConnection
    logs: list[dict[str, Any]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    logged: asyncio.Event = field(default_factory=asyncio.Event)

    def on_log(self, params: Any) -> None:
        self.logs.append(params)
        self.logged.set()

    async def listing(self) -> Any:
        return await asyncio.wait_for(self.extension.request("models/list", {"silent": True}), 30)

    def said(self) -> str:
        return "\n".join(m["message"] for m in self.logs)


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    loop = asyncio.get_running_loop()
    host: HostConnection
    extension: JsonRpcConnection
    host = HostConnection(lambda data: loop.call_soon(extension.feed, data), name="extension")
    extension = JsonRpcConnection(lambda data: loop.call_soon(host.feed, data), name="host")
    server = HostServer(host)
    server.listing_deadline = 0.3
    r = Rig(server, extension)
    extension.on_notification("log", r.on_log)
    extension.on_notification("models/changed", lambda _p: r.changed.set())
    GATES.clear()
    yield r
    for gate in GATES.values():
        gate.set()
    await server.aclose()
    host.connection_lost()
    extension.connection_lost()


async def test_a_slow_provider_is_listed_late_and_the_others_at_once(rig: Rig) -> None:
    await rig.extension.request("initialize", {"providers": [{"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider"}, slow("slow")]})
    rig.changed.clear()
    result = await rig.listing()
    assert [m["id"] for m in result["models"]] == ["echo/echo"]
    assert [late["provider"] for late in result["late"]] == ["slow"]
    assert "provider 'slow' did not list its models within 0.3 s" in rig.said()

    GATES["slow"].set()  # it answers: VS Code is told to ask again, and gets its models
    await asyncio.wait_for(rig.changed.wait(), 30)
    result = await rig.listing()
    assert [m["id"] for m in result["models"]] == ["echo/echo", "slow/slow-model"]
    assert "late" not in result


async def test_a_late_listing_that_fails_is_reported_and_changes_nothing(rig: Rig) -> None:
    await rig.extension.request("initialize", {"providers": [{"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider"}, slow("bad", fail=True)]})
    rig.changed.clear()
    result = await rig.listing()
    assert [late["provider"] for late in result["late"]] == ["bad"]
    GATES["bad"].set()
    while "bad gave up" not in rig.said():
        rig.logged.clear()
        await asyncio.wait_for(rig.logged.wait(), 30)
    assert "provider 'bad' could not list its models: RuntimeError: bad gave up" in rig.said()
    assert not rig.changed.is_set()


def test_the_default_deadline() -> None:
    assert LISTING_DEADLINE == 10.0
