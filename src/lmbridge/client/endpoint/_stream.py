"""The one streaming path every API's streamed answer goes through.

:func:`stream_parts` reads a VS Code response part by part and writes what a
:class:`PartEncoder` makes of each part (SSE events, NDJSON lines). It

- waits up to ``first_part_wait`` seconds for the first part before answering ``200``, so that
  a request that fails at once (model gone, not signed in, rate limited) gets a real HTTP error
  status, rendered by the route's API (the core's error path);
- writes the encoder's ``ping()`` whenever the model is silent for ``keepalive`` seconds, so
  clients, proxies and dead-peer detection keep the connection;
- after ``200``, turns a failure into the encoder's ``fail()`` bytes: what was streamed stays
  valid and the client's SDK raises the error;
- always closes the response: when the client goes away the core cancels the handler, and the
  close cancels the VS Code request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

from ...parts import ResponsePart
from ...timing import mark
from ._http import Api, ErrorInfo, Exchange, error_info

__all__ = ["PartEncoder", "ndjson_line", "sse_event", "stream_parts"]


def sse_event(data: Any, event: str | None = None) -> bytes:
    """One server-sent event: ``event: <name>`` (when given) and one ``data:`` line."""
    payload = json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def ndjson_line(obj: Any) -> bytes:
    """One NDJSON line."""
    return json.dumps(obj, ensure_ascii=False).encode() + b"\n"


class PartEncoder(Protocol):
    """What one API makes of a response's parts, as bytes of its stream."""

    media_type: str
    """``text/event-stream`` or ``application/x-ndjson``."""

    def start(self) -> bytes:
        """The stream's opening (may be empty)."""
        ...

    def feed(self, part: ResponsePart) -> bytes:
        """One part (may be empty)."""
        ...

    def finish(self) -> bytes:
        """The normal end (finish reason, usage, ``[DONE]``)."""
        ...

    def fail(self, error: ErrorInfo) -> bytes:
        """An error after ``200`` was sent (an error event or line)."""
        ...

    def ping(self) -> bytes:
        """Something the client ignores, written while the model is silent."""
        ...


async def stream_parts(
    out: Exchange,
    parts: AsyncIterator[ResponsePart],
    encoder: PartEncoder,
    *,
    first_part_wait: float,
    keepalive: float,
    api: Api | None = None,
) -> None:
    """Stream ``parts`` through ``encoder`` (module docstring); closes ``parts`` at the end.

    A failure before ``200`` is raised, for the core to answer in the route's error shape;
    one after it is described by ``api`` (:meth:`Api.error_info`) for ``encoder.fail``.
    """
    headers = [("content-type", encoder.media_type), ("cache-control", "no-cache")]
    pending: asyncio.Future[ResponsePart] | None = None
    try:
        pending = asyncio.ensure_future(anext(parts))
        done, _ = await asyncio.wait({pending}, timeout=first_part_wait)
        if done:
            # a failure here propagates: nothing was sent yet
            first = _result(pending)
            pending = None
            await out.start(200, headers)
            await out.write(encoder.start())
            if first is None:
                await out.write(encoder.finish())
                await out.end()
                return
            await out.write(encoder.feed(first))
            mark("endpoint.first_byte")
        else:
            await out.start(200, headers)
            await out.write(encoder.start())
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(anext(parts))
                done, _ = await asyncio.wait({pending}, timeout=keepalive)
                if not done:
                    await out.write(encoder.ping())
                    continue
                part = _result(pending)
                pending = None
                if part is None:
                    break
                data = encoder.feed(part)
                if data:
                    await out.write(data)
            await out.write(encoder.finish())
            mark("endpoint.end")
        except Exception as exc:  # the request failed mid-stream: tell the client, keep serving
            pending = None
            await out.write(encoder.fail(api.error_info(exc) if api else error_info(exc)))
        await out.end()
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        aclose = getattr(parts, "aclose", None)
        if aclose is not None:
            await aclose()


def _result(future: asyncio.Future[ResponsePart]) -> ResponsePart | None:
    try:
        return future.result()
    except StopAsyncIteration:
        return None
