"""How the consumer client reaches VS Code's models: one protocol, two transports.

:class:`BridgeTransport` is the narrow interface the client API (:mod:`.api`) and the loopback
endpoint (:mod:`.endpoint`) are written against. It mirrors ``vscode.lm``: select models, send
a request and stream its parts, count tokens, hear about model and configuration changes.

- :class:`HostTransport` runs inside the host process the extension started: ``lm/*`` requests
  over the host's JSON-RPC connection, parts from ``lm/parts`` notifications matched by
  ``streamId``, ``$/cancelRequest`` when the caller cancels (docs/protocol.md).
- :class:`HttpTransport` runs in any other process: the same operations over the loopback
  endpoint, found through the endpoint file (:mod:`.discovery`).

Cancellation contract for :meth:`BridgeTransport.send_request`: the returned iterator stops
with a :class:`~.classify.ChatRequestError` of kind ``cancelled`` soon after ``cancel`` is set,
and closing it (``aclose``) or cancelling the task that iterates it cancels the VS Code request.
Every failure is a :class:`~.classify.ChatRequestError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import WireError
from ..parts import (
    ChatMessage,
    ChatRequestOptions,
    ModelCapabilities,
    ResponsePart,
    ToolResultPart,
    message_to_wire,
    options_to_wire,
    parts_from_wire,
)
from ..timing import mark
from ._tool_types import ToolContent, ToolError, VSCodeTool, result_from_wire
from .classify import ChatRequestError, ErrorKind, classify_error, error_from_rpc
from .discovery import EndpointInfo, find_endpoint
from .pace import Pacer
from .selectors import ModelSelector

if TYPE_CHECKING:
    # HttpTransport's only: the host imports this module for HostTransport and serves its
    # requests without HTTP, so httpx (with ssl, h11, anyio...) loads with the first
    # HttpTransport, not with every start of the host.
    import httpx

__all__ = [
    "BridgeTransport",
    "ChatModel",
    "HostTransport",
    "HttpTransport",
    "Listeners",
    "RpcConnection",
    "clear_default_transport",
    "default_transport",
    "get_default_transport",
    "response_parts_from_wire",
    "set_default_transport",
    "set_local_default_transport",
]

_log = logging.getLogger("lmbridge.client")


@dataclass(frozen=True, slots=True)
class ChatModel:
    """``vscode.LanguageModelChat`` as the consumer sees it (without its methods)."""

    id: str
    """Unique id (``gpt-4o``, ``lmbridge``'s ``openai/gpt-4o`` ...)."""
    name: str
    """Human-readable name."""
    vendor: str
    """Who provides it (``copilot``, ``lmbridge`` ...)."""
    family: str
    """Model family."""
    version: str
    """Version string."""
    max_input_tokens: int
    """Tokens the prompt may use."""
    capabilities: ModelCapabilities | None = None
    """Whether it takes images and calls tools; ``None`` when VS Code did not say (then
    both are assumed)."""
    workspace: str | None = None
    """For a model of a provider that a workspace's settings added (lmbridge's own, allowed by
    the user): where that provider points. Such a model is chosen only by a selector naming its
    id (:meth:`chosen_by`), never by a family, a pattern or a default."""

    @property
    def image_input(self) -> bool:
        """Whether images may be sent to it (assumed when unknown)."""
        return self.capabilities is None or self.capabilities.image_input

    @property
    def tool_calling(self) -> bool:
        """Whether it calls tools (assumed when unknown)."""
        return self.capabilities is None or bool(self.capabilities.tool_calling)

    def to_wire(self) -> dict[str, Any]:
        """The camelCase form ``lm/selectChatModels`` answers with."""
        out: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "vendor": self.vendor,
            "family": self.family,
            "version": self.version,
            "maxInputTokens": self.max_input_tokens,
        }
        if self.capabilities is not None:
            out["capabilities"] = {
                "imageInput": self.capabilities.image_input,
                "toolCalling": self.capabilities.tool_calling,
            }
        if self.workspace is not None:
            out["workspace"] = self.workspace
        return out

    @classmethod
    def from_wire(cls, obj: Any, where: str = "model") -> ChatModel:
        """Parse one model of an ``lm/selectChatModels`` answer."""
        if not isinstance(obj, Mapping):
            raise WireError(f"{where}: expected an object, got {type(obj).__name__}")
        ident = obj.get("id")
        if not isinstance(ident, str) or not ident:
            raise WireError(f"{where}.id: expected a non-empty string, got {ident!r}")
        limit = obj.get("maxInputTokens", 0)
        if isinstance(limit, float) and limit.is_integer():
            limit = int(limit)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise WireError(
                f"{where}.maxInputTokens: expected a non-negative integer, got {limit!r}"
            )

        def text(key: str, default: str) -> str:
            value = obj.get(key)
            return value if isinstance(value, str) else default

        caps = obj.get("capabilities")
        capabilities = None
        if isinstance(caps, Mapping):
            tools = caps.get("toolCalling", True)
            capabilities = ModelCapabilities(
                image_input=caps.get("imageInput") is True,
                tool_calling=tools if isinstance(tools, (bool, int)) else True,
            )
        return cls(
            id=ident,
            name=text("name", ident),
            vendor=text("vendor", ""),
            family=text("family", ""),
            version=text("version", ""),
            max_input_tokens=limit,
            capabilities=capabilities,
            # anything but a string still marks the model: never mistaken for the user's
            workspace=None if (w := obj.get("workspace")) is None else str(w),
        )

    @property
    def ref(self) -> dict[str, str]:
        """The ``model`` parameter of ``lm/sendRequest`` and ``lm/countTokens``."""
        return {"id": self.id, "vendor": self.vendor}

    def matches(self, selector: ModelSelector) -> bool:
        """Whether ``selector`` selects this model."""
        return selector.matches(
            vendor=self.vendor, family=self.family, version=self.version, id=self.id
        )

    def chosen_by(self, selector: ModelSelector) -> bool:
        """Whether ``selector`` may choose this model for someone who did not name it: it
        matches, and a workspace's model (:attr:`workspace`) only when the selector names its id.
        A repository's provider then never answers a family, a pattern or a default."""
        return self.matches(selector) and (self.workspace is None or selector.id == self.id)


