"""The endpoint's HTTP core: connections, limits, head-first checks, routing, the error path.

HTTP/1.1 is parsed by h11 over asyncio streams. For each request the core

1. waits for the request head (``idle_timeout`` for the first byte on a kept-alive connection,
   then ``head_timeout`` for the whole head; a head over 64 KiB is refused by h11);
2. checks the head before reading any body byte: the ``Host`` header names this listener
   (``127.0.0.1:<port>`` or ``localhost:<port>``), there is no ``Origin`` header (browsers send
   one; no API client does), the token is in one of the headers the route's :class:`Api`
   accepts, the route exists, and a ``Content-Length`` is within ``max_body``. A failed check is
   answered at once with ``Connection: close`` and the body is never read;
3. reads the body within ``body_timeout``, counting chunked bodies as they come (413 when they
   outgrow ``max_body``);
4. runs the route's handler while watching the socket: a client that goes away cancels the
   handler, which closes the VS Code request;
5. renders every failure through the route's :class:`Api` (:class:`ErrorInfo` -> its body).

At most ``max_connections`` connections are open. A new one over the cap makes room by closing
the oldest connection that has not yet sent an accepted request head or sits idle between
requests (so a flood of half-open connections cannot lock out the token holder); when every
connection is busy with an accepted request, the new one is closed at once. Both are logged,
at most once per ``log_interval`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import parse_qs, unquote

import h11

from ..._json import loads
from ...errors import ConversionError
from ...timing import mark
from ..classify import ChatRequestError, ErrorKind, classify_error
from ..guard import RetryPolicy, as_prompt_too_long

__all__ = [
    "MAX_BODY",
    "Api",
    "ErrorInfo",
    "Exchange",
    "HTTPError",
    "Handler",
    "HttpCore",
    "Limits",
    "Request",
    "Route",
    "error_body",
    "error_info",
]

_log = logging.getLogger("lmbridge.client.endpoint")

MAX_BODY = 32 * 1024 * 1024
"""Largest request body accepted (images in a conversation make bodies large)."""

_MAX_HEAD = 64 * 1024
_READ = 65536


@dataclass(frozen=True, slots=True)
class Limits:
    """What one client may cost the endpoint; every value is a parameter so tests run fast."""

    max_body: int = MAX_BODY
    """Largest request body in bytes; larger ones get 413 without being read."""
    head_timeout: float = 10.0
    """Seconds from a connection's start (or a request's first byte) to its complete head."""
    body_timeout: float = 60.0
    """Seconds to receive a request's body once its head was accepted."""
    idle_timeout: float = 30.0
    """Seconds a kept-alive connection may wait for its next request."""
    max_connections: int = 128
    """Open connections at most (see the module docstring for who is closed over the cap)."""
    linger: float = 2.0
    """After an early error answer, seconds to drain what the client still sends, so that it
    reads the answer instead of a reset (clients such as httpx send the whole body before
    they read); at most ``linger_bytes`` are drained, and drained bytes are dropped at once."""
    linger_bytes: int = 2 * MAX_BODY
    log_interval: float = 10.0
    """Seconds between two log lines about connections closed over the cap."""


class HTTPError(Exception):
    """An error answer, in the shape of the route's :class:`Api` (see :class:`ErrorInfo`)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str | None = None,
        code: str | None = None,
        param: str | None = None,
        headers: Iterable[tuple[str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = list(headers)


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """A failure as every API renders it: what :attr:`Api.render_error` receives."""

    status: int
    """HTTP status of the answer."""
    type: str
    """Error type, named as Anthropic's API names them (``invalid_request_error``,
    ``authentication_error``, ``permission_error``, ``not_found_error``, ``request_too_large``,
    ``rate_limit_error``, ``timeout_error``, ``api_error``); renderers may rename."""
    message: str
    """What went wrong, for the user."""
    code: str | None = None
    """A machine-readable code (OpenAI's ``code``: ``invalid_api_key``, ``model_not_found``)."""
    cause: BaseException | None = None
    """The exception behind it, for renderers that say more (a :class:`ChatRequestError`)."""
    headers: tuple[tuple[str, str], ...] = ()
    """Extra response headers (``www-authenticate``, ``retry-after``)."""
    param: str | None = None
    """The request field at fault (OpenAI's ``param``), when one is."""


_TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    499: "cancelled",
}
_STATUS_BY_KIND = {
    ErrorKind.NOT_SIGNED_IN: 403,
    ErrorKind.NO_PERMISSION: 403,
    ErrorKind.RATE_LIMITED: 429,
    ErrorKind.MODEL_NOT_FOUND: 404,
    ErrorKind.CANCELLED: 499,
    # VS Code or the model's provider failed: the endpoint is a gateway to them
    ErrorKind.INTERNAL: 502,
}


