"""Apps on event loops of their own: each app of ``lmbridge.apps`` runs in a thread with its own
asyncio loop, so that an app that blocks (a synchronous sleep, a long computation without an
``await``, a blocking library call) stalls itself only, while the host's loop goes on
answering VS Code's chat requests, the loopback endpoint and the other apps.

An app reaches VS Code through a :class:`LoopTransport`: each call crosses to the host's loop
(``asyncio.run_coroutine_threadsafe``), where the host's
:class:`~lmbridge.client.HostTransport` does the work as it always has, and the results, the
streamed parts and the listeners' calls cross back (``call_soon_threadsafe``). Cancelling on
the app's side (its task, a request's ``cancel`` event, closing a stream) cancels the host's
side, which sends ``$/cancelRequest``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from ..client._tool_types import ToolContent, ToolError, VSCodeTool
from ..client.classify import ChatRequestError, ErrorKind
from ..client.selectors import ModelSelector
from ..client.transport import (
    _CANCELLED,
    ChatModel,
    HostTransport,
    _cancelled_by_caller,
    _unless_cancelled,
    _watch,
    set_local_default_transport,
)
from ..parts import ChatMessage, ChatRequestOptions, ResponsePart

APP_SWITCH_INTERVAL = 0.0001
"""Seconds a thread runs before the interpreter hands over, once an app runs (see
:meth:`AppThread.start`)."""

__all__ = ["AppThread", "LoopTransport"]

_T = TypeVar("_T")

_STOPPED = object()


def _host_stopped() -> ChatRequestError:
    return ChatRequestError(ErrorKind.INTERNAL, "the lmbridge host has stopped")


def _call_on(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> bool:
    """Schedule ``fn(*args)`` on ``loop`` from any thread; False when the loop is closed."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        return False
    return True


