"""Apps that block their event loop (a synchronous sleep, a CPU loop in a coroutine) stall
themselves only: each app runs on a loop and thread of its own (lmbridge.host.app_threads), so
the host goes on answering VS Code's chat requests and the loopback endpoint, and the app's own
work, through its transport, completes once it stops blocking. docs/reliability.md."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from lmbridge.client.testing import FakeBridge, fake_model, serve_bridge_over_rpc
from lmbridge.host.client import HostClient
from lmbridge.parts import ChatMessage, TextPart

GPT = fake_model("gpt-4o-id", vendor="copilot", family="gpt-4o")

# Blocks its loop until the test creates "<name>.release", then uses VS Code's model through
# its transport. The "blocking" file says it is inside the blocking part.
BLOCKER = """
import json, sys, time
from pathlib import Path
from lmbridge.client import LanguageModelClient

async def main(transport):
    me = Path(__file__)
    me.with_suffix(".blocking").write_text("yes")
    while not me.with_suffix(".release").exists():
        {block}
    client = LanguageModelClient()
    response = await client.send_request(
        [{{"role": 1, "content": [{{"kind": "text", "value": "from " + me.stem}}], "name": None}}]
    )
    me.with_suffix(".done").write_text(json.dumps(
        {{"text": await response.text(), "same_transport": client.transport is transport}}))
"""
SLEEPER = BLOCKER.format(block="time.sleep(0.01)  # a synchronous sleep: no await")
SPINNER = BLOCKER.format(block="sum(range(20000))  # CPU work: no await")
STUCK = """
import time
from pathlib import Path

async def main(transport):
    Path(__file__).with_suffix(".blocking").write_text("yes")
    time.sleep(3600)  # blocks its loop for good: it cannot even see its cancellation
"""


async def wait_until(check: Callable[[], Any], what: str, timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{what}: never")


async def wait_for_file(path: Path) -> None:
    await wait_until(path.exists, f"{path.name} appears")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
async def test_apps_that_block_their_loop_leave_the_host_and_the_endpoint_answering(
    tmp_path: Path,
) -> None:
    apps = {}
    for name, source in {"sleeper": SLEEPER, "spinner": SPINNER, "stuck": STUCK}.items():
        apps[name] = tmp_path / f"{name}.py"
        apps[name].write_text(textwrap.dedent(source))
    env = {k: v for k, v in os.environ.items() if k != "LMBRIDGE_ENDPOINT_FILE"}
    endpoint_file = tmp_path / "endpoint.json"
    bridge = FakeBridge([GPT])
    async with HostClient.start(env=env, stderr=asyncio.subprocess.DEVNULL) as client:
        serve_bridge_over_rpc(client.connection, bridge)  # the extension's lm/* side
        await asyncio.wait_for(  # a bound for a host that stopped answering, not a timing
            client.initialize(
                providers=[{"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider"}],
                storagePath=str(tmp_path),
                settings={"apps": [str(p) for p in apps.values()], "endpointEnabled": True},
            ),
            30,
        )
        for path in apps.values():
            await wait_for_file(path.with_suffix(".blocking"))
        # Every app is inside its blocking part now, and the two that can leave it wait for
        # their release file, which does not exist yet: whatever is answered below is
        # answered while they block.
        parts, _ = await asyncio.wait_for(
            client.chat("echo/echo", [ChatMessage.user("while they block")]), 30
        )
        assert "You said: while they block" in "".join(
            p.value for p in parts if isinstance(p, TextPart)
        )
        await wait_for_file(endpoint_file)
        info = json.loads(endpoint_file.read_text())
        async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
            answer = await http.post(
                f"{info['url']}/v1/chat/completions",
                headers={"Authorization": f"Bearer {info['token']}"},
                json={"model": "gpt-4o", "messages": [{"role": "user", "content": "endpoint"}]},
            )
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == "endpoint"
        assert [r.messages[-1].content[0].value for r in bridge.requests] == ["endpoint"]  # type: ignore[union-attr]
        assert not any(p.with_suffix(".done").exists() for p in apps.values())

        # released, each finishes its own work through its transport
        for name in ("sleeper", "spinner"):
            apps[name].with_suffix(".release").write_text("go")
        for name in ("sleeper", "spinner"):
            await wait_for_file(apps[name].with_suffix(".done"))
            done: dict[str, Any] = json.loads(apps[name].with_suffix(".done").read_text())
            assert done == {"text": f"from {name}", "same_transport": True}
        finished = {f"app {str(apps[n])!r} finished" for n in ("sleeper", "spinner")}
        await wait_until(
            lambda: finished <= {m["message"] for m in client.logs}, "both apps finish"
        )

        # the app blocked for good does not hold the exit up; it is named
        client.process.terminate()
        assert await asyncio.wait_for(client.process.wait(), 30) == 0
        warned = [m["message"] for m in client.logs if m["level"] == "warning"]
        assert any(str(apps["stuck"]) in m and "did not stop" in m for m in warned), warned
    assert not endpoint_file.exists()