def error_info(exc: BaseException) -> ErrorInfo:
    """Any failure as an :class:`ErrorInfo`: an :class:`HTTPError` as it says, a
    :class:`~lmbridge.errors.ConversionError` as 400, anything else classified like a failed
    VS Code request (:func:`~..classify.classify_error`)."""
    if isinstance(exc, HTTPError):
        return ErrorInfo(
            exc.status,
            exc.type or _TYPE_BY_STATUS.get(exc.status, "api_error"),
            exc.message,
            exc.code,
            exc,
            tuple(exc.headers),
            exc.param,
        )
    if isinstance(exc, ConversionError):
        return ErrorInfo(400, "invalid_request_error", str(exc), None, exc)
    too_long = as_prompt_too_long(exc)
    if too_long is not None:  # OpenAI's context-length answer, which agents compact on
        return ErrorInfo(
            400,
            "invalid_request_error",
            f"Your input exceeds the context window of this model: {too_long}",
            "context_length_exceeded",
            too_long,
            param="messages",
        )
    error = exc if isinstance(exc, ChatRequestError) else classify_error(exc)
    status = _STATUS_BY_KIND[error.kind]
    retry = RetryPolicy.retry_after_header(error) if status == 429 else None
    headers = (("retry-after", retry),) if retry is not None else ()
    return ErrorInfo(
        status, _TYPE_BY_STATUS.get(status, "api_error"), str(error), None, error, headers
    )


def error_body(info: ErrorInfo) -> dict[str, Any]:
    """The endpoint's own error shape, used by the ``/lm`` routes and Chat Completions:
    ``{"error": {"message", "type", "code"}}`` as OpenAI's clients read it, plus lmbridge's
    ``kind``, ``detail``, ``code`` ... (:meth:`ChatRequestError.to_wire`) when a VS Code request
    failed, so :class:`~..transport.HttpTransport` rebuilds the same error."""
    error: dict[str, Any] = {
        "message": info.message,
        "type": info.type,
        "param": info.param,
        "code": info.code,
    }
    if isinstance(info.cause, ChatRequestError):
        error = info.cause.to_wire()
        error["message"] = str(info.cause)
        error["type"] = info.cause.kind.value
        error["code"] = info.cause.raw_code
    return {"error": error}


@dataclass(frozen=True, slots=True)
class Api:
    """One API the endpoint speaks: how it authenticates and how its errors look."""

    name: str
    """Short name for logs (``openai``, ``anthropic``, ``lm``)."""
    render_error: Callable[[ErrorInfo], Mapping[str, Any]]
    """The JSON body of an error answer in this API's shape."""
    token_headers: tuple[str, ...] = ("authorization",)
    """Where the token may come: ``authorization`` (``Bearer <token>`` only, never ``Basic``)
    and/or another header with the bare token (``x-api-key`` as Anthropic's clients send it,
    ``x-goog-api-key`` as Gemini's)."""
    token_query: tuple[str, ...] = ()
    """Query parameters that may carry the token too (Gemini's clients send ``?key=``)."""
    describe_error: Callable[[BaseException], ErrorInfo | None] | None = None
    """The API's own reading of a failure (its statuses, ``retry-after``, a context-length
    error), tried before :func:`error_info`; None leaves it to :func:`error_info`."""

    def error_info(self, exc: BaseException) -> ErrorInfo:
        """``exc`` as this API describes it."""
        if self.describe_error is not None:
            info = self.describe_error(exc)
            if info is not None:
                return info
        return error_info(exc)


