"""A tiny SOCKS5 proxy on 127.0.0.1 for tests (RFC 1928, no authentication, ``CONNECT`` only),
recording the destinations it was asked for.

Whatever host a client names, the proxy connects to 127.0.0.1 at the port asked for, so a test
can use names that do not resolve (``http://upstream.test:<port>/v1``): only the proxy needs
to reach them.
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading

from support.proxy import _pipe

__all__ = ["SocksProxy"]


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        client: socket.socket = self.request
        try:
            version, count = _exactly(client, 2)
            methods = _exactly(client, count)
            if version != 5 or 0 not in methods:
                client.sendall(b"\x05\xff")
                return
            client.sendall(b"\x05\x00")
            _, command, _, kind = _exactly(client, 4)
            if kind == 1:
                host = socket.inet_ntoa(_exactly(client, 4))
            elif kind == 3:
                host = _exactly(client, _exactly(client, 1)[0]).decode()
            else:
                host = socket.inet_ntop(socket.AF_INET6, _exactly(client, 16))
            (port,) = struct.unpack("!H", _exactly(client, 2))
            self.server.owner.seen.append((host, port))
            if command != 1:
                client.sendall(b"\x05\x07\x00\x01" + bytes(6))
                return
            upstream = socket.create_connection(("127.0.0.1", port))
        except (OSError, ValueError):
            return
        client.sendall(b"\x05\x00\x00\x01" + bytes(6))
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join(10)
        upstream.close()


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: SocksProxy


class SocksProxy:
    """The proxy; a context manager. ``seen`` holds each ``(host, port)`` asked for."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def __enter__(self) -> SocksProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