class LoopTransport:
    """:class:`~lmbridge.client.BridgeTransport` (and tool transport) for code on another event
    loop than the host's, an app's: every operation runs on ``host_loop`` through ``target``.

    Made for, and used from, ``app_loop``; :meth:`detach` drops its listeners when the app ends.
    """

    def __init__(
        self,
        target: HostTransport,
        host_loop: asyncio.AbstractEventLoop,
        app_loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._target = target
        self._host = host_loop
        self._loop = app_loop
        self._unsubscribe: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ read by the client API

    @property
    def settings(self) -> Mapping[str, Any]:
        """The host transport's consumer settings (read-only here)."""
        return self._target.settings

    @property
    def model_setting(self) -> str | None:
        """``lmbridge.consumer.model``, as the host transport has it."""
        return self._target.model_setting

    def report_degraded(self, cause: str) -> None:
        """Tell the user, through the host, that the app got the fallback answer."""
        _call_on(self._host, self._target.report_degraded, cause)

    # ------------------------------------------------------------------ crossing

    def _submit(
        self, make: Callable[[], Awaitable[_T]], stopped: Callable[[], Exception]
    ) -> asyncio.Future[_T]:
        """Run ``make()`` on the host's loop; a future of this loop for its result (cancelling
        that future cancels the host's task)."""

        async def run() -> _T:
            return await make()

        coro = run()
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self._host)
        except RuntimeError:  # the host's loop is closed
            coro.close()
            raise stopped() from None
        return asyncio.wrap_future(future)

    async def _cross(
        self, make: Callable[[], Awaitable[_T]], stopped: Callable[[], Exception] = _host_stopped
    ) -> _T:
        """``await make()`` on the host's loop; cancelling the caller cancels it there."""
        request = self._submit(make, stopped)
        try:
            return await request
        except asyncio.CancelledError:
            if not _current_task_cancelling():
                raise stopped() from None  # the host cancelled it: it is stopping
            raise

    # ------------------------------------------------------------------ BridgeTransport

    async def select_chat_models(self, selector: ModelSelector) -> list[ChatModel]:
        """``lm/selectChatModels``, on the host's loop."""
        return await self._cross(lambda: self._target.select_chat_models(selector))

    async def count_tokens(self, model: ChatModel, text: str | ChatMessage) -> int:
        """``lm/countTokens``, on the host's loop."""
        return await self._cross(lambda: self._target.count_tokens(model, text))

    def send_request(
        self,
        model: ChatModel,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        cancel: asyncio.Event | None = None,
        *,
        justification: str | None = None,
    ) -> AsyncIterator[ResponsePart]:
        """``lm/sendRequest`` on the host's loop, its parts streamed back to this loop."""
        return self._stream(model, list(messages), options, cancel, justification)

    async def _stream(
        self,
        model: ChatModel,
        messages: list[ChatMessage],
        options: ChatRequestOptions,
        cancel: asyncio.Event | None,
        justification: str | None,
    ) -> AsyncGenerator[ResponsePart, None]:
        # (False, part) for each part, (True, the host's future) at the end, _CANCELLED
        queue: asyncio.Queue[Any] = asyncio.Queue()
        watcher = _watch(cancel, queue)

        async def pump() -> None:
            # the cancel event stays here: setting it ends this generator, whose clean-up
            # cancels the pump, which closes the host's stream (VS Code's request)
            stream = self._target.send_request(
                model, messages, options, justification=justification
            )
            try:
                async for part in stream:
                    if not _call_on(self._loop, queue.put_nowait, (False, part)):
                        return  # the app's loop is gone: nobody reads on
            finally:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()  # ends VS Code's request now, not when collected

        coro = pump()
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self._host)
        except RuntimeError:
            coro.close()
            if watcher is not None:
                watcher.cancel()
            raise _host_stopped() from None
        # done callbacks run after the pump's last part was handed over, so the end comes last
        future.add_done_callback(lambda f: _call_on(self._loop, queue.put_nowait, (True, f)))
        try:
            while True:
                item = await queue.get()
                if item is _CANCELLED:
                    raise _cancelled_by_caller()
                done, value = item
                if done:
                    if value.cancelled():
                        raise _host_stopped()
                    exc = value.exception()
                    if exc is not None:
                        raise exc
                    return
                if cancel is not None and cancel.is_set():
                    raise _cancelled_by_caller()  # parts queued before the cancel are not wanted
                yield value
        finally:
            if watcher is not None:
                watcher.cancel()
            future.cancel()  # when still running: the host closes the stream, VS Code cancels

    # ------------------------------------------------------------------ tools

    async def list_tools(self) -> list[VSCodeTool]:
        """``lm/tools``, on the host's loop."""
        return await self._cross(self._target.list_tools, _tools_stopped)

    async def invoke_tool(
        self, name: str, input: Mapping[str, Any], cancel: asyncio.Event | None = None
    ) -> ToolContent:
        """``lm/invokeTool``, on the host's loop; setting ``cancel`` cancels it there."""
        request = self._submit(lambda: self._target.invoke_tool(name, input), _tools_stopped)
        content: ToolContent = await _unless_cancelled(request, cancel)
        return content

    # ------------------------------------------------------------------ listeners

    def on_models_changed(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on this loop when VS Code's models change."""

        def relay() -> None:
            _call_on(self._loop, callback)

        # Listeners.add/remove are single list operations, safe from this thread
        remove = self._target.on_models_changed(relay)
        self._unsubscribe.append(remove)
        return remove

    def on_config_changed(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(section)`` on this loop when a consumer setting changed."""

        def relay(section: str) -> None:
            _call_on(self._loop, callback, section)

        remove = self._target.on_config_changed(relay)
        self._unsubscribe.append(remove)
        return remove

    def detach(self) -> None:
        """Drop every listener this transport added to the host's (the app ended)."""
        for remove in self._unsubscribe:
            remove()
        self._unsubscribe.clear()

    async def aclose(self) -> None:
        """Nothing to release: the host owns the connection."""


def _tools_stopped() -> ToolError:
    return ToolError("unavailable", "the lmbridge host has stopped")


def _current_task_cancelling() -> bool:
    """Whether the current task was asked to stop (rather than what it awaited cancelled)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return bool(cancelling()) if cancelling is not None else True


class AppThread:
    """One app on a thread and event loop of its own, driven from the host's loop.

    ``load(spec)`` (run on the app's thread, so a slow import does not stall the host) gives
    the entry point, which is called with a :class:`LoopTransport` over ``target``; that
    transport is also the default one for the app's loop. The futures :attr:`started`,
    :attr:`outcome` and :attr:`ended` belong to the host's loop.
    """

    def __init__(
        self,
        spec: str,
        load: Callable[[str], Callable[[Any], Awaitable[Any]]],
        target: HostTransport,
    ) -> None:
        self.spec = spec
        self._load = load
        self._target = target
        self._host = asyncio.get_running_loop()
        self.started: asyncio.Future[None] = self._host.create_future()
        """Done when the app was loaded and its entry point called."""
        self.outcome: asyncio.Future[Any] = self._host.create_future()
        """The entry point's result or exception (what :func:`load` raised when the app could
        not be loaded); cancelled when the app was stopped."""
        self.ended: asyncio.Future[None] = self._host.create_future()
        """Done when the thread ended: the entry point returned and the tasks it started too."""
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self.thread = threading.Thread(target=self._run, name=f"lmbridge app {spec}", daemon=True)
        # daemon: an app that never ends (blocked, or deaf to its cancellation) must not keep
        # the host process alive once VS Code asked it to exit

    def start(self) -> None:
        """Start the app's thread."""
        # The interpreter lets one thread run at a time and hands over every switch interval
        # (5 ms by default): with an app busy in Python code, each step of the host's thread
        # that waits on the system (a file lookup, a socket read) waited up to that long, and
        # a start that stats a thousand files took many seconds. A shorter interval keeps the
        # host answering at a small cost to the app's throughput.
        if sys.getswitchinterval() > APP_SWITCH_INTERVAL:
            sys.setswitchinterval(APP_SWITCH_INTERVAL)
        self.thread.start()

    def stop(self) -> None:
        """Cancel every task on the app's loop (an app still loading does not start)."""
        with self._lock:
            self._stopping = True
            loop = self._loop
        if loop is not None:
            _call_on(loop, _cancel_all, loop)

    # ------------------------------------------------------------------ on the app's thread

    def _settle(self, future: asyncio.Future[Any], result: Any = None, exc: Any = None) -> None:
        def settle() -> None:
            if future.done():
                return
            if exc is _STOPPED:
                future.cancel()
            elif exc is not None:
                future.set_exception(exc)
            else:
                future.set_result(result)

        _call_on(self._host, settle)

    def _run(self) -> None:
        try:
            entry = self._load(self.spec)
        except BaseException as exc:  # a sys.exit() at import fails the app too
            self._settle(self.outcome, exc=exc)
            self._settle(self.ended)
            return
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        transport = LoopTransport(self._target, self._host, loop)
        set_local_default_transport(transport)  # this thread's context, which its tasks copy
        with self._lock:
            stopping = self._stopping
            self._loop = loop
        try:
            if stopping:
                self._settle(self.outcome, exc=_STOPPED)
            else:
                loop.run_until_complete(self._main(entry, transport))
        finally:
            transport.detach()
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            with self._lock:
                self._loop = None
            asyncio.set_event_loop(None)
            loop.close()
            self._settle(self.ended)

    async def _main(self, entry: Callable[[Any], Awaitable[Any]], transport: LoopTransport) -> None:
        self._settle(self.started)
        try:
            result = await entry(transport)
        except asyncio.CancelledError:
            self._settle(self.outcome, exc=_STOPPED)
        except BaseException as exc:  # reported by the host, whatever it is
            self._settle(self.outcome, exc=exc)
        else:
            self._settle(self.outcome, result)
        # Tasks the app started go on after its entry point returned, as they would on the
        # host's loop, until they end or the app is stopped (which cancels them too); the
        # thread ends with the last of them.
        me = asyncio.current_task()
        while True:
            left = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
            if not left:
                return
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait(left)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()
