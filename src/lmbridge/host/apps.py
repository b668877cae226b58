"""The consumer side inside the host: VS Code's models for the Python apps the extension starts.

:class:`ConsumerHost` puts a :class:`~lmbridge.client.HostTransport` on the host's connection
and makes it the default transport (so ``LanguageModelClient()`` in an app needs no argument
and follows the ``lmbridge.consumer.model`` setting), runs the app modules the
``lmbridge.apps`` setting names, each on an event loop and thread of its own
(:mod:`.app_threads`: one that blocks stalls itself, not the host), and opens or closes the
loopback endpoint per ``lmbridge.endpoint.enabled``. The settings arrive in ``initialize``/``configure``
(``settings.apps``, ``settings.endpointEnabled``, ``settings.consumerModel``,
``settings.endpointModels``) and, for the
model, in ``lm/configChanged`` (docs/protocol.md).

An app is named ``"package.module"`` (its ``main``), ``"package.module:function"`` or by the
path of a ``.py`` file (loaded without putting its folder on ``sys.path``); the entry point is
``async def main(transport)``, called with a :class:`~lmbridge.client.BridgeTransport` that
crosses to the host's loop. A failing app is reported in the output channel and the host and
the other apps keep running. Apps start with the host and again when the setting
changes; one that returned is not restarted otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import importlib.util
import inspect
import logging
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..client import endpoint as _endpoint  # loads its modules when it first opens
from ..client.discovery import default_endpoint_file
from ..client.model_names import ModelNameMap
from ..client.pace import Pace
from ..client.selectors import AUTO, SelectorError, parse_selector
from ..client.tools import ToolAllowlist
from ..client.transport import (
    BridgeTransport,
    HostTransport,
    RpcConnection,
    clear_default_transport,
    set_default_transport,
)
from ..errors import ConfigError
from .app_threads import AppThread

if TYPE_CHECKING:
    from ..client.endpoint import EndpointServer

__all__ = [
    "ENDPOINT_FILE_NAME",
    "AppEntry",
    "ConsumerHost",
    "ConsumerSettings",
    "load_app",
    "parse_consumer_settings",
]

_log = logging.getLogger("lmbridge.host.apps")

_STOP_GRACE = 2.0
"""Seconds an app gets to end once it is cancelled, before the host goes on without it."""

ENDPOINT_FILE_NAME = "endpoint.json"
"""Name of the endpoint file in the extension's storage folder."""

AppEntry = Callable[[BridgeTransport], Awaitable[Any]]
"""What an app module provides: ``async def main(transport)``."""

_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class _Connection(RpcConnection, Protocol):
    def log(self, level: str, message: str) -> None: ...

    def notify(self, method: str, params: Any = None) -> None: ...


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """The settings of the consumer side, as the extension sends them."""

    apps: tuple[str, ...] = ()
    """``lmbridge.apps``: app modules or ``.py`` files to run."""
    endpoint_enabled: bool = False
    """``lmbridge.endpoint.enabled``: open the loopback endpoint."""
    model: str = AUTO
    """``lmbridge.consumer.model``: the selector ``LanguageModelClient()`` uses."""
    endpoint_models: ModelNameMap = field(default_factory=ModelNameMap)
    """``lmbridge.endpoint.models``: client model names -> selectors, for the endpoint."""
    endpoint_tools: ToolAllowlist = field(default_factory=ToolAllowlist)
    """``lmbridge.endpoint.tools``: the VS Code tools the endpoint offers (none by default)."""
    pace: Pace = field(default_factory=Pace)
    """``lmbridge.pace``: limits on requests to VS Code's models, for apps and the endpoint."""


