"""The extension's side of the protocol, in Python: start a host and talk to it.

Used by ``lmbridge demo``, the tests and the benchmarks, so they exercise the real process
over real pipes exactly as the VS Code extension does::

    async with HostClient.start(["--config", "providers.toml"]) as host:
        await host.initialize()
        models = await host.request("models/list", {"silent": True})
        result = await host.chat("echo/echo", [ChatMessage.user("hi")], on_parts=print)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..parts import (
    ChatMessage,
    ChatRequestOptions,
    ResponsePart,
    message_to_wire,
    options_to_wire,
    parts_from_wire,
)
from .jsonrpc import JsonRpcConnection, RequestId

__all__ = ["ChatCall", "HostClient"]


@dataclass
class ChatCall:
    """One ``chat/response`` in flight: its id, the parts so far, and the final result."""

    id: RequestId
    future: asyncio.Future[Any]
    parts: list[ResponsePart] = field(default_factory=list)
    notifications: int = 0
    on_parts: Callable[[list[ResponsePart]], None] | None = None

    async def result(self) -> Any:
        """The ``chat/response`` result (raises :class:`RemoteError` on an error answer)."""
        return await self.future


class HostClient:
    """A running ``lmbridge host`` subprocess and the JSON-RPC connection to it."""

    def __init__(self, process: asyncio.subprocess.Process, *, record: bool = False) -> None:
        self.process = process
        self.received: bytearray | None = bytearray() if record else None
        """Every byte the host wrote to stdout, when started with ``record=True``."""
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self.connection = JsonRpcConnection(self._stdin.write, name="host")
        self.logs: list[dict[str, Any]] = []
        """``log`` notifications received."""
        self.models_changed = 0
        """``models/changed`` notifications received."""
        self._calls: dict[RequestId, ChatCall] = {}
        self.stray_parts: list[dict[str, Any]] = []
        """``chat/parts`` for requests that were not (or no longer) in flight."""
        self.connection.on_notification("chat/parts", self._on_parts)
        self.connection.on_notification("log", self.logs.append)
        self.connection.on_notification("models/changed", self._on_models_changed)
        self._reader = asyncio.ensure_future(self._read(process.stdout))

    @classmethod
    @contextlib.asynccontextmanager
    async def start(
        cls,
        args: Sequence[str] = (),
        *,
        env: dict[str, str] | None = None,
        stderr: Any = None,
        python: str | None = None,
        record: bool = False,
        own_session: bool = False,
    ) -> AsyncIterator[HostClient]:
        """Start ``python -m lmbridge host ARGS``; shut it down on exit from the block.

        ``stderr`` is passed to the subprocess (a file, ``DEVNULL``; default: inherited).
        ``own_session`` starts it in a session of its own (POSIX), so that a Ctrl-C in the
        terminal reaches the caller only, which then cancels its request (``lmbridge chat``).
        """
        process = await asyncio.create_subprocess_exec(
            python or sys.executable,
            "-m",
            "lmbridge",
            "host",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=env if env is not None else dict(os.environ),
            start_new_session=own_session,
        )
        client = cls(process, record=record)
        try:
            yield client
        finally:
            await client.close()

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        while True:
            data = await stdout.read(65536)
            if not data:
                break
            if self.received is not None:
                self.received += data
            self.connection.feed(data)
        self.connection.connection_lost()

    def _on_parts(self, params: Any) -> None:
        call = self._calls.get(params.get("requestId"))
        if call is None:
            self.stray_parts.append(params)
            return
        parts = parts_from_wire(params.get("parts"), "chat/parts.parts")
        call.notifications += 1
        call.parts.extend(parts)  # type: ignore[arg-type]
        if call.on_parts is not None:
            call.on_parts(parts)  # type: ignore[arg-type]

    def _on_models_changed(self, _params: Any) -> None:
        self.models_changed += 1

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and await the result."""
        return await self.connection.request(method, params)

    async def initialize(self, **params: Any) -> Any:
        """Send ``initialize`` (client info filled in)."""
        return await self.request(
            "initialize", {"clientName": "lmbridge-python", "clientVersion": "0", **params}
        )

    def start_chat(
        self,
        model_id: str,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions | None = None,
        on_parts: Callable[[list[ResponsePart]], None] | None = None,
    ) -> ChatCall:
        """Send ``chat/response``; the parts collect in the returned :class:`ChatCall`."""
        params = {
            "modelId": model_id,
            "messages": [message_to_wire(m) for m in messages],
            "options": options_to_wire(options or ChatRequestOptions()),
        }
        ident, fut = self.connection.send_request("chat/response", params)
        call = ChatCall(ident, fut, on_parts=on_parts)
        self._calls[ident] = call
        fut.add_done_callback(lambda _f: self._calls.pop(ident, None))
        return call

    async def chat(
        self,
        model_id: str,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions | None = None,
        on_parts: Callable[[list[ResponsePart]], None] | None = None,
    ) -> tuple[list[ResponsePart], Any]:
        """Run one ``chat/response``; return its parts and its result."""
        call = self.start_chat(model_id, messages, options, on_parts)
        result = await call.result()
        return call.parts, result

    def cancel(self, call: ChatCall) -> None:
        """Send ``$/cancelRequest`` for ``call``."""
        self.connection.cancel_request(call.id)

    async def close(self, timeout: float = 5.0) -> int:
        """``shutdown`` + ``exit``, then wait for the process (killed after ``timeout``)."""
        if self.process.returncode is None and not self.connection.closed.is_set():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.request("shutdown", {}), timeout)
            self.connection.notify("exit")
            with contextlib.suppress(Exception):
                await self._stdin.drain()
                self._stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), timeout)
        except asyncio.TimeoutError:
            self.process.kill()
            await self.process.wait()
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(self._reader, 1.0)
        return self.process.returncode or 0
