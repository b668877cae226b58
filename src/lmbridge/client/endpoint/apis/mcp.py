"""VS Code's tools as an MCP server at ``/mcp`` (the Streamable HTTP transport).

Off until the user lists tools in ``lmbridge.endpoint.tools`` (user settings only; ``["*"]``
for all): then ``POST /mcp`` speaks MCP (protocol versions 2025-11-25, 2025-06-18, 2025-03-26
and 2024-11-05) to clients such as Claude Code (``--mcp-config`` with ``"type": "http"``) and
Codex:

- ``initialize`` (answered with an ``Mcp-Session-Id``), ``notifications/initialized``,
  ``ping``, ``tools/list``, ``tools/call``, ``notifications/cancelled``; other methods
  ``-32601``; a batch (a JSON array, 2025-03-26) is answered as one;
- the answer is ``application/json`` (one response, or an array for a batch); a POST of
  notifications or responses only gets ``202`` with no body; ``GET /mcp`` is ``405`` (the
  server sends nothing unasked) and ``DELETE /mcp`` ends a session;
- ``tools/list`` lists the allowed tools of ``vscode.lm.tools`` (name, description, input
  schema); a tool outside the allowlist is neither listed nor callable (``-32602`` unknown
  tool, the same answer as for a tool that does not exist);
- ``tools/call`` checks the arguments against the tool's schema
  (:func:`~...tools.validate_input`) and then runs ``vscode.lm.invokeTool`` (a tool that asks
  for confirmation in VS Code still asks). Text parts become ``text`` content, images
  ``image``, audio ``audio``, JSON and text data ``text``, other data an embedded ``resource``
  blob. A bad input or a failing tool is a result with ``isError: true`` whose text says why
  (so the model can correct itself); ``notifications/cancelled`` or the client closing the
  request cancels the tool's token in VS Code.

Every request meets the endpoint's defences first (:mod:`.._http`): the token as ``Authorization:
Bearer`` (checked on the head), the ``Host`` check against DNS rebinding, no ``Origin`` (no web
page), the body, time and connection limits. Why hand-written: the official ``mcp`` Python SDK
brings Starlette, Uvicorn, Pydantic, anyio and more into the host, whose start-up and size
matter (``docs/endpoint.md`` has the numbers); the transport is a few JSON-RPC methods over the
endpoint's existing HTTP core.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import importlib.metadata
import secrets
from collections import OrderedDict
from typing import Any

from ...._json import loads
from ....parts import TextPart
from ...tools import ToolBox, ToolContent, ToolError, VSCodeTool
from .._http import Api, ErrorInfo, Exchange, HTTPError, Request, Route
from ._base import ApiContext

__all__ = ["API", "MCP_API", "PROTOCOL_VERSIONS", "mcp_content", "routes"]

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""The MCP versions served, newest first; the client's is echoed when it is one of them."""

_MAX_SESSIONS = 256
_MAX_BATCH = 64
"""Messages in one batch at most: each call in it runs at once."""

# JSON-RPC error codes
_PARSE_ERROR = -32700
_INVALID_REQUEST = -32600
_METHOD_NOT_FOUND = -32601
_INVALID_PARAMS = -32602
_CANCELLED = -32800
_SERVER_ERROR = -32000

_INSTRUCTIONS = (
    "The tools of the user's VS Code (those its extensions and MCP servers register), as the "
    "user's setting lmbridge.endpoint.tools allows them. A tool may ask the user to confirm "
    "in VS Code before it runs."
)


def _render(info: ErrorInfo) -> dict[str, Any]:
    """An HTTP-level failure as a JSON-RPC error without an id (the request was not read)."""
    code = _INVALID_REQUEST if 400 <= info.status < 500 else _SERVER_ERROR
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": info.message}}


MCP_API = Api("mcp", _render, token_headers=("authorization",))
"""JSON-RPC errors; the token as a bearer token only."""
API = MCP_API