@dataclass(slots=True)
class Request:
    """One request whose head passed the checks and whose body was read."""

    method: str
    path: str
    """Percent-decoded path, without the query string."""
    headers: dict[str, str]
    """Lower-cased names; a repeated header keeps its last value."""
    body: bytes = b""
    query: dict[str, list[str]] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    """What the route's ``{name}`` placeholder matched."""

    def json(self) -> dict[str, Any]:
        """The body as a JSON object (an empty body is ``{}``); 400 otherwise."""
        try:
            obj = loads(self.body or b"{}")
        except ValueError as exc:
            raise HTTPError(400, f"invalid JSON body: {exc}") from None
        if not isinstance(obj, dict):
            raise HTTPError(400, "the body must be a JSON object")
        return obj


class Exchange:
    """Writes one response on a connection (status line once, then body chunks)."""

    def __init__(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, extra: list[tuple[str, str]]
    ) -> None:
        self._conn = conn
        self._writer = writer
        self._extra = extra
        self.started = False
        """True once the status line was sent: a failure after it goes into the body."""

    async def _send(self, event: h11.Event) -> None:
        data = self._conn.send(event)
        if data:
            self._writer.write(data)
            await self._writer.drain()

    async def json(
        self, status: int, body: Any, extra: list[tuple[str, str]] | None = None
    ) -> None:
        """A whole JSON answer."""
        payload = json.dumps(body, ensure_ascii=False).encode()
        headers = [("content-type", "application/json"), ("content-length", str(len(payload)))]
        await self.start(status, headers + (extra or []))
        await self._send(h11.Data(data=payload))
        await self.end()

    async def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        """Send the status line and headers (a streamed body follows)."""
        self.started = True
        await self._send(h11.Response(status_code=status, headers=headers + self._extra))

    async def write(self, data: bytes) -> None:
        """Send a piece of the body (nothing for empty data)."""
        if data:
            await self._send(h11.Data(data=data))

    async def end(self) -> None:
        """End the body."""
        await self._send(h11.EndOfMessage())


