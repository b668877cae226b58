"""An in-process :class:`~.transport.BridgeTransport` for tests and demos: no VS Code needed.

::

    bridge = FakeBridge([fake_model("gpt-4o", vendor="copilot")])
    bridge.script("gpt-4o", [TextPart("Hello"), 0.05, ToolCallPart("c1", "f", {})])
    client = LanguageModelClient(bridge)

A script is a list of response parts, numbers (seconds to wait, to make room for a
cancellation) and exceptions (raised at that point). Without a script a model echoes the text
of the last message. The bridge records what it was asked and whether streams were cancelled.

Tools play ``vscode.lm.tools`` / ``invokeTool``: ``bridge.add_tool(VSCodeTool("t", ...),
handler)``, where the handler is the result (text and data parts), a function of the input
returning it (or awaiting: a slow tool), or raises :class:`~.tools.ToolError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ..parts import ChatMessage, ChatRequestOptions, ModelCapabilities, ResponsePart, TextPart
from ._tool_types import ToolContent, ToolError, VSCodeTool
from .classify import ChatRequestError, ErrorKind
from .selectors import ModelSelector
from .transport import ChatModel, Listeners, _unless_cancelled

__all__ = ["FakeBridge", "ScriptItem", "SentRequest", "fake_model", "serve_bridge_over_rpc"]

ScriptItem: TypeAlias = "ResponsePart | float | BaseException"
Responder: TypeAlias = (
    "Callable[[ChatModel, Sequence[ChatMessage], ChatRequestOptions], Sequence[ScriptItem]]"
)


def fake_model(
    id: str,
    *,
    vendor: str = "test",
    family: str | None = None,
    version: str = "1",
    name: str | None = None,
    max_input_tokens: int = 8000,
    capabilities: ModelCapabilities | None = None,
    workspace: str | None = None,
) -> ChatModel:
    """A :class:`~.transport.ChatModel` with defaults for what a test does not care about;
    ``workspace``: the origin of the workspace's provider the model comes from."""
    return ChatModel(
        id, name or id, vendor, family or id, version, max_input_tokens, capabilities, workspace
    )


@dataclass
class SentRequest:
    """One ``send_request`` the bridge received."""

    model: ChatModel
    messages: list[ChatMessage]
    options: ChatRequestOptions
    justification: str | None
    cancelled: bool = False
    """Set when the stream was cancelled or closed before its end."""
    finished: bool = False
    """Set when the whole script ran."""


