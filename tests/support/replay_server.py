"""A real HTTP upstream on 127.0.0.1 that replays recorded streams and records what it was sent.

Tests of the gateway, the host and the end-to-end run point an upstream client at
:attr:`ReplayServer.url` instead of a provider's API::

    with ReplayServer() as upstream:
        upstream.route("POST", "/v1/chat/completions", Reply.fixture("openai-chat/openai-text.chunks.txt"))
        upstream.route("GET", "/v1/models", Reply.json({"data": [{"id": "gpt-4o"}]}))
        ...  # the client under test talks to upstream.url + "/v1"
        req = upstream.requests[0]
        assert req.json()["stream"] is True and req.headers["authorization"] == "Bearer sk-test"

- A route answers with a list of :class:`Reply` objects, one per request, in turn; the last one
  repeats (``[Reply.error(429, retry_after=1), Reply.fixture(...)]`` is a retry that succeeds).
- A route may ``check`` each request as the real upstream would: a check that returns a
  :class:`Reply` (an error, say) answers with it instead of the route's next reply.
- Streaming replies are sent with chunked transfer encoding, one SSE event per chunk, with an
  optional ``delay`` between chunks, so a client sees them arrive one by one.
- ``Reply(..., hang=True)`` keeps the response open after its chunks until the client goes away
  (or ``hang_timeout``): the shape of a cancellation test.
- Every request is kept as a :class:`RecordedRequest`: method, path, query, headers (lower-case
  names), body, and whether the client closed the connection before the reply was complete
  (:attr:`RecordedRequest.closed_early`; :meth:`RecordedRequest.wait_done` waits for the end).

Threads, not asyncio: the server runs beside any event loop (httpx.AsyncClient, the host in a
subprocess, VS Code). It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from support.streams import fixture_body

__all__ = ["RecordedRequest", "ReplayServer", "Reply", "split_events"]


def split_events(body: bytes) -> list[bytes]:
    """An SSE body cut after each blank line (one event per piece), nothing lost or added."""
    sep = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    pieces: list[bytes] = []
    start = 0
    while (i := body.find(sep, start)) >= 0:
        pieces.append(body[start : i + len(sep)])
        start = i + len(sep)
    if start < len(body):
        pieces.append(body[start:])
    return pieces


@dataclass
class Reply:
    """One HTTP response: status, headers and a body sent whole or in chunks."""

    status: int = 200
    """HTTP status code."""
    headers: dict[str, str] = field(default_factory=dict)
    """Response headers (Content-Type included)."""
    body: bytes | None = None
    """A body sent at once with Content-Length (when ``chunks`` is None)."""
    chunks: list[bytes] | None = None
    """A streamed body: each item is one chunk of a chunked-encoding response."""
    delay: float = 0.0
    """Seconds to wait before each chunk."""
    hang: bool = False
    """After the chunks, keep the response open until the client closes (or ``hang_timeout``)."""
    hang_timeout: float = 30.0
    """Longest a hanging response stays open."""
    keep_alive: bool = False
    """Keep the connection open for the client's next request after this response, as real
    upstreams do (by default each response closes its connection, so that every request's
    connection is new)."""

    @classmethod
    def sse(
        cls,
        body: bytes,
        *,
        delay: float = 0.0,
        hang: bool = False,
        hang_timeout: float = 30.0,
        status: int = 200,
    ) -> Reply:
        """An SSE body streamed one event per chunk."""
        return cls(
            status=status,
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
            chunks=split_events(body),
            delay=delay,
            hang=hang,
            hang_timeout=hang_timeout,
        )

    @classmethod
    def fixture(
        cls, rel: str, *, delay: float = 0.0, hang: bool = False, hang_timeout: float = 30.0
    ) -> Reply:
        """A recorded stream from ``tests/fixtures/<rel>``, as the upstream of its folder sends it
        (``event:`` lines for the Responses API, ``data: [DONE]`` for Chat Completions, ``.sse``
        files as they are)."""
        return cls.sse(fixture_body(rel), delay=delay, hang=hang, hang_timeout=hang_timeout)

    @classmethod
    def json(cls, value: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
        """A JSON body."""
        return cls(
            status=status,
            headers={"Content-Type": "application/json", **(headers or {})},
            body=json.dumps(value).encode("utf-8"),
        )

    @classmethod
    def error(
        cls,
        status: int,
        body: Any = None,
        *,
        retry_after: float | str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """An error status with a JSON body (OpenAI's shape by default) and ``Retry-After``."""
        if body is None:
            body = {"error": {"message": f"replayed error {status}", "type": "replay", "code": status}}
        extra = dict(headers or {})
        if retry_after is not None:
            extra["Retry-After"] = str(retry_after)
        return cls.json(body, status=status, headers=extra)


@dataclass
class RecordedRequest:
    """What a client sent, and how its response ended."""

    method: str
    path: str
    """The path without the query string."""
    query: dict[str, list[str]]
    headers: dict[str, str]
    """Header names in lower case."""
    body: bytes
    status: int = 0
    """The status the server answered with."""
    chunks_sent: int = 0
    """Body chunks written before the response ended."""
    closed_early: bool = False
    """The client closed the connection before the response was complete."""
    received_at: float = field(default_factory=time.monotonic)
    ended_at: float | None = None
    _done: threading.Event = field(default_factory=threading.Event, repr=False)

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)

    def wait_done(self, timeout: float = 10.0) -> bool:
        """Wait until the server finished with this request (completed or client gone)."""
        return self._done.wait(timeout)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests read `requests`, not stderr

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        split = urlsplit(self.path)
        rec = RecordedRequest(
            method=self.command,
            path=split.path,
            query=parse_qs(split.query),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        owner = self.server.owner
        reply = owner._checked(self.command, split.path, rec) or owner._next_reply(self.command, split.path)
        rec.status = reply.status
        owner._record(rec)
        try:
            self._send(reply, rec)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            rec.closed_early = True
        finally:
            rec.ended_at = time.monotonic()
            rec._done.set()
            # a kept-alive connection takes the next request, as real upstreams' do
            self.close_connection = rec.closed_early or not reply.keep_alive

    do_GET = do_POST = do_PUT = do_DELETE = _serve

    def _peer_closed(self, wait: float) -> bool:
        """Whether the client closed its end, waiting up to ``wait`` seconds to find out."""
        sock = self.connection
        readable, _, _ = select.select([sock], [], [], wait)
        if not readable:
            return False
        try:
            return sock.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _connection_header(self, reply: Reply) -> None:
        if not reply.keep_alive:
            self.send_header("Connection", "close")

    def _send(self, reply: Reply, rec: RecordedRequest) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.chunks is None:
            body = reply.body or b""
            self.send_header("Content-Length", str(len(body)))
            self._connection_header(reply)
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            return
        self.send_header("Transfer-Encoding", "chunked")
        self._connection_header(reply)
        self.end_headers()
        self.wfile.flush()
        for chunk in reply.chunks:
            # Waiting doubles as watching: a client that hangs up meanwhile is noticed at once.
            if self._peer_closed(reply.delay):
                rec.closed_early = True
                return
            if not chunk:
                continue
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
            rec.chunks_sent += 1
        if reply.hang:
            end = time.monotonic() + reply.hang_timeout
            while time.monotonic() < end:
                if self._peer_closed(min(0.05, max(0.0, end - time.monotonic()))):
                    rec.closed_early = True
                    return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, owner: ReplayServer) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that drops a kept-alive connection (httpcore aborts it: a reset) while it
        # waits for the next request is no error; anything else is printed as before
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ReplayServer:
    """The replaying upstream; use as a context manager (or :meth:`start` / :meth:`close`)."""

    def __init__(self) -> None:
        self._routes: dict[tuple[str, str], list[Reply]] = {}
        self._served: dict[tuple[str, str], int] = {}
        self._checks: dict[tuple[str, str], Callable[[RecordedRequest], Reply | None]] = {}
        self._lock = threading.Lock()
        self._new_request = threading.Condition(self._lock)
        self.requests: list[RecordedRequest] = []
        """Every request received, in order."""
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ReplayServer:
        """Listen on 127.0.0.1 on a free port and serve in a background thread."""
        self._server = _Server(self)
        # A short poll interval: shutdown() waits up to one interval, and every test closes a server.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="replay-server", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving (open hanging responses end with their client or their timeout)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._server is None:
            raise RuntimeError("the replay server is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ routes

    def route(
        self,
        method: str,
        path: str,
        replies: Reply | Sequence[Reply],
        *,
        check: Callable[[RecordedRequest], Reply | None] | None = None,
    ) -> None:
        """Answer ``method path`` with ``replies`` in turn (the last one repeats); ``check``,
        when given, sees each request first and may answer it with a reply of its own."""
        items = [replies] if isinstance(replies, Reply) else list(replies)
        if not items:
            raise ValueError("route: give at least one reply")
        with self._lock:
            self._routes[(method.upper(), path)] = items
            self._served[(method.upper(), path)] = 0
            if check is None:
                self._checks.pop((method.upper(), path), None)
            else:
                self._checks[(method.upper(), path)] = check

    def _checked(self, method: str, path: str, rec: RecordedRequest) -> Reply | None:
        with self._lock:
            check = self._checks.get((method.upper(), path))
        return check(rec) if check is not None else None

    def _next_reply(self, method: str, path: str) -> Reply:
        with self._lock:
            key = (method.upper(), path)
            replies = self._routes.get(key)
            if replies is None:
                known = ", ".join(f"{m} {p}" for m, p in self._routes) or "none"
                return Reply.error(404, {"error": {"message": f"no route for {method} {path} (routes: {known})"}})
            n = self._served[key]
            self._served[key] = n + 1
            return replies[min(n, len(replies) - 1)]

    def _record(self, rec: RecordedRequest) -> None:
        with self._new_request:
            self.requests.append(rec)
            self._new_request.notify_all()

    # ------------------------------------------------------------------ waiting

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Wait until ``count`` requests arrived; returns them (raises TimeoutError otherwise)."""
        end = time.monotonic() + timeout
        with self._new_request:
            while len(self.requests) < count:
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self.requests)} of {count} requests arrived in {timeout} s")
                self._new_request.wait(left)
            return list(self.requests)

    def requests_to(self, path: str, method: str | None = None) -> list[RecordedRequest]:
        """The recorded requests for one path (and method)."""
        with self._lock:
            return [r for r in self.requests if r.path == path and (method is None or r.method == method.upper())]

