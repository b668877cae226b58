"""What every API module of the endpoint shares: its context, its shape, one serving path.

An API module (:mod:`.openai_chat`, :mod:`.responses`, :mod:`.anthropic`, :mod:`.lm`) has the
same three pieces:

- **parse the request**: a sans-IO function from the JSON body to a :class:`ChatRequest`
  (model name, VS Code messages and options, ``stream``), raising
  :class:`~lmbridge.errors.ConversionError` naming the field at fault;
- **stream the answer**: a sans-IO event builder (an :class:`EventStream`: ``start``,
  ``feed(part)``, ``finish``, ``fail``, ``body``) that makes the API's events of VS Code's
  parts, and builds the non-streamed answer too;
- **shape the errors**: an :class:`~.._http.Api` (token headers, ``render_error``, and
  ``describe_error`` built with :func:`describer` from the API's own ``error_for``).

It exports ``API`` (its :class:`~.._http.Api`) and ``routes(context) -> list[Route]``, and is
registered once in :data:`lmbridge.client.endpoint.apis.APIS`. The APIs that serve agents go
through :func:`serve_chat`:

1. the body is read into VS Code messages (a bad one: 400 in the API's error shape);
2. the model name is resolved (:meth:`ApiContext.resolve`, against VS Code's models listed once
   and kept: :class:`ModelList`; none: 404);
3. terminal output in tool results is cleaned (ANSI escapes, control characters, progress
   redraws: :data:`ApiContext.clean_terminal`; a request's ``X-Lmbridge-Clean-Terminal``
   header, ``tool-results``, ``all`` or ``off``, overrides it), images become placeholders for
   a model without image input, and a request longer than the model's input limit is refused with the API's context-length error (:mod:`...guard`);
4. the request goes to VS Code; rate limits and server errors before the first part are
   retried with backoff (:class:`~...guard.RetryPolicy`), then answered with their status and
   ``retry-after``;
5. the core's one streaming path (:func:`~.._stream.stream_parts`) writes the API's events:
   ``200`` once the first part is there or after the first-part wait, pings while the model is
   silent, an error event after ``200``, and the VS Code request cancelled when the client
   leaves.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ....errors import ConversionError
from ....parts import ChatMessage, ChatRequestOptions, ResponsePart
from ....terminal import CleanTerminal, clean_terminal_scope, clean_terminal_text
from ....timing import mark
from ...api import start_response
from ...classify import ChatRequestError, classify_error
from ...guard import (
    PromptTooLongError,
    RetryPolicy,
    as_prompt_too_long,
    check_context,
    fit_to_model,
)
from ...model_names import ModelNameMap, pick_model
from ...selectors import ModelSelector
from ...tools import ToolAllowlist
from ...transport import BridgeTransport, ChatModel
from .._http import Api, ErrorInfo, Exchange, HTTPError, Request, Route
from .._stream import sse_event, stream_parts

__all__ = [
    "ApiContext",
    "ChatRequest",
    "ChatShape",
    "Event",
    "EventEncoder",
    "EventStream",
    "ModelList",
    "Registration",
    "describer",
    "retry_headers",
    "serve_chat",
]

Event = tuple[str | None, dict[str, Any]]
"""One server-sent event: its name (``message_start`` ...; None for a nameless one) and data."""


class ChatRequest(Protocol):
    """A parsed request of an agents' API, as VS Code takes it."""

    @property
    def model(self) -> str:
        """The model name the client asked for."""
        ...

    @property
    def messages(self) -> list[ChatMessage]:
        """The conversation, the system prompt first."""
        ...

    @property
    def options(self) -> ChatRequestOptions:
        """Tools, tool mode and model options."""
        ...

    @property
    def stream(self) -> bool:
        """Whether the client wants a streamed answer."""
        ...


class EventStream(Protocol):
    """An API's sans-IO event builder: VS Code parts -> its events and its whole answer."""

    def start(self) -> list[Any]:
        """The opening events."""
        ...

    def feed(self, part: ResponsePart) -> list[Any]:
        """The events for one part."""
        ...

    def finish(self, output_tokens: int = 0) -> list[Any]:
        """The closing events (stop reason, usage)."""
        ...

    def fail(self, error: BaseException) -> list[Any]:
        """An error event ending the stream after ``200``."""
        ...

    def body(self) -> dict[str, Any]:
        """The non-streamed answer."""
        ...