@dataclass
class FakeBridge:
    """A :class:`~.transport.BridgeTransport` with scripted models."""

    models: list[ChatModel] = field(default_factory=list)
    select_error: BaseException | None = None
    """Raised by every ``select_chat_models`` while set."""
    count: Callable[[ChatModel, str | ChatMessage], Any] | None = None
    """Token counter; ``None`` counts characters / 4; may raise or return odd values."""
    selections: list[ModelSelector] = field(default_factory=list)
    requests: list[SentRequest] = field(default_factory=list)
    count_calls: int = 0
    _scripts: dict[str, Responder] = field(default_factory=dict)
    _models_changed: Listeners = field(default_factory=lambda: Listeners("models-changed"))
    _config_changed: Listeners = field(default_factory=lambda: Listeners("config-changed"))
    active_streams: int = 0
    """Streams started and not yet ended (cleaned up)."""
    tools: list[VSCodeTool] = field(default_factory=list)
    """What ``vscode.lm.tools`` lists (:meth:`add_tool`)."""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Every ``invoke_tool``: name and input."""
    cancelled_tools: list[str] = field(default_factory=list)
    """Tools whose invocation was cancelled while they ran."""
    _tool_handlers: dict[str, Any] = field(default_factory=dict)

    def add_tool(self, tool: VSCodeTool, handler: Any = None) -> None:
        """Offer ``tool``; ``handler`` is its result or a function of its input (module doc)."""
        self.tools.append(tool)
        self._tool_handlers[tool.name] = handler if handler is not None else [TextPart("ok")]

    async def list_tools(self) -> list[VSCodeTool]:
        """The tools added."""
        await asyncio.sleep(0)
        return list(self.tools)

    async def invoke_tool(
        self, name: str, input: Mapping[str, Any], cancel: asyncio.Event | None = None
    ) -> ToolContent:
        """Run the tool's handler; ``cancel`` set while it runs raises ``cancelled``."""
        if name not in self._tool_handlers:
            raise ToolError("not_found", f"no tool {name!r}")
        self.tool_calls.append((name, dict(input)))
        handler = self._tool_handlers[name]
        if not callable(handler):
            return list(handler)
        run = asyncio.ensure_future(_call_tool(handler, dict(input)))
        try:
            result: ToolContent = await _unless_cancelled(run, cancel)
            return result
        finally:
            if run.cancelled():
                self.cancelled_tools.append(name)

    def script(self, model_id: str, items: Sequence[ScriptItem] | Responder) -> None:
        """What ``model_id`` answers: a fixed script or a function of the request."""
        if callable(items):
            self._scripts[model_id] = items
        else:
            fixed = list(items)
            self._scripts[model_id] = lambda _m, _msgs, _o: fixed

    def fire_models_changed(self) -> None:
        """Play VS Code's ``onDidChangeChatModels``."""
        self._models_changed.fire()

    def fire_config_changed(self, section: str) -> None:
        """Play a configuration change of ``section``."""
        self._config_changed.fire(section)

    async def select_chat_models(self, selector: ModelSelector) -> list[ChatModel]:
        """The models ``selector`` matches, in list order."""
        self.selections.append(selector)
        await asyncio.sleep(0)
        if self.select_error is not None:
            raise self.select_error
        return [m for m in self.models if m.matches(selector)]

    async def count_tokens(self, model: ChatModel, text: str | ChatMessage) -> int:
        """``count`` or characters / 4."""
        self.count_calls += 1
        await asyncio.sleep(0)
        if self.count is not None:
            result: int = self.count(model, text)
            return result
        chars = len(text) if isinstance(text, str) else len(text.text)
        return (chars + 3) // 4

    async def send_request(
        self,
        model: ChatModel,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        cancel: asyncio.Event | None = None,
        *,
        justification: str | None = None,
    ) -> AsyncIterator[ResponsePart]:
        """Play the model's script; stops with a cancelled error when ``cancel`` is set."""
        if model.id not in {m.id for m in self.models}:
            raise ChatRequestError(
                ErrorKind.MODEL_NOT_FOUND, f"no model {model.id!r}", code="NotFound"
            )
        sent = SentRequest(model, list(messages), options, justification)
        self.requests.append(sent)
        responder = self._scripts.get(model.id, _echo)
        self.active_streams += 1
        try:
            for item in responder(model, messages, options):
                if cancel is not None and cancel.is_set():
                    raise ChatRequestError(ErrorKind.CANCELLED, "cancelled", name="Canceled")
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, (int, float)):
                    await _sleep_or_cancel(float(item), cancel)
                    continue
                yield item
            sent.finished = True
        finally:
            self.active_streams -= 1
            if not sent.finished:
                sent.cancelled = True

    def on_models_changed(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Subscribe to :meth:`fire_models_changed`."""
        return self._models_changed.add(callback)

    def on_config_changed(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Subscribe to :meth:`fire_config_changed`."""
        return self._config_changed.add(callback)

    async def aclose(self) -> None:
        """Nothing to release."""


async def _call_tool(
    handler: Callable[[dict[str, Any]], Any], value: dict[str, Any]
) -> ToolContent:
    result = handler(value)
    if inspect.isawaitable(result):
        result = await result
    return list(result)


async def _sleep_or_cancel(seconds: float, cancel: asyncio.Event | None) -> None:
    if cancel is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(cancel.wait(), seconds)
    if cancel.is_set():
        raise ChatRequestError(ErrorKind.CANCELLED, "cancelled", name="Canceled")


def _echo(
    _model: ChatModel, messages: Sequence[ChatMessage], _options: ChatRequestOptions
) -> list[ScriptItem]:
    return [TextPart(messages[-1].text if messages else "")]


def serve_bridge_over_rpc(connection: Any, bridge: FakeBridge) -> None:
    """Answer ``lm/*`` requests on ``connection`` from ``bridge``, as the extension does.

    A Python stand-in for the extension's consumer handlers (extension/src/consumer.ts), for
    testing :class:`~.transport.HostTransport` over a real JSON-RPC peer: parts go out as
    ``lm/parts`` notifications before the answer, failures answer ``-32000`` with
    ``{"languageModelError", "name"}``, ``$/cancelRequest`` cancels the stream (the peer
    answers ``-32800``). ``connection`` is a :class:`lmbridge.host.jsonrpc.JsonRpcConnection`.
    """
    from ..host.jsonrpc import RpcError
    from ..parts import message_from_wire, messages_from_wire, options_from_wire, parts_to_wire

    def failure(exc: Exception) -> RpcError:
        code = getattr(exc, "code", "Unknown")
        if isinstance(exc, ChatRequestError):
            code = exc.raw_code
        data = {
            "languageModelError": code,
            "name": getattr(exc, "name", None) or type(exc).__name__,
        }
        return RpcError(-32000, str(exc), data)

    def model_of(params: Any) -> ChatModel:
        ref = params["model"]
        found = [m for m in bridge.models if m.id == ref["id"]]
        if not found:
            raise RpcError(
                -32000,
                f"no VS Code language model with id '{ref['id']}'",
                {"languageModelError": "NotFound", "name": "LanguageModelError"},
            )
        return found[0]

    async def select(params: Any, _request: Any) -> Any:
        try:
            models = await bridge.select_chat_models(
                ModelSelector.from_wire(params.get("selector"))
            )
        except Exception as exc:
            raise failure(exc) from exc
        return {"models": [m.to_wire() for m in models]}

    async def count(params: Any, _request: Any) -> Any:
        text = params["text"]
        value = text if isinstance(text, str) else message_from_wire(text)
        return {"tokens": await bridge.count_tokens(model_of(params), value)}

    async def send(params: Any, _request: Any) -> Any:
        model = model_of(params)
        stream = bridge.send_request(
            model,
            messages_from_wire(params["messages"]),
            options_from_wire(params.get("options")),
            justification=params.get("justification"),
        )
        try:
            async for part in stream:
                connection.notify(
                    "lm/parts", {"streamId": params["streamId"], "parts": parts_to_wire([part])}
                )
        except Exception as exc:
            raise failure(exc) from exc
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        return {}

    async def tools(params: Any, _request: Any) -> Any:
        return {"tools": [t.to_wire() for t in await bridge.list_tools()]}

    async def invoke(params: Any, _request: Any) -> Any:
        # the extension's token follows $/cancelRequest; here the handler's task is cancelled
        try:
            content = await bridge.invoke_tool(params["name"], params.get("input") or {})
        except ToolError as exc:
            raise RpcError(-32000, str(exc), {"toolError": exc.reason}) from exc
        return {"content": parts_to_wire(content)}

    connection.on_request("lm/selectChatModels", select)
    connection.on_request("lm/countTokens", count)
    connection.on_request("lm/sendRequest", send)
    connection.on_request("lm/tools", tools)
    connection.on_request("lm/invokeTool", invoke)
    bridge.on_models_changed(lambda: connection.notify("lm/modelsChanged", {}))
    bridge.on_config_changed(
        lambda section: connection.notify("lm/configChanged", {"section": section})
    )
