"""The real host (a subprocess) against upstreams that try to exhaust it or hold up the others.

Any provider's ``baseUrl`` is contacted when VS Code lists models, with no user action, so each
attack here is one provider pointed at a hostile server on 127.0.0.1
(tests/support/hostile_upstream.py), beside the user's honest providers. For each: the host's
peak memory (``VmHWM`` of its process) stays under :data:`PEAK_BOUND`, the request fails with an
error that says what happened, and the user's own providers are still listed and answering.

Without the defences the same runs took the host to 1.2-9.4 GB (gzip bomb), to as much as the
server sent (endless line, endless event: the server stops at :data:`SENT` here), kept every
model out of the list for as long as the trickle went on, and let a deep tool call through to
poison the next request.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from lmbridge.host.client import HostClient
from lmbridge.host.jsonrpc import RemoteError
from lmbridge.parts import ChatMessage, TextPart, ToolCallPart
from support.hostile_upstream import GOOD_TEXT, HostileUpstream

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

PEAK_BOUND = 300
"""MiB the host's peak memory stays under (a memory bound, not a timing)."""

SENT = 2 << 30
"""The most an endless answer sends: the safety net for a host without the defences."""

GUARD = 120.0
"""Seconds a call may take before the test gives up (a hang is the failure it guards)."""


@pytest.fixture(scope="module")
def server() -> Iterator[HostileUpstream]:
    with HostileUpstream(limit=SENT, depth=300) as s:
        yield s


def peak_mib(pid: int) -> int:
    """The process's peak resident memory (``VmHWM``), in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmHWM")


def entry(name: str, base_url: str, models: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "format": "chat-completions",
        "baseUrl": base_url,
        "retry": {"maxAttempts": 1},
    }
    if models is not None:
        out["models"] = models
    return out


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}


@pytest.fixture
async def host(server: HostileUpstream) -> AsyncIterator[HostClient]:
    async with HostClient.start([], env=clean_env(), stderr=asyncio.subprocess.DEVNULL) as client:
        yield client


async def start(host: HostClient, server: HostileUpstream, evil: dict[str, Any]) -> None:
    """The user's two honest providers (one listed in the settings, one with a catalog) and
    the hostile one."""
    mine = entry("mine", server.url + "/good", ["m"])
    listed = entry("listed", server.url + "/good")
    result = await host.initialize(providers=[mine, evil, listed])
    assert all(p["ok"] for p in result["providers"]), result


async def listing(host: HostClient) -> dict[str, Any]:
    result: dict[str, Any] = await asyncio.wait_for(
        host.request("models/list", {"silent": True}), GUARD
    )
    return result


async def assert_the_others_answer(host: HostClient, *, list_again: bool = True) -> None:
    if list_again:
        ids = [m["id"] for m in (await listing(host))["models"]]
        assert "mine/m" in ids and "listed/m" in ids
    parts, _ = await asyncio.wait_for(host.chat("mine/m", [ChatMessage.user("hi")]), GUARD)
    assert "".join(p.value for p in parts if isinstance(p, TextPart)) == GOOD_TEXT


def logged(host: HostClient) -> str:
    return "\n".join(str(entry.get("message")) for entry in host.logs)


@pytest.mark.parametrize("kind", ["bomb", "bomb2"], ids=["gzip-bomb", "gzip-in-gzip"])
async def test_a_compressed_catalog_bomb_is_stopped_at_the_cap(
    host: HostClient, server: HostileUpstream, kind: str
) -> None:
    await start(host, server, entry("evil", f"{server.url}/{kind}"))
    result = await listing(host)
    ids = [m["id"] for m in result["models"]]
    assert ids == ["mine/m", "listed/m"]  # the others are listed; the bomb brought nothing
    assert peak_mib(host.process.pid) < PEAK_BOUND
    said = logged(host)
    assert "provider 'evil' could not list its models" in said
    assert ("passed 8,388,608 bytes" in said) or ("encoded several times" in said)
    await assert_the_others_answer(host)


async def test_a_trickling_catalog_does_not_hold_up_the_other_providers(
    host: HostClient, server: HostileUpstream
) -> None:
    await start(host, server, entry("evil", f"{server.url}/trickle"))
    result = await listing(host)
    assert [m["id"] for m in result["models"]] == ["mine/m", "listed/m"]
    assert [late["provider"] for late in result["late"]] == ["evil"]
    assert "did not list its models within 10 s" in logged(host)
    await assert_the_others_answer(host, list_again=False)
    assert peak_mib(host.process.pid) < PEAK_BOUND


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("endless-line", "grew past 16,777,216 bytes without ending"),
        ("huge-event", "grew past 16,777,216 bytes without ending"),
        ("huge-answer", "the answer passed 67,108,864 bytes without ending"),
    ],
)
async def test_an_answer_without_end_fails_the_request_at_its_cap(
    host: HostClient, server: HostileUpstream, kind: str, said: str
) -> None:
    await start(host, server, entry("evil", f"{server.url}/{kind}", ["m"]))
    with pytest.raises(RemoteError) as info:
        await asyncio.wait_for(host.chat("evil/m", [ChatMessage.user("hi")]), GUARD)
    assert said in info.value.message
    assert peak_mib(host.process.pid) < PEAK_BOUND
    await assert_the_others_answer(host)


async def test_tool_arguments_deeper_than_the_protocol_carries_fail_the_answer_that_brings_them(
    host: HostClient, server: HostileUpstream
) -> None:
    await start(host, server, entry("evil", f"{server.url}/deep-args", ["m"]))
    call = host.start_chat("evil/m", [ChatMessage.user("hi")])
    with pytest.raises(RemoteError) as info:
        await asyncio.wait_for(call.result(), GUARD)
    assert "the model produced a broken tool call" in info.value.message
    assert "nested more than 100 levels deep" in info.value.message
    assert not [p for p in call.parts if isinstance(p, ToolCallPart)]
    # nothing poisoned: the next request (the user's) goes through
    await assert_the_others_answer(host)
