"""An upstream that fails mid-stream, through the real host (``python -m lmbridge host``):
reset, stalled past the timeout, garbage, cut before ``[DONE]``, an HTML page. What was
streamed stays with the caller, the request ends with an error that says what happened, the
upstream connection is closed, and the next request works. docs/reliability.md."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lmbridge.host.client import HostClient
from lmbridge.host.jsonrpc import RemoteError
from lmbridge.parts import ChatMessage, TextPart
from support.fault_server import FaultServer

TIMEOUT = 1.0  # the provider's read timeout, seconds (the stall lasts until the client closes)


@pytest.fixture
def upstream() -> FaultServer:
    with FaultServer() as server:
        yield server  # type: ignore[misc]


@pytest.fixture
async def host(upstream: FaultServer, tmp_path: Path) -> AsyncIterator[HostClient]:
    provider = {
        "name": "up",
        "format": "chat-completions",
        "baseUrl": f"{upstream.url}/v1",
        "models": ["m"],
        "timeout": TIMEOUT,
        "retry": {"maxAttempts": 1},
    }
    with (tmp_path / "stderr.txt").open("wb") as err:
        async with HostClient.start(["--log-level", "debug"], stderr=err) as client:
            result = await client.initialize(providers=[provider], storagePath=str(tmp_path))
            assert [p["ok"] for p in result["providers"]] == [True], result
            yield client


def text_of(parts: list[object]) -> str:
    return "".join(p.value for p in parts if isinstance(p, TextPart))


async def chat(host: HostClient) -> tuple[str, RemoteError | None]:
    call = host.start_chat("up/m", [ChatMessage.user("hi")])
    try:
        await asyncio.wait_for(call.result(), 30)
    except RemoteError as exc:
        return text_of(call.parts), exc
    return text_of(call.parts), None


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("reset", "connection"),
        ("stall", "stopped sending"),
        ("garbage", "not valid JSON"),
        ("cut", "ended"),
    ],
)
async def test_a_fault_mid_stream_keeps_what_was_streamed_and_the_next_request_works(
    host: HostClient, upstream: FaultServer, fault: str, said: str
) -> None:
    upstream.faults = [fault, "ok"]  # type: ignore[list-item]
    text, error = await chat(host)
    assert text == "Hello"  # what was streamed before the fault reached the caller
    assert error is not None, f"{fault}: the request ended without an error"
    assert said in error.message, error.message
    if fault in ("stall", "garbage"):  # the upstream holds the connection: the host closes it
        assert await asyncio.to_thread(upstream.connections[0].client_closed.wait, 10)
    text, error = await chat(host)
    assert (text, error) == ("Hello there", None)


async def test_an_html_page_instead_of_an_event_stream_is_named(
    host: HostClient, upstream: FaultServer
) -> None:
    upstream.faults = ["html", "ok"]
    text, error = await chat(host)
    assert text == ""
    assert error is not None and "text/html" in error.message, error
    text, error = await chat(host)
    assert (text, error) == ("Hello there", None)


def test_the_fault_server_resets_for_real() -> None:
    """The reset fault is a TCP reset (the client's read fails), not an orderly close."""
    with FaultServer() as upstream:
        upstream.faults = ["reset"]
        out = subprocess.run(
            ["curl", "-sS", "-N", "-X", "POST", "-d", "{}", f"{upstream.url}/v1/chat/completions"],
            capture_output=True,
            text=True,
            check=False,
        )
    assert out.returncode != 0 and "reset" in out.stderr.lower(), (out.returncode, out.stderr)


async def test_a_cancel_mid_stream_answers_cancelled_and_closes_the_connection(
    host: HostClient, upstream: FaultServer
) -> None:
    """The cancel closes the upstream response under the stream: the stream's end that follows
    is the caller's doing, not an upstream that stopped (-32800, not an error)."""
    upstream.faults = ["stall", "ok"]
    got = asyncio.Event()
    call = host.start_chat("up/m", [ChatMessage.user("hi")], on_parts=lambda parts: got.set())
    await asyncio.wait_for(got.wait(), 30)
    host.cancel(call)
    with pytest.raises(RemoteError) as info:
        await asyncio.wait_for(call.result(), 30)
    assert info.value.code == -32800, info.value
    assert await asyncio.to_thread(upstream.connections[0].client_closed.wait, 10)
    text, error = await chat(host)
    assert (text, error) == ("Hello there", None)
