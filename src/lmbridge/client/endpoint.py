"""The loopback endpoint: VS Code's models for processes VS Code did not start.

The host runs it when the user enables it (off by default). It listens on 127.0.0.1 only, on a
random port, and wants ``Authorization: Bearer <token>`` on every request (401 otherwise); the
token is random per start and written with the URL to the endpoint file (mode 0600, see
:mod:`.discovery`), where :class:`~.transport.HttpTransport` finds it.

Routes (JSON bodies; ``NDJSON`` is one JSON object per line):

====================================  =======================================================
``POST /lm/selectChatModels``         ``{"selector": object | text}`` -> ``{"models": [...]}``
``POST /lm/sendRequest``              ``{"model", "messages", "options", "justification"?}``
                                      -> NDJSON ``{"parts": [wire parts]}`` ... then
                                      ``{"done": true, "usage"}`` or ``{"error": {...}}``
``POST /lm/countTokens``              ``{"model", "text"}`` -> ``{"tokens": int}``
``GET /lm/events``                    NDJSON ``{"event": "modelsChanged"}``,
                                      ``{"event": "configChanged", "section"}``
``GET /v1/models``                    OpenAI model list (``/v1/models/{id}`` for one)
``POST /v1/chat/completions``         OpenAI Chat Completions, streaming (SSE) or not, tools
====================================  =======================================================

``model`` in the OpenAI routes is a model id or any selector text (``vscodelm/auto``,
``vscodelm/copilot/gpt-4o``, ``copilot/gpt-4o``). A client that disconnects cancels its VS Code
request. HTTP is parsed by h11 over asyncio streams: no framework, no hand-written parsing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h11

from ..convert import from_chat_completions, to_chat_completions_message
from ..errors import ConversionError, WireError
from ..parts import (
    ChatMessage,
    ChatRequestOptions,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolMode,
    message_from_wire,
    messages_from_wire,
    options_from_wire,
    parts_to_wire,
    usage_to_wire,
)
from .api import ChatResponse, start_response, tools_from
from .classify import ChatRequestError, ErrorKind, classify_error
from .discovery import EndpointInfo, remove_endpoint_file, write_endpoint_file
from .selectors import ModelSelector, SelectorError, parse_selector
from .transport import BridgeTransport, ChatModel

__all__ = ["MAX_BODY", "EndpointServer", "HTTPError"]

_log = logging.getLogger("lmbridge.client.endpoint")

MAX_BODY = 32 * 1024 * 1024
"""Largest request body accepted (images in a conversation make bodies large)."""

_STATUS_BY_KIND = {
    ErrorKind.NOT_SIGNED_IN: 403,
    ErrorKind.NO_PERMISSION: 403,
    ErrorKind.RATE_LIMITED: 429,
    ErrorKind.MODEL_NOT_FOUND: 404,
    ErrorKind.CANCELLED: 499,
    # VS Code or the model's provider failed: the endpoint is a gateway to them
    ErrorKind.INTERNAL: 502,
}
_LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
# Chat Completions fields that shape the request; the rest go to VS Code as model options.
_STRUCTURAL = frozenset(
    {"model", "messages", "stream", "stream_options", "tools", "tool_choice", "n", "user",
     "parallel_tool_calls", "functions", "function_call"}
)  # fmt: skip


class HTTPError(Exception):
    """An error answer: status and a JSON body."""

    def __init__(self, status: int, body: Mapping[str, Any]) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body

    @classmethod
    def openai(cls, status: int, message: str, type: str, code: str | None = None) -> HTTPError:
        """An error in OpenAI's shape, which every OpenAI client library understands."""
        return cls(status, {"error": {"message": message, "type": type, "code": code}})


@dataclass
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        try:
            obj = json.loads(self.body or b"{}")
        except ValueError as exc:
            raise HTTPError.openai(
                400, f"invalid JSON body: {exc}", "invalid_request_error"
            ) from None
        if not isinstance(obj, dict):
            raise HTTPError.openai(400, "the body must be a JSON object", "invalid_request_error")
        return obj