@runtime_checkable
class BridgeTransport(Protocol):
    """The operations of ``vscode.lm`` the consumer client needs."""

    async def select_chat_models(self, selector: ModelSelector) -> list[ChatModel]:
        """The models matching ``selector``, in VS Code's order."""
        ...

    def send_request(
        self,
        model: ChatModel,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        cancel: asyncio.Event | None = None,
        *,
        justification: str | None = None,
    ) -> AsyncIterator[ResponsePart]:
        """Stream the response parts of one request (see the module's cancellation contract)."""
        ...

    async def count_tokens(self, model: ChatModel, text: str | ChatMessage) -> int:
        """The model's own token count for ``text``."""
        ...

    def on_models_changed(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` when VS Code's models change; returns a function that unsubscribes."""
        ...

    def on_config_changed(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(section)`` when a setting that matters to consumers changed."""
        ...

    async def aclose(self) -> None:
        """Release connections and background tasks."""
        ...


class Listeners:
    """A list of callbacks; a failing callback is logged and does not stop the others."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._callbacks: list[Callable[..., None]] = []

    def add(self, callback: Callable[..., None]) -> Callable[[], None]:
        """Subscribe; returns the unsubscribe function."""
        self._callbacks.append(callback)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._callbacks.remove(callback)

        return remove

    def fire(self, *args: Any) -> None:
        """Call every callback with ``args``."""
        for callback in list(self._callbacks):
            try:
                callback(*args)
            except Exception:
                _log.exception("a %s listener failed", self._what)

    def __len__(self) -> int:
        return len(self._callbacks)


# The default transport lives here rather than in the client API so that the host sets its
# own without importing the API (and the context guard and converters behind it) at start-up.
_default_transport: BridgeTransport | None = None
# An app the host runs on its own event loop and thread gets a default of its own (a transport
# that crosses to the host's loop); a context variable, because the tasks the app starts copy
# its context and nothing else in the process sees it.
_local_default: contextvars.ContextVar[BridgeTransport | None] = contextvars.ContextVar(
    "lmbridge_local_default_transport", default=None
)


def set_default_transport(transport: BridgeTransport | None) -> None:
    """Make ``transport`` the one module-level functions and new clients use.

    The host sets its :class:`HostTransport` here. Inside an app the host runs (which has a
    default of its own, :func:`set_local_default_transport`) this changes the app's default
    only.
    """
    global _default_transport
    if _local_default.get() is not None and transport is not None:
        _local_default.set(transport)
        return
    _default_transport = transport


def set_local_default_transport(transport: BridgeTransport) -> None:
    """Make ``transport`` the default of the current context only: the thread that calls it
    and the tasks started from there (an app's event loop), whatever the process-wide one is."""
    _local_default.set(transport)


def clear_default_transport(transport: BridgeTransport) -> None:
    """Forget the default transport if it is ``transport`` (e.g. one on a closed connection)."""
    global _default_transport
    if _default_transport is transport:
        _default_transport = None


def default_transport() -> BridgeTransport | None:
    """The default transport set so far (``None``: none yet; the client API then finds the
    loopback endpoint, see :func:`get_default_transport`)."""
    local = _local_default.get()
    return local if local is not None else _default_transport


def get_default_transport() -> BridgeTransport:
    """The default transport: the host's when running inside it, else the loopback endpoint's
    (found the first time it is asked for). Inside an app the host runs: the app's own."""
    transport = default_transport()
    if transport is None:
        transport = HttpTransport.discover()
        set_default_transport(transport)
    return transport


def response_parts_from_wire(obj: Any, where: str = "parts") -> list[ResponsePart]:
    """Parse wire parts of a response; tool results (never valid in a response) are dropped."""
    out: list[ResponsePart] = []
    for part in parts_from_wire(obj, where):
        if isinstance(part, ToolResultPart):
            _log.warning("%s: a response cannot contain a tool result; dropped", where)
            continue
        out.append(part)
    return out


def _models_from_result(result: Any) -> list[ChatModel]:
    models = result.get("models") if isinstance(result, Mapping) else None
    if not isinstance(models, list):
        raise ChatRequestError(
            ErrorKind.INTERNAL, f"lm/selectChatModels: expected {{'models': [...]}}, got {result!r}"
        )
    try:
        return [ChatModel.from_wire(m, f"models[{i}]") for i, m in enumerate(models)]
    except WireError as exc:
        raise ChatRequestError(ErrorKind.INTERNAL, f"lm/selectChatModels: {exc}") from None


def _tokens_from_result(result: Any) -> int:
    tokens = result.get("tokens") if isinstance(result, Mapping) else None
    if isinstance(tokens, float) and tokens.is_integer():
        tokens = int(tokens)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ChatRequestError(
            ErrorKind.INTERNAL, f"lm/countTokens: expected a non-negative integer, got {tokens!r}"
        )
    return tokens


def _text_param(text: str | ChatMessage) -> str | dict[str, Any]:
    return text if isinstance(text, str) else message_to_wire(text)


def _request_params(
    model: ChatModel,
    messages: Sequence[ChatMessage],
    options: ChatRequestOptions,
    justification: str | None,
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "model": model.ref,
        "messages": [message_to_wire(m) for m in messages],
        "options": options_to_wire(options),
    }
    if justification:
        params["justification"] = justification
    return params


# Sentinels on a stream's queue: the request ended, or the caller's cancel event fired.
_END = object()
_CANCELLED = object()


def _watch(cancel: asyncio.Event | None, queue: asyncio.Queue[Any]) -> asyncio.Task[Any] | None:
    """A task that puts ``_CANCELLED`` on ``queue`` when ``cancel`` is set."""
    if cancel is None:
        return None

    async def wait() -> None:
        await cancel.wait()
        queue.put_nowait(_CANCELLED)

    return asyncio.ensure_future(wait())


def _cancelled_by_caller() -> ChatRequestError:
    return ChatRequestError(ErrorKind.CANCELLED, "cancelled by the caller", name="Canceled")


# --------------------------------------------------------------------------- in the host


class RpcConnection(Protocol):
    """What :class:`HostTransport` needs of the host's JSON-RPC connection.

    ``request`` raises an error with ``code``, ``message`` and ``data`` attributes when the
    extension answers with an error, and sends ``$/cancelRequest`` when the awaiting task is
    cancelled (:class:`lmbridge.host.jsonrpc.JsonRpcConnection` does both).
    """

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and await its result."""
        ...

    def on_notification(self, method: str, handler: Callable[[Any], Any]) -> None:
        """Route notifications of ``method`` to ``handler``."""
        ...


class HostTransport:
    """:class:`BridgeTransport` over the host's connection to the extension.

    By default it registers itself for ``lm/parts``, ``lm/modelsChanged`` and
    ``lm/configChanged`` on ``connection``; a host that dispatches those notifications itself
    passes ``register=False`` and calls :meth:`handle_parts`, :meth:`handle_models_changed` and
    :meth:`handle_config_changed`.
    """

    def __init__(self, connection: RpcConnection, *, register: bool = True) -> None:
        self._conn = connection
        self._streams: dict[str, asyncio.Queue[Any]] = {}
        self._models_changed = Listeners("models-changed")
        self._config_changed = Listeners("config-changed")
        self._degraded_reported = False
        self.settings: dict[str, Any] = {}
        """The consumer settings the extension sent (``consumerModel`` ...; docs/protocol.md),
        updated before the config-changed listeners run."""
        self.pacer = Pacer()
        """``lmbridge.pace``: every request to VS Code's models, from apps and from the
        endpoint's clients, takes a slot here first (off by default; :mod:`.pace`)."""
        if register:
            connection.on_notification("lm/parts", self.handle_parts)
            connection.on_notification("lm/modelsChanged", self.handle_models_changed)
            connection.on_notification("lm/configChanged", self.handle_config_changed)

    # notifications from the extension

    def handle_parts(self, params: Any) -> None:
        """``lm/parts {"streamId", "parts"}``: queue the parts for their stream."""
        stream_id = params.get("streamId") if isinstance(params, Mapping) else None
        queue = self._streams.get(stream_id) if isinstance(stream_id, str) else None
        if queue is None:
            # late parts of a cancelled or finished stream: expected after a cancellation
            _log.debug("lm/parts for unknown stream %r", stream_id)
            return
        try:
            parts = response_parts_from_wire(params.get("parts"), "lm/parts.parts")
        except WireError as exc:
            queue.put_nowait(ChatRequestError(ErrorKind.INTERNAL, f"malformed parts: {exc}"))
            return
        mark("endpoint.lm_parts", n=len(parts))
        queue.put_nowait(parts)

    def handle_models_changed(self, params: Any = None) -> None:
        """``lm/modelsChanged``: VS Code's ``onDidChangeChatModels`` fired."""
        self._models_changed.fire()
        self._degraded_reported = False  # the next degraded answer has news: tell again

    def report_degraded(self, cause: str) -> None:
        """An app got the fallback answer (no usable model): ``lm/degraded`` asks the extension
        to tell the user, once until VS Code's models change. The cause is for the log only
        (the extension shows a fixed text: model names come from other extensions)."""
        if self._degraded_reported:
            return
        self._degraded_reported = True
        notify = getattr(self._conn, "notify", None)
        if callable(notify):
            notify("lm/degraded", {"cause": cause[:500]})

    def handle_config_changed(self, params: Any = None) -> None:
        """``lm/configChanged {"section", "settings"?}``: a setting that matters to consumers
        changed; ``settings`` (the current consumer settings) replaces :attr:`settings`."""
        section = params.get("section") if isinstance(params, Mapping) else None
        settings = params.get("settings") if isinstance(params, Mapping) else None
        if isinstance(settings, Mapping):
            self.update_settings(settings)
        self._config_changed.fire(section if isinstance(section, str) else "")

    def update_settings(self, settings: Mapping[str, Any]) -> None:
        """Take the consumer settings from ``initialize``/``configure`` or ``lm/configChanged``."""
        self.settings.update(settings)

    @property
    def model_setting(self) -> str | None:
        """The ``lmbridge.consumer.model`` setting (``consumerModel``), if the extension sent it."""
        value = self.settings.get("consumerModel")
        return value if isinstance(value, str) else None

    # BridgeTransport

    async def _call(self, method: str, params: Any) -> Any:
        try:
            return await self._conn.request(method, params)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise _rpc_failure(method, exc) from exc

    async def select_chat_models(self, selector: ModelSelector) -> list[ChatModel]:
        """``lm/selectChatModels``."""
        result = await self._call("lm/selectChatModels", {"selector": selector.to_wire()})
        return _models_from_result(result)

    async def count_tokens(self, model: ChatModel, text: str | ChatMessage) -> int:
        """``lm/countTokens``."""
        result = await self._call("lm/countTokens", {"model": model.ref, "text": _text_param(text)})
        return _tokens_from_result(result)

    def send_request(
        self,
        model: ChatModel,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        cancel: asyncio.Event | None = None,
        *,
        justification: str | None = None,
    ) -> AsyncIterator[ResponsePart]:
        """``lm/sendRequest``, its parts from ``lm/parts``; ``$/cancelRequest`` on cancellation.
        With a pace set (:attr:`pacer`) the request first waits for a slot, held until the
        stream ends; without one the stream is returned as it is (no cost per part)."""
        stream = self._send(model, messages, options, cancel, justification)
        if not self.pacer.pace:
            return stream
        return self._paced(model.id, stream)

    async def _paced(
        self, model_id: str, stream: AsyncGenerator[ResponsePart, None]
    ) -> AsyncIterator[ResponsePart]:
        try:
            async with self.pacer.slot(model_id):
                async for part in stream:
                    yield part
        finally:
            await stream.aclose()  # ends the VS Code request now, not when collected

    async def _send(
        self,
        model: ChatModel,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        cancel: asyncio.Event | None,
        justification: str | None,
    ) -> AsyncGenerator[ResponsePart, None]:
        stream_id = uuid.uuid4().hex
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._streams[stream_id] = queue
        params = _request_params(model, messages, options, justification)
        params["streamId"] = stream_id
        mark("endpoint.lm_send")
        request = asyncio.ensure_future(self._conn.request("lm/sendRequest", params))
        # The extension sends every lm/parts notification before the answer on the same
        # channel, so _END is queued after the last batch of parts.
        request.add_done_callback(lambda _: queue.put_nowait(_END))
        watcher = _watch(cancel, queue)
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    if request.cancelled():
                        raise _cancelled_by_caller()
                    exc = request.exception()
                    if exc is not None:
                        raise _rpc_failure("lm/sendRequest", exc) from exc
                    return
                if item is _CANCELLED:
                    raise _cancelled_by_caller()
                if isinstance(item, ChatRequestError):
                    raise item
                for part in item:
                    if cancel is not None and cancel.is_set():
                        # parts already queued when the caller cancelled are not wanted
                        raise _cancelled_by_caller()
                    yield part
        finally:
            self._streams.pop(stream_id, None)
            if watcher is not None:
                watcher.cancel()
            if not request.done():
                request.cancel()  # the connection sends $/cancelRequest

    async def list_tools(self) -> list[VSCodeTool]:
        """``lm/tools``: VS Code's tools that ``lmbridge.endpoint.tools`` allows."""
        try:
            result = await self._conn.request("lm/tools", {})
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise _tool_failure("lm/tools", exc) from exc
        return _tools_from_result(result)

    async def invoke_tool(
        self, name: str, input: Mapping[str, Any], cancel: asyncio.Event | None = None
    ) -> ToolContent:
        """``lm/invokeTool``: ``vscode.lm.invokeTool``; setting ``cancel`` (or cancelling the
        caller) sends ``$/cancelRequest``, which cancels the tool's token."""
        request = asyncio.ensure_future(
            self._conn.request("lm/invokeTool", {"name": name, "input": dict(input)})
        )
        try:
            result = await _unless_cancelled(request, cancel)
        except (asyncio.CancelledError, ToolError):
            raise
        except Exception as exc:
            raise _tool_failure("lm/invokeTool", exc) from exc
        return _content_from_result(result)

    def on_models_changed(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Subscribe to ``lm/modelsChanged``."""
        return self._models_changed.add(callback)

    def on_config_changed(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Subscribe to ``lm/configChanged``."""
        return self._config_changed.add(callback)

    async def aclose(self) -> None:
        """Nothing to release: the host owns the connection."""


def _rpc_failure(method: str, exc: BaseException) -> ChatRequestError:
    if isinstance(exc, ChatRequestError):
        return exc
    code = getattr(exc, "code", None)
    message = getattr(exc, "message", None)
    if isinstance(code, int) and isinstance(message, str):
        return error_from_rpc(code, message, getattr(exc, "data", None))
    if isinstance(exc, ConnectionError):
        return ChatRequestError(
            ErrorKind.INTERNAL, f"{method}: the connection to the VS Code extension is closed"
        )
    return classify_error(exc)


# --------------------------------------------------------------------------- over HTTP


class HttpTransport:
    """:class:`BridgeTransport` over the loopback endpoint, for processes VS Code did not start.

    ``HttpTransport.discover()`` reads the endpoint file; pass ``client`` to reuse or mock an
    ``httpx.AsyncClient``.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        client: httpx.AsyncClient | None = None,
        reconnect_delay: float = 1.0,
    ) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"}
        import httpx

        self._own_client = client is None
        # Streams last as long as the model talks: no read timeout, a short connect timeout.
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=5.0), trust_env=False
        )
        self._models_changed = Listeners("models-changed")
        self._config_changed = Listeners("config-changed")
        self._events_task: asyncio.Task[None] | None = None
        self._reconnect_delay = reconnect_delay
        self._closed = False
        self._degraded_reported = False

    @classmethod
    def discover(
        cls, path: Path | None = None, *, client: httpx.AsyncClient | None = None
    ) -> HttpTransport:
        """A transport for the endpoint named by the endpoint file (:func:`.discovery.find_endpoint`)."""
        info: EndpointInfo = find_endpoint(path)
        return cls(info.url, info.token, client=client)

    async def _post(self, route: str, body: Mapping[str, Any]) -> Any:
        import httpx

        try:
            response = await self._client.post(
                f"{self.url}{route}", json=body, headers=self._headers
            )
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        if response.status_code != 200:
            raise _http_failure(response.status_code, response.content)
        try:
            return response.json()
        except ValueError as exc:
            raise ChatRequestError(ErrorKind.INTERNAL, f"{route}: invalid JSON ({exc})") from None

    def _unreachable(self, exc: BaseException) -> ChatRequestError:
        return ChatRequestError(
            ErrorKind.INTERNAL,
            f"cannot reach the lmbridge endpoint at {self.url} ({exc})",
            user_message=(
                "The lmbridge endpoint in VS Code is not reachable: is VS Code running with "
                "the endpoint enabled?"
            ),
        )

    async def select_chat_models(self, selector: ModelSelector) -> list[ChatModel]:
        """``POST /lm/selectChatModels``."""
        return _models_from_result(
            await self._post("/lm/selectChatModels", {"selector": selector.to_wire()})
        )

    async def report_degraded(self, cause: str) -> None:
        """``POST /lm/degraded``: an app got the fallback answer; the host asks the extension to
        tell the user (see :meth:`HostTransport.report_degraded`). Once per transport; a
        failure is ignored (the endpoint may be what is missing)."""
        if self._degraded_reported:
            return
        self._degraded_reported = True
        with contextlib.suppress(ChatRequestError):
            await self._post("/lm/degraded", {"cause": cause[:500]})

    async def count_tokens(self, model: ChatModel, text: str | ChatMessage) -> int:
        """``POST /lm/countTokens``."""
        return _tokens_from_result(
            await self._post("/lm/countTokens", {"model": model.ref, "text": _text_param(text)})
        )

    async def send_request(
        self,
        model: ChatModel,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        cancel: asyncio.Event | None = None,
        *,
        justification: str | None = None,
    ) -> AsyncIterator[ResponsePart]:
        """``POST /lm/sendRequest``: NDJSON lines ``{"parts"}``, then ``{"done"}`` or ``{"error"}``.

        Closing the HTTP response is the cancellation: the endpoint cancels the VS Code request
        when its client goes away.
        """
        body = _request_params(model, messages, options, justification)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        pump = asyncio.ensure_future(self._pump(body, queue))
        pump.add_done_callback(lambda _: queue.put_nowait(_END))
        watcher = _watch(cancel, queue)
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    if not pump.cancelled() and (exc := pump.exception()) is not None:
                        raise exc
                    return
                if item is _CANCELLED:
                    raise _cancelled_by_caller()
                for part in item:
                    if cancel is not None and cancel.is_set():
                        # parts already queued when the caller cancelled are not wanted
                        raise _cancelled_by_caller()
                    yield part
        finally:
            if watcher is not None:
                watcher.cancel()
            if not pump.done():
                pump.cancel()

    async def _pump(self, body: Mapping[str, Any], queue: asyncio.Queue[Any]) -> None:
        """Read the NDJSON response into ``queue``; raises what ended the stream abnormally."""
        import httpx

        url = f"{self.url}/lm/sendRequest"
        try:
            async with self._client.stream("POST", url, json=body, headers=self._headers) as resp:
                if resp.status_code != 200:
                    raise _http_failure(resp.status_code, await resp.aread())
                async for line in resp.aiter_lines():
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except ValueError as exc:
                        raise ChatRequestError(
                            ErrorKind.INTERNAL, f"malformed line from the endpoint ({exc})"
                        ) from None
                    if not isinstance(obj, Mapping):
                        raise ChatRequestError(ErrorKind.INTERNAL, f"malformed line: {line!r}")
                    if "parts" in obj:
                        try:
                            queue.put_nowait(response_parts_from_wire(obj["parts"]))
                        except WireError as exc:
                            raise ChatRequestError(
                                ErrorKind.INTERNAL, f"malformed parts: {exc}"
                            ) from None
                    if "error" in obj:
                        raise ChatRequestError.from_wire(obj["error"])
                    if obj.get("done"):
                        return
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        # The body ended without "done": the endpoint went away mid-stream.
        raise ChatRequestError(ErrorKind.INTERNAL, "the endpoint closed the stream before its end")

    async def list_tools(self) -> list[VSCodeTool]:
        """``POST /lm/tools``."""
        try:
            result = await self._post("/lm/tools", {})
        except ChatRequestError as exc:
            raise ToolError("unavailable", str(exc)) from exc
        return _tools_from_result(result)

    async def invoke_tool(
        self, name: str, input: Mapping[str, Any], cancel: asyncio.Event | None = None
    ) -> ToolContent:
        """``POST /lm/invokeTool``; cancelling closes the request, which cancels the tool."""
        import httpx

        request = asyncio.ensure_future(
            self._client.post(
                f"{self.url}/lm/invokeTool",
                json={"name": name, "input": dict(input)},
                headers=self._headers,
            )
        )
        try:
            response = await _unless_cancelled(request, cancel)
        except httpx.HTTPError as exc:
            raise ToolError("unavailable", str(self._unreachable(exc))) from exc
        try:
            obj = response.json()
        except ValueError:
            obj = None
        error = obj.get("error") if isinstance(obj, Mapping) else None
        if response.status_code != 200 or isinstance(error, Mapping):
            reason = error.get("reason") if isinstance(error, Mapping) else None
            message = error.get("message") if isinstance(error, Mapping) else None
            raise ToolError(
                reason if isinstance(reason, str) else "failed",
                message if isinstance(message, str) else f"HTTP {response.status_code}",
            )
        return _content_from_result(obj)

    def on_models_changed(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Subscribe to model changes (``GET /lm/events``, started on first subscription)."""
        self._ensure_events()
        return self._models_changed.add(callback)

    def on_config_changed(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Subscribe to consumer-relevant setting changes (``GET /lm/events``)."""
        self._ensure_events()
        return self._config_changed.add(callback)

    def _ensure_events(self) -> None:
        if self._events_task is None and not self._closed:
            with contextlib.suppress(RuntimeError):  # no running loop: subscribe later
                self._events_task = asyncio.get_running_loop().create_task(self._events())

    async def _events(self) -> None:
        """Follow ``GET /lm/events``; reconnect after a drop and report a change then, since
        events may have been missed meanwhile."""
        delay = self._reconnect_delay
        connected_before = False
        while not self._closed:
            try:
                async with self._client.stream(
                    "GET", f"{self.url}/lm/events", headers=self._headers
                ) as resp:
                    if resp.status_code != 200:
                        raise _http_failure(resp.status_code, await resp.aread())
                    if connected_before:
                        self._models_changed.fire()
                    connected_before = True
                    delay = self._reconnect_delay
                    async for line in resp.aiter_lines():
                        self._dispatch_event(line)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                _log.debug("model-change events: %s; reconnecting in %.1fs", exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)

    def _dispatch_event(self, line: str) -> None:
        if not line.strip():
            return
        try:
            obj = json.loads(line)
        except ValueError:
            _log.debug("ignoring malformed event line %r", line)
            return
        event = obj.get("event") if isinstance(obj, Mapping) else None
        if event == "modelsChanged":
            self._models_changed.fire()
        elif event == "configChanged":
            section = obj.get("section")
            self._config_changed.fire(section if isinstance(section, str) else "")

    async def aclose(self) -> None:
        """Stop following events and close the HTTP client (when this transport made it)."""
        self._closed = True
        if self._events_task is not None:
            self._events_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._events_task
        if self._own_client:
            await self._client.aclose()

    async def __aenter__(self) -> HttpTransport:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _tools_from_result(result: Any) -> list[VSCodeTool]:
    tools = result.get("tools") if isinstance(result, Mapping) else None
    if not isinstance(tools, list):
        raise ToolError("unavailable", "lm/tools: expected {'tools': [...]}")
    try:
        return [VSCodeTool.from_wire(t, f"tools[{i}]") for i, t in enumerate(tools)]
    except WireError as exc:
        raise ToolError("unavailable", f"lm/tools: {exc}") from None


def _content_from_result(result: Any) -> ToolContent:
    try:
        return result_from_wire(result)
    except WireError as exc:
        raise ToolError("failed", f"lm/invokeTool: {exc}") from None


async def _unless_cancelled(request: asyncio.Future[Any], cancel: asyncio.Event | None) -> Any:
    """``request``'s result, or :class:`ToolError` ``cancelled`` (and ``request`` cancelled)
    once ``cancel`` is set; cancelling the caller cancels ``request`` too."""
    waiter = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    try:
        await asyncio.wait({request} if waiter is None else {request, waiter},
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        if request.done():
            return request.result()
        raise ToolError("cancelled", "the tool call was cancelled")
    finally:
        if waiter is not None:
            waiter.cancel()
        if not request.done():
            request.cancel()
            with contextlib.suppress(BaseException):
                await request


def _tool_failure(method: str, exc: BaseException) -> ToolError:
    """A failed ``lm/tools`` / ``lm/invokeTool`` as :class:`ToolError`: the extension's
    ``data.toolError`` reason, ``unavailable`` for an extension without tools."""
    code = getattr(exc, "code", None)
    message = getattr(exc, "message", None) or str(exc)
    data = getattr(exc, "data", None)
    if code == -32601:
        return ToolError("unavailable", f"{method}: this lmbridge extension has no tools")
    if code == -32800:
        return ToolError("cancelled", "the tool call was cancelled")
    reason = data.get("toolError") if isinstance(data, Mapping) else None
    if isinstance(exc, ConnectionError):
        return ToolError(
            "unavailable", f"{method}: the connection to the VS Code extension is closed"
        )
    return ToolError(reason if isinstance(reason, str) else "failed", str(message))


def _http_failure(status: int, body: bytes) -> ChatRequestError:
    """The :class:`ChatRequestError` an endpoint error response describes."""
    try:
        obj = json.loads(body)
    except ValueError:
        obj = None
    error = obj.get("error") if isinstance(obj, Mapping) else None
    if status == 401:
        return ChatRequestError(
            ErrorKind.NO_PERMISSION,
            f"HTTP 401: {error.get('message') if isinstance(error, Mapping) else body[:200]!r}",
            user_message=(
                "The lmbridge endpoint refused the token: the endpoint file is out of date; "
                "restart the endpoint or read the file again."
            ),
        )
    if isinstance(error, Mapping) and "kind" in error:
        return ChatRequestError.from_wire(error)
    detail = (
        error.get("message") if isinstance(error, Mapping) else body[:200].decode(errors="replace")
    )
    return classify_error(f"HTTP {status}: {detail}")
