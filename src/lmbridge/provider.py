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
        yield TextPart(messages[-1].text.upper())

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

import asyncio
import functools
import inspect
import logging
import threading
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, TypeVar, runtime_checkable

from .contract import ContractChecker
from .errors import LMBridgeError
from .parts import (
    ChatMessage,
    ChatRequestOptions,
    DataPart,
    FinishReason,
    ModelCapabilities,
    ModelInfo,
    Part,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)

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


# --------------------------------------------------------------------------- events


class Disposable:
    """VS Code's ``Disposable``: call :meth:`dispose` to undo a registration."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[], None] | None = None) -> None:
        self._fn = fn

    def dispose(self) -> None:
        """Undo the registration; further calls do nothing."""
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()


class EventEmitter:
    """VS Code's ``EventEmitter<void>``: :meth:`event` subscribes, :meth:`fire` notifies.

    A listener that raises is logged and does not keep the others from running.
    """

    def __init__(self) -> None:
        self._listeners: list[Callable[[], Any]] = []

    def event(self, listener: Callable[[], Any]) -> Disposable:
        """Subscribe ``listener``; dispose the result to unsubscribe."""
        self._listeners.append(listener)
        return Disposable(
            lambda: self._listeners.remove(listener) if listener in self._listeners else None
        )

    def fire(self) -> None:
        """Call every listener once."""
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:
                _log.exception("an event listener failed")


# --------------------------------------------------------------------------- cancellation


class CancellationToken:
    """VS Code's ``CancellationToken``, asyncio-friendly.

    Check :attr:`is_cancellation_requested` between steps, subscribe with
    :meth:`on_cancellation_requested`, or ``await token.wait()`` (for example raced against
    an upstream read). Tokens come from a :class:`CancellationTokenSource`;
    :data:`CancellationToken.NONE` is never cancelled.
    """

    NONE: CancellationToken

    def __init__(self) -> None:
        self._cancelled = False
        self._callbacks: list[Callable[[], Any]] = []
        self._lock = threading.Lock()

    @property
    def is_cancellation_requested(self) -> bool:
        """Whether the request was cancelled."""
        return self._cancelled

    def on_cancellation_requested(self, callback: Callable[[], Any]) -> Disposable:
        """Call ``callback`` once when cancelled (at once if it already is)."""
        with self._lock:
            if not self._cancelled:
                self._callbacks.append(callback)
                return Disposable(lambda: self._remove(callback))
        _call(callback)
        return Disposable()

    def _remove(self, callback: Callable[[], Any]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    async def wait(self) -> None:
        """Return when the token is cancelled."""
        if self._cancelled:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            # cancel() may run on another thread; the future belongs to this loop.
            loop.call_soon_threadsafe(_resolve, fut)

        sub = self.on_cancellation_requested(wake)
        try:
            await fut
        finally:
            sub.dispose()

    def raise_if_cancelled(self) -> None:
        """Raise :class:`asyncio.CancelledError` when the token is cancelled."""
        if self._cancelled:
            raise asyncio.CancelledError("the request was cancelled")

    def _cancel(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            _call(cb)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _call(callback: Callable[[], Any]) -> None:
    try:
        callback()
    except Exception:
        _log.exception("a cancellation callback failed")


CancellationToken.NONE = CancellationToken()


class CancellationTokenSource:
    """VS Code's ``CancellationTokenSource``: owns a token and cancels it."""

    def __init__(self) -> None:
        self.token = CancellationToken()
        """The token to hand to the provider."""

    def cancel(self) -> None:
        """Cancel the token (thread-safe; idempotent)."""
        self.token._cancel()

    def dispose(self) -> None:
        """Drop the token's callbacks without cancelling."""
        with self.token._lock:
            self.token._callbacks.clear()


# --------------------------------------------------------------------------- progress


@runtime_checkable
class Progress(Protocol[T_co]):
    """VS Code's ``Progress<T>``: something to :meth:`report` values to."""

    def report(self, value: T_co) -> None:
        """Report one value."""


class ResponseProgress(Progress[ResponsePart], Protocol):
    """The progress a chat response reports to: parts, and optionally usage and finish reason."""

    def report_usage(self, usage: Usage) -> None:
        """Record the token usage the upstream reported (merged field by field)."""

    def finish(self, reason: FinishReason) -> None:
        """Record why the response ended."""


@dataclass(frozen=True, slots=True)
class ChatResult:
    """What a finished response reports besides its parts."""

    usage: Usage = field(default_factory=Usage)
    """Token usage, as far as known."""
    finish_reason: FinishReason | None = None
    """Why the response ended (``None``: not said)."""


ResponseItem: TypeAlias = "ResponsePart | Usage | FinishReason | ChatResult"
"""What a generator-style provider may yield."""


# --------------------------------------------------------------------------- the contract


class ContractViolationError(LMBridgeError):
    """A provider broke the stream contract (the provider's fault, not the upstream's)."""


