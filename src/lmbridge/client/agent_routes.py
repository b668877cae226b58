"""The agents' APIs on the loopback endpoint: Anthropic Messages and OpenAI Responses.

``POST /v1/messages`` (also with Claude Code's ``?beta=true``), ``POST
/v1/messages/count_tokens`` and ``POST /v1/responses`` over a
:class:`~.transport.BridgeTransport`. The translation is sans-IO in :mod:`.api_anthropic`
and :mod:`.api_responses`; this module does the waiting and writing, the same way for both:

1. the body is read into VS Code messages (a bad one: 400 in the API's error shape);
2. the model name is resolved (:func:`~.model_names.pick_model`; none: 404);
3. images become placeholders for a model without image input, and a request longer than the
   model's input limit is refused with the API's context-length error (:mod:`.guard`);
4. the request goes to VS Code; rate limits and server errors before the first part are
   retried with backoff (:class:`~.guard.RetryPolicy`), then answered with their status and
   ``retry-after``;
5. a stream answers ``200`` once the first part is there, or after ``first_part_wait``
   seconds (then a failure is an error event); while waiting for parts, Anthropic streams
   get ``ping`` events and Responses streams an SSE comment, so clients and proxies keep
   the connection. A client that disconnects cancels the VS Code request (the HTTP core
   cancels the handler, which closes the response).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

from ..errors import ConversionError
from ..parts import ChatMessage, ChatRequestOptions, ResponsePart
from . import api_anthropic, api_responses
from .api import ChatResponse, start_response
from .classify import ChatRequestError, ErrorKind, classify_error
from .endpoint import EndpointServer, HTTPError, _Exchange, _Request
from .guard import (
    PromptTooLongError,
    RetryPolicy,
    check_context,
    estimate_input_tokens,
    fit_to_model,
)
from .model_names import ModelNameMap, pick_model
from .selectors import ModelSelector
from .transport import BridgeTransport, ChatModel

__all__ = ["AgentEndpointServer", "AgentRoutes", "Responder", "is_anthropic", "sse_event"]

_log = logging.getLogger("lmbridge.client.endpoint")

_SSE_HEADERS = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]


class Responder(Protocol):
    """How a route writes its answer (the HTTP core's exchange)."""

    started: bool

    async def json(
        self, status: int, body: Any, extra: list[tuple[str, str]] | None = None
    ) -> None: ...

    async def start(self, status: int, headers: list[tuple[str, str]]) -> None: ...

    async def write(self, data: bytes) -> None: ...

    async def end(self) -> None: ...


def sse_event(name: str | None, data: Any) -> bytes:
    """One server-sent event: ``event: <name>`` (when given) and one ``data:`` line."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {payload}\n\n".encode()


class _Stream(Protocol):
    def start(self) -> list[tuple[str, dict[str, Any]]]: ...

    def feed(self, part: ResponsePart) -> list[tuple[str, dict[str, Any]]]: ...

    def finish(self, output_tokens: int = 0) -> list[tuple[str, dict[str, Any]]]: ...

    def fail(self, error: BaseException) -> list[tuple[str, dict[str, Any]]]: ...

    def body(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class _Shape:
    """What differs between the two APIs; everything else is the same path."""

    parse: Callable[[dict[str, Any]], Any]
    error_for: Callable[[BaseException], tuple[int, dict[str, Any]]]
    encoder: Callable[[Any, int], _Stream]
    ping: bytes
    """What a waiting stream gets: Anthropic's ``ping`` event, or an SSE comment."""


_ANTHROPIC = _Shape(
    parse=api_anthropic.parse_messages_request,
    error_for=api_anthropic.error_for,
    encoder=lambda request, tokens: api_anthropic.MessagesStream(
        model=request.model, input_tokens=tokens
    ),
    ping=sse_event("ping", {"type": "ping"}),
)
_RESPONSES = _Shape(
    parse=api_responses.parse_responses_request,
    error_for=api_responses.error_for,
    encoder=lambda request, tokens: api_responses.ResponsesStream(
        model=request.model,
        input_tokens=tokens,
        tool_names=request.tool_names,
        parallel_tool_calls=request.parallel_tool_calls,
        tool_choice=request.tool_choice,
    ),
    ping=b": keepalive\n\n",
)


def _body(raw: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw or b"{}")
    except ValueError as exc:
        raise ConversionError(f"invalid JSON body: {exc}") from None
    if not isinstance(obj, dict):
        raise ConversionError("the body must be a JSON object")
    return obj


def _retry_headers(error: BaseException) -> list[tuple[str, str]]:
    if isinstance(error, ChatRequestError):
        value = RetryPolicy.retry_after_header(error)
        if value is not None:
            return [("retry-after", value)]
    return []


class AgentRoutes:
    """The Messages and Responses routes over ``bridge`` (module docstring).

    ``names`` maps client model names to selectors (``lmbridge.endpoint.models``);
    ``first_part_wait`` is how long a stream waits for the first part before answering 200;
    ``keepalive`` the gap after which a waiting stream gets a ping.
    """

    def __init__(
        self,
        bridge: BridgeTransport,
        *,
        names: ModelNameMap | None = None,
        retry: RetryPolicy | None = None,
        count_timeout: float = 2.0,
        first_part_wait: float = 10.0,
        keepalive: float = 15.0,
    ) -> None:
        self.bridge = bridge
        self.names = names or ModelNameMap()
        """Client model names -> selectors; replace it when the setting changes."""
        self.retry = retry if retry is not None else RetryPolicy()
        self._count_timeout = count_timeout
        self._first_part_wait = first_part_wait
        self._keepalive = keepalive

    # ------------------------------------------------------------------ shared

    async def resolve(self, name: str) -> ChatModel:
        """The VS Code model for a client's model name (404 ``model-not-found`` if none)."""
        models = await self.bridge.select_chat_models(ModelSelector())
        model = pick_model(name, models, self.names)
        if model is None:
            raise ChatRequestError(
                ErrorKind.MODEL_NOT_FOUND,
                f"no VS Code language model for {name!r}: GET /v1/models lists them; "
                "lmbridge.endpoint.models maps other names to selectors",
                code="NotFound",
            )
        return model

    async def _prepare(
        self, name: str, messages: list[ChatMessage], options: ChatRequestOptions
    ) -> tuple[ChatModel, list[ChatMessage], int]:
        model = await self.resolve(name)
        messages = fit_to_model(messages, model)
        tokens = check_context(model, messages, options)
        return model, messages, tokens

    def _start(
        self,
        model: ChatModel,
        messages: list[ChatMessage],
        options: ChatRequestOptions,
        tokens: int,
    ) -> ChatResponse:
        return start_response(
            self.bridge,
            model,
            messages,
            options,
            count_timeout=self._count_timeout,
            retry=self.retry,
            # the guard's estimate: agents' histories are long, one countTokens per message is not
            input_tokens=tokens,
            justification=f"An agent would like to use '{model.name}' through lmbridge.",
        )

    @staticmethod
    async def _error(
        out: Responder,
        error_for: Callable[[BaseException], tuple[int, dict[str, Any]]],
        exc: BaseException,
    ) -> None:
        if isinstance(exc, ChatRequestError) and exc.kind is ErrorKind.INTERNAL:
            _log.warning("agent request failed: %s", exc.detail or exc)
        status, body = error_for(exc)
        await out.json(status, body, _retry_headers(exc))

    async def _collect(self, response: ChatResponse) -> list[ResponsePart]:
        try:
            return [part async for part in response]
        finally:
            await response.aclose()

    async def _stream(
        self,
        out: Responder,
        response: ChatResponse,
        encoder: _Stream,
        error_for: Callable[[BaseException], tuple[int, dict[str, Any]]],
        ping: bytes,
    ) -> None:
        """Stream ``response`` through ``encoder`` (see the module docstring, step 5)."""

        def frames(events: list[tuple[str, dict[str, Any]]]) -> bytes:
            return b"".join(sse_event(n, d) for n, d in events)

        iterator = aiter(response)
        pending: asyncio.Future[ResponsePart] | None = None
        try:
            pending = asyncio.ensure_future(anext(iterator))
            done, _ = await asyncio.wait({pending}, timeout=self._first_part_wait)
            if done:
                try:
                    first = pending.result()
                except StopAsyncIteration:
                    first = None
                except ChatRequestError as exc:
                    pending = None
                    await self._error(out, error_for, exc)
                    return
                pending = None
                await out.start(200, _SSE_HEADERS)
                await out.write(frames(encoder.start()))
                if first is not None:
                    await out.write(frames(encoder.feed(first)))
                    pending = asyncio.ensure_future(anext(iterator))
            else:
                await out.start(200, _SSE_HEADERS)
                await out.write(frames(encoder.start()))
            while pending is not None:
                done, _ = await asyncio.wait({pending}, timeout=self._keepalive)
                if not done:
                    await out.write(ping)
                    continue
                try:
                    part = pending.result()
                except StopAsyncIteration:
                    pending = None
                    break
                pending = None
                await out.write(frames(encoder.feed(part)))
                pending = asyncio.ensure_future(anext(iterator))
            await out.write(frames(encoder.finish(response.usage.output_tokens or 0)))
        except ChatRequestError as exc:
            pending = None
            if not out.started:
                await self._error(out, error_for, exc)
                return
            # what was streamed stays valid; the client's SDK raises the error event
            await out.write(frames(encoder.fail(exc)))
        finally:
            if pending is not None and not pending.done():
                pending.cancel()
                # wait() does not raise: a cancellation of this task still propagates
                await asyncio.wait({pending})
            await response.aclose()
        await out.end()

    async def _serve(self, raw: bytes, out: Responder, api: _Shape) -> None:
        """One request of either API: steps 1 to 5 of the module docstring."""
        try:
            request = api.parse(_body(raw))
            model, messages, tokens = await self._prepare(
                request.model, request.messages, request.options
            )
        except (ConversionError, PromptTooLongError, ChatRequestError) as exc:
            await self._error(out, api.error_for, exc)
            return
        except Exception as exc:
            await self._error(out, api.error_for, classify_error(exc))
            return
        response = self._start(model, messages, request.options, tokens)
        encoder = api.encoder(request, tokens)
        if request.stream:
            await self._stream(out, response, encoder, api.error_for, api.ping)
            return
        try:
            parts = await self._collect(response)
        except ChatRequestError as exc:
            await self._error(out, api.error_for, exc)
            return
        encoder.start()
        for part in parts:
            encoder.feed(part)
        encoder.finish(response.usage.output_tokens or 0)
        await out.json(200, encoder.body())

    async def messages(self, raw: bytes, out: Responder) -> None:
        """``POST /v1/messages``: a Messages request, streamed (SSE) or not."""
        await self._serve(raw, out, _ANTHROPIC)

    async def count_tokens(self, raw: bytes, out: Responder) -> None:
        """``POST /v1/messages/count_tokens``: the estimate the context guard uses."""
        try:
            request = api_anthropic.parse_messages_request(_body(raw), count_only=True)
            model = await self.resolve(request.model)
            messages = fit_to_model(request.messages, model)
        except (ConversionError, ChatRequestError) as exc:
            await self._error(out, api_anthropic.error_for, exc)
            return
        tokens = estimate_input_tokens(model, messages, request.options)
        await out.json(200, api_anthropic.count_tokens_body(tokens))

    async def responses(self, raw: bytes, out: Responder) -> None:
        """``POST /v1/responses``: a Responses request, streamed (SSE) or not."""
        await self._serve(raw, out, _RESPONSES)

    # ------------------------------------------------------------------ model lists

    async def model_list(self, anthropic: bool) -> dict[str, Any]:
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
        if anthropic:
            return api_anthropic.models_list(
                [api_anthropic.model_entry(m, name) for name, m in entries]
            )
        return {
            "object": "list",
            "data": [api_responses.model_entry(m, name) for name, m in entries],
        }

    async def model(self, name: str, anthropic: bool) -> tuple[int, dict[str, Any]]:
        """``GET /v1/models/{name}``: the model a name resolves to, in the API's shape."""
        try:
            model = await self.resolve(name)
        except ChatRequestError as exc:
            return (api_anthropic.error_for if anthropic else api_responses.error_for)(exc)
        if anthropic:
            return 200, api_anthropic.model_entry(model, name)
        return 200, api_responses.model_entry(model, name)


def is_anthropic(headers: Mapping[str, str]) -> bool:
    """Whether a request comes from an Anthropic client (it sends ``anthropic-version``)."""
    return "anthropic-version" in headers


class AgentEndpointServer(EndpointServer):
    """The loopback endpoint with the agents' APIs: Messages, count_tokens, Responses.

    Also takes the token as ``x-api-key`` (what Anthropic's clients send), answers ``GET
    /v1/models`` in Anthropic's shape to clients that send ``anthropic-version``, and
    resolves model names (percent-decoded) through ``lmbridge.endpoint.models``.
    """

    def __init__(
        self,
        bridge: BridgeTransport,
        *,
        names: ModelNameMap | None = None,
        retry: RetryPolicy | None = None,
        first_part_wait: float = 10.0,
        token: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        endpoint_file: Path | bool | None = None,
        count_timeout: float = 2.0,
        keepalive: float = 15.0,
    ) -> None:
        super().__init__(
            bridge,
            token=token,
            host=host,
            port=port,
            endpoint_file=endpoint_file,
            count_timeout=count_timeout,
            keepalive=keepalive,
        )
        self.agents = AgentRoutes(
            bridge,
            names=names,
            retry=retry,
            count_timeout=count_timeout,
            first_part_wait=first_part_wait,
            keepalive=keepalive,
        )
        """The Messages and Responses routes (``agents.names`` follows the setting)."""
        self._routes[("POST", "/v1/messages")] = self._messages
        self._routes[("POST", "/v1/messages/count_tokens")] = self._messages_count
        self._routes[("POST", "/v1/responses")] = self._responses

    def _check_token(self, request: _Request) -> None:
        given = request.headers.get("x-api-key")
        if given is not None and hmac.compare_digest(given.strip().encode(), self.token.encode()):
            return
        try:
            super()._check_token(request)
        except HTTPError as exc:
            if request.path.startswith("/v1/messages") or is_anthropic(request.headers):
                raise HTTPError(
                    401,
                    api_anthropic.error_body(
                        "authentication_error",
                        "missing or wrong token: send it as 'x-api-key' (or 'Authorization: "
                        "Bearer') with the token from the lmbridge endpoint file",
                    ),
                ) from None
            raise exc from None

    async def _messages(self, request: _Request, exchange: _Exchange) -> None:
        await self.agents.messages(request.body, exchange)

    async def _messages_count(self, request: _Request, exchange: _Exchange) -> None:
        await self.agents.count_tokens(request.body, exchange)

    async def _responses(self, request: _Request, exchange: _Exchange) -> None:
        await self.agents.responses(request.body, exchange)

    async def _openai_models(self, request: _Request, exchange: _Exchange) -> None:
        await exchange.json(200, await self.agents.model_list(is_anthropic(request.headers)))

    async def _openai_model(self, request: _Request, exchange: _Exchange) -> None:
        name = unquote(request.path[len("/v1/models/") :])
        status, body = await self.agents.model(name, is_anthropic(request.headers))
        await exchange.json(status, body)