def parse_consumer_settings(settings: Mapping[str, Any]) -> tuple[ConsumerSettings, list[str]]:
    """The consumer settings in ``settings`` and a problem for each value that was unusable
    (which then keeps its default)."""
    problems: list[str] = []
    apps: tuple[str, ...] = ()
    raw_apps = settings.get("apps")
    if isinstance(raw_apps, list):
        good = [a.strip() for a in raw_apps if isinstance(a, str) and a.strip()]
        if len(good) != len(raw_apps):
            problems.append(
                f"lmbridge.apps: every entry must be a module name or a .py path; ignored "
                f"{[a for a in raw_apps if not (isinstance(a, str) and a.strip())]!r}"
            )
        apps = tuple(dict.fromkeys(good))  # the same app twice would run twice
    elif raw_apps is not None:
        problems.append(f"lmbridge.apps: expected a list, got {type(raw_apps).__name__}")
    enabled = settings.get("endpointEnabled", False)
    if not isinstance(enabled, bool):
        problems.append(f"lmbridge.endpoint.enabled: expected true or false, got {enabled!r}")
        enabled = False
    model = settings.get("consumerModel", AUTO)
    if model is None:
        model = AUTO
    if not isinstance(model, str):
        problems.append(f"lmbridge.consumer.model: expected a string, got {model!r}")
        model = AUTO
    else:
        try:
            parse_selector(model)
        except SelectorError as exc:
            # kept as is: the client reports it on the next request with the fallback message
            problems.append(f"lmbridge.consumer.model: {exc}")
    names, name_problems = ModelNameMap.from_setting(settings.get("endpointModels"))
    problems += name_problems
    tools, tool_problems = ToolAllowlist.from_setting(settings.get("endpointTools"))
    problems += tool_problems
    pace, pace_problems = Pace.from_setting(settings.get("pace"))
    problems += pace_problems
    return ConsumerSettings(apps, enabled, model, names, tools, pace), problems


def load_app(spec: str) -> AppEntry:
    """The entry point of the app ``spec`` (``package.module[:function]`` or a ``.py`` path).

    Raises :class:`~lmbridge.errors.ConfigError` saying what is wrong.
    """
    if spec.endswith(".py") or "/" in spec or os.sep in spec:
        path = Path(spec).expanduser()
        if not path.is_absolute():
            path = Path.cwd() / path
        if not path.is_file():
            raise ConfigError(f"app {spec!r}: no such file {path}")
        name = f"lmbridge_app_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}_{abs(hash(path)) % 10**8}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ConfigError(f"app {spec!r}: cannot load {path} as a Python module")
        module = importlib.util.module_from_spec(module_spec)
        # Unlike `python file.py`, the file's folder is not put on sys.path: whatever else lies
        # there (a repository's json.py ...) would shadow installed modules for the whole host.
        # An app with helper modules is a package, named as "package.module".
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise ConfigError(f"app {spec!r}: importing {path} failed: {_brief(exc)}") from exc
        attr = "main"
    else:
        module_name, _, attr = spec.partition(":")
        attr = attr or "main"
        if not _MODULE_NAME.match(module_name) or not _MODULE_NAME.match(attr):
            raise ConfigError(
                f"app {spec!r}: expected 'package.module', 'package.module:function' or a path "
                "to a .py file"
            )
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise ConfigError(
                f"app {spec!r}: importing {module_name!r} failed: {_brief(exc)} (is it installed "
                "in the Python that runs the host, see lmbridge.pythonCommand?)"
            ) from exc
    entry = getattr(module, attr, None)
    if entry is None:
        raise ConfigError(
            f"app {spec!r}: the module has no {attr!r}; define async def {attr}(transport)"
        )
    if not inspect.iscoroutinefunction(entry):
        raise ConfigError(
            f"app {spec!r}: {attr} must be an async function taking the transport "
            f"(async def {attr}(transport)), got {type(entry).__name__}"
        )
    return entry  # type: ignore[no-any-return]