class ContractGuard:
    """The progress handed to a provider: enforces the stream contract, then forwards.

    Each reported part goes through :class:`lmbridge.contract.ContractChecker` (no tool results
    in a response, tool input is a ``dict``, call ids non-empty and unique, valid MIME types,
    only response parts); a violation raises :class:`ContractViolationError` in the provider,
    so the response fails with a message naming the rule instead of VS Code receiving a bad
    part. Two cases are repaired rather than refused:

    - empty text (and empty thinking without metadata) is dropped: VS Code shows nothing for
      it and some consumers mistake it for the end;
    - after the token is cancelled, parts are dropped silently (the provider may be mid-step).

    After :meth:`close`, reporting is a violation.
    """

    def __init__(
        self,
        sink: Callable[[ResponsePart], None],
        token: CancellationToken = CancellationToken.NONE,
        *,
        allow_thinking: bool = True,
    ) -> None:
        self._sink = sink
        self._token = token
        self._checker = ContractChecker(allow_thinking=allow_thinking)
        self._tool_calls = 0
        self.usage = Usage()
        """Usage reported so far."""
        self.finish_reason: FinishReason | None = None
        """The finish reason reported, if any."""
        self.parts_reported = 0
        """Parts forwarded to the sink."""
        self.dropped = 0
        """Parts dropped (empty, or after cancellation)."""

    def report(self, value: ResponsePart) -> None:
        """Check one part and forward it (or drop it, or raise)."""
        if self._token.is_cancellation_requested:
            self._checker.cancel()
            self.dropped += 1
            return
        if (isinstance(value, TextPart) and value.value == "") or (
            isinstance(value, ThinkingPart) and not value.text and not value.metadata
        ):
            self.dropped += 1
            return
        violations = self._checker.observe(value)
        if violations:
            raise ContractViolationError("; ".join(f"{v.rule}: {v.message}" for v in violations))
        if isinstance(value, ToolCallPart):
            self._tool_calls += 1
        self.parts_reported += 1
        self._sink(value)

    def report_usage(self, usage: Usage) -> None:
        """Merge reported usage (later values win field by field)."""
        self.usage = self.usage.merged(usage)

    def finish(self, reason: FinishReason) -> None:
        """Record the finish reason."""
        self.finish_reason = FinishReason(reason)

    def accept(self, item: object) -> None:
        """Take one item a generator-style provider yielded."""
        if isinstance(item, Usage):
            self.report_usage(item)
        elif isinstance(item, FinishReason):
            self.finish(item)
        elif isinstance(item, ChatResult):
            self.report_usage(item.usage)
            if item.finish_reason is not None:
                self.finish(item.finish_reason)
        else:
            self.report(item)  # type: ignore[arg-type]  # report() rejects non-parts clearly

    def close(self) -> ChatResult:
        """End the response; later reports are violations. Returns usage and finish reason."""
        self._checker.end()
        reason = self.finish_reason
        if self._token.is_cancellation_requested:
            reason = FinishReason.CANCELLED
        elif reason is None:
            reason = FinishReason.TOOL_CALLS if self._tool_calls else FinishReason.STOP
        return ChatResult(self.usage, reason)


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


_estimators: dict[tuple[str, str], Any] = {}


_storage_path: str | None = None


def use_token_storage(storage_path: str | None) -> None:
    """Keep what the default estimators learn in ``storage_path`` (the extension's global
    storage folder, sent by the host): per-message counts and calibration survive restarts."""
    global _storage_path
    if storage_path != _storage_path:
        _storage_path = storage_path
        _estimators.clear()


def _estimator(model: ModelInfo) -> Any:
    key = (model.family, model.id)
    if key not in _estimators:
        try:
            from .tokens import TokenEstimator, shared_store

            _estimators[key] = TokenEstimator(
                model.family, model_id=model.id, store=shared_store(_storage_path)
            )
        except Exception:  # a family it refuses, or a partial installation: chars / 4
            _log.debug("no token estimator for %s; using chars/4", model.id, exc_info=True)
            _estimators[key] = None
    return _estimators[key]


def estimate_tokens(
    model: ModelInfo, text: str | ChatMessage, estimator: Any | None = None
) -> int:
    """Token estimate for ``text``: ``estimator`` (default: the shared
    :class:`lmbridge.tokens.TokenEstimator` for ``model``), else chars / 4."""
    if estimator is None:
        estimator = _estimator(model)
    if estimator is not None:
        try:
            if isinstance(text, str):
                return int(estimator.count_text(text))
            return int(estimator.count_message(text))
        except Exception:
            _log.debug("token estimator failed; using chars/4", exc_info=True)
    return _chars_over_four(text)


def observe_usage(
    model: ModelInfo,
    messages: Sequence[ChatMessage],
    options: ChatRequestOptions,
    input_tokens: int,
) -> None:
    """Let the default estimator learn from the input tokens an upstream reported."""
    estimator = _estimator(model)
    if estimator is not None and input_tokens > 0:
        try:
            estimator.observe(messages, options, input_tokens)
        except Exception:
            _log.debug("token calibration failed", exc_info=True)


def _chars_over_four(text: str | ChatMessage) -> int:
    if isinstance(text, str):
        return (len(text) + 3) // 4
    total = 4  # role and framing overhead per message
    for part in text.content:
        total += _part_chars(part)
    return total


def _part_chars(part: Part) -> int:
    if isinstance(part, TextPart):
        return (len(part.value) + 3) // 4
    if isinstance(part, ThinkingPart):
        return (len(part.text) + 3) // 4
    if isinstance(part, ToolCallPart):
        return (len(part.name) + len(repr(part.input)) + 3) // 4
    if isinstance(part, ToolResultPart):
        return sum(_part_chars(p) for p in part.content) + 4
    # images and other data: a flat cost, as VS Code's own estimators do
    return 85 if part.mime_type.startswith("image/") else (len(part.data) + 3) // 4


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

    The function may be an async or sync generator of parts, or return a string, a list of
    parts, a :class:`ChatResult` or ``None``. Keyword arguments are those of
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