class ModelList:
    """VS Code's models as the endpoint resolves names against them, listed once and kept.

    Listing is ``vscode.lm.selectChatModels``, for which VS Code asks every provider for its
    models again (lmbridge's own provider asks the host): a round trip through the extension
    host and the workbench that a request should not wait for each time. The list is kept
    until VS Code says its models changed (:meth:`forget`, on the bridge's models-changed
    event) and for at most ``max_age`` seconds, in case a provider changes its models without
    saying so; a name the kept list does not know is looked up in a new listing.
    """

    def __init__(
        self,
        bridge: BridgeTransport,
        max_age: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bridge = bridge
        self._max_age = max_age
        self._clock = clock
        self._models: list[ChatModel] | None = None
        self._listed_at = 0.0
        self._generation = 0

    def forget(self) -> None:
        """Drop the kept list: the next request lists again."""
        self._models = None
        self._generation += 1

    def kept(self) -> list[ChatModel] | None:
        """The kept list, or None when there is none or it is too old."""
        if self._models is None or self._clock() - self._listed_at >= self._max_age:
            return None
        return self._models

    async def listed(self) -> list[ChatModel]:
        """A new listing, kept unless VS Code's models changed while it was made."""
        generation = self._generation
        models = await self._bridge.select_chat_models(ModelSelector())
        if generation == self._generation:
            self._models, self._listed_at = models, self._clock()
        return models


@dataclass
class ApiContext:
    """What the API modules' routes share: VS Code, the model names, retries and timings."""

    bridge: BridgeTransport
    names: ModelNameMap = field(default_factory=ModelNameMap)
    """Client model names -> selectors (``lmbridge.endpoint.models``; replaced when the
    setting changes)."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """Retries before the first part (the agents' routes)."""
    keepalive: float = 15.0
    """Seconds of silence after which a stream gets a keep-alive."""
    first_part_wait: float = 10.0
    """Seconds a stream waits for its first part before answering ``200``."""
    tools: ToolAllowlist = field(default_factory=ToolAllowlist)
    """``lmbridge.endpoint.tools``: VS Code's tools offered (``/mcp``, ``/lm/tools``); empty:
    none (replaced when the setting changes)."""
    clean_terminal: CleanTerminal = "tool-results"
    """Where terminal output is cleaned in the agents' requests (see step 3 above)."""
    models: ModelList = field(init=False)
    """VS Code's models, listed once and kept (:class:`ModelList`); the server drops the list
    when VS Code's models change."""

    def __post_init__(self) -> None:
        self.models = ModelList(self.bridge)

    def clean_scope(self, request: Request) -> CleanTerminal:
        """The request's ``X-Lmbridge-Clean-Terminal`` header, else :attr:`clean_terminal`;
        400 for a value it cannot take."""
        header = request.headers.get("x-lmbridge-clean-terminal")
        if header is None:
            return self.clean_terminal
        try:
            return clean_terminal_scope(header.strip().lower(), "X-Lmbridge-Clean-Terminal")
        except ConversionError as exc:
            raise HTTPError(400, str(exc)) from None

    async def resolve(self, name: Any) -> ChatModel:
        """The VS Code model for a client's model name (:func:`~...model_names.pick_model`),
        for every API of the endpoint; 404 ``model_not_found`` if none."""
        if not isinstance(name, str):
            raise HTTPError(400, "model: expected a string", param="model")
        kept = self.models.kept()
        model = pick_model(name, kept, self.names) if kept is not None else None
        if model is None:
            model = pick_model(name, await self.models.listed(), self.names)
        if model is None:
            raise HTTPError(
                404,
                f"no VS Code language model for {name!r}: GET /v1/models lists them; "
                "lmbridge.endpoint.models maps other names to selectors",
                code="model_not_found",
            )
        return model

    async def model_entries(self) -> list[tuple[str, ChatModel]]:
        """What the model lists show: VS Code's models by id, then the names of
        ``lmbridge.endpoint.models`` without wildcards, each with its model (listed anew: a
        client asking for the list wants the current one)."""
        models = await self.models.listed()
        # a workspace's models are listed only under the names the user's setting gives them
        entries: list[tuple[str, ChatModel]] = [(m.id, m) for m in models if m.workspace is None]
        seen = {m.id for m in models}
        for pattern, _ in self.names.entries:
            if any(c in pattern for c in "*?[") or pattern in seen:
                continue
            model = pick_model(pattern, models, self.names)
            if model is not None:
                entries.append((pattern, model))
                seen.add(pattern)
        return entries


@dataclass(frozen=True, slots=True)
class Registration:
    """One API in the endpoint's table: its error shape and its routes."""

    api: Api
    routes: Callable[[ApiContext], list[Route]]


def retry_headers(error: BaseException) -> tuple[tuple[str, str], ...]:
    """``retry-after`` for a rate-limited VS Code request that says when to retry."""
    if isinstance(error, ChatRequestError):
        value = RetryPolicy.retry_after_header(error)
        if value is not None:
            return (("retry-after", value),)
    return ()


def describer(
    error_for: Callable[[BaseException], tuple[int, dict[str, Any]]],
    read: Callable[[dict[str, Any]], tuple[str, str, str | None, str | None]] | None = None,
) -> Callable[[BaseException], ErrorInfo | None]:
    """An API's reading of a failure (its statuses, types and codes, ``retry-after``) from its
    ``error_for(exc) -> (status, body)``. ``read`` takes ``(type, message, code, param)`` out
    of the body; the default reads ``body["error"]`` as OpenAI and Anthropic shape it."""

    def describe(exc: BaseException) -> ErrorInfo | None:
        if isinstance(exc, HTTPError):
            return None  # the core's own refusals (token, JSON, size) say it already
        # VS Code's side refused it as too long: the API's own context-length answer
        exc = as_prompt_too_long(exc) or exc
        if not isinstance(exc, (PromptTooLongError, ConversionError, ChatRequestError)):
            exc = classify_error(exc)
        status, body = error_for(exc)
        if read is not None:
            kind, message, code, param = read(body)
        else:
            err = body["error"]
            kind, message, code, param = (
                err["type"],
                err["message"],
                err.get("code"),
                err.get("param"),
            )
        return ErrorInfo(status, kind, message, code, exc, retry_headers(exc), param)

    return describe


class EventEncoder:
    """An API's :class:`EventStream` as the core's :class:`~.._stream.PartEncoder` (SSE)."""

    media_type = "text/event-stream"

    def __init__(self, events: EventStream, usage: Callable[[], int], ping: bytes) -> None:
        self._events = events
        self._usage = usage
        self._ping = ping

    def _frames(self, events: list[Event]) -> bytes:
        """The bytes of ``events`` (an SSE event each; subclasses frame them otherwise)."""
        return b"".join(sse_event(data, name) for name, data in events)

    def start(self) -> bytes:
        return self._frames(self._events.start())

    def feed(self, part: ResponsePart) -> bytes:
        return self._frames(self._events.feed(part))

    def finish(self) -> bytes:
        return self._frames(self._events.finish(self._usage()))

    def fail(self, error: ErrorInfo) -> bytes:
        cause = error.cause if error.cause is not None else RuntimeError(error.message)
        return self._frames(self._events.fail(cause))

    def ping(self) -> bytes:
        return self._ping


@dataclass(frozen=True)
class ChatShape:
    """What differs between the agents' APIs; everything else is :func:`serve_chat`."""

    api: Api
    parse: Callable[[dict[str, Any]], ChatRequest]
    """Step 1: the body -> the request (sans-IO)."""
    events: Callable[[Any, int, ChatModel], EventStream]
    """The event builder for a parsed request, its input-token estimate and the VS Code model
    that answers."""
    ping: bytes
    """What a waiting stream gets: Anthropic's ``ping`` event, or an SSE comment."""
    encoder: Callable[[EventStream, Callable[[], int], bytes], Any] = EventEncoder
    """The :class:`~.._stream.PartEncoder` for a streamed answer (SSE of the events)."""


async def serve_chat(
    context: ApiContext,
    request: Request,
    out: Exchange,
    shape: ChatShape,
) -> None:
    """One request of an agents' API: steps 1 to 5 of the module docstring. Failures are
    raised: the core answers them in the route's API shape."""
    scope = context.clean_scope(request)
    parsed = shape.parse(request.json())
    model = await context.resolve(parsed.model)
    mark("endpoint.resolved")
    messages: list[ChatMessage] = fit_to_model(clean_terminal_text(parsed.messages, scope), model)
    options: ChatRequestOptions = parsed.options
    tokens = check_context(model, messages, options)
    response = start_response(
        context.bridge,
        model,
        messages,
        options,
        retry=context.retry,
        # the guard's estimate: agents' histories are long, one countTokens per message is not
        input_tokens=tokens,
        justification=f"An agent would like to use '{model.name}' through lmbridge.",
    )
    events = shape.events(parsed, tokens, model)
    if parsed.stream:
        await stream_parts(
            out,
            response,
            shape.encoder(events, lambda: response.usage.output_tokens or 0, shape.ping),
            first_part_wait=context.first_part_wait,
            keepalive=context.keepalive,
            api=shape.api,
        )
        return
    try:
        parts = [part async for part in response]
    finally:
        await response.aclose()
    events.start()
    for part in parts:
        events.feed(part)
    events.finish(response.usage.output_tokens or 0)
    await out.json(200, events.body())
