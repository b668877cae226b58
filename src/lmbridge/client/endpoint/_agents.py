"""The agents' APIs on the endpoint: Anthropic Messages and OpenAI Responses.

``POST /v1/messages`` (also with Claude Code's ``?beta=true``), ``POST
/v1/messages/count_tokens`` and ``POST /v1/responses``, and the model lists in each API's
shape (``GET /v1/models`` answers clients that send ``anthropic-version`` in Anthropic's
shape, others in OpenAI's; both list the names of ``lmbridge.endpoint.models`` too). The
translation is sans-IO in :mod:`..api_anthropic` and :mod:`..api_responses`; here both APIs
go through one path:

1. the body is read into VS Code messages (a bad one: 400 in the API's error shape);
2. the model name is resolved (:func:`~..model_names.pick_model`; none: 404);
3. images become placeholders for a model without image input, and a request longer than the
   model's input limit is refused with the API's context-length error (:mod:`..guard`);
4. the request goes to VS Code; rate limits and server errors before the first part are
   retried with backoff (:class:`~..guard.RetryPolicy`), then answered with their status and
   ``retry-after``;
5. the core's one streaming path (:func:`~._stream.stream_parts`) writes the API's events:
   ``200`` once the first part is there or after the first-part wait, ``ping`` events
   (Anthropic) or SSE comments (Responses) while the model is silent, an error event after
   ``200``, and the VS Code request cancelled when the client leaves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import ConversionError
from ...parts import ChatMessage, ChatRequestOptions, ResponsePart
from .. import api_anthropic, api_responses
from ..api import ChatResponse, start_response
from ..classify import ChatRequestError, classify_error
from ..guard import (
    PromptTooLongError,
    RetryPolicy,
    check_context,
    estimate_input_tokens,
    fit_to_model,
)
from ..model_names import ModelNameMap, pick_model
from ..selectors import ModelSelector
from ..transport import BridgeTransport, ChatModel
from ._http import Api, ErrorInfo, Exchange, HTTPError, Request, Route
from ._openai_chat import OPENAI_API
from ._stream import sse_event, stream_parts

__all__ = ["ANTHROPIC_API", "RESPONSES_API", "AgentRoutes", "is_anthropic"]

_log = logging.getLogger("lmbridge.client.endpoint")

Events = list[tuple[str, dict[str, Any]]]


def is_anthropic(headers: Mapping[str, str]) -> bool:
    """Whether a request comes from an Anthropic client (it sends ``anthropic-version``)."""
    return "anthropic-version" in headers


def _retry_headers(error: BaseException) -> tuple[tuple[str, str], ...]:
    if isinstance(error, ChatRequestError):
        value = RetryPolicy.retry_after_header(error)
        if value is not None:
            return (("retry-after", value),)
    return ()


def _describer(
    error_for: Callable[[BaseException], tuple[int, dict[str, Any]]],
) -> Callable[[BaseException], ErrorInfo | None]:
    """An API's reading of a failure: its statuses, types and codes, ``retry-after``."""

    def describe(exc: BaseException) -> ErrorInfo | None:
        if isinstance(exc, HTTPError):
            return None  # the core's own refusals (token, JSON, size) say it already
        if not isinstance(exc, (PromptTooLongError, ConversionError, ChatRequestError)):
            exc = classify_error(exc)
        status, body = error_for(exc)
        err = body["error"]
        return ErrorInfo(
            status,
            err["type"],
            err["message"],
            err.get("code"),
            exc,
            _retry_headers(exc),
            err.get("param"),
        )

    return describe


_ANTHROPIC_TYPES = {"cancelled": "api_error", "timeout_error": "timeout_error"}


def _render_anthropic(info: ErrorInfo) -> dict[str, Any]:
    return api_anthropic.error_body(_ANTHROPIC_TYPES.get(info.type, info.type), info.message)


def _render_responses(info: ErrorInfo) -> dict[str, Any]:
    return api_responses.error_body(info.message, info.type, info.code, info.param)


