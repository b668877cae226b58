"""The synchronous client: :class:`LanguageModelClient`'s methods for code without an event loop.

::

    from lmbridge import SyncLanguageModelClient

    with SyncLanguageModelClient(selector="vscodelm/auto") as client:
        answer = client.complete([{"role": "user", "content": "Hi"}], format="chat-completions")
        print(answer.text, answer.usage)
        for part in client.send_request(history, format="anthropic"):   # streamed
            ...

Like the ``openai`` and ``httpx`` packages' sync classes, it owns what the async one needs: an
event loop on a thread of its own, on which the async client and its transport run; each call
hands its coroutine to that loop and waits for the result. So it works the same from a plain
script, a thread, or code that runs an event loop of its own (a notebook), and never touches
the caller's loop. Callbacks (:meth:`SyncLanguageModelClient.on_models_changed`) run on the
client's thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from ..parts import ChatMessage, ChatRequestOptions, FinishReason, ResponsePart, ToolMode, Usage
from ..terminal import CleanTerminal
from .api import (
    DEFAULT_CONFIG_SECTIONS,
    MODEL_SETTING,
    ChatResponse,
    Completion,
    LanguageModelClient,
    MessageFormat,
    SelectorSource,
    _ModelSetting,
)
from .classify import ChatRequestError
from .guard import RetryPolicy
from .selectors import ModelSelector
from .transport import BridgeTransport, ChatModel, HttpTransport

__all__ = ["SyncChatResponse", "SyncLanguageModelClient"]

T = TypeVar("T")


class _LoopThread:
    """An event loop running on a daemon thread of its own, until :meth:`close`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._serve, name="lmbridge-sync-client", daemon=True
        )
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for it; an interrupt (Ctrl-C) cancels it."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "a SyncLanguageModelClient was called from its own callback; "
                "use LanguageModelClient in async code"
            )
        if self.loop.is_closed():
            coro.close()
            raise RuntimeError("the SyncLanguageModelClient is closed")
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # a no-op when it is done; cancels the task on an interrupt
            raise

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Call ``fn`` on the loop's thread (thread-safe; ignored once closed)."""
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(fn)

    def close(self) -> None:
        """Finish the loop's async generators, stop the loop and its thread."""
        if self.loop.is_closed():
            return
        self.run(self.loop.shutdown_asyncgens())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class SyncChatResponse:
    """The answer to :meth:`SyncLanguageModelClient.send_request`: an iterator of parts.

    The same attributes as :class:`~.api.ChatResponse` (``model``, ``degraded``, ``usage``,
    ``parts``, ``tool_calls``, ``thinking``, ``finish_reason``, ``error``); :meth:`text` and
    :meth:`final` read the rest. :meth:`cancel` (from any thread) or :meth:`close` cancels the
    VS Code request.
    """

    def __init__(self, response: ChatResponse, runner: _LoopThread, cancel: asyncio.Event) -> None:
        self._response = response
        self._runner = runner
        self._cancel = cancel

    @property
    def model(self) -> ChatModel:
        """The model that answers."""
        return self._response.model

    @property
    def degraded(self) -> bool:
        """True when no real model was available and the fallback answered."""
        return self._response.degraded

    @property
    def usage(self) -> Usage:
        """Input tokens and output tokens so far (final once the stream ended)."""
        return self._response.usage

    @property
    def parts(self) -> list[ResponsePart]:
        """Every part received so far."""
        return self._response.parts

    @property
    def tool_calls(self) -> list[Any]:
        """The tool calls received so far."""
        return self._response.tool_calls

    @property
    def thinking(self) -> str:
        """The reasoning received so far."""
        return self._response.thinking

    @property
    def finish_reason(self) -> FinishReason | None:
        """Why the stream ended (``None`` while it runs)."""
        return self._response.finish_reason

    @property
    def error(self) -> ChatRequestError | None:
        """What ended the stream abnormally, once it has."""
        return self._response.error

    @property
    def finished(self) -> bool:
        """True once the stream ended, normally or not."""
        return self._response.finished

    def __iter__(self) -> Iterator[ResponsePart]:
        return self

    def __next__(self) -> ResponsePart:
        try:
            return self._runner.run(self._next())
        except StopAsyncIteration:
            raise StopIteration from None

    async def _next(self) -> ResponsePart:
        return await self._response.__anext__()

    def text(self) -> str:
        """Read the rest of the stream; the whole response's text."""
        return self._runner.run(self._response.text())

    def final(self) -> Completion:
        """Read the rest of the stream; the whole answer as one :class:`~.api.Completion`."""
        return self._runner.run(self._response.final())

    def cancel(self) -> None:
        """Cancel the VS Code request; safe to call from any thread, also while another
        thread reads the stream (it then ends with a ``cancelled`` error)."""
        self._runner.call_soon(self._cancel.set)

    def close(self) -> None:
        """Stop reading: cancels the VS Code request if it is still running."""
        if not self._response.finished:
            self._runner.run(self._response.aclose())

    def __enter__(self) -> SyncChatResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncLanguageModelClient:
    """:class:`~.api.LanguageModelClient` for synchronous code: the same arguments and methods,
    each returning its result instead of a coroutine (the module docstring says how).

    ``transport`` defaults to a new :class:`~.transport.HttpTransport` to the loopback endpoint
    named by ``endpoint_file`` (default: the endpoint file VS Code's lmbridge writes), made here,
    so a missing endpoint raises :class:`~.discovery.EndpointNotFoundError` at once; the client
    closes the transport it made. Close the client with :meth:`close` or a ``with`` block.
    """

    def __init__(
        self,
        transport: BridgeTransport | None = None,
        *,
        endpoint_file: Path | str | None = None,
        selector: SelectorSource | _ModelSetting = MODEL_SETTING,
        justification: str | None = None,
        debounce: float = 0.25,
        config_sections: Sequence[str] = DEFAULT_CONFIG_SECTIONS,
        count_timeout: float = 2.0,
        fallback: bool = True,
        retry: RetryPolicy | None = RetryPolicy(),  # noqa: B008 (frozen, shared safely)
        context_guard: bool = True,
        clean_terminal: CleanTerminal | bool = "tool-results",
    ) -> None:
        self._runner = _LoopThread()
        self._own_transport: HttpTransport | None = None
        if transport is None:
            path = Path(endpoint_file) if endpoint_file is not None else None
            try:
                transport = self._own_transport = self._runner.run(_discover(path))
            except BaseException:
                self._runner.close()
                raise
        self._client = LanguageModelClient(
            transport,
            selector=selector,
            justification=justification,
            debounce=debounce,
            config_sections=config_sections,
            count_timeout=count_timeout,
            fallback=fallback,
            retry=retry,
            context_guard=context_guard,
            clean_terminal=clean_terminal,
        )

    @property
    def transport(self) -> BridgeTransport:
        """The transport in use."""
        return self._client.transport

    @property
    def selector(self) -> ModelSelector:
        """The selector the next selection uses."""
        return self._client.selector

    @property
    def current_model(self) -> ChatModel | None:
        """The cached model, without selecting."""
        return self._client.current_model

    @property
    def selections(self) -> int:
        """How many times this client called ``selectChatModels``."""
        return self._client.selections

    def model(self) -> ChatModel:
        """The selected model, selecting it now if needed; raises when none is available."""
        return self._runner.run(self._client.model())

    def send_request(
        self,
        messages: Sequence[Any],
        options: ChatRequestOptions | None = None,
        *,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        format: MessageFormat = "vscode",
        tools: Sequence[Any] | None = None,
        tool_mode: ToolMode | None = None,
        justification: str | None = None,
        clean_terminal: CleanTerminal | bool | None = None,
    ) -> SyncChatResponse:
        """Send ``messages`` (in ``format``) to the selected model; iterate the result for the
        answer's parts. The arguments are :meth:`~.api.LanguageModelClient.send_request`'s;
        cancel with :meth:`SyncChatResponse.cancel`."""

        async def send() -> tuple[ChatResponse, asyncio.Event]:
            cancel = asyncio.Event()
            response = await self._client.send_request(
                messages,
                options,
                system=system,
                format=format,
                tools=tools,
                tool_mode=tool_mode,
                cancel=cancel,
                justification=justification,
                clean_terminal=clean_terminal,
            )
            return response, cancel

        response, cancel = self._runner.run(send())
        return SyncChatResponse(response, self._runner, cancel)

    def complete(
        self,
        messages: Sequence[Any],
        options: ChatRequestOptions | None = None,
        *,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        format: MessageFormat = "vscode",
        tools: Sequence[Any] | None = None,
        tool_mode: ToolMode | None = None,
        justification: str | None = None,
        clean_terminal: CleanTerminal | bool | None = None,
    ) -> Completion:
        """Send ``messages`` and read the whole answer: one :class:`~.api.Completion` (text,
        thinking, tool calls, usage, finish reason)."""
        return self._runner.run(
            self._client.complete(
                messages,
                options,
                system=system,
                format=format,
                tools=tools,
                tool_mode=tool_mode,
                justification=justification,
                clean_terminal=clean_terminal,
            )
        )

    def count_tokens(self, text: str | ChatMessage) -> int:
        """The selected model's token count for ``text`` (chars/4 when the model cannot say)."""
        return self._runner.run(self._client.count_tokens(text))

    def invalidate(self) -> None:
        """Drop the selected model now; the next request selects again."""
        self._client.invalidate()

    def set_selector(self, selector: SelectorSource | _ModelSetting) -> None:
        """Use another selector from the next request on."""
        self._client.set_selector(selector)

    def on_models_changed(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (on the client's thread) when VS Code's models change; returns
        the unsubscribe function."""
        return self._client.on_models_changed(callback)

    def close(self) -> None:
        """Stop listening to the transport, close the transport this client made, and stop
        the client's thread. Later calls raise ``RuntimeError``."""
        if self._runner.loop.is_closed():
            return
        try:
            self._runner.run(self._aclose())
        finally:
            self._runner.close()

    async def _aclose(self) -> None:
        await self._client.aclose()
        if self._own_transport is not None:
            await self._own_transport.aclose()

    def __enter__(self) -> SyncLanguageModelClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _discover(path: Path | None) -> HttpTransport:
    # made on the client's loop: the transport's HTTP client belongs to that loop
    return HttpTransport.discover(path)
