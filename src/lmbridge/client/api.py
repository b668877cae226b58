"""Use VS Code's models from Python: select, send, stream, count, cancel.

::

    client = LanguageModelClient(selector="vscodelm/copilot/gpt-4o")
    response = await client.send_request(history, system=prompt, format="anthropic")
    async for part in response:          # TextPart, ThinkingPart, ToolCallPart, DataPart
        ...
    print(response.usage, response.degraded)

Behaviour:

- **Lazy.** Nothing is selected when the client is made; the first request selects a model with
  the current selector and caches it together with that selector. VS Code's model-change event
  and changes of the watched settings sections drop the cache; the next request waits until
  those events have been quiet for ``debounce`` seconds and then selects once. The selector may
  be a function that reads the app's setting: a changed value reselects on the next request, so
  switching the model setting needs no reload.
- **Fallback.** When no model matches, or selection fails, the response comes from a fallback
  model that streams one message saying what is missing (e.g. the Copilot sign-in); the
  response is marked ``degraded`` and the underlying error is logged once. The fallback never
  selects again (no recursion); the next request tries selection afresh.
- **Usage.** Input tokens are counted before sending with the model's ``countTokens`` (or
  characters / 4 when that fails or is slow); output tokens are estimated from the streamed text
  and tool-call JSON. ``response.usage`` is final when the stream ends, also after a
  cancellation or an error, and is always made of non-negative integers.
- **Cancellation.** Cancelling the task that reads the response, setting the ``cancel`` event,
  or :meth:`ChatResponse.aclose` cancels the VS Code request.
- **Errors** are :class:`~.classify.ChatRequestError` with a :class:`~.classify.ErrorKind` and a
  message for the user; VS Code's ``LanguageModelError.code`` is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import json
import logging
import math
import time
import warnings
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..errors import ConversionError, WireError
from ..parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    DataPart,
    FinishReason,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolMode,
    ToolResultPart,
    Usage,
    message_from_wire,
)
from ..terminal import CleanTerminal, clean_terminal_scope, clean_terminal_text
from .classify import ChatRequestError, ErrorKind, classify_error
from .guard import RetryPolicy, check_context, fit_to_model
from .selectors import AUTO, ModelSelector, SelectorError, parse_selector
from .transport import (
    BridgeTransport,
    ChatModel,
    Listeners,
    clear_default_transport,
    get_default_transport,
    set_default_transport,
)

__all__ = [
    "DEFAULT_CONFIG_SECTIONS",
    "FALLBACK_MODEL",
    "MODEL_SETTING",
    "ChatModel",
    "ChatResponse",
    "Completion",
    "LanguageModelClient",
    "MessageFormat",
    "SelectorSource",
    "clear_default_transport",
    "estimate_chars",
    "get_default_transport",
    "messages_for_request",
    "select_chat_models",
    "set_default_transport",
    "start_response",
    "tools_from",
]

_log = logging.getLogger("lmbridge.client")

MessageFormat: TypeAlias = Literal["vscode", "anthropic", "chat-completions", "gemini", "openai"]
SelectorSource: TypeAlias = "str | ModelSelector | Mapping[str, Any] | Callable[[], str | ModelSelector | Mapping[str, Any] | None] | None"

class _ModelSetting(enum.Enum):
    MODEL_SETTING = "model-setting"


MODEL_SETTING = _ModelSetting.MODEL_SETTING
"""The default selector of :class:`LanguageModelClient`: the transport's model setting
(``lmbridge.consumer.model`` for apps the host runs, see ``HostTransport.model_setting``),
read before every selection; ``vscodelm/auto`` when the transport has none."""

DEFAULT_CONFIG_SECTIONS = ("lmbridge", "lm")
"""Settings sections whose changes invalidate the selected model: the app's and VS Code's ``lm``."""

FALLBACK_MODEL = ChatModel(
    id="lmbridge-fallback",
    name="No language model available",
    vendor="lmbridge",
    family="fallback",
    version="1",
    max_input_tokens=0,
)
"""The pseudo-model a degraded response comes from."""

_DEGRADED_PREFIX = "VS Code's language models are responding with limited functionality."


# --------------------------------------------------------------------------- default transport

async def select_chat_models(
    selector: str | ModelSelector | Mapping[str, Any] | None = None,
    *,
    transport: BridgeTransport | None = None,
) -> list[ChatModel]:
    """``vscode.lm.selectChatModels``: the models matching ``selector`` (text or object)."""
    return await (transport or get_default_transport()).select_chat_models(parse_selector(selector))


# --------------------------------------------------------------------------- messages and tools


def messages_for_request(
    messages: Sequence[Any],
    *,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    format: MessageFormat = "vscode",
) -> list[ChatMessage]:
    """VS Code messages for a conversation given in ``format``, with ``system`` first.

    ``"vscode"`` takes :class:`~lmbridge.parts.ChatMessage` objects or their wire form;
    ``"anthropic"`` an Anthropic ``messages`` list; ``"chat-completions"`` a Chat Completions
    ``messages`` list (``"openai"``, its former name, is a deprecated alias); ``"gemini"`` Gemini
    ``contents`` (``system`` may then be a list of ``systemInstruction`` parts). The system prompt becomes a leading Assistant message (VS Code's stable API has no
    System role; providers read leading assistant messages as the system prompt).
    """
    from ..convert import from_anthropic, from_chat_completions, from_gemini

    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ConversionError(f"messages: expected a list, got {type(messages).__name__}")
    if format == "anthropic":
        return from_anthropic(messages, system)
    if format == "gemini":
        return from_gemini(messages, system)
    if format == "openai":
        warnings.warn(
            'format="openai" is deprecated; use format="chat-completions"',
            DeprecationWarning,
            stacklevel=3,
        )
        format = "chat-completions"
    if format == "chat-completions":
        out = from_chat_completions(messages)
    elif format == "vscode":
        out = []
        for i, m in enumerate(messages):
            try:
                out.append(
                    m if isinstance(m, ChatMessage) else message_from_wire(m, f"messages[{i}]")
                )
            except WireError as exc:
                raise ConversionError(str(exc)) from None
    else:
        raise ConversionError(f"format: expected 'vscode', 'anthropic', 'chat-completions' or 'gemini', got {format!r}")
    if system:
        if not isinstance(system, str):
            system = "".join(str(b.get("text", "")) for b in system if isinstance(b, Mapping))
        out.insert(0, ChatMessage.assistant(system))
    return out


def tools_from(tools: Sequence[Any] | None) -> list[ChatTool]:
    """Tools as :class:`~lmbridge.parts.ChatTool`, from ChatTools, OpenAI
    ``{"type": "function", "function": {...}}`` or Anthropic ``{"name", "input_schema"}`` dicts."""
    out: list[ChatTool] = []
    for i, tool in enumerate(tools or ()):
        where = f"tools[{i}]"
        if isinstance(tool, ChatTool):
            out.append(tool)
            continue
        if not isinstance(tool, Mapping):
            raise ConversionError(f"{where}: expected a tool object, got {type(tool).__name__}")
        spec: Mapping[str, Any] = tool
        schema_key = "input_schema"
        if tool.get("type") == "function" or "function" in tool:
            fn = tool.get("function")
            if not isinstance(fn, Mapping):
                raise ConversionError(f"{where}.function: expected an object")
            spec, schema_key, where = fn, "parameters", f"{where}.function"
        elif "inputSchema" in tool:
            schema_key = "inputSchema"
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise ConversionError(f"{where}.name: expected a non-empty string")
        description = spec.get("description") or ""
        if not isinstance(description, str):
            raise ConversionError(f"{where}.description: expected a string")
        schema = spec.get(schema_key)
        if schema is not None and not isinstance(schema, dict):
            raise ConversionError(f"{where}.{schema_key}: expected an object")
        out.append(ChatTool(name, description, schema))
    return out


# --------------------------------------------------------------------------- usage heuristics


def estimate_chars(value: str | ChatMessage | ResponsePart | ToolResultPart) -> int:
    """Characters that count towards a chars/4 token estimate (tool calls as their JSON)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, ChatMessage):
        return sum(estimate_chars(p) for p in value.content)
    if isinstance(value, TextPart):
        return len(value.value)
    if isinstance(value, ThinkingPart):
        return len(value.text)
    if isinstance(value, ToolCallPart):
        return len(_tool_call_json(value))
    if isinstance(value, ToolResultPart):
        return sum(estimate_chars(p) for p in value.content)
    if isinstance(value, DataPart):
        # Images are not text: VS Code providers price them separately; a small constant keeps
        # the estimate from ignoring them.
        return 85 * 4 if value.mime_type.startswith("image/") else len(value.data)


