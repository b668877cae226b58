"""The loopback endpoint: the HTTP core with the routes of every API in
:data:`~.apis.APIS`, and its file."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from pathlib import Path

from ...errors import ConfigError
from ..discovery import (
    EndpointInfo,
    EndpointNotFoundError,
    read_endpoint_file,
    remove_endpoint_file,
    write_endpoint_file,
)
from ..guard import RetryPolicy
from ..model_names import ModelNameMap
from ..tools import ToolAllowlist
from ..transport import BridgeTransport
from ._http import HttpCore, Limits
from .apis import APIS, ApiContext
from .apis.openai_chat import OPENAI_API

__all__ = ["EndpointServer"]

_log = logging.getLogger("lmbridge.client.endpoint")


class EndpointServer(HttpCore):
    """The loopback HTTP endpoint in front of a :class:`~..transport.BridgeTransport`.

    ``endpoint_file=None`` writes the default file (:func:`..discovery.default_endpoint_file`),
    a path writes there, ``False`` writes none (tests that pass the URL and token directly).
    ``keepalive`` is the silence after which streams get a keep-alive, ``first_part_wait`` how
    long a stream waits for its first part before answering 200, ``limits`` what one client may
    cost (:class:`~._http.Limits`). More APIs plug in with :meth:`~._http.HttpCore.add_route`.
    ``names`` maps the model names agents send to selectors (``lmbridge.endpoint.models``),
    ``retry`` retries failures before the first part on the agents' routes, ``tools`` lists the
    VS Code tools offered (``lmbridge.endpoint.tools``; none by default).

    The endpoint file is checked every ``file_check`` seconds while the endpoint is open and
    written again when it is gone or stale: several VS Code windows share one storage folder,
    and when the window that wrote the file last closes, it removes its file while an older
    window's endpoint still serves.
    """

    def __init__(
        self,
        bridge: BridgeTransport,
        *,
        token: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        endpoint_file: Path | bool | None = None,
        keepalive: float = 15.0,
        first_part_wait: float = 10.0,
        limits: Limits | None = None,
        names: ModelNameMap | None = None,
        retry: RetryPolicy | None = None,
        tools: ToolAllowlist | None = None,
        file_check: float = 5.0,
    ) -> None:
        if host not in ("127.0.0.1", "::1", "localhost"):
            # the token is the only protection: never offer it beyond this machine
            raise ValueError(f"the endpoint listens on loopback only, not {host!r}")
        super().__init__(
            token=token or secrets.token_urlsafe(32),
            host=host,
            port=port,
            default_api=OPENAI_API,
            limits=limits,
        )
        self.bridge = bridge
        self._file: Path | bool | None = endpoint_file
        self._written: Path | None = None
        self._file_check = file_check
        self._file_keeper: asyncio.Task[None] | None = None
        self.context = ApiContext(
            bridge,
            names=names or ModelNameMap(),
            retry=retry if retry is not None else RetryPolicy(),
            keepalive=keepalive,
            first_part_wait=first_part_wait,
            tools=tools or ToolAllowlist(),
        )
        """What every API's routes share (bridge, model names, retries, timings)."""
        # the kept model list goes when VS Code's models change
        self._unsubscribe = bridge.on_models_changed(self.context.models.forget)
        for registration in APIS:
            for route in registration.routes(self.context):
                self.add_route(route)

    @property
    def names(self) -> ModelNameMap:
        """Client model names -> selectors for every API (``lmbridge.endpoint.models``)."""
        return self.context.names

    @names.setter
    def names(self, names: ModelNameMap) -> None:
        self.context.names = names

    @property
    def tools(self) -> ToolAllowlist:
        """VS Code's tools offered at ``/mcp`` and ``/lm/tools`` (``lmbridge.endpoint.tools``;
        empty: none)."""
        return self.context.tools

    @tools.setter
    def tools(self, tools: ToolAllowlist) -> None:
        self.context.tools = tools

    async def start(self) -> EndpointInfo:
        """Listen and write the endpoint file; returns where and with which token."""
        await self._listen()
        info = EndpointInfo(self.url, self.token, os.getpid())
        if self._file is not False:
            path = None if self._file is None or self._file is True else self._file
            try:
                self._written = write_endpoint_file(info, path)
            except BaseException:
                await self._stop()
                raise
            self._file_keeper = asyncio.get_running_loop().create_task(
                self._keep_file(info, self._written)
            )
        _log.info("loopback endpoint listening on %s", self.url)
        return info

    async def _keep_file(self, info: EndpointInfo, path: Path) -> None:
        """Write the endpoint file again whenever it is gone or names a process that ended
        (another window's host removed it, or was killed); a live host's file is left alone."""
        while True:
            await asyncio.sleep(self._file_check)
            try:
                read_endpoint_file(path)
                continue  # a live host's (ours, or a newer window's)
            except EndpointNotFoundError:
                pass
            try:
                write_endpoint_file(info, path)
            except (OSError, ConfigError) as exc:
                _log.warning("cannot write the endpoint file %s again: %s", path, exc)
                continue
            _log.info("the endpoint file %s was gone or stale: written again", path)

    async def aclose(self) -> None:
        """Stop listening, end open connections (cancelling their requests), remove the file."""
        keeper, self._file_keeper = self._file_keeper, None
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        if self._written is not None:
            remove_endpoint_file(self._written, os.getpid())
            self._written = None
        self._unsubscribe()
        await self._stop()

    async def __aenter__(self) -> EndpointServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
