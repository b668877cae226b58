"""Running the host on the process's stdin/stdout.

stdout carries the protocol only. Before anything else runs, the protocol's file descriptors
are duplicated and fd 1 is pointed at stderr (and fd 0 at the null device), so a stray
``print`` in a provider, a C extension writing to fd 1 or a child process cannot corrupt the
stream, nor can anything read the extension's messages away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import stat
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .logs import LogLevels
from .server import HostConnection, HostServer

__all__ = ["claim_stdio", "serve_stdio"]

_log = logging.getLogger("lmbridge.host")


def claim_stdio() -> tuple[int, int]:
    """Take fds 0/1 for the protocol; return (input fd, output fd) and redirect the originals."""
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)  # anything written to fd 1 from now on lands in stderr
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = sys.stderr
    return proto_in, proto_out


async def serve_stdio(
    file_config: Mapping[str, Any] | None = None,
    fds: tuple[int, int] | None = None,
    *,
    log_levels: LogLevels | None = None,
    strict: str | None = None,
) -> int:
    """Serve the bridge protocol until ``exit`` or EOF; return the exit status.

    ``log_levels`` receives the ``logLevel`` setting (see :mod:`.logs`). ``strict`` (the name of
    the configuration file, for ``lmbridge host --config``) loads ``file_config``'s providers
    before serving and refuses to start (exit 2, one line per provider on stderr) when one
    cannot load; the host the extension starts is not strict: it serves the providers that
    load and reports the others in ``initialize``.
    """
    proto_in, proto_out = fds if fds is not None else claim_stdio()
    loop = asyncio.get_running_loop()
    write, close_writer = await _writer(loop, proto_out)
    connection = HostConnection(write, name="extension")
    server = HostServer(connection, file_config=file_config, log_levels=log_levels)
    if strict is not None:
        failed = await server.preload()
        if failed:
            for name, error in failed:
                print(f"lmbridge host: {strict}: provider {name!r}: {error}", file=sys.stderr)
            print(
                f"lmbridge host: not started: {len(failed)} provider(s) in {strict} cannot "
                f"load; `lmbridge check --config {strict}` checks every provider",
                file=sys.stderr,
            )
            await server.aclose()
            await close_writer()
            os.close(proto_in)
            return 2
    stop_reader = await _reader(loop, proto_in, connection)
    # SIGTERM (a process group stopped at once, a service manager) ends the host like `exit`
    # does, so apps stop and the endpoint file with its token is removed.
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # Windows, threads
        loop.add_signal_handler(signal.SIGTERM, server.exited.set)
    _log.info("lmbridge host ready (pid %d)", os.getpid())
    done_exit = asyncio.ensure_future(server.exited.wait())
    done_eof = asyncio.ensure_future(connection.wait_closed())
    await asyncio.wait({done_exit, done_eof}, return_when=asyncio.FIRST_COMPLETED)
    for fut in (done_exit, done_eof):
        fut.cancel()
    tasks = [r.task for r in connection.inflight.values() if r.task is not None]
    connection.cancel_all()
    if tasks:  # let cancelled requests send their -32800 answers
        await asyncio.wait(tasks, timeout=1.0)
    await server.aclose()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.remove_signal_handler(signal.SIGTERM)
    stop_reader()
    await close_writer()
    return 0


async def _writer(
    loop: asyncio.AbstractEventLoop, fd: int
) -> tuple[Callable[[bytes], None], Callable[[], Any]]:
    pipe = os.fdopen(fd, "wb", buffering=0)
    if _pollable(fd):
        try:
            transport, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, pipe)
        except (ValueError, OSError, NotImplementedError):
            pass  # a regular file or a tty-less oddity: blocking writes below
        else:

            async def close() -> None:
                # let the buffered tail (the last responses) reach the extension
                for _ in range(200):
                    if transport.get_write_buffer_size() == 0:
                        break
                    await asyncio.sleep(0.005)
                transport.close()

            return transport.write, close

    lock = threading.Lock()

    def write(data: bytes) -> None:
        with lock:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]

    async def close_blocking() -> None:
        pipe.close()

    return write, close_blocking


def _pollable(fd: int) -> bool:
    # asyncio's pipe transports need a pipe or socket the selector can watch
    if sys.platform == "win32":
        return False
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _ReadProtocol(asyncio.Protocol):
    def __init__(self, connection: HostConnection) -> None:
        self._connection = connection

    def data_received(self, data: bytes) -> None:
        self._connection.feed(data)

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._connection.connection_lost()


async def _reader(
    loop: asyncio.AbstractEventLoop, fd: int, connection: HostConnection
) -> Callable[[], None]:
    pipe = os.fdopen(fd, "rb", buffering=0)
    if _pollable(fd):
        try:
            transport, _ = await loop.connect_read_pipe(lambda: _ReadProtocol(connection), pipe)
        except (ValueError, OSError, NotImplementedError):
            pass
        else:
            return transport.close

    # Windows, files, /dev/null, ttys: a thread does the blocking reads.
    def read_loop() -> None:
        try:
            while True:
                data = os.read(fd, 65536)
                if not data:
                    break
                loop.call_soon_threadsafe(connection.feed, data)
        except OSError:
            pass
        finally:
            loop.call_soon_threadsafe(connection.connection_lost)

    threading.Thread(target=read_loop, name="lmbridge-stdin", daemon=True).start()
    return lambda: None