ANTHROPIC_API = Api(
    "anthropic",
    _render_anthropic,
    token_headers=("x-api-key", "authorization"),
    describe_error=_describer(api_anthropic.error_for),
)
"""Anthropic's error shape; the token as ``x-api-key`` or a bearer token (Claude Code's
``ANTHROPIC_AUTH_TOKEN``)."""
RESPONSES_API = Api(
    "responses",
    _render_responses,
    token_headers=("authorization", "x-api-key"),
    describe_error=_describer(api_responses.error_for),
)
"""OpenAI's error shape, with ``context_length_exceeded`` for too long an input."""


class _Encoder:
    """One API's event builder as the core's :class:`~._stream.PartEncoder`."""

    media_type = "text/event-stream"

    def __init__(
        self,
        events: api_anthropic.MessagesStream | api_responses.ResponsesStream,
        response: ChatResponse,
        ping: bytes,
    ) -> None:
        self._events = events
        self._response = response
        self._ping = ping

    @staticmethod
    def _frames(events: Events) -> bytes:
        return b"".join(sse_event(data, name) for name, data in events)

    def start(self) -> bytes:
        return self._frames(self._events.start())

    def feed(self, part: ResponsePart) -> bytes:
        return self._frames(self._events.feed(part))

    def finish(self) -> bytes:
        return self._frames(self._events.finish(self._response.usage.output_tokens or 0))

    def fail(self, error: ErrorInfo) -> bytes:
        cause = error.cause if error.cause is not None else RuntimeError(error.message)
        return self._frames(self._events.fail(cause))

    def ping(self) -> bytes:
        return self._ping


@dataclass(frozen=True)
class _Shape:
    """What differs between the two APIs; everything else is the same path."""

    api: Api
    parse: Callable[[dict[str, Any]], Any]
    events: Callable[[Any, int], api_anthropic.MessagesStream | api_responses.ResponsesStream]
    ping: bytes
    """What a waiting stream gets: Anthropic's ``ping`` event, or an SSE comment."""


_ANTHROPIC = _Shape(
    api=ANTHROPIC_API,
    parse=api_anthropic.parse_messages_request,
    events=lambda request, tokens: api_anthropic.MessagesStream(
        model=request.model, input_tokens=tokens
    ),
    ping=sse_event({"type": "ping"}, "ping"),
)
_RESPONSES = _Shape(
    api=RESPONSES_API,
    parse=api_responses.parse_responses_request,
    events=lambda request, tokens: api_responses.ResponsesStream(
        model=request.model,
        input_tokens=tokens,
        tool_names=request.tool_names,
        parallel_tool_calls=request.parallel_tool_calls,
        tool_choice=request.tool_choice,
    ),
    ping=b": keepalive\n\n",
)