def _rpc_error(ident: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


def _rpc_result(ident: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def _mcp_tool(tool: VSCodeTool) -> dict[str, Any]:
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else None
    if schema is None or schema.get("type") != "object":
        # MCP wants an object schema; a tool without one takes no arguments
        schema = {"type": "object", "properties": {}} if schema is None else schema
    entry: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": schema,
    }
    if tool.tags:
        entry["_meta"] = {"vscode/tags": list(tool.tags)}
    return entry


_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript")


def mcp_content(parts: ToolContent) -> list[dict[str, Any]]:
    """A tool's result parts as MCP content (module docstring)."""
    out: list[dict[str, Any]] = []
    for i, part in enumerate(parts):
        if isinstance(part, TextPart):
            out.append({"type": "text", "text": part.value})
            continue
        mime = part.mime_type.lower()
        encoded = base64.b64encode(part.data).decode("ascii")
        if mime.startswith("image/"):
            out.append({"type": "image", "data": encoded, "mimeType": part.mime_type})
        elif mime.startswith("audio/"):
            out.append({"type": "audio", "data": encoded, "mimeType": part.mime_type})
        elif mime.startswith(_TEXT_TYPES) or mime.endswith(("+json", "+xml")):
            out.append({"type": "text", "text": part.data.decode("utf-8", "replace")})
        else:
            out.append(
                {
                    "type": "resource",
                    "resource": {
                        "uri": f"vscode-tool-result:///{i}",
                        "mimeType": part.mime_type,
                        "blob": encoded,
                    },
                }
            )
    return out


class _Server:
    """The MCP sessions of one endpoint: each session's requests in flight, to cancel them."""

    def __init__(self, context: ApiContext) -> None:
        self.context = context
        self.sessions: OrderedDict[str, dict[Any, asyncio.Event]] = OrderedDict()

    @property
    def box(self) -> ToolBox:
        return ToolBox(self.context.bridge, allow=self.context.tools)

    def _check_on(self) -> None:
        if not self.context.tools:
            raise HTTPError(
                403,
                "VS Code's tools are off: the user setting lmbridge.endpoint.tools lists the "
                'tools the endpoint offers (["*"] for all)',
            )

    async def post(self, request: Request, out: Exchange) -> None:
        self._check_on()
        version = request.headers.get("mcp-protocol-version")
        if version is not None and version not in PROTOCOL_VERSIONS:
            raise HTTPError(
                400,
                f"unsupported MCP-Protocol-Version {version!r}; supported: "
                + ", ".join(PROTOCOL_VERSIONS),
            )
        try:
            body = loads(request.body or b"null")
        except ValueError as exc:
            await out.json(400, _rpc_error(None, _PARSE_ERROR, f"invalid JSON: {exc}"))
            return
        batch = isinstance(body, list)
        messages = body if batch else [body]
        if not messages or not all(isinstance(m, dict) for m in messages):
            await out.json(
                400, _rpc_error(None, _INVALID_REQUEST, "expected a JSON-RPC message object")
            )
            return
        if len(messages) > _MAX_BATCH:
            await out.json(
                400,
                _rpc_error(None, _INVALID_REQUEST, f"a batch holds {_MAX_BATCH} messages at most"),
            )
            return
        session = request.headers.get("mcp-session-id")
        initializing = any(m.get("method") == "initialize" for m in messages)
        if session is not None and session not in self.sessions and not initializing:
            # the session ended (DELETE, or the endpoint restarted): the client starts anew
            raise HTTPError(404, f"no MCP session {session!r}: send initialize again")
        inflight = self.sessions.get(session or "", {})
        for message in messages:
            if "id" not in message and message.get("method") == "notifications/cancelled":
                params = message.get("params")
                target = params.get("requestId") if isinstance(params, dict) else None
                event = inflight.get(_key(target))
                if event is not None:
                    event.set()
        calls = [m for m in messages if "method" in m and "id" in m]
        if not calls:
            await out.start(202, [("content-length", "0")])
            await out.end()
            return
        headers: list[tuple[str, str]] = []
        if initializing:
            session = secrets.token_urlsafe(24)
            self.sessions[session] = {}
            while len(self.sessions) > _MAX_SESSIONS:
                self.sessions.popitem(last=False)
            headers.append(("mcp-session-id", session))
        answers = await asyncio.gather(*(self._call(m, session or "") for m in calls))
        await out.json(200, answers if batch else answers[0], headers)

    async def delete(self, request: Request, out: Exchange) -> None:
        session = request.headers.get("mcp-session-id")
        if session is None or self.sessions.pop(session, None) is None:
            raise HTTPError(404, "no such MCP session")
        await out.start(204, [])
        await out.end()

    async def _call(self, message: dict[str, Any], session: str) -> dict[str, Any]:
        ident = message.get("id")
        method = message.get("method")
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "initialize":
            asked = params.get("protocolVersion")
            return _rpc_result(
                ident,
                {
                    "protocolVersion": asked
                    if asked in PROTOCOL_VERSIONS
                    else PROTOCOL_VERSIONS[0],
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {
                        "name": "lmbridge-vscode-tools",
                        "title": "VS Code's tools (lmbridge)",
                        "version": _version(),
                    },
                    "instructions": _INSTRUCTIONS,
                },
            )
        if method == "ping":
            return _rpc_result(ident, {})
        if method == "tools/list":
            try:
                tools = await self.box.list()
            except ToolError as exc:
                return _rpc_error(ident, _SERVER_ERROR, str(exc))
            return _rpc_result(ident, {"tools": [_mcp_tool(t) for t in tools]})
        if method == "tools/call":
            return await self._tools_call(ident, params, session)
        return _rpc_error(ident, _METHOD_NOT_FOUND, f"method not found: {method!r}")

    async def _tools_call(self, ident: Any, params: dict[str, Any], session: str) -> dict[str, Any]:
        name = params.get("name")
        arguments = params.get("arguments")
        if not isinstance(name, str) or not name:
            return _rpc_error(ident, _INVALID_PARAMS, "params.name: expected a tool name")
        if arguments is not None and not isinstance(arguments, dict):
            return _rpc_error(ident, _INVALID_PARAMS, "params.arguments: expected an object")
        cancel = asyncio.Event()
        inflight = self.sessions.get(session)
        if inflight is not None:
            inflight[_key(ident)] = cancel
        try:
            content = await self.box.invoke(name, arguments or {}, cancel)
        except ToolError as exc:
            if exc.reason == "not_found":
                return _rpc_error(ident, _INVALID_PARAMS, f"Unknown tool: {name}")
            if exc.reason == "cancelled":
                return _rpc_error(ident, _CANCELLED, "the tool call was cancelled")
            return _rpc_result(
                ident, {"content": [{"type": "text", "text": str(exc)}], "isError": True}
            )
        finally:
            if inflight is not None:
                inflight.pop(_key(ident), None)
        return _rpc_result(ident, {"content": mcp_content(content), "isError": False})


@functools.cache
def _version() -> str:
    """lmbridge's version, read from its installed metadata (importing the package's top would
    make the endpoint import everything above it)."""
    try:
        return importlib.metadata.version("lmbridge")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _key(ident: Any) -> Any:
    """A request id as a dict key (ids are strings or numbers; anything else matches nothing)."""
    return ident if isinstance(ident, (str, int)) and not isinstance(ident, bool) else object()


def routes(context: ApiContext) -> list[Route]:
    """``POST /mcp`` and ``DELETE /mcp`` (``GET`` is answered 405 by the core)."""
    server = _Server(context)
    return [
        Route("POST", "/mcp", server.post, MCP_API),
        Route("DELETE", "/mcp", server.delete, MCP_API),
    ]
