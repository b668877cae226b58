"""The endpoint file when windows come and go: two real hosts (two VS Code windows) sharing
the extension's storage folder, one of them killed. The file always names a live host or is
gone, and a client reading it says what is wrong. docs/reliability.md."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest

from lmbridge.client.discovery import EndpointNotFoundError, read_endpoint_file
from lmbridge.host.client import HostClient

ENV = {k: v for k, v in os.environ.items() if k != "LMBRIDGE_ENDPOINT_FILE"}


async def wait_until(check: object, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not check():  # type: ignore[operator]
        assert loop.time() < end, "timed out"
        await asyncio.sleep(0.02)


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as s:
        yield s


async def open_window(stack: AsyncExitStack, storage: Path) -> HostClient:
    """A host as a window's extension starts it, with the loopback endpoint on."""
    host = await stack.enter_async_context(
        HostClient.start(env=ENV, stderr=asyncio.subprocess.DEVNULL)
    )
    await host.initialize(providers=[], storagePath=str(storage), settings={"endpointEnabled": True})
    await wait_until(lambda: _pid_in(storage / "endpoint.json") == host.process.pid)
    return host


def _pid_in(file: Path) -> int | None:
    try:
        return json.loads(file.read_text()).get("pid")  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


async def answers(url: str) -> bool:
    async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
        return (await http.get(f"{url}/v1/models")).status_code == 401  # alive, checks tokens


async def test_two_windows_share_the_file_and_each_leaves_it_right(
    tmp_path: Path, stack: AsyncExitStack
) -> None:
    file = tmp_path / "endpoint.json"
    first = await open_window(stack, tmp_path)
    first_info = read_endpoint_file(file)
    second = await open_window(stack, tmp_path)  # the newer window's host takes the file
    info = read_endpoint_file(file)
    assert info.pid == second.process.pid and info.url != first_info.url
    assert await answers(info.url) and await answers(first_info.url)
    # the first window closes: the file is not its own any more, so it stays, still right
    first.process.terminate()
    assert await asyncio.wait_for(first.process.wait(), 10) == 0
    assert read_endpoint_file(file).pid == second.process.pid
    # the second closes: its file goes with it, and a client says where it looked
    second.process.terminate()
    assert await asyncio.wait_for(second.process.wait(), 10) == 0
    assert not file.exists()
    with pytest.raises(EndpointNotFoundError, match=f"no lmbridge endpoint file at {file}"):
        read_endpoint_file(file)


async def test_when_the_newer_window_closes_first_the_older_writes_its_file_again(
    tmp_path: Path, stack: AsyncExitStack
) -> None:
    file = tmp_path / "endpoint.json"
    older = await open_window(stack, tmp_path)
    older_url = read_endpoint_file(file).url
    newer = await open_window(stack, tmp_path)
    newer.process.terminate()  # removes its own file on the way out
    assert await asyncio.wait_for(newer.process.wait(), 10) == 0
    # the older window's endpoint still serves: within its file check (5 s) it is findable again
    await wait_until(lambda: _pid_in(file) == older.process.pid, timeout=20)
    info = read_endpoint_file(file)
    assert info.url == older_url and await answers(info.url)


async def test_a_killed_host_leaves_a_file_that_clients_call_stale(
    tmp_path: Path, stack: AsyncExitStack
) -> None:
    file = tmp_path / "endpoint.json"
    host = await open_window(stack, tmp_path)
    pid = host.process.pid
    host.process.send_signal(signal.SIGKILL)  # no clean-up at all
    await asyncio.wait_for(host.process.wait(), 10)
    assert _pid_in(file) == pid  # left behind
    with pytest.raises(EndpointNotFoundError, match=rf"is stale \(process {pid} is not running\)"):
        read_endpoint_file(file)
    # the next window's host replaces it
    again = await open_window(stack, tmp_path)
    assert read_endpoint_file(file).pid == again.process.pid