Handler = Callable[[Request, Exchange], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Route:
    """``method path -> handler``, answered in ``api``'s shape.

    ``path`` is exact, or ends with one ``{name}`` placeholder that takes the rest of the
    (percent-decoded) path, slashes included: ``/v1/models/{model}``. ``when`` picks between
    routes on the same path by the request's headers (``anthropic-version`` present ...); a
    route with a ``when`` that matches wins over one without.
    """

    method: str
    path: str
    handler: Handler
    api: Api
    when: Callable[[Mapping[str, str]], bool] | None = None

    @property
    def prefix(self) -> tuple[str, str] | None:
        """``(prefix, name)`` for a placeholder route, else None."""
        if not self.path.endswith("}") or "/{" not in self.path:
            return None
        head, _, name = self.path.rpartition("/{")
        return head + "/", name[:-1]


class _Closed(Exception):
    """The connection ends here (answered or not)."""


@dataclass(eq=False)
class _Connection:
    """Book-keeping for one client connection, for the connection cap."""

    task: asyncio.Task[Any] | None
    writer: asyncio.StreamWriter
    busy: bool = False
    """Serving a request whose head was accepted: never closed to make room."""


class HttpCore:
    """Listens on loopback and serves the routes added with :meth:`add_route`.

    ``default_api`` renders errors for requests that match no route. Subclasses set
    :attr:`token`; :meth:`start` needs ``host``/``port``.
    """

    def __init__(
        self,
        *,
        token: str,
        host: str,
        port: int,
        default_api: Api,
        limits: Limits | None = None,
    ) -> None:
        self.token = token
        self.limits = limits or Limits()
        self.default_api = default_api
        self._host = host
        self._port = port
        self._exact: dict[tuple[str, str], list[Route]] = {}
        self._prefixed: list[Route] = []
        self._server: asyncio.Server | None = None
        self._connections: dict[_Connection, None] = {}  # insertion order = age
        self._allowed_hosts: frozenset[str] = frozenset()
        self._refused_since_log = 0
        self._last_cap_log = float("-inf")
        self.url = ""
        """``http://127.0.0.1:<port>`` once started."""

    # ------------------------------------------------------------------ routes

    def add_route(self, route: Route, *, replace: bool = False) -> None:
        """Serve ``route``; a second route on the same method, path and ``when`` needs
        ``replace=True`` (an API module taking over a path, e.g. a model list)."""
        prefix = route.prefix
        if prefix is None:
            routes = self._exact.setdefault((route.method, route.path), [])
        else:
            routes = self._prefixed
        same = [
            r
            for r in routes
            if (r.method, r.path, r.when) == (route.method, route.path, route.when)
        ]
        if same and not replace:
            raise ValueError(f"a route for {route.method} {route.path} exists already")
        for old in same:
            routes.remove(old)
        # routes with a header condition are tried first
        routes.insert(0, route) if route.when is not None else routes.append(route)
        if prefix is not None:
            self._prefixed.sort(key=lambda r: -len(r.path))

    def routes(self) -> list[Route]:
        """Every route, for docs and tests."""
        return [r for rs in self._exact.values() for r in rs] + list(self._prefixed)

    def _match(
        self, method: str, path: str, headers: Mapping[str, str]
    ) -> tuple[Route | None, dict[str, str], bool]:
        """The route, its placeholder value, and whether the path exists for another method."""
        other_method = False
        candidates: list[tuple[Route, dict[str, str]]] = []
        for (m, p), routes in self._exact.items():
            if p == path:
                if m == method:
                    candidates += [(r, {}) for r in routes]
                else:
                    other_method = True
        for route in self._prefixed:
            prefix = route.prefix
            assert prefix is not None
            if path.startswith(prefix[0]) and len(path) > len(prefix[0]):
                if route.method == method:
                    candidates.append((route, {prefix[1]: path[len(prefix[0]) :]}))
                else:
                    other_method = True
        for route, params in candidates:
            if route.when is None or route.when(headers):
                return route, params, other_method
        return None, {}, other_method

    # ------------------------------------------------------------------ lifecycle

    async def _listen(self) -> int:
        self._server = await asyncio.start_server(self._on_connection, self._host, self._port)
        port: int = self._server.sockets[0].getsockname()[1]
        host = f"[{self._host}]" if ":" in self._host else self._host
        self.url = f"http://{host}:{port}"
        names = {host, "127.0.0.1", "localhost"} if self._host != "::1" else {host, "localhost"}
        self._allowed_hosts = frozenset(f"{name}:{port}" for name in names)
        return port

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [c.task for c in self._connections if c.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    @property
    def open_connections(self) -> int:
        """Connections open right now."""
        return len(self._connections)

    # ------------------------------------------------------------------ connections

    def _admit(self, record: _Connection) -> bool:
        """Make room for ``record`` under the cap; False when it must be closed instead."""
        if len(self._connections) >= self.limits.max_connections:
            victim = next((c for c in self._connections if not c.busy), None)
            self._note_refused()
            if victim is None:
                return False
            del self._connections[victim]
            victim.writer.transport.abort()
            if victim.task is not None:
                victim.task.cancel()
        self._connections[record] = None
        return True

    def _note_refused(self) -> None:
        self._refused_since_log += 1
        now = time.monotonic()
        if now - self._last_cap_log >= self.limits.log_interval:
            _log.warning(
                "loopback endpoint: %d connection(s) closed over the cap of %d open connections "
                "(a local process opens many connections; the oldest waiting ones are closed)",
                self._refused_since_log,
                self.limits.max_connections,
            )
            self._refused_since_log = 0
            self._last_cap_log = now

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        record = _Connection(asyncio.current_task(), writer)
        if not self._admit(record):
            writer.transport.abort()
            return
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
        try:
            first = True
            while True:
                record.busy = False
                head = await self._read_head(conn, reader, writer, first)
                first = False
                if head is None:
                    break
                request, route = await self._check_head(head, conn, reader, writer)
                record.busy = True
                await self._read_body(request, route.api, conn, reader, writer)
                await self._serve(request, route, conn, reader, writer)
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    break
                conn.start_next_cycle()
        except (_Closed, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            _log.exception("endpoint connection failed")
        finally:
            self._connections.pop(record, None)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _next_event(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        deadline: float,
        api: Api,
    ) -> Any:
        """The next h11 event, reading until ``deadline`` (then 408 and close)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                error = HTTPError(exc.error_status_hint, f"bad request: {exc}")
                await self._refuse(conn, reader, writer, api, error)
            if event is not h11.NEED_DATA:
                return event
            remaining = deadline - loop.time()
            try:
                if remaining <= 0:
                    raise asyncio.TimeoutError
                data = await asyncio.wait_for(reader.read(_READ), remaining)
            except asyncio.TimeoutError:
                await self._refuse(
                    conn, reader, writer, api, HTTPError(408, "the request took too long to arrive")
                )
            conn.receive_data(data)  # b"" is EOF, which h11 turns into an event

    async def _read_head(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        first: bool,
    ) -> h11.Request | None:
        loop = asyncio.get_running_loop()
        if not first and not conn.trailing_data[0]:
            # kept alive: wait for the next request's first byte, then give it head_timeout
            try:
                data = await asyncio.wait_for(reader.read(_READ), self.limits.idle_timeout)
            except asyncio.TimeoutError:
                return None
            if not data:
                return None
            conn.receive_data(data)
        deadline = loop.time() + self.limits.head_timeout
        event = await self._next_event(conn, reader, writer, deadline, self.default_api)
        if isinstance(event, h11.Request):
            return event
        return None  # ConnectionClosed (h11 turns anything else into an error)

    async def _check_head(
        self,
        head: h11.Request,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> tuple[Request, Route]:
        """Everything that can be decided from the head, before any body byte is read."""
        headers: dict[str, str] = {}
        for name, value in head.headers:
            headers[name.decode("latin-1").lower()] = value.decode("latin-1")
        method = head.method.decode("ascii")
        target = head.target.decode("latin-1")
        raw_path, _, raw_query = target.partition("?")
        api = self.default_api
        try:
            # A web page can make the browser talk to 127.0.0.1 under its own host name (DNS
            # rebinding); it still lacks the token, but refusing foreign Host headers costs
            # nothing.
            host = headers.get("host", "")
            if host.lower() not in self._allowed_hosts:
                raise HTTPError(403, f"unexpected Host header {host!r}: only {self.url} is served")
            # Browsers add Origin to every cross-origin and every POST request; API clients
            # (SDKs, CLIs, curl) never do. A page must not reach the endpoint, token or not.
            if "origin" in headers:
                raise HTTPError(403, "requests from web pages (with an Origin header) are refused")
            try:
                path = unquote(raw_path, errors="strict")
            except UnicodeDecodeError:
                raise HTTPError(400, f"the path {raw_path!r} is not UTF-8 once decoded") from None
            route, params, other_method = self._match(method, path, headers)
            if route is not None:
                api = route.api
            self._check_token(headers, api if route is not None else None, raw_query)
            if route is None:
                if other_method:
                    raise HTTPError(405, f"method not allowed: {method} {path}")
                raise HTTPError(404, f"no such route: {method} {path}")
            length = headers.get("content-length")
            if length is not None and length.isdigit() and int(length) > self.limits.max_body:
                raise HTTPError(
                    413, f"body of {length} bytes is larger than {self.limits.max_body} bytes"
                )
        except HTTPError as exc:
            await self._refuse(conn, reader, writer, api, exc)
        assert route is not None  # (refused above otherwise)
        query = parse_qs(raw_query, keep_blank_values=True)
        request = Request(method, path, headers, b"", query, params)
        return request, route

    def _check_token(self, headers: Mapping[str, str], api: Api | None, raw_query: str) -> None:
        accepted = api.token_headers if api is not None else ("authorization", "x-api-key")
        in_query = api.token_query if api is not None else ()
        expected = self.token.encode()
        ok = False
        for name in accepted:
            value = headers.get(name)
            if value is None:
                continue
            if name == "authorization":
                scheme, _, value = value.partition(" ")
                if scheme.lower() != "bearer":  # Basic and the rest carry no bearer token
                    continue
            # constant time: the comparison says nothing about how much of the token matched
            ok |= hmac.compare_digest(value.strip().encode("latin-1"), expected)
        if in_query and raw_query:
            query = parse_qs(raw_query, keep_blank_values=True)
            for name in in_query:
                for value in query.get(name, ()):
                    ok |= hmac.compare_digest(value.strip().encode("utf-8", "replace"), expected)
        if not ok:
            where = " or ".join(
                [
                    "'Authorization: Bearer <token>'" if n == "authorization" else f"'{n}: <token>'"
                    for n in accepted
                ]
                + [f"'?{n}=<token>'" for n in in_query]
            )
            raise HTTPError(
                401,
                f"missing or wrong token: send {where} with the token from the lmbridge "
                "endpoint file",
                code="invalid_api_key",
                headers=[("www-authenticate", "Bearer")],
            )

    async def _refuse(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        api: Api,
        error: HTTPError,
    ) -> NoReturn:
        """Answer ``error`` (when the connection still can), close without reading the body."""
        if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE) and conn.their_state is not h11.IDLE:
            exchange = Exchange(conn, writer, [("connection", "close")])
            with contextlib.suppress(Exception):
                await self._answer_error(exchange, api, error_info(error))
                await self._linger(reader, writer)
        raise _Closed

    async def _linger(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Half-close, then drop what the client still sends for a moment: closing a socket
        with unread data resets it, and the client may lose the answer it has not read yet."""
        if writer.can_write_eof():
            writer.write_eof()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.linger
        drained = 0
        while drained < self.limits.linger_bytes:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            try:
                data = await asyncio.wait_for(reader.read(_READ), remaining)
            except asyncio.TimeoutError:
                return
            if not data:
                return
            drained += len(data)

    async def _read_body(
        self,
        request: Request,
        api: Api,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        if conn.they_are_waiting_for_100_continue:
            writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
        body = bytearray()
        deadline = asyncio.get_running_loop().time() + self.limits.body_timeout
        while True:
            event = await self._next_event(conn, reader, writer, deadline, api)
            if isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.limits.max_body:
                    await self._refuse(
                        conn,
                        reader,
                        writer,
                        api,
                        HTTPError(413, f"body larger than {self.limits.max_body} bytes"),
                    )
            elif isinstance(event, h11.EndOfMessage):
                request.body = bytes(body)
                return
            else:  # ConnectionClosed mid-body
                raise _Closed

    async def _serve(
        self,
        request: Request,
        route: Route,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """Run the handler; if the client goes away meanwhile, cancel it (and its request)."""
        extra = [("keep-alive", f"timeout={int(self.limits.idle_timeout)}")]
        exchange = Exchange(conn, writer, extra)
        handler = asyncio.ensure_future(self._dispatch(request, route, exchange))
        watch: asyncio.Future[bytes] | None = asyncio.ensure_future(reader.read(_READ))
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
                        raise _Closed
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

    async def _dispatch(self, request: Request, route: Route, exchange: Exchange) -> None:
        """The one error path: whatever a handler raises is answered in its API's shape."""
        mark("endpoint.request", path=request.path)
        try:
            await route.handler(request, exchange)
        except Exception as exc:
            if exchange.started:
                raise
            info = route.api.error_info(exc)
            if info.status >= 500:
                _log.warning("%s %s failed: %s", request.method, request.path, info.message)
            await self._answer_error(exchange, route.api, info)

    @staticmethod
    async def _answer_error(exchange: Exchange, api: Api, info: ErrorInfo) -> None:
        await exchange.json(info.status, api.render_error(info), list(info.headers))