class _Exchange:
    """Writes one response on a connection."""

    def __init__(self, conn: h11.Connection, writer: asyncio.StreamWriter) -> None:
        self._conn = conn
        self._writer = writer
        self.started = False

    async def _send(self, event: h11.Event) -> None:
        data = self._conn.send(event)
        if data:
            self._writer.write(data)
            await self._writer.drain()

    async def json(
        self, status: int, body: Any, extra: list[tuple[str, str]] | None = None
    ) -> None:
        payload = json.dumps(body, ensure_ascii=False).encode()
        headers = [("content-type", "application/json"), ("content-length", str(len(payload)))]
        await self.start(status, headers + (extra or []))
        await self._send(h11.Data(data=payload))
        await self.end()

    async def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.started = True
        await self._send(h11.Response(status_code=status, headers=headers))

    async def write(self, data: bytes) -> None:
        await self._send(h11.Data(data=data))

    async def end(self) -> None:
        await self._send(h11.EndOfMessage())


Handler = Callable[[_Request, _Exchange], Awaitable[None]]


class EndpointServer:
    """The loopback HTTP endpoint in front of a :class:`~.transport.BridgeTransport`.

    ``endpoint_file=None`` writes the default file (:func:`.discovery.default_endpoint_file`),
    a path writes there, ``False`` writes none (tests that pass the URL and token directly).
    """

    def __init__(
        self,
        bridge: BridgeTransport,
        *,
        token: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        endpoint_file: Path | bool | None = None,
        count_timeout: float = 2.0,
        keepalive: float = 15.0,
    ) -> None:
        if host not in ("127.0.0.1", "::1", "localhost"):
            # the token is the only protection: never offer it beyond this machine
            raise ValueError(f"the endpoint listens on loopback only, not {host!r}")
        self.bridge = bridge
        self.token = token or secrets.token_urlsafe(32)
        self._host = host
        self._port = port
        self._file: Path | bool | None = endpoint_file
        self._written: Path | None = None
        self._count_timeout = count_timeout
        self._keepalive = keepalive
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self.url = ""
        """``http://127.0.0.1:<port>`` once started."""
        self._routes: dict[tuple[str, str], Handler] = {
            ("POST", "/lm/selectChatModels"): self._select,
            ("POST", "/lm/sendRequest"): self._send_request,
            ("POST", "/lm/countTokens"): self._count_tokens,
            ("GET", "/lm/events"): self._events,
            ("GET", "/v1/models"): self._openai_models,
            ("POST", "/v1/chat/completions"): self._openai_chat,
        }

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> EndpointInfo:
        """Listen and write the endpoint file; returns where and with which token."""
        self._server = await asyncio.start_server(self._on_connection, self._host, self._port)
        port = self._server.sockets[0].getsockname()[1]
        host = f"[{self._host}]" if ":" in self._host else self._host
        self.url = f"http://{host}:{port}"
        info = EndpointInfo(self.url, self.token, os.getpid())
        if self._file is not False:
            path = None if self._file is None or self._file is True else self._file
            self._written = write_endpoint_file(info, path)
        _log.info("loopback endpoint listening on %s", self.url)
        return info

    async def aclose(self) -> None:
        """Stop listening, end open connections (cancelling their requests), remove the file."""
        if self._written is not None:
            remove_endpoint_file(self._written, os.getpid())
            self._written = None
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> EndpointServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ HTTP

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
        try:
            while True:
                request = await self._read_request(conn, reader, writer)
                if request is None:
                    break
                await self._serve(request, conn, reader, writer)
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    break
                conn.start_next_cycle()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            _log.exception("endpoint connection failed")
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> _Request | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                await self._bad_request(conn, writer, exc)
                return None
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                conn.receive_data(data)  # b"" means EOF, which h11 turns into an event
                continue
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    await _Exchange(conn, writer).json(
                        413, {"error": {"message": f"body larger than {MAX_BODY} bytes"}}
                    )
                    return None
            elif isinstance(event, h11.EndOfMessage) and head is not None:
                headers = {
                    k.decode("latin-1").lower(): v.decode("latin-1") for k, v in head.headers
                }
                target = head.target.decode("latin-1").split("?", 1)[0]
                return _Request(head.method.decode("ascii"), target, headers, bytes(body))
            elif isinstance(event, (h11.ConnectionClosed, h11.PAUSED)):
                return None

    async def _bad_request(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, exc: h11.RemoteProtocolError
    ) -> None:
        if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with contextlib.suppress(Exception):
                await _Exchange(conn, writer).json(
                    exc.error_status_hint, {"error": {"message": f"bad request: {exc}"}}
                )

    async def _serve(
        self,
        request: _Request,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """Run the handler; if the client goes away meanwhile, cancel it (and its request)."""
        exchange = _Exchange(conn, writer)
        handler = asyncio.ensure_future(self._dispatch(request, exchange))
        watch: asyncio.Future[bytes] | None = asyncio.ensure_future(reader.read(65536))
        try:
            while not handler.done():
                waiting: set[asyncio.Future[Any]] = {handler} if watch is None else {handler, watch}
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if watch is not None and watch.done():
                    data = b"" if watch.cancelled() or watch.exception() else watch.result()
                    watch = None
                    if not data and not handler.done():
                        _log.debug("client left %s %s; cancelling it", request.method, request.path)
                        handler.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await handler
                        raise ConnectionResetError("client disconnected")
                    # a pipelined request (or EOF after the answer): h11 keeps it for later
                    conn.receive_data(data)
            handler.result()
        finally:
            if watch is not None and not watch.done():
                watch.cancel()
                # the next read on this connection must wait until this one is gone; a
                # cancelled read leaves any data it was woken for in the reader's buffer
                with contextlib.suppress(asyncio.CancelledError):
                    await watch
            if not handler.done():
                handler.cancel()

    async def _dispatch(self, request: _Request, exchange: _Exchange) -> None:
        try:
            self._check_host(request)
            self._check_token(request)
            route = self._routes.get((request.method, request.path))
            if route is None and request.method == "GET" and request.path.startswith("/v1/models/"):
                route = self._openai_model
            if route is None:
                known = {p for (_, p) in self._routes}
                status, what = (
                    (405, "method not allowed") if request.path in known else (404, "no such route")
                )
                raise HTTPError.openai(
                    status, f"{what}: {request.method} {request.path}", "invalid_request_error"
                )
            await route(request, exchange)
        except HTTPError as exc:
            if exchange.started:
                raise
            extra = [("www-authenticate", "Bearer")] if exc.status == 401 else None
            await exchange.json(exc.status, exc.body, extra)
        except Exception as exc:  # the bridge failed: classify it for the client
            if exchange.started:
                raise
            error = classify_error(exc)
            if error.kind is ErrorKind.INTERNAL:
                _log.warning("%s %s failed: %s", request.method, request.path, error.detail)
            await exchange.json(_STATUS_BY_KIND[error.kind], {"error": _error_body(error)})

    def _check_host(self, request: _Request) -> None:
        # A web page can make the browser talk to 127.0.0.1 under its own host name (DNS
        # rebinding); it still lacks the token, but refusing foreign Host headers costs nothing.
        host = request.headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if name not in _LOCAL_HOSTS:
            raise HTTPError.openai(403, f"unexpected Host header {host!r}", "invalid_request_error")

    def _check_token(self, request: _Request) -> None:
        auth = request.headers.get("authorization", "")
        scheme, _, given = auth.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), self.token.encode()
        ):
            raise HTTPError.openai(
                401,
                "missing or wrong token: send 'Authorization: Bearer <token>' with the token "
                "from the lmbridge endpoint file",
                "invalid_request_error",
                "invalid_api_key",
            )

    # ------------------------------------------------------------------ native routes

    async def _select(self, request: _Request, exchange: _Exchange) -> None:
        body = request.json()
        try:
            selector = parse_selector(body.get("selector"))
        except SelectorError as exc:
            raise HTTPError.openai(400, str(exc), "invalid_request_error") from None
        models = await self.bridge.select_chat_models(selector)
        await exchange.json(200, {"models": [m.to_wire() for m in models]})

    async def _count_tokens(self, request: _Request, exchange: _Exchange) -> None:
        body = request.json()
        model = _model_ref(body.get("model"))
        text = body.get("text")
        try:
            value: str | ChatMessage = (
                text if isinstance(text, str) else message_from_wire(text, "text")
            )
        except WireError as exc:
            raise HTTPError.openai(400, str(exc), "invalid_request_error") from None
        tokens = await self.bridge.count_tokens(model, value)
        await exchange.json(200, {"tokens": tokens})

    async def _send_request(self, request: _Request, exchange: _Exchange) -> None:
        body = request.json()
        model = _model_ref(body.get("model"))
        try:
            messages = messages_from_wire(body.get("messages"))
            options = options_from_wire(body.get("options"))
        except WireError as exc:
            raise HTTPError.openai(400, str(exc), "invalid_request_error") from None
        justification = body.get("justification")
        stream = self.bridge.send_request(
            model,
            messages,
            options,
            justification=justification if isinstance(justification, str) else None,
        )
        await exchange.start(200, [("content-type", "application/x-ndjson")])
        try:
            async for part in stream:
                await exchange.write(_line({"parts": parts_to_wire([part])}))
            await exchange.write(_line({"done": True}))
        except Exception as exc:  # the bridge failed mid-stream: tell the client, keep serving
            await exchange.write(_line({"error": classify_error(exc).to_wire()}))
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        await exchange.end()

    async def _events(self, request: _Request, exchange: _Exchange) -> None:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        unsubscribe = [
            self.bridge.on_models_changed(lambda: queue.put_nowait({"event": "modelsChanged"})),
            self.bridge.on_config_changed(
                lambda section: queue.put_nowait({"event": "configChanged", "section": section})
            ),
        ]
        try:
            await exchange.start(200, [("content-type", "application/x-ndjson")])
            await exchange.write(_line({"event": "hello"}))
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), self._keepalive)
                except asyncio.TimeoutError:
                    event = {}  # keeps proxies and dead-peer detection honest
                await exchange.write(_line(event))
        finally:
            for off in unsubscribe:
                off()

    # ------------------------------------------------------------------ OpenAI-compatible routes

    async def _openai_models(self, request: _Request, exchange: _Exchange) -> None:
        models = await self.bridge.select_chat_models(ModelSelector())
        await exchange.json(200, {"object": "list", "data": [_openai_model(m) for m in models]})

    async def _openai_model(self, request: _Request, exchange: _Exchange) -> None:
        name = request.path[len("/v1/models/") :]
        model = await self._resolve(name)
        await exchange.json(200, _openai_model(model))

    async def _resolve(self, name: Any) -> ChatModel:
        """A model id first (ids may contain '/'), then any selector text."""
        if not isinstance(name, str):
            raise HTTPError.openai(400, "model: expected a string", "invalid_request_error")
        models: list[ChatModel] = []
        with contextlib.suppress(SelectorError):
            if name and name not in ("auto", "vscodelm/auto"):
                models = await self.bridge.select_chat_models(ModelSelector(id=name))
        if not models:
            try:
                selector = parse_selector("" if name == "auto" else name)
            except SelectorError as exc:
                raise HTTPError.openai(
                    404, f"no model {name!r} ({exc})", "invalid_request_error", "model_not_found"
                ) from None
            models = await self.bridge.select_chat_models(selector)
        if not models:
            raise HTTPError.openai(
                404,
                f"no VS Code language model matches {name!r}: GET /v1/models lists them",
                "invalid_request_error",
                "model_not_found",
            )
        return models[0]

    async def _openai_chat(self, request: _Request, exchange: _Exchange) -> None:
        body = request.json()
        if body.get("n") not in (None, 1):
            raise HTTPError.openai(400, "n: only 1 choice is supported", "invalid_request_error")
        try:
            messages = from_chat_completions(body.get("messages"))  # type: ignore[arg-type]
            options = _openai_options(body)
        except ConversionError as exc:
            raise HTTPError.openai(400, str(exc), "invalid_request_error") from None
        if not messages:
            raise HTTPError.openai(
                400, "messages: at least one message is needed", "invalid_request_error"
            )
        model = await self._resolve(body.get("model"))
        response = start_response(
            self.bridge, model, messages, options, count_timeout=self._count_timeout
        )
        ident = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            await self._openai_stream(response, exchange, ident, created, include_usage)
            return
        try:
            parts = [p async for p in response]
        finally:
            await response.aclose()
        message = to_chat_completions_message(parts)
        thinking = "".join(p.text for p in parts if isinstance(p, ThinkingPart))
        if thinking:
            message["reasoning_content"] = thinking
        await exchange.json(
            200,
            {
                "id": ident,
                "object": "chat.completion",
                "created": created,
                "model": model.id,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if response.tool_calls else "stop",
                        "logprobs": None,
                    }
                ],
                "usage": _openai_usage(response),
            },
        )

    async def _openai_stream(
        self,
        response: ChatResponse,
        exchange: _Exchange,
        ident: str,
        created: int,
        include_usage: bool,
    ) -> None:
        model = response.model.id

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            obj = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [
                    {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
                ],
            }
            return _sse(obj)

        iterator = aiter(response)
        try:
            # Wait for the first part before answering 200, so that a request that fails at
            # once (model gone, not signed in) gets a proper HTTP error status.
            first: ResponsePart | None = await anext(iterator, None)
            await exchange.start(
                200, [("content-type", "text/event-stream"), ("cache-control", "no-cache")]
            )
            await exchange.write(chunk({"role": "assistant", "content": ""}))
            calls = 0
            part = first
            while part is not None:
                if isinstance(part, TextPart):
                    await exchange.write(chunk({"content": part.value}))
                elif isinstance(part, ThinkingPart):
                    await exchange.write(chunk({"reasoning_content": part.text}))
                elif isinstance(part, ToolCallPart):
                    call = {
                        "index": calls,
                        "id": part.call_id,
                        "type": "function",
                        "function": {
                            "name": part.name,
                            "arguments": json.dumps(part.input, ensure_ascii=False),
                        },
                    }
                    calls += 1
                    await exchange.write(chunk({"tool_calls": [call]}))
                part = await anext(iterator, None)
            await exchange.write(chunk({}, "tool_calls" if calls else "stop"))
            if include_usage:
                usage_chunk = {
                    "id": ident,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": _openai_usage(response),
                }
                await exchange.write(_sse(usage_chunk))
            await exchange.write(b"data: [DONE]\n\n")
        except ChatRequestError as exc:
            if not exchange.started:
                raise
            # OpenAI's clients raise an APIError for an "error" event in the stream.
            await exchange.write(_sse({"error": _error_body(exc)}))
        finally:
            await response.aclose()
        await exchange.end()


