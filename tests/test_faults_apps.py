"""Apps (``lmbridge.apps``) that misbehave, in the real host process with the loopback endpoint
open: one that raises, one that fails to import, one that waits for ever, one that ignores its
cancellation, one that leaves tasks behind (one of them failing). The host keeps answering,
the endpoint keeps serving, each problem is reported, and shutdown still ends the process and
removes the endpoint file. docs/reliability.md."""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
from pathlib import Path

import httpx

from lmbridge.host.client import HostClient
from lmbridge.parts import ChatMessage, TextPart

APPS = {
    "raises.py": """
        async def main(transport):
            raise RuntimeError("the app broke")
        """,
    "broken_import.py": """
        import no_such_module_anywhere_for_lmbridge
        async def main(transport):
            pass
        """,
    "forever.py": """
        import asyncio
        async def main(transport):
            await asyncio.Event().wait()
        """,
    "stubborn.py": """
        import asyncio
        async def main(transport):
            while True:
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    pass  # refuses to stop
        """,
    "leaky.py": """
        import asyncio
        async def spin():
            while True:
                await asyncio.sleep(0.01)
        async def fail():
            raise ValueError("a leaked task failed")
        async def main(transport):
            for _ in range(20):
                asyncio.ensure_future(spin())
            asyncio.ensure_future(fail())
        """,
}


async def test_misbehaving_apps_take_neither_the_host_nor_the_endpoint_with_them(
    tmp_path: Path,
) -> None:
    specs = []
    for name, source in APPS.items():
        (tmp_path / name).write_text(textwrap.dedent(source))
        specs.append(str(tmp_path / name))
    env = {k: v for k, v in os.environ.items() if k != "LMBRIDGE_ENDPOINT_FILE"}
    endpoint_file = tmp_path / "endpoint.json"
    async with HostClient.start(env=env, stderr=asyncio.subprocess.DEVNULL) as client:
        await client.initialize(
            providers=[{"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider"}],
            storagePath=str(tmp_path),
            settings={"apps": specs, "endpointEnabled": True},
        )
        for _ in range(500):  # the apps run: wait until each failure has been reported
            messages = " | ".join(m["message"] for m in client.logs)
            if "the app broke" in messages and "no_such_module" in messages:
                break
            await asyncio.sleep(0.02)
        assert "the app broke" in messages and "no_such_module" in messages, messages
        # the host still answers, a chat still streams
        models = await client.request("models/list", {"silent": True})
        assert [m["id"] for m in models["models"]] == ["echo/echo"]
        parts, _ = await client.chat("echo/echo", [ChatMessage.user("still here")])
        assert "You said: still here" in "".join(
            p.value for p in parts if isinstance(p, TextPart)
        )
        # the endpoint still serves: it checks the token and answers
        info = json.loads(endpoint_file.read_text())
        async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
            refused = await http.get(f"{info['url']}/v1/models")
            assert refused.status_code == 401
        client.process.terminate()
        # the app that refuses to stop, and the tasks left behind, do not hold the exit up
        assert await asyncio.wait_for(client.process.wait(), 20) == 0
    assert not endpoint_file.exists()
