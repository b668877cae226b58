"""The async HTTP client every wire format shares: request, retries, streaming, cancellation.

One exchange::

    build_request()  VS Code messages + options -> the format's converter -> JSON body, headers
    _open()          POST; 408/429/5xx and connection errors are retried (backoff, Retry-After)
                     until the first body byte arrives; other statuses are mapped to errors
    _pump()          body bytes -> SSE -> the format's decoder -> parts reported as they come;
                     an error the decoder found is raised after the parts before it are reported

A hostile or broken upstream cannot fill the memory: an SSE event (or line) is at most
:data:`~lmbridge.sse.MAX_EVENT_BYTES` before it is complete, and a whole answer at most
:data:`MAX_ANSWER_BYTES` after content decoding; past either the request fails with an error
that says so, the parts before it kept. Error bodies are read up to 64 KiB.

Credentials go only where the key was stored for: the key's origin (``key_origin``, by default
that of ``base_url``). A request whose URL has another origin (an absolute ``chatPath`` or
``modelsPath``) is sent without them, and redirects are never followed (a cross-origin
redirect would carry ``x-api-key`` / ``api-key`` along; httpx drops only ``Authorization``).

Cancellation runs the exchange as its own task and cancels it when the token fires: a pending
read or a retry wait is interrupted at once, the ``finally`` closes the HTTP response (the
upstream sees the connection close) and nothing is reported afterwards.

The :class:`httpx.AsyncClient` is always given, never made here: the provider owns it (and
tests pass one pointed at a local server).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import httpx

from ..entries import origin_of
from ..errors import ConversionError, LanguageModelError, UpstreamHTTPError
from ..parts import ChatMessage, ChatRequestOptions, FinishReason, ResponsePart, Usage
from ..provider import CancellationToken, ChatResult, Progress
from ..upstream import AssemblerOptions, ByteStreamDecoder, StreamDecoder, decoder_for
from ._body import decoded_chunks, head_of, read_head
from ._errors import (
    ErrorContext,
    error_info,
    map_http_error,
    map_stream_error,
    map_transport_error,
    parse_retry_after,
    redact,
    retry_delay_in_body,
)
from ._network import run_to_the_end
from ._retry import RetryPolicy, is_retryable_status

__all__ = [
    "EFFORT_SETTING",
    "MAX_ANSWER_BYTES",
    "SESSION_OPTION",
    "BodyDecoder",
    "UpstreamClient",
    "UpstreamRequest",
    "deep_merge",
    "join_url",
]

log = logging.getLogger("lmbridge.gateway")

_ERROR_BODY_LIMIT = 64 * 1024  # enough for any real error object; a runaway body is cut

MAX_ANSWER_BYTES = 64 * 1024 * 1024
"""The most bytes (after content decoding) one streamed answer may have: far above a long
answer with images (a 128k-token answer is about half a MiB of text), far below what would
strain the host."""


SESSION_OPTION = "_conversationId"
"""The model option in which Copilot passes the chat session's id (missing in some flows)."""


def session_cache_key(session: str) -> str:
    """The prompt-cache key of a chat session: a digest, so the upstream never sees VS Code's
    own id, and the same one for every request of the session (so they share a cache)."""
    return "lmbridge-" + hashlib.sha256(session.encode("utf-8")).hexdigest()[:32]


EFFORT_SETTING = "reasoningEffort"
"""The per-model setting (``configurationSchema``) and provider option of the thinking effort."""


def effort_schema(levels: Sequence[str]) -> dict[str, Any]:
    """The ``configurationSchema`` that gives a model VS Code's Thinking Effort entry in the
    model picker. No default: a request without a choice asks for the upstream's own."""
    return {
        "properties": {
            EFFORT_SETTING: {
                "type": "string",
                "title": "Thinking Effort",
                "description": "How much the model reasons before it answers.",
                "enum": list(levels),
                "enumItemLabels": [level.capitalize() for level in levels],
                "group": "navigation",
            }
        }
    }


def bare_model(model: str) -> str:
    """The model's id without a router's prefix (``openai/gpt-5`` -> ``gpt-5``), lower case."""
    return model.rsplit("/", 1)[-1].lower()