# --------------------------------------------------------------------------- helpers


def _line(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode() + b"\n"


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def _error_body(exc: ChatRequestError) -> dict[str, Any]:
    """Both shapes at once: OpenAI's (message, type, code) and ours (kind, detail ...)."""
    body = exc.to_wire()
    body["message"] = str(exc)
    body["type"] = exc.kind.value
    body["code"] = exc.raw_code
    return body


def _model_ref(obj: Any) -> ChatModel:
    """The model an ``lm/*`` route names by ``{"id", "vendor"}``; the bridge resolves it."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("id"), str) or not obj["id"]:
        raise HTTPError.openai(
            400, "model.id: expected a non-empty string", "invalid_request_error"
        )
    vendor = obj.get("vendor")
    return ChatModel(obj["id"], obj["id"], vendor if isinstance(vendor, str) else "", "", "", 0)


def _openai_model(model: ChatModel) -> dict[str, Any]:
    return {
        "id": model.id,
        "object": "model",
        "created": 0,
        "owned_by": model.vendor,
        "name": model.name,
        "family": model.family,
        "version": model.version,
        "max_input_tokens": model.max_input_tokens,
    }


def _openai_usage(response: ChatResponse) -> dict[str, int]:
    usage = usage_to_wire(response.usage)
    prompt, completion = usage.get("inputTokens", 0), usage.get("outputTokens", 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _openai_options(body: Mapping[str, Any]) -> ChatRequestOptions:
    tools = tools_from(body.get("tools"))
    choice = body.get("tool_choice")
    mode = ToolMode.AUTO
    if choice == "none":
        tools = []
    elif choice == "required":
        mode = ToolMode.REQUIRED
    elif isinstance(choice, Mapping):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else None
        chosen = [t for t in tools if t.name == name]
        if not chosen:
            raise ConversionError(f"tool_choice: no tool named {name!r} in tools")
        tools, mode = chosen, ToolMode.REQUIRED
    elif choice not in (None, "auto"):
        raise ConversionError(
            f"tool_choice: expected 'auto', 'none', 'required' or a function, got {choice!r}"
        )
    model_options = {k: v for k, v in body.items() if k not in _STRUCTURAL and v is not None}
    return ChatRequestOptions(tools=tools, tool_mode=mode, model_options=model_options)