class AgentRoutes:
    """The Messages and Responses routes over ``bridge`` (module docstring).

    ``names`` maps client model names to selectors (``lmbridge.endpoint.models``; replace it
    when the setting changes).
    """

    def __init__(
        self,
        bridge: BridgeTransport,
        *,
        names: ModelNameMap | None = None,
        retry: RetryPolicy | None = None,
        keepalive: float = 15.0,
        first_part_wait: float = 10.0,
    ) -> None:
        self.bridge = bridge
        self.names = names or ModelNameMap()
        """Client model names -> selectors."""
        self.retry = retry if retry is not None else RetryPolicy()
        """Retries before the first part."""
        self._keepalive = keepalive
        self._first_part_wait = first_part_wait

    def routes(self) -> list[Route]:
        """The routes to add to the server (the model lists for every client among them)."""
        return [
            Route("POST", "/v1/messages", self.messages, ANTHROPIC_API),
            Route("POST", "/v1/messages/count_tokens", self.count_tokens, ANTHROPIC_API),
            Route("POST", "/v1/responses", self.responses, RESPONSES_API),
            Route("GET", "/v1/models", self.models, ANTHROPIC_API, when=is_anthropic),
            Route("GET", "/v1/models/{model}", self.model, ANTHROPIC_API, when=is_anthropic),
            Route("GET", "/v1/models", self.models, OPENAI_API),
            Route("GET", "/v1/models/{model}", self.model, OPENAI_API),
        ]

    # ------------------------------------------------------------------ shared

    async def resolve(self, name: Any) -> ChatModel:
        """The VS Code model for a client's model name (:func:`~..model_names.pick_model`),
        for every API of the endpoint; 404 ``model_not_found`` if none."""
        if not isinstance(name, str):
            raise HTTPError(400, "model: expected a string", param="model")
        models = await self.bridge.select_chat_models(ModelSelector())
        model = pick_model(name, models, self.names)
        if model is None:
            raise HTTPError(
                404,
                f"no VS Code language model for {name!r}: GET /v1/models lists them; "
                "lmbridge.endpoint.models maps other names to selectors",
                code="model_not_found",
            )
        return model

    async def _serve(self, request: Request, out: Exchange, shape: _Shape) -> None:
        """One request of either API: steps 1 to 5 of the module docstring. Failures are
        raised: the core answers them in the route's API shape."""
        body = shape.parse(request.json())
        model = await self.resolve(body.model)
        messages: list[ChatMessage] = fit_to_model(body.messages, model)
        options: ChatRequestOptions = body.options
        tokens = check_context(model, messages, options)
        response = start_response(
            self.bridge,
            model,
            messages,
            options,
            retry=self.retry,
            # the guard's estimate: agents' histories are long, one countTokens per message is not
            input_tokens=tokens,
            justification=f"An agent would like to use '{model.name}' through lmbridge.",
        )
        events = shape.events(body, tokens)
        if body.stream:
            await stream_parts(
                out,
                response,
                _Encoder(events, response, shape.ping),
                first_part_wait=self._first_part_wait,
                keepalive=self._keepalive,
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

    # ------------------------------------------------------------------ routes

    async def messages(self, request: Request, out: Exchange) -> None:
        """``POST /v1/messages``: a Messages request, streamed (SSE) or not."""
        await self._serve(request, out, _ANTHROPIC)

    async def count_tokens(self, request: Request, out: Exchange) -> None:
        """``POST /v1/messages/count_tokens``: the estimate the context guard uses."""
        body = api_anthropic.parse_messages_request(request.json(), count_only=True)
        model = await self.resolve(body.model)
        messages = fit_to_model(body.messages, model)
        tokens = estimate_input_tokens(model, messages, body.options)
        await out.json(200, api_anthropic.count_tokens_body(tokens))

    async def responses(self, request: Request, out: Exchange) -> None:
        """``POST /v1/responses``: a Responses request, streamed (SSE) or not."""
        await self._serve(request, out, _RESPONSES)

    async def models(self, request: Request, out: Exchange) -> None:
        """``GET /v1/models`` in the asking API's shape: VS Code's models by id, then the
        names of ``lmbridge.endpoint.models`` without wildcards, each with its model."""
        models = await self.bridge.select_chat_models(ModelSelector())
        entries: list[tuple[str, ChatModel]] = [(m.id, m) for m in models]
        seen = {m.id for m in models}
        for pattern, _ in self.names.entries:
            if any(c in pattern for c in "*?[") or pattern in seen:
                continue
            model = pick_model(pattern, models, self.names)
            if model is not None:
                entries.append((pattern, model))
                seen.add(pattern)
        if is_anthropic(request.headers):
            await out.json(
                200,
                api_anthropic.models_list([api_anthropic.model_entry(m, n) for n, m in entries]),
            )
            return
        await out.json(
            200, {"object": "list", "data": [api_responses.model_entry(m, n) for n, m in entries]}
        )

    async def model(self, request: Request, out: Exchange) -> None:
        """``GET /v1/models/{model}``: the model a name resolves to, in the API's shape."""
        name = request.params["model"]
        model = await self.resolve(name)
        if is_anthropic(request.headers):
            await out.json(200, api_anthropic.model_entry(model, name))
        else:
            await out.json(200, api_responses.model_entry(model, name))
