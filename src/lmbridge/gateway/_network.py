"""The HTTP client's network layer: proxy routing and certificate checks by
:class:`~lmbridge.network.NetworkSettings` (VS Code's ``http.*`` settings).

:class:`ProxyRouter` is an :class:`httpx.AsyncBaseTransport` that sends each request directly
or through a proxy: the settings' proxy (with ``noProxy``), else the environment's
(``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY`` with ``NO_PROXY``); loopback hosts never go
through a proxy. httpx tunnels ``https`` requests through an HTTP proxy with ``CONNECT``, and
any request through a SOCKS5 one (``socksio``). A proxy httpx cannot follow (an environment's
``socks4://``) is logged once and skipped.

A cancelled request leaves nothing behind. httpcore (1.0.9) closes a response under an anyio
shield, which a plain asyncio ``Task.cancel()`` goes through: a cancellation that lands inside
a close (httpx closes a response itself in the reading task when its body ends) stops it
half-way, and the connection stays in the pool for good, counted in use (an open socket and a
pool slot) or with its closed connection (a pool entry every later request walks past). So a
response's close here always runs to its end (:func:`run_to_the_end`), and after every failed
or cancelled request and every close the pool is swept of connections no request holds that
are not idle (:func:`_reclaim_orphans`): those a cancellation stopped inside httpcore's own
clean-up, which no close can reach any more.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

import httpx

from ..network import NetworkSettings, is_loopback_host, no_proxy_matches, redact_proxy

__all__ = ["ProxyRouter", "run_to_the_end", "ssl_verify"]

log = logging.getLogger("lmbridge.gateway")

T = TypeVar("T")


async def run_to_the_end(step: Awaitable[T]) -> T:
    """Await ``step`` (a close) to its end, even when the calling task is cancelled meanwhile:
    it runs in a task of its own, and a cancellation that arrives while it runs is raised
    once it is done (a close stopped half-way leaves its connection open)."""
    running = asyncio.ensure_future(step)
    cancelled = False
    while not running.done():
        try:
            await asyncio.shield(running)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled or running.cancelled():
        raise asyncio.CancelledError
    return running.result()


def ssl_verify(network: NetworkSettings) -> ssl.SSLContext | bool:
    """What httpx's ``verify`` gets: ``False`` when ``proxyStrictSSL`` is off, the system's
    certificate store (``truststore``) when ``systemCertificates`` is on, else ``True``
    (the bundled ``certifi`` store)."""
    if not network.proxy_strict_ssl:
        return False
    if network.system_certificates:
        try:
            import truststore
        except ImportError:  # a partial installation: the bundled store still verifies
            log.warning("truststore is not installed; verifying with the bundled certificates")
            return True
        return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return True


class ProxyRouter(httpx.AsyncBaseTransport):
    """Sends each request directly or through the proxy its URL calls for (module notes)."""

    def __init__(
        self,
        network: NetworkSettings,
        *,
        verify: ssl.SSLContext | bool = True,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.network = network
        self._verify = verify
        env = (
            urllib.request.getproxies_environment()
            if environ is None
            else {k.lower().removesuffix("_proxy"): v for k, v in environ.items() if v}
        )
        self._env = {k: v for k, v in env.items() if k in ("http", "https", "all")}
        self._env_no_proxy = tuple(
            item.strip().lower() for item in env.get("no", "").split(",") if item.strip()
        )
        self._direct = httpx.AsyncHTTPTransport(verify=verify)
        self._proxied: dict[str, httpx.AsyncHTTPTransport] = {}
        self._said: set[str] = set()
        self._closing: set[asyncio.Task[None]] = set()

    def proxy_for(self, url: httpx.URL) -> str | None:
        """The proxy a request to ``url`` goes through (``None``: directly)."""
        host = url.host
        port = url.port or (443 if url.scheme == "https" else 80)
        if is_loopback_host(host):
            return None
        if self.network.proxy is not None:
            return None if self.network.bypasses(host, port) else self.network.proxy
        proxy = self._env.get(url.scheme) or self._env.get("all")
        if not proxy or no_proxy_matches(self._env_no_proxy, host, port):
            return None
        return proxy

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` directly or through its proxy."""
        proxy = self.proxy_for(request.url)
        transport = self._direct if proxy is None else self._transport_for(proxy, request.url)
        try:
            response = await transport.handle_async_request(request)
        except BaseException:
            _reclaim_orphans(transport, self._closing)
            raise
        # no await from the response's making to here: its close is always this one
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Body(response.stream, lambda: _reclaim_orphans(transport, self._closing))
        return response

    def _transport_for(self, proxy: str, url: httpx.URL) -> httpx.AsyncHTTPTransport:
        transport = self._proxied.get(proxy)
        if transport is None:
            try:
                transport = httpx.AsyncHTTPTransport(proxy=httpx.Proxy(proxy), verify=self._verify)
            except (ImportError, ValueError) as exc:
                # a scheme this httpx cannot follow (an environment's socks4://, socks5
                # without socksio): said once, and the requests go directly
                where = redact_proxy(proxy)
                if where not in self._said:
                    self._said.add(where)
                    log.error("the proxy %s cannot be used (%s); requests go without it", where, exc)
                return self._direct
            self._proxied[proxy] = transport
        where = redact_proxy(proxy)
        if where not in self._said:
            self._said.add(where)
            log.info("requests to %s go through the proxy %s", url.host, where)
        return transport

    async def aclose(self) -> None:
        """Close every connection pool."""
        await self._direct.aclose()
        for transport in self._proxied.values():
            await transport.aclose()


