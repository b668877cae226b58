"""A hostile HTTP upstream on 127.0.0.1: the answers a malicious ``baseUrl`` can give.

Each path plays one attack (the host contacts any provider's ``baseUrl`` when VS Code lists
models, with no user action, so a repository's provider entry can point the host here)::

    with HostileUpstream() as server:
        base = server.url + "/bomb"          # GET /bomb/models: a gzip bomb
        base = server.url + "/bomb2"         # GET /bomb2/models: gzip inside gzip
        base = server.url + "/trickle"       # GET /trickle/models: one byte a second, forever
        base = server.url + "/endless-line"  # POST .../chat/completions: one line, no newline, forever
        base = server.url + "/huge-event"    # POST: one event of many lines that never ends
        base = server.url + "/huge-answer"   # POST: valid small events without end
        base = server.url + "/deep-args"     # POST: a tool call whose arguments nest 5,000 deep
        base = server.url + "/good"          # an honest upstream: one model, one short answer

Endless answers are written until the client closes the connection (or ``limit`` bytes, a
safety net so that a test without the defence ends). Threads, not asyncio: the host under test
is a subprocess. It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import functools
import gzip
import json
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["HostileUpstream"]

GOOD_TEXT = "an honest answer"


@functools.cache
def _gzip_twice(size: int) -> bytes:
    return gzip.compress(_gzip_bomb(size), 9)


@functools.cache
def _gzip_bomb(size: int) -> bytes:
    """A valid-looking model list start and ``size`` bytes of spaces, gzipped (about 1000:1),
    made a MiB at a time (the test process never holds the inflated body)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip container
    out = [packer.compress(b'{"data": [')]
    block = b" " * (1 << 20)
    for _ in range(size >> 20):
        out.append(packer.compress(block))
    out.append(packer.flush())
    return b"".join(out)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        kind = self.path.strip("/").split("/", 1)[0]
        self.server.owner.hits.append(("GET", self.path))
        try:
            if kind in ("bomb", "bomb2"):
                owner = self.server.owner
                body, coding = (owner.bomb, "gzip") if kind == "bomb" else (owner.bomb2, "gzip, gzip")
                self._head(200, "application/json", {"Content-Encoding": coding, "Content-Length": str(len(body))})
                self.wfile.write(body)
            elif kind == "trickle":
                self._head(200, "application/json", {"Transfer-Encoding": "chunked"})
                self._write_chunked(b'{"data": [', delay=0)
                self._forever(b" ", delay=1.0)
            elif kind == "good":
                body = json.dumps({"data": [{"id": "m"}]}).encode()
                self._head(200, "application/json", {"Content-Length": str(len(body))})
                self.wfile.write(body)
            else:
                body = json.dumps({"data": [{"id": "m"}]}).encode()
                self._head(200, "application/json", {"Content-Length": str(len(body))})
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass
        self.close_connection = True

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        kind = self.path.strip("/").split("/", 1)[0]
        self.server.owner.hits.append(("POST", self.path))
        try:
            self._head(200, "text/event-stream", {"Transfer-Encoding": "chunked"})
            if kind == "endless-line":
                self._write_chunked(b"data: " + json.dumps(_chat_chunk({"content": ""}))[:-1].encode())
                self._forever(b"x" * 65536)
            elif kind == "huge-event":
                self._forever(b"data: " + b"y" * 65530 + b"\n")
            elif kind == "huge-answer":
                self._write_chunked(_sse(_chat_chunk({"role": "assistant", "content": ""})))
                event = _sse(_chat_chunk({"content": "z" * 4000}))
                self._forever(event * 16)
            elif kind == "deep-args":
                depth = self.server.owner.depth
                args = "[" * depth + "]" * depth
                args = '{"a": ' + args + "}"
                call = {"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": "run", "arguments": args}}
                self._write_chunked(_sse(_chat_chunk({"role": "assistant", "tool_calls": [call]})))
                self._write_chunked(_sse(_chat_chunk({}, "tool_calls")) + b"data: [DONE]\n\n")
                self._write_chunked(b"")
            else:
                self._write_chunked(_sse(_chat_chunk({"role": "assistant", "content": GOOD_TEXT})))
                self._write_chunked(_sse(_chat_chunk({}, "stop")) + b"data: [DONE]\n\n")
                self._write_chunked(b"")
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass
        self.close_connection = True

    def _head(self, status: int, content_type: str, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.flush()

    def _write_chunked(self, data: bytes, delay: float = 0.0) -> None:
        if delay:
            time.sleep(delay)
        self.wfile.write(_chunk(data))
        self.wfile.flush()

    def _forever(self, piece: bytes, delay: float = 0.0) -> None:
        """``piece`` again and again until the client goes away (or the safety limit)."""
        owner = self.server.owner
        sent = 0
        while sent < owner.limit and not owner.stopping.is_set():
            if delay and owner.stopping.wait(delay):
                break
            self.wfile.write(_chunk(piece))
            sent += len(piece)
        owner.sent.append(sent)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: HostileUpstream


class HostileUpstream:
    """The server; a context manager (``url`` is ``http://127.0.0.1:<port>``)."""

    def __init__(self, *, limit: int = 4 << 30, bomb_size: int = 400 << 20, depth: int = 5000) -> None:
        self.limit = limit
        """The most bytes an endless answer sends (a safety net for tests without the defence)."""
        self.depth = depth
        """How deep the ``deep-args`` tool call's arguments nest."""
        self.bomb = _gzip_bomb(bomb_size)
        self.bomb2 = _gzip_twice(bomb_size)
        """A gzip bomb gzipped again (``Content-Encoding: gzip, gzip``): a few KiB that a
        decoder applying both layers a network read at a time inflates by gigabytes at once."""
        self.hits: list[tuple[str, str]] = []
        self.sent: list[int] = []
        """Bytes each endless answer sent before the client went away."""
        self.stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> HostileUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