def join_url(base: str, path: str) -> str:
    """``base`` + ``path`` with exactly one slash between them (an empty path: ``base``; an
    absolute ``http(s)://`` URL: itself, which gets the key only at the key's origin)."""
    if not path:
        return base
    if path.lower().startswith(("http://", "https://")):
        return path
    return base.rstrip("/") + "/" + path.lstrip("/")


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` laid over it; nested objects merge, anything else is replaced."""
    out: dict[str, Any] = dict(base)
    for key, value in override.items():
        old = out.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            out[key] = deep_merge(old, value)
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class UpstreamRequest:
    """One upstream HTTP request, ready to send."""

    url: str
    """Where it goes."""
    body: dict[str, Any]
    """The JSON body."""
    headers: dict[str, str] = field(repr=False)
    """All headers, the credentials included (hence not in ``repr``)."""
    model: str | None = None
    """The upstream model id (for messages)."""


@dataclass
class _Exchange:
    decoder: StreamDecoder | None = None
    attempts: int = 0

    def usage(self) -> Usage:
        return (self.decoder.usage if self.decoder is not None else None) or Usage()


Sleep = Callable[[float], Awaitable[None]]


class BodyDecoder(Protocol):
    """Response body bytes -> parts (:class:`~lmbridge.upstream.ByteStreamDecoder` for SSE)."""

    @property
    def decoder(self) -> StreamDecoder:
        """The format decoder underneath (its error, usage and finish reason)."""

    def feed(self, chunk: bytes) -> list[ResponsePart]:
        """Decode a chunk of the body."""

    def close(self) -> list[ResponsePart]:
        """End of body."""


class UpstreamClient(ABC):
    """Streams one upstream wire format. Subclasses say how to build the body and authenticate.

    ``extra_body`` is laid under every request body: it fills in fields the request does not
    set (e.g. Anthropic's ``context_management``, OpenAI's ``store``), nested objects merged.
    ``converter_options`` are keyword arguments for the format's converter (its own options and
    the :class:`~lmbridge.convert.ConversionPolicy` fields). ``sleep`` and ``clock`` (a UNIX
    time, for ``Retry-After`` dates) are injectable so tests need not wait.
    """

    format: ClassVar[str]
    """The wire format's name, as in the configuration."""
    chat_path: ClassVar[str]
    """The streaming endpoint, relative to the base URL."""
    models_path: ClassVar[str] = "/models"
    """The model catalog, relative to the base URL."""
    passthrough_options: ClassVar[frozenset[str]] = frozenset()
    """Model options copied into the body as they are (upstream-specific knobs)."""
    drain_timeout: ClassVar[float] = 2.0
    """Seconds to read on after the stream's end marker before closing the connection."""
    max_answer_bytes: int = MAX_ANSWER_BYTES
    """The most bytes one streamed answer may have (see the module notes)."""
    provider_options: ClassVar[frozenset[str]] = frozenset()
    """Provider-entry options this format takes besides the common ones (keyword arguments)."""
    cache_key_field: ClassVar[str | None] = None
    """The body field that names a prompt cache (``prompt_cache_key``), for formats with one:
    the chat session's id goes there, so a session's requests share the upstream's cache."""
    reasoning_effort: str | None = None
    """The provider's ``reasoningEffort`` option: the effort when the picker chose none, and
    the picker's entry on every model of the provider."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: str | None = None,
        provider: str | None = None,
        api_key_env: str | None = None,
        headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        converter_options: Mapping[str, Any] | None = None,
        chat_path: str | None = None,
        models_path: str | None = None,
        retry: RetryPolicy | None = None,
        assembler_options: AssemblerOptions | None = None,
        sleep: Sleep | None = None,
        clock: Callable[[], float] | None = None,
        api_key_header: str | None = None,
        key_origin: str | None = None,
    ) -> None:
        self.http = http
        self.api_key_header = api_key_header or None
        """Send the key as this header's whole value (``api-key`` for Azure) instead of the
        format's own credentials."""
        self.base_url = base_url.rstrip("/")
        self.provider = provider or self.format
        self.api_key_env = api_key_env
        self.headers = dict(headers or {})
        self.extra_body = dict(extra_body or {})
        self.converter_options = dict(converter_options or {})
        self.retry = retry or RetryPolicy()
        self.assembler_options = assembler_options
        self._api_key = api_key or None
        self._chat_path = self.chat_path if chat_path is None else chat_path
        self._models_path = self.models_path if models_path is None else models_path
        self._sleep: Sleep = sleep or asyncio.sleep
        self._clock = clock or time.time
        self.key_origin = key_origin or origin_of(self.base_url)
        """The only origin the key is sent to (:func:`~lmbridge.config.origin_of`)."""
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        # never the key
        return f"{type(self).__name__}(provider={self.provider!r}, base_url={self.base_url!r})"

    # -- thinking effort

    def effort_levels(self, model: str) -> tuple[str, ...]:
        """The efforts ``model`` takes (its Thinking Effort entry), ``()`` for none: no
        reasoning model this format knows of."""
        return ()

    def apply_effort(self, body: dict[str, Any], effort: str, model: str) -> None:
        """Put ``effort`` in ``body`` as the format asks for it (nothing here)."""
        return None

    def effort_for(self, model: str, options: ChatRequestOptions) -> str | None:
        """The effort of a request: the picker's choice, else the provider's option."""
        chosen = options.model_configuration.get(EFFORT_SETTING)
        if isinstance(chosen, str) and chosen:
            return chosen
        return self.reasoning_effort

    # -- what subclasses provide

    @abstractmethod
    def build_body(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        *,
        default_max_tokens: int | None = None,
        image_input: bool = True,
    ) -> dict[str, Any]:
        """The format's request body (by its converter). ``default_max_tokens`` is the output
        budget to ask for when the options name none, for upstreams that require one."""

    def body_decoder(self, content_type: str) -> BodyDecoder | None:
        """The decoder for a response body of ``content_type``: the format's SSE decoder;
        ``None`` for a JSON document, which is not a stream."""
        if content_type.startswith("application/json"):
            return None
        return ByteStreamDecoder(decoder_for(self.format, self.assembler_options))

    def protocol_headers(self) -> dict[str, str]:
        """Headers the format needs on every request besides the credentials (none here)."""
        return {}

    def key_headers(self, key: str) -> dict[str, str]:
        """The format's own way to send the key (here ``Authorization: Bearer``)."""
        return {"authorization": f"Bearer {key}"}

    def auth_headers(self) -> dict[str, str]:
        """:meth:`protocol_headers` and the key: in ``api_key_header`` when one is configured,
        else the format's own way (:meth:`key_headers`)."""
        out = self.protocol_headers()
        if self._api_key:
            if self.api_key_header:
                out[self.api_key_header.lower()] = self._api_key
            else:
                out.update(self.key_headers(self._api_key))
        return out

    def key_allowed(self, url: str) -> bool:
        """Whether the key may go with a request to ``url`` (its origin is the key's)."""
        try:
            return origin_of(url) == self.key_origin
        except ValueError:
            return False

    def credential_names(self) -> set[str]:
        """The (lower-case) names of the headers that carry a credential."""
        if self.api_key_header:
            return {self.api_key_header.lower()}
        return {k.lower() for k in self.key_headers("-")}

    def guard_headers(self, url: str, headers: Mapping[str, str]) -> dict[str, str]:
        """``headers`` without the credentials when ``url`` is not at the key's origin (any
        credential: the key, or a format's own such as Vertex AI's access token)."""
        if not self.has_key or self.key_allowed(url):
            return dict(headers)
        names = self.credential_names()
        where = self.redact(url.split("?", 1)[0])
        if where not in self._warned:
            self._warned.add(where)
            log.warning(
                "%s: %s is not at the API key's origin %s; it is sent without the key",
                self.provider, where, self.key_origin,
            )  # fmt: skip
        return {k: v for k, v in headers.items() if k.lower() not in names}

    # -- requests

    @property
    def has_key(self) -> bool:
        """Whether an API key is configured."""
        return self._api_key is not None

    @property
    def endpoint(self) -> str:
        """The full URL of the streaming endpoint."""
        return join_url(self.base_url, self._chat_path)

    @property
    def models_url(self) -> str:
        """The full URL of the model catalog."""
        return join_url(self.base_url, self._models_path)

    def catalog_headers(self) -> dict[str, str]:
        """Headers for ``GET /models`` (the key only when the catalog is at its origin)."""
        headers = {"accept": "application/json", **self.auth_headers(), **self.headers}
        return self.guard_headers(self.models_url, headers)

    def error_context(self, model: str | None = None) -> ErrorContext:
        """What error messages about this upstream need."""
        return ErrorContext(
            provider=self.provider,
            base_url=self.base_url,
            model=model,
            api_key_env=self.api_key_env,
            has_key=self.has_key,
            secrets=(self._api_key,) if self._api_key else (),
        )

    def redact(self, text: str) -> str:
        """``text`` without the API key."""
        return redact(text, (self._api_key,))

    def build_request(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions | None = None,
        *,
        default_max_tokens: int | None = None,
        image_input: bool = True,
        extra_body: Mapping[str, Any] | None = None,
    ) -> UpstreamRequest:
        """The HTTP request for one chat response.

        Raises :class:`LanguageModelError` when the messages cannot be expressed for this
        upstream (the converter's :class:`~lmbridge.errors.ConversionError` is its cause).
        """
        options = options or ChatRequestOptions()
        try:
            body = self.build_body(
                model,
                messages,
                options,
                default_max_tokens=default_max_tokens,
                image_input=image_input,
            )
        except ConversionError as exc:
            raise LanguageModelError(
                f"{self.provider}: the conversation cannot be sent as {self.format}: {exc}"
            ) from exc
        for key in self.passthrough_options:
            value = options.model_options.get(key)
            if value is not None and key not in body:
                body[key] = value
        effort = self.effort_for(model, options)
        if effort is not None:
            self.apply_effort(body, effort, model)
        session = options.model_options.get(SESSION_OPTION)
        key_field = self.cache_key_field
        if key_field and isinstance(session, str) and session and key_field not in body:
            body[key_field] = session_cache_key(session)
        base = deep_merge(self.extra_body, extra_body or {})
        if base:
            body = deep_merge(base, body)
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            **self.auth_headers(),
            **self.headers,
        }
        request = UpstreamRequest(self.endpoint, body, self.guard_headers(self.endpoint, headers), model)
        return self.finish_request(request)

    def finish_request(self, request: UpstreamRequest) -> UpstreamRequest:
        """A format's last word on a built request, after the extra body is merged (so what
        the user set there wins): default fields and the headers they need. As is by default."""
        return request

    # -- streaming

    async def stream(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions | None,
        progress: Progress[ResponsePart],
        token: CancellationToken = CancellationToken.NONE,
        *,
        default_max_tokens: int | None = None,
        image_input: bool = True,
        extra_body: Mapping[str, Any] | None = None,
    ) -> ChatResult:
        """Send the request and report the response's parts to ``progress`` as they arrive.

        Returns the usage and finish reason (``cancelled`` when ``token`` fired: nothing is
        reported after that and the HTTP response is closed). Raises
        :class:`LanguageModelError` for every failure, after reporting the parts before it.
        """
        request = self.build_request(
            model,
            messages,
            options,
            default_max_tokens=default_max_tokens,
            image_input=image_input,
            extra_body=extra_body,
        )
        return await self.send(request, progress, token)

    async def send(
        self,
        request: UpstreamRequest,
        progress: Progress[ResponsePart],
        token: CancellationToken = CancellationToken.NONE,
    ) -> ChatResult:
        """Send a built request; see :meth:`stream`."""
        if token.is_cancellation_requested:
            return ChatResult(Usage(), FinishReason.CANCELLED)
        state = _Exchange()
        loop = asyncio.get_running_loop()
        exchange = loop.create_task(self._exchange(request, progress, token, state))
        stop = _Stop(exchange)
        # The token may fire on another thread; the task belongs to this loop.
        sub = token.on_cancellation_requested(lambda: loop.call_soon_threadsafe(stop))
        try:
            caller_cancelled = await _settle(exchange, stop)
        finally:
            sub.dispose()
        if caller_cancelled or (exchange.cancelled() and not _fired(token)):
            raise asyncio.CancelledError
        if exchange.cancelled():
            log.info("%s: request cancelled; upstream response closed", self.provider)
            return ChatResult(state.usage(), FinishReason.CANCELLED)
        return exchange.result()

    async def _exchange(
        self,
        request: UpstreamRequest,
        progress: Progress[ResponsePart],
        token: CancellationToken,
        state: _Exchange,
    ) -> ChatResult:
        ctx = self.error_context(request.model)
        try:
            response, chunks, first = await self._open(request, token, ctx, state)
            try:
                return await self._pump(response, chunks, first, progress, token, ctx, state)
            finally:
                # Closing a response whose body was not read to the end closes its connection.
                await _close(response)
        except httpx.DecodingError as exc:
            raise LanguageModelError(
                f"{self.provider}: the answer cannot be read: {self.redact(str(exc))}"
            ) from exc

    async def _open(
        self,
        request: UpstreamRequest,
        token: CancellationToken,
        ctx: ErrorContext,
        state: _Exchange,
    ) -> tuple[httpx.Response, AsyncIterator[bytes], bytes]:
        content = json.dumps(request.body, ensure_ascii=False, separators=(",", ":")).encode()
        while True:
            if token.is_cancellation_requested:
                raise asyncio.CancelledError
            state.attempts += 1
            attempt = state.attempts
            log.debug(
                "%s: POST %s model=%s (%d bytes, attempt %d)",
                self.provider, self.redact(request.url), request.model, len(content), attempt,
            )
            headers = self.guard_headers(request.url, request.headers)
            http_request = self.http.build_request(
                "POST", request.url, headers=headers, content=content
            )
            try:
                # never follow: a redirect elsewhere would take the credentials with it
                response = await self.http.send(http_request, stream=True, follow_redirects=False)
            except httpx.TransportError as exc:
                what = f"{type(exc).__name__}: {self.redact(str(exc))}"
                await self._wait_or_raise(
                    attempt, None, what, map_transport_error(exc, ctx, attempts=attempt), exc
                )
                continue
            if not 200 <= response.status_code < 300:
                error = await self._http_error(response)
                mapped = map_http_error(error, ctx, attempts=attempt)
                quota = error_info(error.body).code == "insufficient_quota"
                if not is_retryable_status(error.status_code) or quota:
                    raise mapped from error
                await self._wait_or_raise(
                    attempt, error.retry_after, f"HTTP {error.status_code}", mapped, error
                )
                continue
            chunks = decoded_chunks(response)
            try:
                first = await _first_chunk(chunks)
            except httpx.TransportError as exc:
                await _close(response)
                what = f"{type(exc).__name__} before the first byte"
                await self._wait_or_raise(
                    attempt, None, what, map_transport_error(exc, ctx, attempts=attempt), exc
                )
                continue
            except BaseException:
                await _close(response)
                raise
            return response, chunks, first

    async def _wait_or_raise(
        self,
        attempt: int,
        retry_after: float | None,
        what: str,
        error: LanguageModelError,
        cause: BaseException,
    ) -> None:
        delay = self.retry.delay(attempt, retry_after)
        if delay is None:
            raise error from cause
        log.info(
            "%s: %s; retrying in %.2f s (attempt %d of %d)",
            self.provider, what, delay, attempt + 1, self.retry.max_attempts,
        )
        await self._sleep(delay)

    async def _http_error(self, response: httpx.Response) -> UpstreamHTTPError:
        raw = b""
        try:
            raw = await read_head(response, _ERROR_BODY_LIMIT)
        except (httpx.TransportError, httpx.DecodingError):
            pass  # the status says enough
        finally:
            await _close(response)
        body = self.redact(raw.decode("utf-8", "replace"))
        retry_after = parse_retry_after(response.headers, self._clock)
        if retry_after is None:
            retry_after = retry_delay_in_body(body)
        log.info(
            "%s: HTTP %d from %s: %s",
            self.provider, response.status_code, self.redact(str(response.url)), body,
        )
        return UpstreamHTTPError(
            f"{self.provider}: HTTP {response.status_code}",
            status_code=response.status_code,
            body=body,
            retry_after=retry_after,
        )

    async def _pump(
        self,
        response: httpx.Response,
        chunks: AsyncIterator[bytes],
        first: bytes,
        progress: Progress[ResponsePart],
        token: CancellationToken,
        ctx: ErrorContext,
        state: _Exchange,
    ) -> ChatResult:
        content_type = response.headers.get("content-type", "")
        stream = self.body_decoder(content_type)
        if stream is None:
            raise await self._json_instead_of_stream(first, chunks, ctx)
        decoder = state.decoder = stream.decoder
        chunk: bytes | None = first
        reported = 0
        received = 0
        limit = self.max_answer_bytes
        end_marker = False
        while chunk is not None:
            received += len(chunk)
            if received > limit > 0:
                log.info("%s: the answer passed %d bytes; cut there", self.provider, limit)
                raise LanguageModelError(
                    f"{self.provider}: the answer passed {limit:,} bytes without ending, so it "
                    f"was cut there (the upstream at {self.base_url} is broken or hostile)"
                )
            reported += self._report(stream.feed(chunk), progress, token)
            if decoder.error is not None:
                raise map_stream_error(decoder.error, ctx) from decoder.error
            if decoder.closed:
                # The format's end marker: what follows does not matter, but reading to the
                # end lets the connection be reused and the upstream see a clean finish.
                end_marker = True
                await _drain(chunks, self.drain_timeout)
                break
            try:
                chunk = await anext(chunks)
            except StopAsyncIteration:
                chunk = None
            except httpx.TransportError as exc:
                log.info(
                    "%s: the stream broke off: %s", self.provider, self.redact(repr(exc))
                )
                raise map_transport_error(exc, ctx, streaming=True) from exc
        reported += self._report(stream.close(), progress, token)
        _log_unhandled(self.format, decoder)
        if decoder.error is not None:
            raise map_stream_error(decoder.error, ctx) from decoder.error
        if not end_marker and decoder.finish_reason is None:
            if token.is_cancellation_requested:
                raise asyncio.CancelledError  # the cancel closed the stream: the caller's doing
            # The body ended with neither the format's end marker nor a finish reason: the
            # upstream stopped (or a proxy cut it) mid-answer. Ending quietly would pass a
            # truncated answer (or, for a page that is no event stream, an empty one) for whole.
            raise self._ended_early(content_type, first, reported, ctx)
        if reported == 0 and decoder.finish_reason is FinishReason.CONTENT_FILTER:
            # VS Code would show an empty answer with no reason: say what happened.
            raise LanguageModelError.blocked(
                f"{self.provider}: the upstream's content filter stopped the answer before it "
                "began; rephrase the request or try another model"
            )
        log.debug(
            "%s: done: finish=%s usage=%s", self.provider, decoder.raw_finish_reason, decoder.usage
        )
        return ChatResult(decoder.usage or Usage(), decoder.finish_reason)

    @staticmethod
    def _report(
        parts: list[ResponsePart], progress: Progress[ResponsePart], token: CancellationToken
    ) -> int:
        for part in parts:
            if token.is_cancellation_requested:
                # the task's cancel is on its way; stop reporting now
                raise asyncio.CancelledError
            progress.report(part)
        return len(parts)

    def _ended_early(
        self, content_type: str, first: bytes, reported: int, ctx: ErrorContext
    ) -> LanguageModelError:
        if reported == 0 and "event-stream" not in content_type:
            seen = self.redact(first[:200].decode("utf-8", "replace"))
            log.info("%s: a %s answer instead of an event stream: %s", self.provider,
                     content_type or "untyped", seen)  # fmt: skip
            return LanguageModelError(
                f"{self.provider} answered with {content_type or 'an untyped body'}, not an event "
                f"stream ({seen[:80]!r}); is the baseUrl {self.base_url} right, or did a proxy "
                "or a network sign-in page answer instead?"
            )
        log.info("%s: the stream ended without its end", self.provider)
        return LanguageModelError(
            f"the stream from {ctx.provider} ended before the answer did (no finish reason, no "
            "end marker): the upstream stopped or the connection was cut; the text so far is "
            "kept; try again"
        )

    async def _json_instead_of_stream(
        self, first: bytes, chunks: AsyncIterator[bytes], ctx: ErrorContext
    ) -> LanguageModelError:
        raw = await head_of(chunks, _ERROR_BODY_LIMIT, first)
        body = self.redact(raw.decode("utf-8", "replace"))
        log.info("%s: a JSON answer instead of an event stream: %s", self.provider, body)
        info = error_info(body)
        return LanguageModelError(
            f"{self.provider} answered with a JSON document instead of an event stream "
            f"({ctx.redact(info.message)}); is 'format': {self.format!r} right for {self.base_url}?"
        )


_unhandled_logged: set[tuple[str, str]] = set()


def _log_unhandled(format: str, decoder: StreamDecoder) -> None:
    """Log, once per process and type, the event types a stream carried that its decoder
    ignored (at debug level: they are expected, but a new one should leave a trace)."""
    for kind in sorted(decoder.unhandled):
        if (format, kind) not in _unhandled_logged:
            _unhandled_logged.add((format, kind))
            log.debug("%s: ignored %r events (nothing in them is used)", format, kind[:80])


async def _drain(chunks: AsyncIterator[bytes], timeout: float) -> None:
    async def consume() -> None:
        async for _ in chunks:
            pass

    # an upstream that keeps the stream open after its end marker is simply closed
    with contextlib.suppress(asyncio.TimeoutError, httpx.TransportError):
        await asyncio.wait_for(consume(), timeout)


async def _close(response: httpx.Response) -> None:
    """Close ``response`` to the end, even when the task is cancelled meanwhile.

    The exchange may stop itself when it sees the token fired (between two parts) while the
    token's cancel of its task is still on its way: that cancel then lands inside the close.
    (The host's own transport closes every body to the end too; this covers a client given
    another one.)
    """
    await run_to_the_end(response.aclose())


async def _first_chunk(chunks: AsyncIterator[bytes]) -> bytes:
    # Decoded chunks may be empty (compression); the first byte is the first non-empty one.
    async for chunk in chunks:
        if chunk:
            return chunk
    return b""


class _Stop:
    """Cancels the exchange task once, whoever asks first (the token or the caller's own
    cancellation; a cancelled request usually has both).

    A second cancellation would land in the middle of the response's close: httpcore closes
    the connection under an anyio shield, which a task's ``cancel()`` goes through, so the
    connection stayed open and the upstream went on generating (and billing) to the end of
    its answer.
    """

    __slots__ = ("done", "task")

    def __init__(self, task: asyncio.Task[ChatResult]) -> None:
        self.task = task
        self.done = False

    def __call__(self) -> None:
        if not self.done:
            self.done = True
            self.task.cancel()


async def _settle(exchange: asyncio.Task[ChatResult], stop: _Stop) -> bool:
    """Wait until ``exchange`` has ended (its connection closed); return whether the calling
    task was cancelled meanwhile. The caller's cancellation does not reach the exchange
    directly (the shield): it stops the exchange once through ``stop`` and waits for it."""
    caller_cancelled = False
    while not exchange.done():
        try:
            await asyncio.shield(exchange)
        except asyncio.CancelledError:
            # the caller's own cancellation, unless this is only the exchange ending as
            # cancelled (by the token) with no cancel of the caller
            if not exchange.done() or not exchange.cancelled() or _cancelling():
                caller_cancelled = True
                stop()
    return caller_cancelled


def _cancelling() -> bool:
    # Whether the current task itself is being cancelled (Python 3.11+ can tell).
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling()) if cancelling is not None else False


def _fired(token: CancellationToken) -> bool:
    # a call, so that type checkers do not carry an earlier check of the property over an await
    return token.is_cancellation_requested
