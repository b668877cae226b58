"""The native ``/lm/*`` routes: VS Code's ``vscode.lm`` calls as JSON, for
:class:`~..transport.HttpTransport`.

Bodies carry lmbridge's wire parts (:mod:`lmbridge.parts`); ``NDJSON`` is one JSON object per
line, and ``{}`` lines are keep-alives. Only ``Authorization: Bearer <token>`` is accepted.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from ....errors import WireError
from ....parts import (
    ChatMessage,
    ResponsePart,
    message_from_wire,
    messages_from_wire,
    options_from_wire,
    parts_to_wire,
)
from ...selectors import SelectorError, parse_selector
from ...tools import ToolBox, ToolError
from ...transport import BridgeTransport, ChatModel
from .._http import Api, ErrorInfo, Exchange, HTTPError, Request, Route, error_body
from .._stream import ndjson_line, stream_parts
from ._base import ApiContext

__all__ = ["API", "LM_API", "LmRoutes", "routes"]

LM_API = Api("lm", error_body, token_headers=("authorization",))
"""Errors as :func:`~.._http.error_body`; the token as a bearer token only."""
API = LM_API

_PING = ndjson_line({})


class _PartLines:
    """``/lm/sendRequest``'s NDJSON: ``{"parts"}`` lines, then ``{"done"}`` or ``{"error"}``."""

    media_type = "application/x-ndjson"

    def start(self) -> bytes:
        return b""

    def feed(self, part: ResponsePart) -> bytes:
        return ndjson_line({"parts": parts_to_wire([part])})

    def finish(self) -> bytes:
        return ndjson_line({"done": True})

    def fail(self, error: ErrorInfo) -> bytes:
        return ndjson_line(error_body(error))

    def ping(self) -> bytes:
        return _PING


