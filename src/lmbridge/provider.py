"""The Python provider API: VS Code's ``LanguageModelChatProvider``, in Python.

A provider answers three questions, exactly as a VS Code extension does::

    class Shout(LanguageModelChatProvider):
        models = [model_info("shout", max_input_tokens=8000)]

        async def provide_language_model_chat_response(
            self, model, messages, options, progress, token
        ):
            progress.report(TextPart(messages[-1].text.upper()))

or, with the decorator, for a one-model provider::

    @chat_model("shout", max_input_tokens=8000)
    async def shout(messages, options, token):
        yield messages[-1].text.upper()      # a str is text; or yield TextPart, ThinkingPart ...

The module is the provider API's one front: VS Code's primitives (events, cancellation,
progress) live in :mod:`lmbridge.primitives`, the contract guard in :mod:`lmbridge.guard`, the
shared token estimates in :mod:`lmbridge.token_cache`; all are re-exported here.

``provide_language_model_chat_response`` may report parts to ``progress`` (VS Code's style) or be
an async generator that yields them; both go through a :class:`ContractGuard`, which enforces the
stream contract on whatever the provider produces (no tool results in a response, tool input is
an object, call ids are unique, empty text is dropped, nothing after cancellation or the end).
:func:`respond` drives one response in either style; the host, the demo and the benchmarks all
use it, so a provider behaves the same in-process and behind VS Code.

Besides parts, a response may report :class:`~lmbridge.parts.Usage` and a
:class:`~lmbridge.parts.FinishReason`: yield them (generator style), call
``progress.report_usage`` / ``progress.finish`` (progress style), or return a
:class:`ChatResult` / :class:`~lmbridge.parts.Usage` from the coroutine.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Sequence,
)
from dataclasses import dataclass
from typing import Any, TypeVar

from .guard import ContractGuard, ContractViolationError
from .parts import (
    ChatMessage,
    ChatRequestOptions,
    DataPart,
    FinishReason,
    ModelCapabilities,
    ModelInfo,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from .primitives import (
    CancellationToken,
    CancellationTokenSource,
    ChatResult,
    Disposable,
    EventEmitter,
    Progress,
    ResponseItem,
    ResponseProgress,
)
from .token_cache import estimate_tokens, observe_usage, use_token_storage

__all__ = [
    "CancellationToken",
    "CancellationTokenSource",
    "ChatResult",
    "ContractGuard",
    "ContractViolationError",
    "Disposable",
    "EventEmitter",
    "LanguageModelChatProvider",
    "ModelInformationOptions",
    "Progress",
    "ResponseItem",
    "ResponseProgress",
    "chat_model",
    "estimate_tokens",
    "is_provider_factory",
    "model_info",
    "observe_usage",
    "provider_factory",
    "respond",
    "use_token_storage",
]

_log = logging.getLogger("lmbridge.provider")

T_co = TypeVar("T_co", contravariant=True)
F = TypeVar("F", bound=Callable[..., Any])


def _tname(value: object) -> str:
    return "None" if value is None else type(value).__name__


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


# --------------------------------------------------------------------------- the provider


@dataclass(frozen=True, slots=True)
class ModelInformationOptions:
    """VS Code's ``PrepareLanguageModelChatModelOptions``."""

    silent: bool = False
    """True: do not prompt the user (e.g. for a key); return what is available."""


def model_info(
    id: str,
    *,
    name: str | None = None,
    family: str | None = None,
    version: str = "1",
    max_input_tokens: int = 128_000,
    max_output_tokens: int = 4_096,
    tool_calling: bool | int = False,
    image_input: bool = False,
    tooltip: str | None = None,
    detail: str | None = None,
) -> ModelInfo:
    """A :class:`~lmbridge.parts.ModelInfo` with sensible defaults (name and family = id)."""
    return ModelInfo(
        id=id,
        name=name or id,
        family=family or id,
        version=version,
        max_input_tokens=max_input_tokens,
        max_output_tokens=max_output_tokens,
        tooltip=tooltip,
        detail=detail,
        capabilities=ModelCapabilities(image_input=image_input, tool_calling=tool_calling),
    )


class LanguageModelChatProvider:
    """Base class mirroring ``vscode.LanguageModelChatProvider``.

    Subclasses set :attr:`models` (or override :meth:`provide_language_model_chat_information`)
    and implement :meth:`provide_language_model_chat_response`. Each ``provide_*`` method may be
    synchronous or ``async``; the response may also be an async generator of parts. Call
    :meth:`models_changed` when the model list changes; the host then tells VS Code.
    """

    models: Sequence[ModelInfo] = ()
    """The models this provider serves, when the list is static."""

    def __init__(self) -> None:
        self._did_change = EventEmitter()

    @property
    def on_did_change_language_model_chat_information(
        self,
    ) -> Callable[[Callable[[], Any]], Disposable]:
        """VS Code's ``onDidChangeLanguageModelChatInformation``: subscribe a listener."""
        return self._emitter().event

    def _emitter(self) -> EventEmitter:
        # subclasses that forget super().__init__() still get an emitter
        emitter: EventEmitter | None = self.__dict__.get("_did_change")
        if emitter is None:
            emitter = self.__dict__["_did_change"] = EventEmitter()
        return emitter

    def models_changed(self) -> None:
        """Tell listeners (the host, hence VS Code) that the model list changed."""
        self._emitter().fire()

    def provide_language_model_chat_information(
        self, options: ModelInformationOptions, token: CancellationToken
    ) -> Sequence[ModelInfo] | Awaitable[Sequence[ModelInfo]]:
        """The models available now. Default: :attr:`models`."""
        return list(self.models)

    def provide_language_model_chat_response(
        self,
        model: ModelInfo,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        progress: ResponseProgress,
        token: CancellationToken,
    ) -> Awaitable[ChatResult | Usage | None] | AsyncIterator[ResponseItem]:
        """Answer ``messages``: report parts to ``progress`` or yield them."""
        raise NotImplementedError(f"{type(self).__name__} does not implement chat responses")

    def provide_token_count(
        self, model: ModelInfo, text: str | ChatMessage, token: CancellationToken
    ) -> int | Awaitable[int]:
        """Tokens ``text`` takes for ``model``. Default: :func:`estimate_tokens`."""
        return estimate_tokens(model, text)