def _tool_call_json(part: ToolCallPart) -> str:
    # the shape Cline accounts tool calls with
    return json.dumps(
        {"type": "tool_call", "name": part.name, "arguments": part.input, "callId": part.call_id},
        ensure_ascii=False,
    )


def _tokens(chars: int) -> int:
    return math.ceil(max(chars, 0) / 4)


def _safe_count(value: object) -> int | None:
    """A token count as a non-negative int, or None for anything else (NaN, bool, negative)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or value < 0:
            return None
        return math.ceil(value)
    if isinstance(value, int) and value >= 0:
        return value
    return None


async def _count_input(
    transport: BridgeTransport,
    model: ChatModel,
    messages: Sequence[ChatMessage],
    options: ChatRequestOptions,
    timeout: float,
) -> int:
    """Input tokens: the model's count per message (concurrently), chars/4 where that fails."""

    async def one(message: ChatMessage) -> int:
        try:
            counted = _safe_count(
                await asyncio.wait_for(transport.count_tokens(model, message), timeout)
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # any failure means "estimate instead"
            _log.debug("countTokens failed (%s); estimating with chars/4", exc)
            counted = None
        return counted if counted is not None else _tokens(estimate_chars(message))

    counts = await asyncio.gather(*(one(m) for m in messages))
    tool_chars = sum(
        len(t.name) + len(t.description) + len(json.dumps(t.input_schema or {}))
        for t in options.tools
    )
    return sum(counts) + _tokens(tool_chars)


# --------------------------------------------------------------------------- the response


@dataclass(frozen=True)
class Completion:
    """A whole answer, read to its end: what :meth:`LanguageModelClient.complete` returns.

    ``str(completion)`` is its text.
    """

    model: ChatModel
    """The model that answered (:data:`FALLBACK_MODEL` when degraded)."""
    text: str
    """The answer's visible text, all text parts joined."""
    thinking: str = ""
    """The model's reasoning, all thinking parts joined (empty when it showed none)."""
    tool_calls: list[ToolCallPart] = field(default_factory=list)
    """The tools the model asks to run, in order; answer them with tool results and ask again."""
    usage: Usage = field(default_factory=Usage)
    """Input tokens (counted before sending) and output tokens (estimated from the answer)."""
    finish_reason: FinishReason = FinishReason.STOP
    """``tool-calls`` when the model asks for tools, else ``stop`` (VS Code does not say
    whether a model stopped at its output limit)."""
    parts: list[ResponsePart] = field(default_factory=list)
    """Every part, in order (text, thinking, tool calls, data)."""
    degraded: bool = False
    """True when no real model was available and the fallback answered."""

    def __str__(self) -> str:
        return self.text


class ChatResponse:
    """The answer to :meth:`LanguageModelClient.send_request`: an async iterator of parts.

    The request is sent when reading starts. Read it once, with ``async for`` or :meth:`text`.
    """

    def __init__(
        self,
        model: ChatModel,
        run: Callable[[ChatResponse], AsyncIterator[ResponsePart]],
        *,
        degraded: bool = False,
        input_estimate: int | None = None,
    ) -> None:
        self.model = model
        """The model that answers (:data:`FALLBACK_MODEL` when degraded)."""
        self.degraded = degraded
        """True when no real model was available and the fallback answered."""
        self.error: ChatRequestError | None = None
        """What ended the stream abnormally, once it has."""
        self.finished = False
        """True once the stream ended, normally or not."""
        self.parts: list[ResponsePart] = []
        """Every part received so far."""
        self._input_tokens = input_estimate or 0
        self._output_chars = 0
        self._text: list[str] = []
        self._iter = run(self)
        self._usage_listeners = Listeners("usage")

    # usage

    @property
    def usage(self) -> Usage:
        """Input tokens (counted before sending) and output tokens (estimated from the stream)."""
        return Usage(input_tokens=self._input_tokens, output_tokens=_tokens(self._output_chars))

    def on_usage(self, callback: Callable[[Usage], None]) -> Callable[[], None]:
        """Call ``callback(usage)`` once when the stream ends, however it ends."""
        return self._usage_listeners.add(callback)

    def _record(self, part: ResponsePart) -> None:
        self.parts.append(part)
        self._output_chars += estimate_chars(part)
        if isinstance(part, TextPart):
            self._text.append(part.value)

    def _finish(self, error: ChatRequestError | None) -> None:
        if self.finished:
            return
        self.finished = True
        self.error = error
        usage = self.usage
        _log.info(
            "usage for %s/%s: %d input, %d output tokens%s%s",
            self.model.vendor,
            self.model.id,
            usage.input_tokens,
            usage.output_tokens,
            " (degraded)" if self.degraded else "",
            f" ({error.kind.value})" if error is not None else "",
        )
        self._usage_listeners.fire(usage)

    # reading

    def __aiter__(self) -> ChatResponse:
        return self

    async def __anext__(self) -> ResponsePart:
        return await self._iter.__anext__()

    async def text(self) -> str:
        """Read the rest of the stream; the whole response's text."""
        async for _ in self:
            pass
        return "".join(self._text)

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """The tool calls received so far."""
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def thinking(self) -> str:
        """The reasoning received so far, as one string."""
        return "".join(p.text for p in self.parts if isinstance(p, ThinkingPart))

    @property
    def finish_reason(self) -> FinishReason | None:
        """Why the stream ended (``None`` while it runs): ``tool-calls`` or ``stop``, or
        ``cancelled`` / ``error`` when it ended abnormally."""
        if not self.finished:
            return None
        if self.error is not None:
            cancelled = self.error.kind is ErrorKind.CANCELLED
            return FinishReason.CANCELLED if cancelled else FinishReason.ERROR
        return FinishReason.TOOL_CALLS if self.tool_calls else FinishReason.STOP

    async def final(self) -> Completion:
        """Read the rest of the stream; the whole answer as one :class:`Completion`.

        Raises the :class:`~.classify.ChatRequestError` that ended the stream, if one did.
        """
        async for _ in self:
            pass
        return self.completion()

    def completion(self) -> Completion:
        """The answer received so far as a :class:`Completion` (whole once :attr:`finished`)."""
        return Completion(
            model=self.model,
            text="".join(self._text),
            thinking=self.thinking,
            tool_calls=self.tool_calls,
            usage=self.usage,
            finish_reason=self.finish_reason or FinishReason.STOP,
            parts=list(self.parts),
            degraded=self.degraded,
        )

    async def aclose(self) -> None:
        """Stop reading: cancels the VS Code request if it is still running."""
        aclose = getattr(self._iter, "aclose", None)
        if aclose is not None:
            await aclose()
        self._finish(self.error or ChatRequestError(ErrorKind.CANCELLED, "closed by the caller"))

    async def __aenter__(self) -> ChatResponse:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self.finished:
            await self.aclose()


def start_response(
    transport: BridgeTransport,
    model: ChatModel,
    messages: Sequence[ChatMessage],
    options: ChatRequestOptions,
    *,
    cancel: asyncio.Event | None = None,
    justification: str | None = None,
    count_timeout: float = 2.0,
    retry: RetryPolicy | None = None,
    input_tokens: int | None = None,
) -> ChatResponse:
    """A :class:`ChatResponse` streaming ``model``'s answer through ``transport``.

    The building block under :meth:`LanguageModelClient.send_request` and the loopback
    endpoint: no selection, no fallback; usage, cancellation and error classification.
    ``retry`` retries a rate limit or server error that comes before the first part (see
    :class:`~.guard.RetryPolicy`); ``None`` never retries. ``input_tokens``, when the caller
    has an estimate already, is taken as the input usage instead of counting each message
    with the model's ``countTokens``.
    """

    async def run(response: ChatResponse) -> AsyncIterator[ResponsePart]:
        error: ChatRequestError | None = None
        stream: AsyncIterator[ResponsePart] | None = None
        try:
            if cancel is not None and cancel.is_set():
                raise ChatRequestError(ErrorKind.CANCELLED, "cancelled before sending")
            response._input_tokens = (
                input_tokens
                if input_tokens is not None
                else await _count_input(transport, model, messages, options, count_timeout)
            )
            attempt = 0
            while True:
                attempt += 1
                stream = transport.send_request(
                    model, messages, options, cancel, justification=justification
                )
                try:
                    first: ResponsePart | None = await anext(stream, None)
                except (asyncio.CancelledError, GeneratorExit):
                    raise
                except Exception as exc:
                    # Nothing was streamed yet: a rate limit or server error may pass.
                    failure = classify_error(exc)
                    wait = None if retry is None else retry.delay(attempt, failure)
                    if wait is None or (cancel is not None and cancel.is_set()):
                        raise
                    _log.info(
                        "request to %s failed (%s); retrying in %.1fs", model.id, failure, wait
                    )
                    await _close_stream(stream)
                    stream = None
                    await _sleep_unless(wait, cancel)
                    continue
                break
            if first is not None:
                response._record(first)
                yield first
                async for part in stream:
                    response._record(part)
                    yield part
        except asyncio.CancelledError:
            error = ChatRequestError(ErrorKind.CANCELLED, "the task was cancelled")
            raise
        except GeneratorExit:
            error = ChatRequestError(ErrorKind.CANCELLED, "closed by the caller")
            raise
        except Exception as exc:
            error = classify_error(exc)
            if error.kind is ErrorKind.CANCELLED:
                _log.info("request to %s cancelled", model.id)
            elif error.raw_code == "PaceLimit":  # the user's own limit: the host logs it once
                _log.debug("request to %s held back: %s", model.id, error.detail)
            else:
                _log.error("request to %s failed: %s", model.id, error.detail or error)
            raise error from exc
        finally:
            if stream is not None:
                await _close_stream(stream)
            response._finish(error)

    return ChatResponse(model, run)


async def _close_stream(stream: AsyncIterator[ResponsePart]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        # closing the transport's stream is what cancels the VS Code request
        await aclose()


async def _sleep_unless(seconds: float, cancel: asyncio.Event | None) -> None:
    """Sleep ``seconds``, or less when ``cancel`` is set meanwhile."""
    if cancel is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(cancel.wait(), seconds)


def _fallback_response(
    diagnostic: str,
    cause: str,
    messages: Sequence[ChatMessage],
    transport: BridgeTransport | None = None,
) -> ChatResponse:
    """A degraded response: one diagnostic text part, never any call into the bridge.

    A transport that can tell the user (the host's: a notification in VS Code, shown once) is
    told, through its optional ``report_degraded(cause)``."""

    async def run(response: ChatResponse) -> AsyncIterator[ResponsePart]:
        try:
            # logged here, once per request, rather than on every selection attempt
            _log.warning("no VS Code model available (%s); answering with the fallback", cause)
            report = getattr(transport, "report_degraded", None)
            if callable(report):
                try:
                    told = report(cause)
                    if inspect.isawaitable(told):
                        await asyncio.wait_for(told, 2.0)
                except Exception:  # telling the user must never fail the answer
                    _log.debug("reporting the degraded mode failed", exc_info=True)
            part = TextPart(f"{_DEGRADED_PREFIX} {diagnostic}")
            response._record(part)
            yield part
        finally:
            response._finish(None)

    estimate = sum(_tokens(estimate_chars(m)) for m in messages)
    return ChatResponse(FALLBACK_MODEL, run, degraded=True, input_estimate=estimate)


def _available_text(models: Sequence[ChatModel], families: int = 12, ids: int = 3) -> str:
    """What a selector can name, for the message when none matches: each ``vendor/family``
    once (in VS Code's order) with its models' ids, so that one provider's many models do not
    hide the others. ``lmbridge/m1 (oai/m1, anth/m1, +5 more), copilot/gpt-4o (gpt-4o)``."""
    grouped: dict[str, list[str]] = {}
    for m in models:
        grouped.setdefault(f"{m.vendor}/{m.family}", []).append(m.id)
    shown = []
    for name, found in list(grouped.items())[:families]:
        more = f", +{len(found) - ids} more" if len(found) > ids else ""
        shown.append(f"{name} ({', '.join(found[:ids])}{more})")
    rest = len(grouped) - families
    if rest > 0:
        shown.append(f"and {rest} more {'family' if rest == 1 else 'families'}")
    return ", ".join(shown)


# --------------------------------------------------------------------------- the client


class LanguageModelClient:
    """A lazily selected VS Code model with fallback, usage and cancellation (module docstring).

    ``selector`` is selector text (``vscodelm/auto``, ``vscodelm/copilot/gpt-4o``, Cline's
    ``vendor/family/version/id``), a :class:`~.selectors.ModelSelector`, a selector object, or a
    function returning one of those, read before every selection (the app's setting). The
    default, :data:`MODEL_SETTING`, follows the ``lmbridge.consumer.model`` setting when the
    host runs the app, so switching that setting needs no reload.
    ``config_sections`` are the settings sections whose changes drop the selected model.
    ``fallback=False`` raises a :class:`~.classify.ChatRequestError` instead of degrading.
    Like the loopback endpoint, it turns images into placeholder text for a model that takes
    none, refuses a request longer than the model's input limit before sending it
    (``context_guard``), and retries rate limits and server errors before the first part
    (``retry``); see :mod:`.guard`.
    """

    def __init__(
        self,
        transport: BridgeTransport | None = None,
        *,
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
        self._transport = transport
        self.clean_terminal: CleanTerminal = clean_terminal_scope(clean_terminal)
        """Where ANSI escapes, control characters and progress redraws are removed from the
        messages sent (:func:`lmbridge.convert.clean_terminal_text`): ``"tool-results"`` (the
        default: where an agent forwards a command's coloured output), ``"all"`` or ``"off"``;
        ``send_request(clean_terminal=...)`` overrides it for one request."""
        self.retry = retry
        """Retries of rate limits and server errors before the first part (``None``: none)."""
        self.context_guard = context_guard
        """Refuse a request whose estimate exceeds the model's input limit before sending
        (:class:`~.guard.PromptTooLongError`)."""
        self._selector_source = selector
        self.justification = justification
        """Shown by VS Code when it asks the user to allow access to the model."""
        self._debounce = debounce
        self._sections = tuple(config_sections)
        self._count_timeout = count_timeout
        self._fallback = fallback
        self._model: ChatModel | None = None
        self._model_selector: ModelSelector | None = None
        self._quiet_at: float | None = None  # selection waits until this loop time
        self._lock: asyncio.Lock | None = None
        self._unsubscribe: list[Callable[[], None]] = []
        self._models_changed = Listeners("models-changed")
        self.selections = 0
        """How many times this client called ``selectChatModels`` (for diagnostics and tests)."""
        if transport is not None:
            self._subscribe(transport)

    @property
    def transport(self) -> BridgeTransport:
        """The transport in use (the default one unless given)."""
        if self._transport is None:
            self._transport = get_default_transport()
            self._subscribe(self._transport)
        return self._transport

    def _subscribe(self, transport: BridgeTransport) -> None:
        self._unsubscribe = [
            transport.on_models_changed(self._on_models_changed),
            transport.on_config_changed(self._on_config_changed),
        ]

    # invalidation

    def _on_models_changed(self) -> None:
        self._invalidate_later()
        self._models_changed.fire()

    def _on_config_changed(self, section: str) -> None:
        if not section or any(
            section == s or section.startswith(f"{s}.") or s.startswith(f"{section}.")
            for s in self._sections
        ):
            self._invalidate_later()

    def _invalidate_later(self) -> None:
        """Drop the model; the next selection waits for ``debounce`` seconds of quiet."""
        self._model = None
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:
            now = time.monotonic()
        self._quiet_at = now + self._debounce

    def invalidate(self) -> None:
        """Drop the selected model now; the next request selects again."""
        self._model = None
        self._quiet_at = None

    def set_selector(self, selector: SelectorSource | _ModelSetting) -> None:
        """Use another selector from the next request on (no reload needed)."""
        self._selector_source = selector
        self.invalidate()

    def on_models_changed(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` when VS Code's models change; returns the unsubscribe function."""
        _ = self.transport  # subscribe to the transport's events
        return self._models_changed.add(callback)

    # selection

    @property
    def selector(self) -> ModelSelector:
        """The selector the next selection uses (raises SelectorError for a bad setting)."""
        source = self._selector_source
        if source is MODEL_SETTING:
            setting = getattr(self.transport, "model_setting", None)
            return parse_selector(setting if isinstance(setting, str) else AUTO)
        value = source() if callable(source) else source
        return parse_selector(value)

    @property
    def current_model(self) -> ChatModel | None:
        """The cached model, without selecting."""
        return self._model

    async def model(self) -> ChatModel:
        """The selected model, selecting it now if needed; raises when none is available."""
        model, diagnostic, cause = await self._ensure_model()
        if model is None:
            raise (
                cause
                if isinstance(cause, ChatRequestError)
                else ChatRequestError(ErrorKind.MODEL_NOT_FOUND, diagnostic)
            )
        return model

    async def _ensure_model(self) -> tuple[ChatModel | None, str, BaseException | str]:
        """``(model, "", "")`` or ``(None, diagnostic for the user, underlying cause)``."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            loop = asyncio.get_running_loop()
            # Debounce: each new event moves _quiet_at later, so keep sleeping until the
            # events have been quiet for the whole interval.
            while self._quiet_at is not None and (delay := self._quiet_at - loop.time()) > 0:  # noqa: ASYNC110
                await asyncio.sleep(delay)
            self._quiet_at = None
            try:
                selector = self.selector
            except SelectorError as exc:
                return (
                    None,
                    f"The model setting is invalid: {exc}. Use {AUTO} for the first available model.",
                    exc,
                )
            if self._model is not None and self._model_selector == selector:
                return self._model, "", ""
            self._model = None
            transport = self.transport
            self.selections += 1
            try:
                models = await transport.select_chat_models(selector)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = classify_error(exc)
                return None, error.user_message, error
            # a workspace's provider only when the selector names the model's id
            models = [m for m in models if m.chosen_by(selector)]
            if models:
                self._model, self._model_selector = models[0], selector
                _log.info("selected %s/%s for %s", models[0].vendor, models[0].id, selector)
                return self._model, "", ""
            return None, await self._no_match(transport, selector), f"no model matches {selector}"

    async def _no_match(self, transport: BridgeTransport, selector: ModelSelector) -> str:
        if not selector.is_empty:
            try:
                available = await transport.select_chat_models(ModelSelector())
            except asyncio.CancelledError:
                raise
            except Exception:
                available = []
            if available:
                names = _available_text(available)
                return (
                    f"No language model in VS Code matches '{selector}'. Available: {names}. "
                    f"Change the model setting ({AUTO} picks the first available model)."
                )
        return (
            "No language model is available in VS Code: sign in to GitHub Copilot, or install "
            "and enable an extension that provides language models, then try again."
        )

    # requests

    async def send_request(
        self,
        messages: Sequence[Any],
        options: ChatRequestOptions | None = None,
        *,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        format: MessageFormat = "vscode",
        tools: Sequence[Any] | None = None,
        tool_mode: ToolMode | None = None,
        cancel: asyncio.Event | None = None,
        justification: str | None = None,
        clean_terminal: CleanTerminal | bool | None = None,
    ) -> ChatResponse:
        """Send ``messages`` (in ``format``) to the selected model; read the answer from the result.

        ``tools`` (ChatTools, OpenAI or Anthropic tool dicts) and ``tool_mode`` override those
        of ``options``. Setting ``cancel`` cancels the request. Bad messages raise
        :class:`~lmbridge.errors.ConversionError` here, before anything is sent, and so does a
        request over the model's input limit (:class:`~.guard.PromptTooLongError`).
        """
        vs_messages = messages_for_request(messages, system=system, format=format)
        scope = (
            self.clean_terminal
            if clean_terminal is None
            else clean_terminal_scope(clean_terminal)
        )
        vs_messages = clean_terminal_text(vs_messages, scope)
        options = options or ChatRequestOptions()
        if tools is not None or tool_mode is not None:
            options = ChatRequestOptions(
                tools=tools_from(tools) if tools is not None else options.tools,
                tool_mode=tool_mode if tool_mode is not None else options.tool_mode,
                model_options=options.model_options,
            )
        model, diagnostic, cause = await self._ensure_model()
        if model is None:
            if not self._fallback:
                raise (
                    cause
                    if isinstance(cause, ChatRequestError)
                    else ChatRequestError(
                        ErrorKind.MODEL_NOT_FOUND, str(cause), user_message=diagnostic
                    )
                )
            return _fallback_response(diagnostic, str(cause), vs_messages, self._transport)
        vs_messages = fit_to_model(vs_messages, model)
        if self.context_guard:
            check_context(model, vs_messages, options)
        return start_response(
            self.transport,
            model,
            vs_messages,
            options,
            cancel=cancel,
            justification=justification or self.justification or _justification(model),
            count_timeout=self._count_timeout,
            retry=self.retry,
        )

    async def complete(
        self,
        messages: Sequence[Any],
        options: ChatRequestOptions | None = None,
        *,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        format: MessageFormat = "vscode",
        tools: Sequence[Any] | None = None,
        tool_mode: ToolMode | None = None,
        cancel: asyncio.Event | None = None,
        justification: str | None = None,
        clean_terminal: CleanTerminal | bool | None = None,
    ) -> Completion:
        """:meth:`send_request` and read the answer to its end: one :class:`Completion`
        (text, thinking, tool calls, usage, finish reason).

        Raises what :meth:`send_request` raises, and the
        :class:`~.classify.ChatRequestError` that ends a failed stream.
        """
        response = await self.send_request(
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
        async with response:
            return await response.final()

    async def count_tokens(self, text: str | ChatMessage) -> int:
        """The selected model's token count for ``text`` (chars/4 when the model cannot say)."""
        model, _, _ = await self._ensure_model()
        if model is not None:
            try:
                counted = _safe_count(
                    await asyncio.wait_for(
                        self.transport.count_tokens(model, text), self._count_timeout
                    )
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                _log.debug("countTokens failed (%s); estimating with chars/4", exc)
            else:
                if counted is not None:
                    return counted
        return _tokens(estimate_chars(text))

    async def aclose(self) -> None:
        """Stop listening to the transport's events (the transport stays open)."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []


def _justification(model: ChatModel) -> str:
    return f"A Python app would like to use '{model.name}' from '{model.vendor}'."
