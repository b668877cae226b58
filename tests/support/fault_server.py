"""An upstream on 127.0.0.1 that fails mid-stream the ways real ones do, for fault tests.

A raw socket server (threads, one connection per request, ``Connection: close``) answering
every POST with a Chat Completions stream: two text deltas ("Hel", "lo"), then whatever the
next :data:`Fault` in its queue says (the last one repeats)::

    with FaultServer() as upstream:
        upstream.faults = ["reset", "ok"]
        ...  # a provider with baseUrl upstream.url + "/v1"
        assert upstream.connections[0].client_closed.wait(5)

- ``ok``: the rest of the answer, a finish reason and ``data: [DONE]``;
- ``reset``: the connection is reset (RST: SO_LINGER 0) after the two deltas;
- ``stall``: no byte more after the two deltas, the connection held open until the client
  closes it (a read timeout's shape);
- ``garbage``: an event that is not JSON, then held open until the client closes it;
- ``cut``: the body ends properly (chunked encoding's last chunk) with no finish reason and no
  ``[DONE]``, as a server that stopped generating;
- ``html``: a 200 answer whose body is an HTML page, not an event stream (a captive portal,
  a proxy's error page).

Each accepted connection is kept as a :class:`Connection` whose ``client_closed`` event is set
when the client closed its end (seen as EOF or a reset on the server's socket).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Connection", "Fault", "FaultServer"]

Fault = Literal["ok", "reset", "stall", "garbage", "cut", "html"]


def _delta(text: str) -> bytes:
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "m",
             "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}  # fmt: skip
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


_FINISH = (
    b'data: {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": '
    b'[{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@dataclass
class Connection:
    """One request the server answered."""

    fault: Fault
    request: bytes = b""
    client_closed: threading.Event = field(default_factory=threading.Event)
    """Set when the client closed the connection (EOF or reset seen by the server)."""


class FaultServer:
    """The failing upstream; use as a context manager."""

    def __init__(self) -> None:
        self.faults: list[Fault] = ["ok"]
        """What the next requests get, in turn (the last one repeats)."""
        self.connections: list[Connection] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def __enter__(self) -> FaultServer:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sock.close()
        for thread in self._threads:
            thread.join(5)

    def _next_fault(self) -> Fault:
        with self._lock:
            return self.faults.pop(0) if len(self.faults) > 1 else self.faults[0]

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            record = Connection(self._next_fault())
            with self._lock:
                self.connections.append(record)
            thread = threading.Thread(target=self._serve, args=(conn, record), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket, record: Connection) -> None:
        try:
            record.request = self._read_request(conn)
            if record.request.startswith(b"GET"):
                body = json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                conn.sendall(head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
                return
            self._answer(conn, record)
        except OSError:
            record.client_closed.set()
        finally:
            if record.fault != "reset":
                conn.close()

    @staticmethod
    def _read_request(conn: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            piece = conn.recv(65536)
            if not piece:
                return data
            data += piece
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            piece = conn.recv(65536)
            if not piece:
                break
            body += piece
        return head + b"\r\n\r\n" + body

    def _answer(self, conn: socket.socket, record: Connection) -> None:
        fault = record.fault
        if fault == "html":
            body = b"<html><body><h1>Sign in to the network</h1></body></html>"
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n"
                b"Connection: close\r\n\r\n%s" % (len(body), body)
            )
            return
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        for text in ("Hel", "lo"):
            conn.sendall(_chunk(_delta(text)))
        if fault == "ok":
            conn.sendall(_chunk(_delta(" there")) + _chunk(_FINISH) + _chunk(b"data: [DONE]\n\n"))
            conn.sendall(b"0\r\n\r\n")
        elif fault == "cut":
            conn.sendall(b"0\r\n\r\n")
        elif fault == "reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # with linger 0: a RST, not a FIN
        elif fault == "garbage":
            conn.sendall(_chunk(b"data: {\"choices\": [{\"delta\": \x00\xff<html>\n\n"))
            self._hold(conn, record)
        elif fault == "stall":
            self._hold(conn, record)

    def _hold(self, conn: socket.socket, record: Connection) -> None:
        """Send nothing more; wait until the client closes (at most 60 s)."""
        conn.settimeout(60)
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass
        record.client_closed.set()

    def requests(self) -> Iterator[bytes]:
        """The requests received so far."""
        return (c.request for c in list(self.connections))