class _Body(httpx.AsyncByteStream):
    """A response body whose close runs to its end, and after which (or after a failed read)
    the pool is swept of what a cancellation inside httpcore left (module notes)."""

    def __init__(self, inner: httpx.AsyncByteStream, sweep: Callable[[], None]) -> None:
        self._inner = inner
        self._sweep = sweep

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except BaseException:
            # httpcore's own clean-up has run (or was cut short by a cancellation)
            self._sweep()
            raise

    async def aclose(self) -> None:
        try:
            await run_to_the_end(self._inner.aclose())
        finally:
            self._sweep()


def _reclaim_orphans(transport: httpx.AsyncHTTPTransport, closing: set[asyncio.Task[None]]) -> None:
    """Take out of ``transport``'s pool, and close, the connections a failed or cancelled
    request left there: HTTP/1.1 connections no request in the pool holds that are neither
    idle (ready for the next request) nor closed (the pool drops those itself).

    Two ways a cancellation leaves one, each a pool slot and an open socket for good, toward
    the pool's 100 after which every request waits for a slot and fails:

    - httpcore (1.0.9) gives a request a connection before it starts the request on it; a
      cancellation that lands in between (the connection's state lock, taken right after the
      connect) leaves it never used (encode/httpcore#1093). Measured in the endurance run,
      with every seventh chat request cancelled 5 ms after it started: 4 more sockets to the
      upstream a minute.
    - After a failed read (a timeout, a stream cut off), httpcore releases the connection
      under its anyio shield; a cancellation that lands there (the state lock again) leaves
      it counted in use after its request has left the pool: about 1 a minute in the
      endurance run's hour.
    """
    pool: Any = getattr(transport, "_pool", None)
    try:
        with pool._optional_thread_lock:
            held = {id(r.connection) for r in pool._requests if r.connection is not None}
            orphans = [c for c in pool._connections if id(c) not in held and _left_behind(c)]
            for connection in orphans:
                pool._connections.remove(connection)
    except (AttributeError, TypeError, ValueError):  # another httpcore: its own pool rules
        return
    for connection in orphans:
        log.debug("closing a connection a cancelled request left in the pool: %r", connection)
        # in a task of its own: the caller is being cancelled, and a second cancellation
        # landing inside a close would leave the socket open again
        task = asyncio.ensure_future(connection.aclose())
        closing.add(task)
        task.add_done_callback(closing.discard)


def _left_behind(connection: Any) -> bool:
    """An HTTP/1.1 connection still connecting (no socket yet) or connected and ``NEW`` or
    ``ACTIVE``: with no request holding it, no one will ever use or release it."""
    inner = getattr(connection, "_connection", None)
    if inner is None:
        # connecting: only HTTP/1.1 ones belong to a single request (an HTTP/2 one may serve
        # several queued requests at once)
        return getattr(connection, "_http2", True) is False and not connection.is_closed()
    state = getattr(inner, "_state", None)
    return hasattr(inner, "_h11_state") and getattr(state, "name", None) in ("NEW", "ACTIVE")