class ConsumerHost:
    """Apps, endpoint and transport of the consumer side, driven by the settings.

    ``connection`` is the host's :class:`~lmbridge.host.server.HostConnection`.
    ``endpoint_factory`` makes the loopback endpoint (tests pass their own).
    """

    def __init__(
        self,
        connection: _Connection,
        *,
        endpoint_factory: Callable[[BridgeTransport, Path | None], EndpointServer] | None = None,
        make_default: bool = True,
    ) -> None:
        self.connection = connection
        # The host dispatches the lm/* notifications so that settings are taken before the
        # client's listeners run.
        self.transport = HostTransport(connection, register=False)
        connection.on_notification("lm/parts", self.transport.handle_parts)
        connection.on_notification("lm/modelsChanged", self.transport.handle_models_changed)
        connection.on_notification("lm/configChanged", self._config_changed)
        if make_default:
            set_default_transport(self.transport)
        self._endpoint_factory = endpoint_factory or _default_endpoint
        self.settings = ConsumerSettings()
        """The settings last applied."""
        self.apps: dict[str, AppThread] = {}
        """The apps by their setting entry (finished ones included), each on its own thread
        and event loop."""
        self.endpoint: EndpointServer | None = None
        """The loopback endpoint while it is open."""
        self.endpoint_file: Path | None = None
        """Where the endpoint's URL and token are, while it is open."""
        self._storage: Path | None = None
        self._reported: set[str] = set()
        self._lock = asyncio.Lock()
        self._closed = False
        self._last_bite = float("-inf")
        self.transport.pacer.on_bite = self._pace_bit

    # ------------------------------------------------------------------ settings

    def _pace_bit(self, info: dict[str, Any]) -> None:
        """``lmbridge.pace`` held a request back: ``pace/limited`` for the status bar (every
        refusal; a queued request at most once a second), and a log line."""
        now = time.monotonic()
        if not info.get("refused") and now - self._last_bite < 1.0:
            return
        self._last_bite = now
        _log.info(
            "pace: %s request to %s (%s %s, %d ms in line)",
            "refused a" if info.get("refused") else "queued a",
            info.get("model"),
            info.get("scope"),
            info.get("limit"),
            info.get("waitMs", 0),
        )
        self.connection.notify("pace/limited", info)

    def _config_changed(self, params: Any) -> None:
        if isinstance(params, Mapping) and isinstance(params.get("settings"), Mapping):
            self._take_model(params["settings"])
        self.transport.handle_config_changed(params)

    def _take_model(self, settings: Mapping[str, Any]) -> None:
        if "consumerModel" in settings:
            parsed, problems = parse_consumer_settings({"consumerModel": settings["consumerModel"]})
            for problem in problems:
                self._report(problem)
            self.settings = replace(self.settings, model=parsed.model)

    async def apply(self, settings: Mapping[str, Any], storage_path: str | None = None) -> None:
        """Take the settings of ``initialize``/``configure``: start or stop apps and endpoint."""
        if self._closed:
            return
        parsed, problems = parse_consumer_settings(settings)
        for problem in problems:
            self._report(problem)
        async with self._lock:
            if storage_path:
                self._storage = Path(storage_path)
            previous = self.settings
            self.settings = parsed
            self.transport.update_settings({"consumerModel": parsed.model})
            self.transport.pacer.pace = parsed.pace
            if parsed.apps != previous.apps:
                await self._stop_apps()
            # The endpoint opens before the apps start: its modules load now, while no app
            # thread competes for the interpreter (a CPU-bound app slows every import of
            # this thread down to one file lookup per switch interval).
            if self.endpoint is not None:
                self.endpoint.names = parsed.endpoint_models
                self.endpoint.tools = parsed.endpoint_tools
            if parsed.endpoint_enabled and self.endpoint is None:
                await self._open_endpoint()
            elif not parsed.endpoint_enabled and self.endpoint is not None:
                await self._close_endpoint()
                self.connection.log("info", "loopback endpoint closed")
            # new entries, and those that failed to load before (the file may be fixed now)
            await self._start_apps([a for a in parsed.apps if a not in self.apps])

    # ------------------------------------------------------------------ apps

    async def _start_apps(self, specs: list[str]) -> None:
        for spec in specs:
            app = AppThread(spec, load_app, self.transport)
            self.apps[spec] = app
            app.started.add_done_callback(functools.partial(self._app_started, spec))
            app.outcome.add_done_callback(functools.partial(self._app_ended, app))
            app.start()

    def _app_started(self, spec: str, _started: asyncio.Future[None]) -> None:
        self.connection.log("info", f"app {spec!r} started")

    def _app_ended(self, app: AppThread, outcome: asyncio.Future[Any]) -> None:
        spec = app.spec
        if outcome.cancelled():
            _log.info("app %r stopped", spec)
            return
        exc = outcome.exception()
        if isinstance(exc, ConfigError):  # it could not be loaded
            self._report(str(exc))
            if self.apps.get(spec) is app:
                del self.apps[spec]  # tried again on the next configure (it may be fixed then)
        elif exc is not None:
            _log.error("app %r failed", spec, exc_info=exc)
            self.connection.log(
                "error", f"app {spec!r} failed: {_brief(exc)} (traceback on stderr)"
            )
        else:
            self.connection.log("info", f"app {spec!r} finished")

    async def _stop_apps(self) -> None:
        apps = [a for a in self.apps.values() if not a.ended.done()]
        for app in apps:
            app.stop()
        if apps:
            # an app that ignores its cancellation or blocks its thread must not hold the
            # host's shutdown up: its thread (a daemon) is left to itself
            await asyncio.wait([a.ended for a in apps], timeout=_STOP_GRACE)
            for app in apps:
                if not app.ended.done():
                    self.connection.log(
                        "warning",
                        f"app {app.spec!r} did not stop within {_STOP_GRACE:g} s of its "
                        "cancellation (it ignores it, or blocks its thread); left running",
                    )
        self.apps = {}

    # ------------------------------------------------------------------ endpoint

    def _endpoint_path(self) -> Path | None:
        if os.environ.get("LMBRIDGE_ENDPOINT_FILE"):
            return None  # the endpoint's own default honours the variable
        return self._storage / ENDPOINT_FILE_NAME if self._storage is not None else None

    async def _open_endpoint(self) -> None:
        path = self._endpoint_path()
        endpoint = self._endpoint_factory(self.transport, path)
        endpoint.names = self.settings.endpoint_models
        endpoint.tools = self.settings.endpoint_tools
        try:
            await endpoint.start()
        except (OSError, ConfigError) as exc:
            self._report(f"the loopback endpoint could not start: {_brief(exc)}")
            return
        self.endpoint = endpoint
        self.endpoint_file = file = path if path is not None else default_endpoint_file()
        self.connection.log(
            "info",
            f"loopback endpoint listening on {endpoint.url}; its URL and token are in {file} "
            f"(readable by you only; other processes find it with LMBRIDGE_ENDPOINT_FILE={file})",
        )

    async def _close_endpoint(self) -> None:
        endpoint, self.endpoint, self.endpoint_file = self.endpoint, None, None
        if endpoint is not None:
            await endpoint.aclose()

    # ------------------------------------------------------------------ lifecycle

    def _report(self, message: str) -> None:
        # once per distinct problem: configure is re-sent on every settings change
        if message not in self._reported:
            self._reported.add(message)
            self.connection.log("error", message)

    async def aclose(self) -> None:
        """Stop the apps, close the endpoint (removing its file)."""
        self._closed = True
        await self._stop_apps()
        with contextlib.suppress(Exception):
            await self._close_endpoint()
        # a transport on a closed connection is no default for anyone
        clear_default_transport(self.transport)


def _default_endpoint(transport: BridgeTransport, path: Path | None) -> EndpointServer:
    return _endpoint.EndpointServer(transport, endpoint_file=path)


def _brief(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