class LmRoutes:
    """``POST /lm/selectChatModels``, ``/lm/sendRequest``, ``/lm/countTokens``, ``GET
    /lm/events`` over ``bridge`` (the table in :mod:`lmbridge.client.endpoint`)."""

    def __init__(
        self, bridge: BridgeTransport, *, keepalive: float = 15.0, first_part_wait: float = 10.0
    ) -> None:
        self.bridge = bridge
        self._keepalive = keepalive
        self._first_part_wait = first_part_wait

    def routes(self) -> list[Route]:
        """The routes to add to the server."""
        return [
            Route("POST", "/lm/selectChatModels", self.select, LM_API),
            Route("POST", "/lm/sendRequest", self.send_request, LM_API),
            Route("POST", "/lm/countTokens", self.count_tokens, LM_API),
            Route("GET", "/lm/events", self.events, LM_API),
            Route("POST", "/lm/degraded", self.degraded, LM_API),
        ]

    async def degraded(self, request: Request, out: Exchange) -> None:
        """``{"cause"}`` -> ``{}``: a client's app got the fallback answer; passed on to the
        bridge's ``report_degraded`` (the host's tells the extension, which tells the user)."""
        cause = request.json().get("cause")
        report = getattr(self.bridge, "report_degraded", None)
        if callable(report):
            told = report(cause[:500] if isinstance(cause, str) else "no cause given")
            if inspect.isawaitable(told):
                await told
        await out.json(200, {})

    async def select(self, request: Request, out: Exchange) -> None:
        """``{"selector"}`` -> ``{"models": [...]}``."""
        try:
            selector = parse_selector(request.json().get("selector"))
        except SelectorError as exc:
            raise HTTPError(400, str(exc)) from None
        models = await self.bridge.select_chat_models(selector)
        # a workspace's provider only for a selector that names the model's id
        chosen = [m for m in models if m.chosen_by(selector)]
        await out.json(200, {"models": [m.to_wire() for m in chosen]})

    async def count_tokens(self, request: Request, out: Exchange) -> None:
        """``{"model", "text"}`` -> ``{"tokens"}``."""
        body = request.json()
        model = _model_ref(body.get("model"))
        text = body.get("text")
        try:
            value: str | ChatMessage = (
                text if isinstance(text, str) else message_from_wire(text, "text")
            )
        except WireError as exc:
            raise HTTPError(400, str(exc)) from None
        await out.json(200, {"tokens": await self.bridge.count_tokens(model, value)})

    async def send_request(self, request: Request, out: Exchange) -> None:
        """``{"model", "messages", "options", "justification"?}`` -> NDJSON parts."""
        body = request.json()
        model = _model_ref(body.get("model"))
        try:
            messages = messages_from_wire(body.get("messages"))
            options = options_from_wire(body.get("options"))
        except WireError as exc:
            raise HTTPError(400, str(exc)) from None
        justification = body.get("justification")
        parts = self.bridge.send_request(
            model,
            messages,
            options,
            justification=justification if isinstance(justification, str) else None,
        )
        await stream_parts(
            out,
            parts,
            _PartLines(),
            first_part_wait=self._first_part_wait,
            keepalive=self._keepalive,
            api=LM_API,
        )

    async def events(self, request: Request, out: Exchange) -> None:
        """NDJSON ``{"event": "modelsChanged"}`` and ``{"event": "configChanged", "section"}``
        until the client leaves; ``{}`` after ``keepalive`` seconds of silence."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        unsubscribe = [
            self.bridge.on_models_changed(lambda: queue.put_nowait({"event": "modelsChanged"})),
            self.bridge.on_config_changed(
                lambda section: queue.put_nowait({"event": "configChanged", "section": section})
            ),
        ]
        try:
            await out.start(200, [("content-type", "application/x-ndjson")])
            await out.write(ndjson_line({"event": "hello"}))
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), self._keepalive)
                except asyncio.TimeoutError:
                    await out.write(_PING)
                    continue
                await out.write(ndjson_line(event))
        finally:
            for off in unsubscribe:
                off()


def _model_ref(obj: Any) -> ChatModel:
    """The model an ``lm/*`` route names by ``{"id", "vendor"}``; the bridge resolves it."""
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), str) or not obj["id"]:
        raise HTTPError(400, "model.id: expected a non-empty string")
    vendor = obj.get("vendor")
    return ChatModel(obj["id"], obj["id"], vendor if isinstance(vendor, str) else "", "", "", 0)


def routes(context: ApiContext) -> list[Route]:
    """The ``/lm/*`` routes over the context's bridge, and VS Code's tools for
    :class:`~...transport.HttpTransport`: ``POST /lm/tools`` -> ``{"tools": [...]}`` (empty
    while ``lmbridge.endpoint.tools`` is), ``POST /lm/invokeTool`` ``{"name", "input"}`` ->
    ``{"content": [wire parts]}``, or an error ``{"error": {"reason", "message"}}``
    (:class:`~...tools.ToolError`; 404 for a tool not offered, 400 for a bad input)."""

    async def tools(request: Request, out: Exchange) -> None:
        if not context.tools:
            await out.json(200, {"tools": []})
            return
        try:
            offered = await ToolBox(context.bridge, allow=context.tools).list()
        except ToolError as exc:
            await out.json(502, {"error": {"reason": exc.reason, "message": str(exc)}})
            return
        await out.json(200, {"tools": [t.to_wire() for t in offered]})

    async def invoke(request: Request, out: Exchange) -> None:
        body = request.json()
        name, value = body.get("name"), body.get("input")
        if not isinstance(name, str) or not name:
            raise HTTPError(400, "name: expected a tool name")
        try:
            content = await ToolBox(context.bridge, allow=context.tools).invoke(name, value)
        except ToolError as exc:
            status = _TOOL_STATUS.get(exc.reason, 502)
            await out.json(status, {"error": {"reason": exc.reason, "message": str(exc)}})
            return
        await out.json(200, {"content": parts_to_wire(content)})

    return [
        *LmRoutes(
            context.bridge, keepalive=context.keepalive, first_part_wait=context.first_part_wait
        ).routes(),
        Route("POST", "/lm/tools", tools, LM_API),
        Route("POST", "/lm/invokeTool", invoke, LM_API),
    ]


_TOOL_STATUS = {"not_found": 404, "invalid_input": 400, "cancelled": 499, "unavailable": 503}
