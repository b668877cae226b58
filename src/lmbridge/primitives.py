"""VS Code's small API primitives in Python: events, cancellation, progress.

:class:`Disposable`, :class:`EventEmitter`, :class:`CancellationToken` /
:class:`CancellationTokenSource` and :class:`Progress` behave like their ``vscode``
namesakes (cancellation is also asyncio- and thread-friendly); :class:`ResponseProgress` and
:class:`ChatResult` are what a chat response reports to and ends with. The provider API
(:mod:`lmbridge.provider`) re-exports them all.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, TypeVar, runtime_checkable

from .parts import FinishReason, ResponsePart, Usage

__all__ = [
    "CancellationToken",
    "CancellationTokenSource",
    "ChatResult",
    "Disposable",
    "EventEmitter",
    "Progress",
    "ResponseItem",
    "ResponseProgress",
]

_log = logging.getLogger("lmbridge.provider")

T_co = TypeVar("T_co", contravariant=True)


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


class ResponseProgress(Progress["ResponsePart | str"], Protocol):
    """The progress a chat response reports to: parts (a ``str`` is a text part), and
    optionally usage and finish reason."""

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


ResponseItem: TypeAlias = "ResponsePart | str | Usage | FinishReason | ChatResult"
"""What a generator-style provider may yield (a ``str`` is a text part)."""
