"""A tiny HTTP proxy on 127.0.0.1 for tests: forwards absolute-form requests and tunnels
``CONNECT``, recording what it saw.

Whatever host a request names, the proxy connects to ``target`` (a local server), so a test
can use names that do not resolve (``http://upstream.test/v1``): only the proxy needs to reach
them. Forwarded requests get ``Connection: close``; the proxy relays the answer until the
server closes. A ``CONNECT`` is answered ``200`` and its bytes are relayed both ways (and kept
in :attr:`ProxySeen.tunnelled`, to check that nothing readable went through).
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from dataclasses import dataclass, field

__all__ = ["ProxySeen", "TestProxy"]


@dataclass
class ProxySeen:
    """One request the proxy received."""

    method: str
    target: str
    """The request target: an absolute URL, or ``host:port`` for ``CONNECT``."""
    headers: dict[str, str]
    """Header names in lower case."""
    body: bytes = b""
    tunnelled: bytearray = field(default_factory=bytearray)
    """The bytes the client sent through a ``CONNECT`` tunnel."""


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _pipe(src: socket.socket, dst: socket.socket, keep: bytearray | None = None) -> None:
    with contextlib.suppress(OSError):
        while True:
            chunk = src.recv(65536)
            if not chunk:
                break
            if keep is not None:
                keep.extend(chunk)
            dst.sendall(chunk)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        client: socket.socket = self.request
        head, rest = _read_head(client)
        if not head:
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        seen = ProxySeen(method, target, headers)
        self.server.owner.seen.append(seen)
        upstream = socket.create_connection(("127.0.0.1", self.server.owner.target_port), 10)
        with upstream:
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                seen.tunnelled.extend(rest)
                upstream.sendall(rest)
                back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
                back.start()
                _pipe(client, upstream, seen.tunnelled)
                back.join(10)
                return
            length = int(headers.get("content-length", "0"))
            body = rest
            while len(body) < length:
                chunk = client.recv(65536)
                if not chunk:
                    break
                body += chunk
            seen.body = body
            path = "/" + target.split("://", 1)[-1].split("/", 1)[-1] if "://" in target else target
            out = [f"{method} {path} {version}"]
            for line in lines[1:]:
                name = line.partition(":")[0].strip().lower()
                if name not in ("connection", "proxy-connection", "proxy-authorization"):
                    out.append(line)
            out.append("Connection: close")
            upstream.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + body)
            _pipe(upstream, client)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, owner: TestProxy) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.owner = owner


class TestProxy:
    """``with TestProxy(target_port) as proxy:`` ... ``proxy.url``, ``proxy.seen``."""

    __test__ = False  # not a test class

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.seen: list[ProxySeen] = []
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> TestProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
