"""The provider-side methods of the bridge protocol (``docs/protocol.md``).

:class:`HostServer` registers ``initialize``, ``configure``, ``models/list``, ``providers/test``,
``chat/response``, ``tokens/count``, ``shutdown`` and ``exit`` on a :class:`HostConnection`, keeps the loaded
providers, and streams each response's parts as batched ``chat/parts`` notifications. Its
:class:`~.apps.ConsumerHost` serves the consumer side on the same connection: the ``lm/*``
notifications, the apps of ``lmbridge.apps`` and the loopback endpoint.

Each provider's listing in ``models/list`` has :data:`LISTING_DEADLINE` seconds: a provider whose
upstream is slow (or trickles its model list on purpose) is left out of that answer and
reported, while the others are listed; its listing goes on, and a ``models/changed``
notification follows when it succeeds, so VS Code asks again and gets its models.

Reloading (``configure``) never breaks a request in flight: a provider whose configuration is
unchanged is kept as it is (catalog, token estimators, cached models); a replaced or removed one
stays with the requests that already use it and is closed when the last of them ends. New
requests use the new configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .. import __version__, gateway  # the gateway's modules load with a first upstream entry
from ..compiled import build, json_library
from ..config import (
    LoadedProvider,
    load_providers,
    merge_workspace_entries,
    origin_of,
    parse_secrets,
)
from ..context import certainly_over, too_long_message
from ..diagnose import (
    KNOWN_TRAPS,
    environment_proxies,
    network_facts,
    python_facts,
    render,
    scrub,
)
from ..entries import entry_origin
from ..errors import (
    ConfigError,
    ContextLengthError,
    LanguageModelError,
    UpstreamHTTPError,
    WireError,
)
from ..network import NetworkSettings
from ..parts import (
    ChatMessage,
    ChatRequestOptions,
    FinishReason,
    ModelInfo,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    message_from_wire,
    messages_from_wire,
    model_info_to_wire,
    options_from_wire,
    part_to_wire,
    usage_to_wire,
)
from ..primitives import ChatResult
from ..provider import (
    CancellationToken,
    ContractViolationError,
    ModelInformationOptions,
    estimate_tokens,
    observe_usage,
    respond,
    use_token_storage,
)
from ..sources.editor import EDITOR_LABEL, editor_groups, host_name
from ..timing import mark
from ..token_cache import estimate_request
from .apps import ConsumerHost
from .jsonrpc import (
    INVALID_PARAMS,
    REQUEST_FAILED,
    IncomingRequest,
    JsonRpcConnection,
    RpcError,
)
from .logs import LogLevels
from .paths import clean_sys_path

__all__ = [
    "BATCH_INTERVAL",
    "LISTING_DEADLINE",
    "HostConnection",
    "HostServer",
    "PartBatcher",
    "usage_line",
    "usage_part",
]

_log = logging.getLogger("lmbridge.host")
_usage_log = logging.getLogger("lmbridge.usage")

BATCH_INTERVAL = 0.002
"""Seconds between two ``chat/parts`` notifications of one request while parts keep coming."""

LISTING_DEADLINE = 10.0
"""Seconds one provider's listing may take in ``models/list`` before the answer goes without it
(the module notes)."""


class HostConnection(JsonRpcConnection):
    """The host's connection to the extension: JSON-RPC plus the ``log`` notification.

    :meth:`request` (inherited) sends a request to the extension and awaits its result; the
    consumer side (``lm/*`` methods) is built on it.
    """

    def log(self, level: str, message: str) -> None:
        """Show ``message`` in the extension's output channel (and on stderr)."""
        getattr(_log, "warning" if level == "warning" else level, _log.info)(message)
        self.notify("log", {"level": level, "message": message})


class PartBatcher:
    """Collects one request's parts and sends them as few ``chat/parts`` notifications.

    The first part after a quiet spell is flushed on the next turn of the event loop (so it
    adds no latency); while parts keep coming, at most one notification goes out every
    :data:`BATCH_INTERVAL` seconds. :meth:`discard` drops what is pending and stops sending:
    after a cancellation nothing more goes out.
    """

    def __init__(
        self,
        send: Callable[[list[ResponsePart]], None],
        interval: float = BATCH_INTERVAL,
    ) -> None:
        self._send = send
        self._interval = interval
        self._loop = asyncio.get_running_loop()
        self._pending: list[ResponsePart] = []
        self._handle: asyncio.Handle | asyncio.TimerHandle | None = None
        self._last = -1.0
        self._closed = False
        self.notifications = 0
        """Notifications sent so far."""

    def add(self, part: ResponsePart) -> None:
        """Queue a part (ignored after :meth:`discard`)."""
        if self._closed:
            return
        self._pending.append(part)
        if self._handle is None:
            wait = self._last + self._interval - self._loop.time()
            if wait <= 0:
                self._handle = self._loop.call_soon(self._flush)
            else:
                self._handle = self._loop.call_later(wait, self._flush)

    def _flush(self) -> None:
        self._handle = None
        if self._closed or not self._pending:
            return
        batch, self._pending = self._pending, []
        self._last = self._loop.time()
        self.notifications += 1
        self._send(batch)

    def flush(self) -> None:
        """Send what is pending now (the stream ended)."""
        if self._handle is not None:
            self._handle.cancel()
        self._flush()

    def discard(self) -> None:
        """Drop what is pending; send nothing more."""
        self._closed = True
        self._pending.clear()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


@dataclass(eq=False)
class _Slot:
    """One loaded provider as the host serves it, with what the host keeps about it."""

    loaded: LoadedProvider
    models: dict[str, ModelInfo] | None = None
    """Model id -> info from the last listing (``None``: ask the provider)."""
    list_error: BaseException | None = None
    """Why the last listing failed (``None`` after a success)."""
    users: int = 0
    """Requests using the provider right now."""
    retired: bool = False
    """Replaced or removed by a reload: closed when ``users`` drops to 0."""
    closed: bool = False
    subscription: Any = None
    last_error: str | None = None
    """The error the last failed request to it got (for the diagnosis)."""
    editor: str | None = None
    """For a provider of VS Code's Language Models editor: its group's id. Its models are
    listed only for that group (``models/list`` with ``group``), under the editor's vendor."""
    workspace: str | None = None
    """For a provider a workspace's settings added (and the user allowed): where it points (the
    origin of its ``baseUrl``). Its models carry it, so that the consumer side chooses them only
    by the user's own selector (``client/model_names.py``)."""

    @property
    def name(self) -> str:
        return self.loaded.name


class HostServer:
    """Serves the loaded providers' models over a :class:`HostConnection`.

    ``log_levels`` applies the ``logLevel`` setting (default: the root logger's level, unless
    the command line fixed it).
    """

    def __init__(
        self,
        connection: HostConnection,
        *,
        file_config: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
        log_levels: LogLevels | None = None,
    ) -> None:
        self.connection = connection
        self._file_config = dict(file_config or {})
        self._environ = environ
        self.log_levels = log_levels or LogLevels()
        """Where the ``logLevel`` setting goes."""
        self._slots: dict[str, _Slot] = {}
        self._retired: list[_Slot] = []  # replaced while in use; closed when idle
        self._closing: set[asyncio.Task[None]] = set()
        self._released = asyncio.Event()  # a retired provider's last request ended
        self._reported: set[str] = set()
        self._shutting_down = False
        self.listing_deadline = LISTING_DEADLINE
        """Seconds each provider's listing may take in ``models/list`` (module notes)."""
        self._preloading = False
        self._ignored: list[Any] = []  # what a workspace tried to set (the last load's)
        self._network = NetworkSettings()
        self._secrets: dict[str, Any] = {}  # the keys of the last load: kept out of a diagnosis
        self.exited = asyncio.Event()
        """Set by the ``exit`` notification."""
        c = connection
        c.on_request("initialize", self._initialize)
        c.on_request("configure", self._configure)
        c.on_request("models/list", self._models_list)
        c.on_request("providers/test", self._providers_test)
        c.on_request("chat/response", self._chat_response)
        c.on_request("tokens/count", self._tokens_count)
        c.on_request("diagnose", self._diagnose)
        c.on_request("shutdown", self._shutdown)
        c.on_notification("exit", lambda _params: self.exited.set())
        c._error_mapper = self._map_error
        self.consumer = ConsumerHost(connection)
        """The consumer side: HostTransport (the default transport), apps, loopback endpoint."""

    # ------------------------------------------------------------------ configuration

    async def load(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """(Re)load the providers from ``initialize``/``configure`` params (or the file)."""
        providers = params.get("providers")
        if providers is None or providers == []:
            providers = self._file_config.get("providers")
        users = len(providers) if isinstance(providers, list) else 0 if providers is None else 1
        # The workspace's entries the user has not allowed: judged (what would be ignored is
        # told now), never loaded, so never contacted.
        _, ignored = merge_workspace_entries(providers, params.get("unapprovedWorkspaceProviders"))
        # A workspace's entries come apart from the user's and may do less (config.py); the
        # extension sends here only those the user allowed.
        providers, allowed_ignored = merge_workspace_entries(
            providers, params.get("workspaceProviders")
        )
        ignored = [*allowed_ignored, *(i for i in ignored if i not in allowed_ignored)]
        workspace = _workspace_origins(providers[users:])
        # The Language Models editor's groups come last, under names no other source may use.
        try:
            groups = editor_groups(params.get("editorProviders"))
        except ConfigError as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        labels: dict[int, str] = {}
        for group in groups:
            if not isinstance(group.entry, ConfigError):
                labels[len(providers)] = EDITOR_LABEL
                providers.append(group.entry)
        for item in ignored:
            self._warn(str(item))
        try:
            secrets = parse_secrets(params.get("secrets"))
        except ConfigError as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        try:
            network = NetworkSettings.from_wire(params.get("network"))
        except ConfigError as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        if network.problem is not None:
            self._report(network.problem)
        self._ignored, self._network, self._secrets = ignored, network, secrets
        settings = params.get("settings") or {}
        if not isinstance(settings, Mapping):
            raise RpcError(INVALID_PARAMS, "settings: expected an object")
        storage = params.get("storagePath")
        if storage is not None and not isinstance(storage, str):
            raise RpcError(INVALID_PARAMS, "storagePath: expected a string")
        if storage:
            clean_sys_path(storage)  # a repository may have written to it
        use_token_storage(storage)
        problem = self.log_levels.apply(settings.get("logLevel"))
        if problem:
            self._report(problem)
        # On the loop's thread: provider constructors may create asyncio objects.
        loaded = load_providers(
            providers,
            secrets=secrets,
            environ=self._environ,
            storage_path=storage,
            settings=dict(settings),
            previous=[slot.loaded for slot in self._slots.values()],
            network=network,
            labels=labels,
        )
        loaded += [
            LoadedProvider(g.name, None, LanguageModelError(str(g.entry)))
            for g in groups
            if isinstance(g.entry, ConfigError)
        ]
        editor = {g.name: g.id for g in groups}
        old = self._slots
        slots: dict[str, _Slot] = {}
        losers: list[LoadedProvider] = []
        for p in loaded:
            where = workspace.get(p.name)
            if p.error is not None:
                error = p.error if where is None else _workspace_error(p.name, where, p.error)
                self._report(f"provider {p.name!r} is not available: {error}")
            if p.key_error is not None:
                error = p.key_error if where is None else _workspace_error(p.name, where, p.key_error)
                self._report(str(error))
            if p.name in slots:
                # The first of a name serves; a later one (reported above) must not replace it.
                losers.append(p)
                continue
            kept = old.get(p.name)
            if kept is not None and p.provider is not None and kept.loaded.provider is p.provider:
                kept.loaded = p  # unchanged: same provider, catalog, cached models, subscription
                slots[p.name] = kept
                continue
            slot = _Slot(p)
            if p.provider is not None:
                self._subscribe(slot)
            slots[p.name] = slot
        for name, slot in slots.items():
            slot.workspace = workspace.get(name)
            slot.editor = editor.get(name)
        self._slots = slots
        current = set(map(id, slots.values()))
        for slot in old.values():
            if id(slot) not in current:
                self._retire(slot)
        for p in losers:
            if p.provider is not None and not self._in_use(p.provider):
                await _aclose(p.name, p.provider)
        await self._settle()
        ok = [p.name for p in loaded if p.ok]
        if not self._preloading:
            _log.info("providers ready: %s", ", ".join(ok) or "none")
        if not self._shutting_down:
            await self.consumer.apply(settings, storage)
        return {
            "serverVersion": __version__,
            "serverBuild": build(),  # "compiled" or "pure Python" (lmbridge.compiled)
            "serverJson": json_library(),  # "orjson" or "json"
            "vendor": "lmbridge",
            "providers": [
                {"name": p.name, "ok": True}
                if p.ok
                else {"name": p.name, "ok": False, "error": str(p.error)}
                for p in loaded
            ],
            "ignored": [item.to_wire() for item in ignored],
        }

    def _subscribe(self, slot: _Slot) -> None:
        event = getattr(slot.loaded.provider, "on_did_change_language_model_chat_information", None)
        if not callable(event):
            return

        def changed() -> None:
            slot.models = None
            if not slot.retired:
                self.connection.notify("models/changed", {})

        try:
            slot.subscription = event(changed)
        except Exception:
            _log.exception("subscribing to provider %r's model changes failed", slot.name)

    # ------------------------------------------------------------------ provider lifetimes

    @contextlib.contextmanager
    def _using(self, slot: _Slot) -> Iterator[None]:
        """Keep ``slot``'s provider open while a request uses it."""
        slot.users += 1
        try:
            yield
        finally:
            slot.users -= 1
            if slot.retired and slot.users == 0 and not slot.closed:
                task = asyncio.ensure_future(self._close_slot(slot))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
                self._released.set()

    def _retire(self, slot: _Slot) -> None:
        slot.retired = True
        dispose = getattr(slot.subscription, "dispose", None)
        slot.subscription = None
        if callable(dispose):
            try:
                dispose()
            except Exception:
                _log.exception("unsubscribing from provider %r failed", slot.name)
        self._retired.append(slot)
        if slot.users:
            _log.info(
                "provider %r was replaced; closing it when its %d request(s) end",
                slot.name, slot.users,
            )  # fmt: skip

    async def _settle(self) -> None:
        """Close the retired providers no request uses."""
        for slot in list(self._retired):
            if slot.users == 0:
                await self._close_slot(slot)

    async def _close_slot(self, slot: _Slot) -> None:
        if slot.closed:
            return
        slot.closed = True
        with contextlib.suppress(ValueError):
            self._retired.remove(slot)
        provider = slot.loaded.provider
        # The same object may serve on (a provider instance named in two entries).
        if provider is not None and not self._in_use(provider):
            await _aclose(slot.name, provider)

    def _in_use(self, provider: Any) -> bool:
        return any(s.loaded.provider is provider for s in self._slots.values())

    async def _close_providers(self, grace: float = 2.0) -> None:
        """Close every provider: at once when idle, else after ``grace`` seconds at most."""
        slots, self._slots = list(self._slots.values()), {}
        for slot in slots:
            self._retire(slot)
        await self._settle()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self._retired and loop.time() < deadline:
            self._released.clear()  # cancelled requests are unwinding: wait for the next one
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._released.wait(), deadline - loop.time())
        for slot in list(self._retired):
            await self._close_slot(slot)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    def _report(self, message: str) -> None:
        # Once per distinct problem: configure is re-sent on every settings change.
        if self._preloading or message in self._reported:
            return
        self._reported.add(message)
        self.connection.log("error", message)

    def _warn(self, message: str) -> None:
        # Ignored workspace settings: logged once; the extension tells the user from `ignored`.
        if message not in self._reported:
            self._reported.add(message)
            _log.warning("%s", message)

    # ------------------------------------------------------------------ methods

    async def _initialize(self, params: Any, request: IncomingRequest) -> Any:
        return await self.load(_object(params))

    async def _configure(self, params: Any, request: IncomingRequest) -> Any:
        result = await self.load(_object(params))
        self.connection.notify("models/changed", {})
        return result

    async def _models_list(self, params: Any, request: IncomingRequest) -> Any:
        params = _object(params)
        silent = bool(params.get("silent", False))
        group = params.get("group")
        if group is not None:
            return await self._group_models(group, silent, request.token)
        # the Language Models editor's providers are listed per group, under their own vendor
        slots = [slot for slot in self._slots.values() if slot.loaded.ok and slot.editor is None]
        # Each provider's listing runs on its own: one that is slow cannot hold the others.
        tasks = [
            asyncio.ensure_future(self._list_models(slot, silent, request.token)) for slot in slots
        ]
        try:
            if tasks:
                await asyncio.wait(tasks, timeout=self.listing_deadline)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            raise
        models: list[dict[str, Any]] = []
        late: list[dict[str, str]] = []
        for slot, task in zip(slots, tasks, strict=True):
            name = slot.name
            if not task.done():
                message = (
                    f"provider {name!r} did not list its models within "
                    f"{self.listing_deadline:g} s; the others are listed without it, and its "
                    f"models follow when it answers"
                )
                self._report(message)
                late.append({"provider": name, "error": message})
                task.add_done_callback(functools.partial(self._listed_late, slot))
                continue
            if task.cancelled():
                raise asyncio.CancelledError
            exc = task.exception()
            error = exc if exc is not None else slot.list_error
            if error is not None:
                # a silent listing may hide it (an empty list): the output channel shows it
                self._report(f"provider {name!r} could not list its models: {_brief(error)}")
            if exc is not None:
                continue
            for info in task.result().values():
                wire = _listed(name, info, detail=name)
                if slot.workspace is not None:
                    # the extension keeps it from VS Code and hands it to the consumer side
                    wire["workspace"] = slot.workspace
                models.append(wire)
        result: dict[str, Any] = {"models": models}
        if late:
            result["late"] = late
        return result

    async def _group_models(self, group_id: Any, silent: bool, token: CancellationToken) -> Any:
        """The models of one Language Models editor group; any problem (the entry, the listing,
        a withheld key) is the request's error: VS Code shows it on the group."""
        if not isinstance(group_id, str) or not group_id:
            raise RpcError(INVALID_PARAMS, f"group: expected a group id, got {group_id!r}")
        slot = self._slots.get(host_name(group_id))
        if slot is None or slot.editor is None:
            raise LanguageModelError.not_found(
                f"the Language Models editor group {host_name(group_id)!r} was not configured "
                f"in the host"
            )
        if slot.loaded.provider is None:
            assert slot.loaded.error is not None
            raise _on_the_group(slot.name, slot.loaded.error)
        if slot.loaded.key_error is not None:
            # its models would list, and every chat would fail
            raise _on_the_group(slot.name, slot.loaded.key_error)
        try:
            infos = await self._list_models(slot, silent, token)
        except LanguageModelError as exc:
            raise _on_the_group(slot.name, exc) from exc
        if slot.list_error is not None:
            # a silent listing that failed answers []; say why
            raise _on_the_group(slot.name, slot.list_error)
        # no detail: VS Code shows the group's own name there
        return {"models": [_listed(slot.name, info, detail=None) for info in infos.values()]}

    def _listed_late(self, slot: _Slot, task: asyncio.Future[dict[str, ModelInfo]]) -> None:
        """A listing that passed the deadline ended: tell VS Code to ask again when it brought
        models, report why when it failed."""
        if task.cancelled() or slot.retired or self._shutting_down:
            return
        exc = task.exception()
        error = exc if exc is not None else slot.list_error
        if error is not None:
            self._report(f"provider {slot.name!r} could not list its models: {_brief(error)}")
        elif task.result():
            self.connection.notify("models/changed", {})

    async def _list_models(
        self, slot: _Slot, silent: bool, token: CancellationToken
    ) -> dict[str, ModelInfo]:
        with self._using(slot):
            return await self._provider_models(slot, silent, token)

    async def _provider_models(
        self, slot: _Slot, silent: bool, token: CancellationToken
    ) -> dict[str, ModelInfo]:
        name, provider = slot.name, slot.loaded.provider
        assert provider is not None
        try:
            infos = provider.provide_language_model_chat_information(
                ModelInformationOptions(silent=silent), token
            )
            if inspect.isawaitable(infos):
                infos = await infos
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            slot.list_error = exc
            raise
        # A provider that answers a silent listing with [] on failure says why here
        # (UpstreamProvider does); without it a request would only hear "no such model".
        reported = getattr(provider, "list_error", None)
        slot.list_error = reported if isinstance(reported, BaseException) else None
        out: dict[str, ModelInfo] = {}
        for info in infos:
            if not isinstance(info, ModelInfo):
                raise TypeError(f"model information must be ModelInfo, got {type(info).__name__}")
            if info.id in out:
                _log.warning("provider %r lists model %r twice; keeping the first", name, info.id)
                continue
            out[info.id] = info
        slot.models = out
        return out

    async def _providers_test(self, params: Any, request: IncomingRequest) -> Any:
        """One provider's models read afresh (an upstream's catalog is fetched again, not taken
        from the cache), or why not: the load error, the upstream's answer, a refused key."""
        name = _object(params).get("name")
        if not isinstance(name, str) or not name:
            raise RpcError(INVALID_PARAMS, f"name: expected a provider name, got {name!r}")
        slot = self._slots.get(name)
        if slot is None:
            configured = ", ".join(self._slots) or "none"
            return _tested(
                name, f"no provider named {name!r} is configured; configured: {configured}"
            )
        loaded = slot.loaded
        if loaded.provider is None:
            return _tested(name, loaded.error)
        try:
            with self._using(slot):
                infos = await self._fresh_models(slot, request.token)
        except asyncio.CancelledError:
            raise
        except LanguageModelError as exc:
            return _tested(name, exc)
        except Exception as exc:
            _log.info("provider %r: listing its models failed", name, exc_info=True)
            return _tested(name, _brief(exc))
        models = [_listed(name, i, detail=name) for i in infos]
        # the list may need no key, but with a refused key every chat would fail: not a success
        return _tested(name, loaded.key_error, models)

    async def _fresh_models(self, slot: _Slot, token: CancellationToken) -> list[ModelInfo]:
        catalog = getattr(slot.loaded.provider, "catalog", None)
        fetch = getattr(catalog, "fetch", None)
        if callable(fetch) and getattr(catalog, "static", None) is None:
            # an upstream with a fetched catalog: ask the upstream now (the cache may be
            # younger than the key, and a failed refresh would keep serving the old list)
            fetched = await fetch()
            return [m.info for m in fetched]
        return list((await self._provider_models(slot, False, token)).values())

    def _slot(self, model_id: Any) -> tuple[_Slot, str]:
        """The slot serving ``model_id`` now, and the model's id within its provider."""
        if not isinstance(model_id, str) or "/" not in model_id:
            raise RpcError(INVALID_PARAMS, f"modelId: expected 'provider/model', got {model_id!r}")
        name, _, local = model_id.partition("/")
        slot = self._slots.get(name)
        if slot is None:
            raise LanguageModelError.not_found(
                f"no provider named {name!r} is configured (model {model_id!r}); configured: "
                f"{', '.join(self._slots) or 'none'}"
            )
        if slot.loaded.provider is None:
            assert slot.loaded.error is not None
            raise slot.loaded.error
        return slot, local

    def _keyed_slot(self, model_id: Any) -> tuple[_Slot, str]:
        """:meth:`_slot` for requests that need the provider's key: a withheld key fails them."""
        slot, local = self._slot(model_id)
        if slot.loaded.key_error is not None:
            raise slot.loaded.key_error
        return slot, local

    async def _model(self, slot: _Slot, local: str, token: CancellationToken) -> ModelInfo:
        models = slot.models
        if models is None or local not in models:
            models = await self._provider_models(slot, True, token)
        info = models.get(local)
        if info is not None:
            return info
        error = slot.list_error
        if isinstance(error, LanguageModelError):
            raise error  # the real cause (a rejected key ...), with its code
        if error is not None:
            raise LanguageModelError(
                f"provider {slot.name!r} could not list its models, so it has no model "
                f"{local!r}: {_brief(error)}"
            )
        raise LanguageModelError.not_found(
            f"provider {slot.name!r} has no model {local!r} (it offers: "
            f"{', '.join(models) or 'none'})"
        )

    async def _chat_response(self, params: Any, request: IncomingRequest) -> Any:
        mark("host.chat")
        params = _object(params)
        try:
            messages = messages_from_wire(params.get("messages"), "messages")
            options = options_from_wire(params.get("options"), "options")
        except WireError as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        started = time.monotonic()
        with self._workspace_errors(params.get("modelId")):
            slot, local = self._keyed_slot(params.get("modelId"))
            # The request keeps this provider to its end, whatever a configure does meanwhile.
            with self._using(slot):
                return await self._respond(slot, local, messages, options, request, started)

    async def _respond(
        self,
        slot: _Slot,
        local: str,
        messages: list[ChatMessage],
        options: ChatRequestOptions,
        request: IncomingRequest,
        started: float,
    ) -> Any:
        info = await self._model(slot, local, request.token)
        provider = slot.loaded.provider
        assert provider is not None  # _slot() let only loaded providers through
        model_id = f"{slot.name}/{info.id}"
        estimated = _estimate_request(provider, info, messages, options)
        factor = _calibration_factor(provider, info)  # the one the estimate was made with
        if getattr(provider, "context_check", True) is not False:
            _check_context(model_id, info, estimated, provider)
        connection = self.connection
        request_id = request.id
        first_part: list[float] = []

        def send(batch: list[ResponsePart]) -> None:
            mark("host.chat_parts", n=len(batch))
            connection.notify(
                "chat/parts", {"requestId": request_id, "parts": [part_to_wire(p) for p in batch]}
            )

        batcher = PartBatcher(send)
        request.on_cancel.append(batcher.discard)

        # kept for an estimate of the output, made only when the upstream reports none
        output: list[ResponsePart] = []

        def on_part(part: ResponsePart) -> None:
            if not first_part:
                mark("host.part")
                first_part.append(time.monotonic())
            output.append(part)
            batcher.add(part)

        _log.debug("chat/response %r: %s, %d messages", request_id, info.id, len(messages))
        mark("host.respond")
        try:
            result = await respond(provider, info, messages, options, on_part, request.token)
        except ContextLengthError as exc:
            if not request.token.is_cancellation_requested:
                batcher.flush()
            # The service refused it: the same message as lmbridge's own refusal would be.
            said = exc.upstream or str(exc)
            raise _too_long(model_id, info, estimated, provider, said) from exc
        except BaseException as exc:
            # parts produced before the error stay valid: send them ahead of the error
            if not request.token.is_cancellation_requested:
                batcher.flush()
                if isinstance(exc, Exception):
                    slot.last_error = _brief(exc)
            raise
        if request.token.is_cancellation_requested:
            raise asyncio.CancelledError
        batcher.flush()
        if result.usage.input_tokens:
            observe_usage(info, messages, options, result.usage.input_tokens)
        stats = _stats(model_id, info, result, started, first_part, estimated)
        stats["calibrationFactor"] = factor
        if result.usage.output_tokens is None:
            text = "".join(map(_output_text, output))
            stats["estimatedOutputTokens"] = _estimate_output(info, text)
        _usage_log.info("%s", usage_line(stats))
        return {
            "usage": usage_to_wire(result.usage),
            "finishReason": result.finish_reason.value if result.finish_reason else None,
            "stats": stats,
            "usagePart": usage_part(stats),
        }

    async def _tokens_count(self, params: Any, request: IncomingRequest) -> Any:
        params = _object(params)
        text = params.get("text")
        if not isinstance(text, str):
            try:
                text = message_from_wire(text, "text")
            except WireError as exc:
                raise RpcError(
                    INVALID_PARAMS, f"text: expected a string or a wire message ({exc})"
                ) from None
        with self._workspace_errors(params.get("modelId")):
            slot, local = self._slot(params.get("modelId"))
            with self._using(slot):
                info = await self._model(slot, local, request.token)
                count_fn = getattr(slot.loaded.provider, "provide_token_count", None)
                if callable(count_fn):
                    count = count_fn(info, text, request.token)
                    if inspect.isawaitable(count):
                        count = await count
                else:
                    count = estimate_tokens(info, text)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise TypeError(f"provide_token_count returned {count!r}, not a non-negative int")
        return {"tokens": count}

    async def _diagnose(self, params: Any, request: IncomingRequest) -> Any:
        """``diagnose``: what the host knows for a bug report (:mod:`lmbridge.diagnose`); names,
        origins, numbers and error messages, never a key, a token or a message's content."""
        providers = []
        for slot in self._slots.values():
            loaded = slot.loaded
            entry = loaded.entry
            origin = None
            if entry is not None and entry.base_url:
                try:
                    origin = entry_origin(entry)
                except ValueError:
                    origin = None
            providers.append(
                {
                    "name": slot.name,
                    "ok": loaded.ok,
                    "kind": "python" if entry is not None and entry.provider else "upstream",
                    "format": entry.format if entry is not None else None,
                    "origin": origin,
                    "models": len(slot.models) if slot.models is not None else None,
                    "error": str(loaded.error) if loaded.error is not None else None,
                    "keyError": str(loaded.key_error) if loaded.key_error is not None else None,
                    "lastError": slot.last_error or (
                        _brief(slot.list_error) if slot.list_error is not None else None
                    ),
                    "workspace": slot.workspace,
                }
            )
        endpoint = self.consumer.endpoint
        report = {
            "versions": python_facts(),
            "network": {
                **network_facts(self._network),
                **{f"environment {k}": v for k, v in environment_proxies(self._environ).items()},
            },
            "endpoint": {
                "enabled": self.consumer.settings.endpoint_enabled,
                "listening": endpoint.url if endpoint is not None else None,
                "file": str(self.consumer.endpoint_file) if self.consumer.endpoint_file else None,
                "apps": list(self.consumer.settings.apps),
            },
            "providers": providers,
            "ignored": [item.to_wire() for item in self._ignored],
            "traps": [text for _, text in KNOWN_TRAPS],
        }
        keys = [k.key for k in self._secrets.values()] + [
            self._environ_value(slot.loaded.entry.api_key_env)
            for slot in self._slots.values()
            if slot.loaded.entry is not None and slot.loaded.entry.api_key_env
        ]
        return {"report": scrub(report, keys), "text": render(report, keys)}

    def _environ_value(self, name: str) -> str:
        env = os.environ if self._environ is None else self._environ
        return env.get(name, "")

    async def _shutdown(self, params: Any, request: IncomingRequest) -> Any:
        self._shutting_down = True
        for other in list(self.connection.inflight.values()):
            if other is not request:
                other.cancel()
        await self.consumer.aclose()
        await self._close_providers()
        return None

    async def preload(self) -> list[tuple[str, str]]:
        """Load the configuration file's providers now, as ``initialize`` with no providers
        would (it then keeps them); return ``(name, one-line error)`` of those that cannot."""
        self._preloading = True  # the caller reports failures; initialize reports the rest
        try:
            result = await self.load({})
        finally:
            self._preloading = False
        return [
            (p["name"], " ".join(str(p["error"]).split()))
            for p in result["providers"]
            if not p["ok"]
        ]

    async def aclose(self) -> None:
        """Stop the consumer side and close the providers (on exit)."""
        await self.consumer.aclose()
        await self._close_providers()

    # ------------------------------------------------------------------ errors

    @contextlib.contextmanager
    def _workspace_errors(self, model_id: Any) -> Iterator[None]:
        """A request to a workspace's provider fails naming where that provider points, never
        advising to give it the user's key (:func:`_workspace_error`)."""
        try:
            yield
        except (LanguageModelError, ConfigError) as exc:
            name = model_id.partition("/")[0] if isinstance(model_id, str) else None
            slot = self._slots.get(name) if name else None
            if slot is None or slot.workspace is None:
                raise
            raise _workspace_error(slot.name, slot.workspace, exc) from exc

    def _map_error(self, exc: BaseException, request: IncomingRequest) -> RpcError:
        if isinstance(exc, LanguageModelError):
            _log.info("%s %r failed: %s (%s)", request.method, request.id, exc, exc.code)
            return _lm_error(str(exc), exc.code)
        if isinstance(exc, ContractViolationError):
            message = f"the provider broke the stream contract: {exc}"
            _log.error("%s %r: %s", request.method, request.id, message)
            return _lm_error(message, "Unknown")
        if isinstance(exc, UpstreamHTTPError):
            code = {401: "NoPermissions", 403: "NoPermissions", 404: "NotFound", 429: "Blocked"}
            _log.error(
                "%s %r: upstream HTTP %s: %s", request.method, request.id, exc.status_code, exc
            )
            return _lm_error(str(exc), code.get(exc.status_code, "Unknown"))
        if isinstance(exc, ConfigError):
            return _lm_error(str(exc), "Unknown")
        _log.error("%s %r failed", request.method, request.id, exc_info=exc)
        return _lm_error(f"the provider failed: {_brief(exc)}", "Unknown")


def _estimate_request(
    provider: Any, info: ModelInfo, messages: list[ChatMessage], options: ChatRequestOptions
) -> int | None:
    """The request's estimated input tokens (messages, tools, system, overhead; no margin):
    the provider's own estimate (``estimate_request_tokens``) when it has one, else the shared
    estimator's. ``None`` when estimating failed (the request is then sent unchecked)."""
    try:
        own = getattr(provider, "estimate_request_tokens", None)
        value = own(info, messages, options) if callable(own) else None
        if value is None:
            value = estimate_request(info, messages, options)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TypeError(f"estimate_request_tokens returned {value!r}")
        return value
    except Exception:  # an estimate must never fail a request
        _log.debug("estimating the request's tokens failed", exc_info=True)
        return None


def _window(info: ModelInfo) -> int:
    """The model's whole context window as Copilot takes it: input plus output limit."""
    if info.max_input_tokens <= 0:
        return 0
    return info.max_input_tokens + max(0, info.max_output_tokens)


def _turn_off(provider: Any) -> str:
    """How the user turns the context check off for ``provider``."""
    if isinstance(provider, gateway.UpstreamProvider):  # an option of its entry
        return 'set "contextCheck": false in the provider\'s entry in lmbridge.providers'
    return "set the provider's context_check attribute to False"


def _check_context(model_id: str, info: ModelInfo, estimated: int | None, provider: Any) -> None:
    """Raise when the request is certainly over the model's window (:mod:`lmbridge.context`):
    before anything is sent, so the upstream sees no request. Anything else is sent."""
    if estimated is not None and certainly_over(estimated, _window(info)):
        raise _too_long(model_id, info, estimated, provider)


def _too_long(
    model_id: str, info: ModelInfo, estimated: int | None, provider: Any, upstream: str | None = None
) -> ContextLengthError:
    """The error of a request too long for the model; ``upstream``: what the service said."""
    message = too_long_message(
        model_id,
        estimated=estimated,
        limit=info.max_input_tokens,
        window=_window(info),
        turn_off=_turn_off(provider),
        upstream=upstream,
    )
    return ContextLengthError(message, upstream=upstream)


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def _stats(
    model_id: str,
    info: ModelInfo,
    result: ChatResult,
    started: float,
    first_part: list[float],
    estimated: int | None,
) -> dict[str, Any]:
    """The ``stats`` of a ``chat/response`` result (docs/protocol.md): never any content."""
    usage = result.usage
    return {
        "model": model_id,
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "cachedTokens": usage.cache_read_tokens,
        "reasoningTokens": usage.reasoning_tokens,
        "durationMs": _ms(time.monotonic() - started),
        "firstTokenMs": _ms(first_part[0] - started) if first_part else None,
        "finishReason": result.finish_reason.value if result.finish_reason else None,
        "maxInputTokens": info.max_input_tokens or None,
        "estimatedInputTokens": estimated,
    }


def _calibration_factor(provider: Any, info: ModelInfo) -> float | None:
    """The correction factor the provider's estimator applies for ``info`` (None: none)."""
    own = getattr(provider, "calibration_factor", None)
    try:
        value = own(info) if callable(own) else None
    except Exception:  # a figure for the usage line must never fail a request
        _log.debug("reading the calibration factor failed", exc_info=True)
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return round(float(value), 3)


def _output_text(part: ResponsePart) -> str:
    """The text of an answer's part that counts as output tokens."""
    if isinstance(part, TextPart):
        return part.value
    if isinstance(part, ThinkingPart):
        return part.value if isinstance(part.value, str) else "".join(part.value)
    if isinstance(part, ToolCallPart):
        return part.name + json.dumps(part.input, ensure_ascii=False)
    return ""


def _estimate_output(info: ModelInfo, text: str) -> int | None:
    """The answer's output tokens by the host's estimate (``None`` when estimating failed)."""
    try:
        count = estimate_tokens(info, text)
    except Exception:  # an estimate must never fail a request
        _log.debug("estimating the output's tokens failed", exc_info=True)
        return None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def usage_part(stats: Mapping[str, Any]) -> dict[str, Any] | None:
    """The answer's usage as Copilot's context ring reads it: OpenAI's shape (``prompt_tokens``,
    ``completion_tokens``, ``total_tokens``, ``prompt_tokens_details.cached_tokens``,
    ``completion_tokens_details.reasoning_tokens``), which the extension reports at the end of
    the answer as a ``LanguageModelDataPart`` of MIME ``usage``.

    The upstream's numbers; the host's estimate only where the upstream reported none (the
    usage line then marks it ``~``). ``None`` when there is neither."""

    def pick(reported: str, estimated: str) -> int | None:
        value = stats.get(reported)
        if not isinstance(value, int) or isinstance(value, bool):
            value = stats.get(estimated)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    prompt = pick("inputTokens", "estimatedInputTokens")
    completion = pick("outputTokens", "estimatedOutputTokens")
    if prompt is None and completion is None:
        return None
    part: dict[str, Any] = {
        "prompt_tokens": prompt or 0,
        "completion_tokens": completion or 0,
        "total_tokens": (prompt or 0) + (completion or 0),
    }
    cached = stats.get("cachedTokens")
    if isinstance(cached, int):
        part["prompt_tokens_details"] = {"cached_tokens": cached}
    reasoning = stats.get("reasoningTokens")
    if isinstance(reasoning, int):
        part["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return part


def estimate_note(stats: Mapping[str, Any]) -> str:
    """How the host's estimate of the input compares with the upstream's count, e.g.
    ``estimated 1,150, -4.2%, factor 1.030``; empty when there is no estimate."""
    estimated = stats.get("estimatedInputTokens")
    if not isinstance(estimated, int):
        return ""
    actual = stats.get("inputTokens")
    note = f"estimated {estimated}"
    if isinstance(actual, int) and actual > 0:
        note += f", {100 * (estimated - actual) / actual:+.1f}%"
    factor = stats.get("calibrationFactor")
    if isinstance(factor, (int, float)) and not isinstance(factor, bool):
        note += f", factor {factor:.3f}"
    return note


def usage_line(stats: Mapping[str, Any]) -> str:
    """The one log line of an answer, from its ``stats``: numbers and names, no content.

    The input is the upstream's count beside the host's estimate of the request (how far off
    it was, and the calibration factor in effect); without a count from the upstream, the
    estimate marked ``~`` and said to be one."""

    def n(key: str) -> str:
        value = stats.get(key)
        return "?" if value is None else f"{value}"

    first = stats.get("firstTokenMs")
    finish = stats.get("finishReason")
    note = estimate_note(stats)
    if stats.get("inputTokens") is None and isinstance(stats.get("estimatedInputTokens"), int):
        # the upstream reported no count: the estimate is all there is
        input_text = f"~{stats['estimatedInputTokens']} tokens (the upstream reported none; {note})"
    else:
        input_text = f"{n('inputTokens')} tokens" + (f" ({note})" if note else "")
    output_text = n("outputTokens")
    if stats.get("outputTokens") is None and isinstance(stats.get("estimatedOutputTokens"), int):
        output_text = f"~{stats['estimatedOutputTokens']} (the upstream reported none; estimated)"
    line = (
        f"answer from {stats.get('model')}: input {input_text} "
        f"(cached {n('cachedTokens')}), output {output_text} "
        f"(reasoning {n('reasoningTokens')}), {n('durationMs')} ms, first token "
        f"{'-' if first is None else f'{first} ms'}, finish {finish or '?'}"
    )
    if finish == FinishReason.LENGTH.value:
        line += " (the answer was cut by the output limit)"
    return line


async def _aclose(name: str, provider: Any) -> None:
    aclose = getattr(provider, "aclose", None)
    if callable(aclose):
        try:
            result = aclose()
            if inspect.isawaitable(result):
                await result
        except Exception:
            _log.exception("closing provider %r failed", name)


def _lm_error(message: str, code: str) -> RpcError:
    return RpcError(REQUEST_FAILED, message, {"languageModelError": code})


def _tested(
    name: str, error: LanguageModelError | str | None, models: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A ``providers/test`` result: the models, or the error (its code when it has one)."""
    result: dict[str, Any] = {"name": name, "ok": error is None, "models": models or []}
    if error is not None:
        result["error"] = str(error)
        result["code"] = error.code if isinstance(error, LanguageModelError) else "Unknown"
    return result


def _brief(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _workspace_error(name: str, where: str, exc: BaseException) -> LanguageModelError:
    """``exc`` of a provider a workspace's settings added: the same code, its text without the
    advice to run a key command (it would bind the user's key to the workspace's server), and
    where the provider points, so the user sees whose server answered."""
    text = "; ".join(c for c in str(exc).split("; ") if "'lmbridge: " not in c).rstrip(". ")
    code = exc.code if isinstance(exc, LanguageModelError) else "Unknown"
    return LanguageModelError(
        f"{text}. Provider {name!r} comes from this workspace's settings, not yours, and points "
        f"to {where}",
        code,
    )


def _listed(provider: str, info: ModelInfo, detail: str | None) -> dict[str, Any]:
    """A provider's model as ``models/list`` gives it: its id ``<provider>/<model>``."""
    return model_info_to_wire(replace(info, id=f"{provider}/{info.id}", detail=detail))


def _on_the_group(name: str, exc: BaseException) -> BaseException:
    """An error as VS Code shows it on a Language Models editor group's row: without the
    provider's name in front (the row is the group; its name in the host is an id VS Code
    never shows), so that what to do is read first."""
    if not isinstance(exc, LanguageModelError):
        return exc
    for prefix in (f"provider {name!r}: ", f"{EDITOR_LABEL} ({name!r}): ", f"{name}: "):
        if exc.message.startswith(prefix):
            return LanguageModelError(exc.message[len(prefix) :], exc.code)
    if exc.message.startswith(f"{name} "):  # "<name> rejected the API key ..."
        return LanguageModelError("the upstream" + exc.message[len(name) :], exc.code)
    return exc


def _workspace_origins(entries: list[Any]) -> dict[str, str]:
    """Name -> where it points, for the workspace's entries the merge kept: the origin of the
    ``baseUrl`` (the URL as written when it has no valid origin: the entry then fails to load)."""
    out: dict[str, str] = {}
    for entry in entries:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            continue
        url = entry.get("baseUrl")
        try:
            where = origin_of(url) if isinstance(url, str) else "no baseUrl"
        except ValueError:
            where = str(url)
        out.setdefault(entry["name"], where)
    return out


def _object(params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, f"params: expected an object, got {type(params).__name__}")
    return params