# --------------------------------------------------------------------------- driving a response


async def respond(
    provider: LanguageModelChatProvider,
    model: ModelInfo,
    messages: Sequence[ChatMessage],
    options: ChatRequestOptions,
    on_part: Callable[[ResponsePart], None],
    token: CancellationToken = CancellationToken.NONE,
    *,
    allow_thinking: bool = True,
) -> ChatResult:
    """Run one chat response in either style; every part passes a :class:`ContractGuard`.

    ``on_part`` receives the parts in order. When ``token`` is cancelled, no part reaches
    ``on_part`` afterwards, a generator is closed (its ``finally`` blocks run, closing
    upstream connections) and the result's finish reason is ``cancelled``.
    """
    guard = ContractGuard(on_part, token, allow_thinking=allow_thinking)
    produced = provider.provide_language_model_chat_response(model, messages, options, guard, token)
    await _drain(produced, guard, token)
    return guard.close()


async def _drain(produced: object, guard: ContractGuard, token: CancellationToken) -> None:
    if hasattr(produced, "__aiter__"):
        agen: AsyncIterator[object] = produced  # type: ignore[assignment]
        try:
            async for item in agen:
                if token.is_cancellation_requested:
                    break
                guard.accept(item)
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None:
                await aclose()
        return
    if inspect.isawaitable(produced):
        value = await produced
        await _drain(value, guard, token)
        return
    if produced is None:
        return
    if isinstance(produced, (Usage, FinishReason, ChatResult)):
        guard.accept(produced)
        return
    if isinstance(produced, str):
        guard.report(TextPart(produced))
        return
    if isinstance(produced, (TextPart, ThinkingPart, ToolCallPart, DataPart, ToolResultPart)):
        guard.accept(produced)
        return
    if isinstance(produced, (Iterator, Iterable)):
        it = iter(produced)
        try:
            for item in it:
                if token.is_cancellation_requested:
                    break
                guard.accept(item)
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()
        return
    raise ContractViolationError(
        f"a chat response must report parts, yield them, or return None/ChatResult/Usage; "
        f"got {_describe(produced)}"
    )


# --------------------------------------------------------------------------- the decorator


ChatFunction = Callable[[Sequence[ChatMessage], ChatRequestOptions, CancellationToken], Any]


class FunctionChatProvider(LanguageModelChatProvider):
    """A one-model provider made from a function; see :func:`chat_model`."""

    def __init__(self, fn: ChatFunction, info: ModelInfo) -> None:
        super().__init__()
        self.fn = fn
        self.models = [info]
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    def provide_language_model_chat_response(
        self,
        model: ModelInfo,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        progress: ResponseProgress,
        token: CancellationToken,
    ) -> Any:
        """Call the wrapped function; whatever it returns or yields is the response."""
        return self.fn(messages, options, token)


def chat_model(
    id: str,
    **info: Any,
) -> Callable[[ChatFunction], FunctionChatProvider]:
    """Turn ``fn(messages, options, token)`` into a provider serving one model.

    The function may be an async or sync generator of parts and strings (a string is text),
    or return a string, a list of parts, a :class:`ChatResult` or ``None``. Keyword arguments are those of
    :func:`model_info`. Reference the result in the configuration as ``"module:name"``.
    """

    def wrap(fn: ChatFunction) -> FunctionChatProvider:
        return FunctionChatProvider(fn, model_info(id, **info))

    return wrap


PROVIDER_FACTORY_MARK = "__lmbridge_provider_factory__"
"""The attribute :func:`provider_factory` sets on a callable."""


def provider_factory(fn: F) -> F:
    """Mark ``fn`` as a provider factory that a configuration entry may name.

    A ``"provider": "module:name"`` reference is checked before anything is called: it must
    name a :class:`LanguageModelChatProvider` subclass, a provider instance (such as a
    :func:`chat_model` function) or a callable marked with this decorator. The factory is
    called with the entry's other fields as keyword arguments (plus ``context=`` when it takes
    a ``context`` parameter) and must return a provider::

        @provider_factory
        def make(greeting: str = "hi", *, context: ProviderContext) -> LanguageModelChatProvider:
            return Greeter(greeting, api_key=context.api_key)
    """
    setattr(fn, PROVIDER_FACTORY_MARK, True)
    return fn


def is_provider_factory(obj: object) -> bool:
    """Whether ``obj`` was marked with :func:`provider_factory`."""
    return callable(obj) and getattr(obj, PROVIDER_FACTORY_MARK, False) is True
