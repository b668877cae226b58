"""VS Code reloading its window with requests in flight, as the host sees it: the extension
host goes away without a word (no ``shutdown``, no ``exit``), its end of the pipes closes.
With an agent's stream in flight through the loopback endpoint and a chat in flight on the
provider side, the host exits by itself (no orphan), removes its endpoint file (nothing
stale), and the agent's stream ends with an error event or a closed connection, not a hang.
docs/reliability.md."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import httpx

from lmbridge.client.testing import FakeBridge, fake_model, serve_bridge_over_rpc
from lmbridge.host.client import HostClient
from lmbridge.parts import ChatMessage, TextPart

GPT = fake_model("gpt-4o", vendor="copilot", family="gpt-4o")


async def test_the_window_going_away_mid_request_leaves_no_host_and_no_file(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LMBRIDGE_ENDPOINT_FILE"}
    bridge = FakeBridge([GPT])
    bridge.script(GPT.id, [TextPart("first "), 60.0, TextPart("never")])  # stays in flight
    endpoint_file = tmp_path / "endpoint.json"
    async with HostClient.start(env=env, stderr=asyncio.subprocess.DEVNULL) as host:
        serve_bridge_over_rpc(host.connection, bridge)  # the extension's lm/* handlers
        echo = {"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider", "delay": 5}
        await host.initialize(
            providers=[echo], storagePath=str(tmp_path), settings={"endpointEnabled": True}
        )
        for _ in range(500):
            if endpoint_file.exists():
                break
            await asyncio.sleep(0.02)
        info = json.loads(endpoint_file.read_text())
        chat = host.start_chat("echo/echo", [ChatMessage.user("a slow answer " * 5)])

        async def agent() -> tuple[list[str], BaseException | None]:
            lines: list[str] = []
            body = {"model": "gpt-4o", "stream": True,
                    "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
            headers = {"authorization": f"Bearer {info['token']}"}
            try:
                async with httpx.AsyncClient(trust_env=False, timeout=30) as http:  # noqa: SIM117
                    async with http.stream(
                        "POST", f"{info['url']}/v1/chat/completions", json=body, headers=headers
                    ) as response:
                        async for line in response.aiter_lines():
                            lines.append(line)
            except httpx.HTTPError as exc:
                return lines, exc
            return lines, None

        streaming = asyncio.ensure_future(agent())
        for _ in range(500):  # both requests in flight
            if bridge.requests and chat.parts:
                break
            await asyncio.sleep(0.02)
        assert bridge.requests and chat.parts
        # the window goes: the extension host's pipes close, nothing is said
        host.process.stdin.close()  # type: ignore[union-attr]
        assert await asyncio.wait_for(host.process.wait(), 20) == 0  # no orphaned host
        lines, error = await asyncio.wait_for(streaming, 20)  # the agent is not left hanging
        assert not endpoint_file.exists()  # no stale endpoint file
    text = "\n".join(lines)
    assert "first " in text  # what was streamed reached the agent
    assert "[DONE]" not in text  # not passed off as a whole answer
    assert error is not None or '"error"' in text, text  # a clean error, one way or the other
