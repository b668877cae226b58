"""The provider-side methods of the bridge protocol (``docs/protocol.md``).

:class:`HostServer` registers ``initialize``, ``configure``, ``models/list``, ``chat/response``,
``tokens/count``, ``shutdown`` and ``exit`` on a :class:`HostConnection`, keeps the loaded
providers, and streams each response's parts as batched ``chat/parts`` notifications. Its
:class:`~.apps.ConsumerHost` serves the consumer side on the same connection: the ``lm/*``
notifications, the apps of ``lmbridge.apps`` and the loopback endpoint.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from .. import __version__
from ..config import LoadedProvider, load_providers
from ..errors import ConfigError, LanguageModelError, UpstreamHTTPError, WireError
from ..parts import (
    ModelInfo,
    ResponsePart,
    message_from_wire,
    messages_from_wire,
    model_info_to_wire,
    options_from_wire,
    part_to_wire,
    usage_to_wire,
)
from ..provider import (
    CancellationToken,
    ContractViolationError,
    ModelInformationOptions,
    estimate_tokens,
    observe_usage,
    respond,
    use_token_storage,
)
from .apps import ConsumerHost
from .jsonrpc import (
    INVALID_PARAMS,
    REQUEST_FAILED,
    IncomingRequest,
    JsonRpcConnection,
    RpcError,
)

__all__ = ["BATCH_INTERVAL", "HostConnection", "HostServer", "PartBatcher"]

_log = logging.getLogger("lmbridge.host")

BATCH_INTERVAL = 0.002
"""Seconds between two ``chat/parts`` notifications of one request while parts keep coming."""


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


class HostServer:
    """Serves the loaded providers' models over a :class:`HostConnection`."""

    def __init__(
        self,
        connection: HostConnection,
        *,
        file_config: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.connection = connection
        self._file_config = dict(file_config or {})
        self._environ = environ
        self._providers: dict[str, LoadedProvider] = {}
        self._models: dict[str, dict[str, ModelInfo]] = {}  # provider -> model id -> info
        self._subscriptions: list[Any] = []
        self._reported: set[str] = set()
        self._shutting_down = False
        self.exited = asyncio.Event()
        """Set by the ``exit`` notification."""
        c = connection
        c.on_request("initialize", self._initialize)
        c.on_request("configure", self._configure)
        c.on_request("models/list", self._models_list)
        c.on_request("chat/response", self._chat_response)
        c.on_request("tokens/count", self._tokens_count)
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
        secrets = params.get("secrets") or {}
        if not isinstance(secrets, Mapping):
            raise RpcError(INVALID_PARAMS, "secrets: expected an object of provider name -> key")
        settings = params.get("settings") or {}
        if not isinstance(settings, Mapping):
            raise RpcError(INVALID_PARAMS, "settings: expected an object")
        storage = params.get("storagePath")
        if storage is not None and not isinstance(storage, str):
            raise RpcError(INVALID_PARAMS, "storagePath: expected a string")
        use_token_storage(storage)
        # On the loop's thread: provider constructors may create asyncio objects.
        loaded = load_providers(
            providers,
            secrets={str(k): str(v) for k, v in secrets.items() if isinstance(v, str)},
            environ=self._environ,
            storage_path=storage,
            settings=dict(settings),
        )
        await self._close_providers()
        self._providers = {p.name: p for p in loaded}
        self._models = {}
        for p in loaded:
            if p.provider is not None:
                self._subscribe(p)
            elif p.error is not None:
                self._report(f"provider {p.name!r} is not available: {p.error}")
        ok = [p.name for p in loaded if p.ok]
        _log.info("providers ready: %s", ", ".join(ok) or "none")
        if not self._shutting_down:
            await self.consumer.apply(settings, storage)
        return {
            "serverVersion": __version__,
            "vendor": "lmbridge",
            "providers": [
                {"name": p.name, "ok": True}
                if p.ok
                else {"name": p.name, "ok": False, "error": str(p.error)}
                for p in loaded
            ],
        }

    def _subscribe(self, loaded: LoadedProvider) -> None:
        event = getattr(loaded.provider, "on_did_change_language_model_chat_information", None)
        if not callable(event):
            return

        def changed(name: str = loaded.name) -> None:
            self._models.pop(name, None)
            self.connection.notify("models/changed", {})

        try:
            self._subscriptions.append(event(changed))
        except Exception:
            _log.exception("subscribing to provider %r's model changes failed", loaded.name)

    async def _close_providers(self) -> None:
        for sub in self._subscriptions:
            dispose = getattr(sub, "dispose", None)
            if callable(dispose):
                dispose()
        self._subscriptions = []
        for p in self._providers.values():
            aclose = getattr(p.provider, "aclose", None)
            if callable(aclose):
                try:
                    result = aclose()
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    _log.exception("closing provider %r failed", p.name)

    def _report(self, message: str) -> None:
        # Once per distinct problem: configure is re-sent on every settings change.
        if message in self._reported:
            return
        self._reported.add(message)
        self.connection.log("error", message)

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
        names = [name for name, p in self._providers.items() if p.ok]
        lists = await asyncio.gather(
            *(self._provider_models(name, silent, request.token) for name in names),
            return_exceptions=True,
        )
        models: list[dict[str, Any]] = []
        for name, result in zip(names, lists, strict=True):
            if isinstance(result, BaseException):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                self._report(f"provider {name!r} could not list its models: {_brief(result)}")
                continue
            for info in result.values():
                wire = model_info_to_wire(replace(info, id=f"{name}/{info.id}", detail=name))
                models.append(wire)
        return {"models": models}

    async def _provider_models(
        self, name: str, silent: bool, token: CancellationToken
    ) -> dict[str, ModelInfo]:
        provider = self._providers[name].provider
        assert provider is not None
        infos = provider.provide_language_model_chat_information(
            ModelInformationOptions(silent=silent), token
        )
        if inspect.isawaitable(infos):
            infos = await infos
        out: dict[str, ModelInfo] = {}
        for info in infos:
            if not isinstance(info, ModelInfo):
                raise TypeError(f"model information must be ModelInfo, got {type(info).__name__}")
            if info.id in out:
                _log.warning("provider %r lists model %r twice; keeping the first", name, info.id)
                continue
            out[info.id] = info
        self._models[name] = out
        return out

    async def _resolve(self, model_id: Any, token: CancellationToken) -> tuple[Any, ModelInfo]:
        if not isinstance(model_id, str) or "/" not in model_id:
            raise RpcError(INVALID_PARAMS, f"modelId: expected 'provider/model', got {model_id!r}")
        name, _, local = model_id.partition("/")
        loaded = self._providers.get(name)
        if loaded is None:
            raise LanguageModelError.not_found(
                f"no provider named {name!r} is configured (model {model_id!r}); configured: "
                f"{', '.join(self._providers) or 'none'}"
            )
        if loaded.provider is None:
            assert loaded.error is not None
            raise loaded.error
        models = self._models.get(name)
        if models is None or local not in models:
            models = await self._provider_models(name, True, token)
        info = models.get(local)
        if info is None:
            raise LanguageModelError.not_found(
                f"provider {name!r} has no model {local!r} (it offers: "
                f"{', '.join(models) or 'none'})"
            )
        return loaded.provider, info

    async def _chat_response(self, params: Any, request: IncomingRequest) -> Any:
        params = _object(params)
        try:
            messages = messages_from_wire(params.get("messages"), "messages")
            options = options_from_wire(params.get("options"), "options")
        except WireError as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        provider, info = await self._resolve(params.get("modelId"), request.token)
        connection = self.connection
        request_id = request.id

        def send(batch: list[ResponsePart]) -> None:
            connection.notify(
                "chat/parts", {"requestId": request_id, "parts": [part_to_wire(p) for p in batch]}
            )

        batcher = PartBatcher(send)
        request.on_cancel.append(batcher.discard)
        _log.debug("chat/response %r: %s, %d messages", request_id, info.id, len(messages))
        try:
            result = await respond(provider, info, messages, options, batcher.add, request.token)
        except BaseException:
            # parts produced before the error stay valid: send them ahead of the error
            if not request.token.is_cancellation_requested:
                batcher.flush()
            raise
        if request.token.is_cancellation_requested:
            raise asyncio.CancelledError
        batcher.flush()
        if result.usage.input_tokens:
            observe_usage(info, messages, options, result.usage.input_tokens)
        return {
            "usage": usage_to_wire(result.usage),
            "finishReason": result.finish_reason.value if result.finish_reason else None,
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
        provider, info = await self._resolve(params.get("modelId"), request.token)
        count_fn = getattr(provider, "provide_token_count", None)
        if callable(count_fn):
            count = count_fn(info, text, request.token)
            if inspect.isawaitable(count):
                count = await count
        else:
            count = estimate_tokens(info, text)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise TypeError(f"provide_token_count returned {count!r}, not a non-negative int")
        return {"tokens": count}

    async def _shutdown(self, params: Any, request: IncomingRequest) -> Any:
        self._shutting_down = True
        for other in list(self.connection.inflight.values()):
            if other is not request:
                other.cancel()
        await self.consumer.aclose()
        await self._close_providers()
        return None

    async def aclose(self) -> None:
        """Stop the consumer side and close the providers (on exit)."""
        await self.consumer.aclose()
        await self._close_providers()

    # ------------------------------------------------------------------ errors

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


def _lm_error(message: str, code: str) -> RpcError:
    return RpcError(REQUEST_FAILED, message, {"languageModelError": code})


def _brief(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _object(params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, f"params: expected an object, got {type(params).__name__}")
    return params
