"""A JSON-RPC 2.0 peer: both sides send requests and notifications.

:class:`JsonRpcConnection` is fed bytes (:meth:`~JsonRpcConnection.feed`) and writes frames
through a function it is given, so the same class serves the host (over stdio), the client the
demo and tests use (over a subprocess's pipes) and in-memory tests. Incoming requests run as
one task each; ``$/cancelRequest`` cancels the task (and with it the upstream stream) and the
request answers ``-32800``. Outgoing requests are futures resolved by the peer's responses;
cancelling the awaiting task sends ``$/cancelRequest``, as vscode-jsonrpc does.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..provider import CancellationToken, CancellationTokenSource
from .framing import FrameDecoder, FrameError, Message, encode_message

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "REQUEST_FAILED",
    "IncomingRequest",
    "JsonRpcConnection",
    "RemoteError",
    "RequestId",
    "RpcError",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_FAILED = -32803
"""LSP's RequestFailed: the method ran and failed (``data`` says how)."""
REQUEST_CANCELLED = -32800
"""LSP's RequestCancelled."""

_log = logging.getLogger("lmbridge.host.rpc")

RequestId = int | str


class RpcError(Exception):
    """Raise from a handler to answer with this JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        """The ``error`` member of a response."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


class RemoteError(Exception):
    """The peer answered one of our requests with an error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data


@dataclass
class IncomingRequest:
    """A request being served: its id, method and cancellation."""

    id: RequestId
    method: str
    source: CancellationTokenSource = field(default_factory=CancellationTokenSource)
    task: asyncio.Task[Any] | None = None
    on_cancel: list[Callable[[], None]] = field(default_factory=list)

    @property
    def token(self) -> CancellationToken:
        """Cancelled when the peer sends ``$/cancelRequest`` (or the connection ends)."""
        return self.source.token

    def cancel(self) -> None:
        """Cancel: hooks first (so nothing more is sent), then the token, then the task.

        Only the first call does anything: cancelling the task again (a repeated
        ``$/cancelRequest``, then a shutdown or the connection's end) would land in the
        handler's clean-up, such as the close of its upstream connection.
        """
        if self.source.token.is_cancellation_requested:
            return
        hooks, self.on_cancel = self.on_cancel, []
        for hook in hooks:
            try:
                hook()
            except Exception:
                _log.exception("a cancellation hook failed")
        self.source.cancel()
        if self.task is not None:
            self.task.cancel()


RequestHandler = Callable[[Any, IncomingRequest], Awaitable[Any]]
NotificationHandler = Callable[[Any], Any]
ErrorMapper = Callable[[BaseException, IncomingRequest], RpcError]


class JsonRpcConnection:
    """One JSON-RPC 2.0 peer over a byte stream.

    ``write`` sends bytes (it must not block for long: an asyncio transport's ``write``).
    Register handlers with :meth:`on_request` / :meth:`on_notification`; feed received bytes to
    :meth:`feed`; call :meth:`connection_lost` at EOF.
    """

    def __init__(
        self,
        write: Callable[[bytes], None],
        *,
        error_mapper: ErrorMapper | None = None,
        name: str = "peer",
    ) -> None:
        self._write = write
        self._decoder = FrameDecoder()
        self._requests: dict[str, RequestHandler] = {}
        self._notifications: dict[str, NotificationHandler] = {}
        self._inflight: dict[RequestId, IncomingRequest] = {}
        self._pending: dict[RequestId, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._error_mapper = error_mapper
        self._name = name
        self.closed = asyncio.Event()
        """Set when the connection ended (EOF or :meth:`close`)."""
        self.malformed = 0
        """Frames or messages received that could not be used (each answered with an error)."""

    # ------------------------------------------------------------------ registration

    def on_request(self, method: str, handler: RequestHandler) -> None:
        """Serve ``method`` with ``await handler(params, request)``; its return is the result."""
        self._requests[method] = handler

    def on_notification(self, method: str, handler: NotificationHandler) -> None:
        """Call ``handler(params)`` for each ``method`` notification (may return an awaitable)."""
        self._notifications[method] = handler

    # ------------------------------------------------------------------ sending

    def send(self, message: Mapping[str, Any]) -> None:
        """Write one message (a no-op once closed)."""
        if self.closed.is_set():
            return
        self._write(encode_message(message))

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def send_request(
        self, method: str, params: Any = None
    ) -> tuple[RequestId, asyncio.Future[Any]]:
        """Send a request; return its id and the future of its result."""
        ident = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.closed.is_set():
            fut.set_exception(ConnectionError(f"the connection to the {self._name} is closed"))
            return ident, fut
        self._pending[ident] = fut
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return ident, fut

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and await its result; cancelling the await cancels the request.

        Raises :class:`RemoteError` when the peer answers with an error.
        """
        ident, fut = self.send_request(method, params)
        try:
            return await fut
        except asyncio.CancelledError:
            # the answer (-32800 or a late result) is not wanted any more
            if self._pending.pop(ident, None) is not None:
                self.cancel_request(ident)
            raise

    def cancel_request(self, ident: RequestId) -> None:
        """Ask the peer to cancel our request ``ident`` (``$/cancelRequest``)."""
        self.notify("$/cancelRequest", {"id": ident})

    # ------------------------------------------------------------------ receiving

    def feed(self, data: bytes) -> None:
        """Decode received bytes and dispatch every complete message.

        A frame that cannot be decoded is logged and answered with a parse error (under its id
        when one can be read, else id null), and a request whose dispatch fails with an
        internal error: neither costs the other messages of the same read.
        """
        try:
            events = self._decoder.feed(data)
        except Exception:  # a decoder bug must not end the connection
            _log.exception("decoding input from the %s failed", self._name)
            self._decoder = FrameDecoder()
            return
        for event in events:
            if isinstance(event, FrameError):
                self.malformed += 1
                _log.error("malformed input from the %s: %s", self._name, event.message)
                # without a readable id, JSON-RPC answers with id null
                self._send_error(event.id, PARSE_ERROR, f"parse error: {event.message}")
                continue
            try:
                self._dispatch(event)
            except Exception as exc:
                self.malformed += 1
                _log.exception("handling a message from the %s failed", self._name)
                ident = event.value.get("id") if isinstance(event.value, dict) else None
                if _valid_id(ident) is not None and "method" in event.value:
                    self._send_error(ident, INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")

    def _dispatch(self, event: Message) -> None:
        msg = event.value
        if not isinstance(msg, dict):
            self.malformed += 1
            _log.error("a JSON-RPC message must be an object, got %s", type(msg).__name__)
            self._send_error(None, INVALID_REQUEST, "a message must be a JSON object")
            return
        method = msg.get("method")
        ident = msg.get("id")
        if method is None:
            if "result" in msg or "error" in msg:
                self._on_response(msg)
            else:
                self._send_error(
                    _valid_id(ident), INVALID_REQUEST, "neither a request nor a response"
                )
            return
        if not isinstance(method, str):
            self._send_error(_valid_id(ident), INVALID_REQUEST, "'method' must be a string")
            return
        params = msg.get("params")
        valid = _valid_id(ident)
        if "id" not in msg:
            self._on_notification(method, params)
        elif valid is None:
            self._send_error(None, INVALID_REQUEST, "'id' must be a string or an integer")
        else:
            self._on_request(valid, method, params)

    def _on_response(self, msg: dict[str, Any]) -> None:
        fut = self._pending.pop(msg.get("id"), None)  # type: ignore[arg-type]
        if fut is None or fut.done():
            _log.debug("response to unknown or cancelled request %r", msg.get("id"))
            return
        error = msg.get("error")
        if error is not None:
            if not isinstance(error, dict):
                error = {"code": INTERNAL_ERROR, "message": str(error)}
            code = error.get("code", INTERNAL_ERROR)
            message = str(error.get("message", ""))
            if isinstance(code, bool) or not isinstance(code, int):
                # the request must still end: with the error, its code said to be malformed
                message = f"{message} (the peer's error code was not an integer: {code!r:.40})"
                code = INTERNAL_ERROR
            fut.set_exception(RemoteError(code, message, error.get("data")))
        else:
            fut.set_result(msg.get("result"))

    def _on_notification(self, method: str, params: Any) -> None:
        if method == "$/cancelRequest":
            ident = params.get("id") if isinstance(params, dict) else None
            request = self._inflight.get(ident)  # type: ignore[arg-type]
            if request is not None:
                _log.debug("cancelling request %r (%s)", ident, request.method)
                request.cancel()
            return
        handler = self._notifications.get(method)
        if handler is None:
            if not method.startswith("$/"):
                _log.debug("ignoring notification %s", method)
            return
        try:
            result = handler(params)
            if asyncio.iscoroutine(result):
                task = asyncio.ensure_future(result)
                task.add_done_callback(_log_task_failure)
        except Exception:
            _log.exception("notification handler for %s failed", method)

    def _on_request(self, ident: RequestId, method: str, params: Any) -> None:
        handler = self._requests.get(method)
        if handler is None:
            self._send_error(ident, METHOD_NOT_FOUND, f"unknown method {method!r}")
            return
        if ident in self._inflight:
            self._send_error(ident, INVALID_REQUEST, f"request id {ident!r} is already in use")
            return
        request = IncomingRequest(ident, method)
        self._inflight[ident] = request
        request.task = asyncio.ensure_future(self._serve(handler, params, request))
        request.task.add_done_callback(lambda task: self._never_started(task, request))

    def _never_started(self, task: asyncio.Future[Any], request: IncomingRequest) -> None:
        # A ``$/cancelRequest`` right behind its request (VS Code sends one as soon as a token
        # fires) cancels the task before its first step: the coroutine is then closed without
        # running, so ``_serve`` neither answers nor leaves ``_inflight``. Answer for it here.
        if task.cancelled():
            self._inflight.pop(request.id, None)
            self._send_error(request.id, REQUEST_CANCELLED, "the request was cancelled")

    async def _serve(self, handler: RequestHandler, params: Any, request: IncomingRequest) -> None:
        try:
            result = await handler(params, request)
        except asyncio.CancelledError:
            self._send_error(request.id, REQUEST_CANCELLED, "the request was cancelled")
        except RpcError as exc:
            self.send({"jsonrpc": "2.0", "id": request.id, "error": exc.to_json()})
        except Exception as exc:
            error = self._map_error(exc, request)
            self.send({"jsonrpc": "2.0", "id": request.id, "error": error.to_json()})
        else:
            if request.source.token.is_cancellation_requested:
                # finished in the same step the cancel arrived: still answer as cancelled
                self._send_error(request.id, REQUEST_CANCELLED, "the request was cancelled")
            else:
                self.send({"jsonrpc": "2.0", "id": request.id, "result": result})
        finally:
            self._inflight.pop(request.id, None)

    def _map_error(self, exc: BaseException, request: IncomingRequest) -> RpcError:
        if self._error_mapper is not None:
            try:
                return self._error_mapper(exc, request)
            except Exception:
                _log.exception("mapping an error failed")
        _log.error("%s failed", request.method, exc_info=exc)
        return RpcError(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")

    def _send_error(self, ident: RequestId | None, code: int, message: str) -> None:
        self.send({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}})

    # ------------------------------------------------------------------ lifecycle

    @property
    def inflight(self) -> dict[RequestId, IncomingRequest]:
        """Requests being served, by id."""
        return self._inflight

    def cancel_all(self) -> None:
        """Cancel every request being served."""
        for request in list(self._inflight.values()):
            request.cancel()

    def connection_lost(self) -> None:
        """The byte stream ended: cancel served requests, fail our pending ones."""
        if self._decoder.pending:
            _log.error("the %s closed the stream inside a frame", self._name)
        self.cancel_all()
        self.closed.set()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError(f"the connection to the {self._name} closed"))
        self._pending.clear()

    async def wait_closed(self) -> None:
        """Return once the connection ended."""
        await self.closed.wait()


def _valid_id(ident: Any) -> RequestId | None:
    if isinstance(ident, bool) or not isinstance(ident, (int, str)):
        return None
    return ident


def _log_task_failure(task: asyncio.Future[Any]) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        exc = task.exception()
        if exc is not None:
            _log.error("a notification handler failed", exc_info=exc)
