"""The upstream clients over real HTTP, against the replay server on 127.0.0.1.

For every wire format: streamed text and tool calls arrive as the format's decoder makes them,
with usage; the request carries the converted messages, tools, tool choice, output budget and
credentials; the stream ends cleanly. Retries honour Retry-After and stop once the body began;
HTTP errors are mapped; cancellation mid-stream closes the connection (the server sees it) and
nothing is reported after; the catalog is fetched, cached and its changes reported. The API
key never appears in a log line (httpx and httpcore debug logs included) or an error.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from lmbridge.config import ProviderContext, ProviderEntry, parse_entries
from lmbridge.errors import ConfigError, LanguageModelError
from lmbridge.gateway import (
    AISDKClient,
    AnthropicClient,
    ChatCompletionsClient,
    ModelCatalog,
    ResponsesClient,
    RetryPolicy,
    UpstreamClient,
    build_provider,
)
from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    FinishReason,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolMode,
    ToolResultPart,
)
from lmbridge.provider import CancellationTokenSource, ModelInformationOptions, respond
from support.replay_server import ReplayServer, Reply
from support.streams import decode_body, fixture_body, fixture_lines, sse_body

KEY = "sk-http-DO-NOT-LEAK-9876543210"

# format -> client class, path, text fixture, tool fixture
FORMATS: dict[str, tuple[type[UpstreamClient], str, str, str]] = {
    "chat-completions": (
        ChatCompletionsClient,
        "/v1/chat/completions",
        "openai-chat/openai-text.chunks.txt",
        "deepseek/deepseek-tool-call.chunks.txt",
    ),
    "responses": (
        ResponsesClient,
        "/v1/responses",
        "open-responses/lmstudio-basic.1.chunks.txt",
        "open-responses/lmstudio-tool-call.1.chunks.txt",
    ),
    "anthropic": (
        AnthropicClient,
        "/v1/messages",
        "anthropic/anthropic-text.chunks.txt",
        "anthropic/anthropic-json-tool.1.chunks.txt",
    ),
    "ai-sdk": (
        AISDKClient,
        "/v1/chat",
        "ai-sdk/fullstream/text-deltas.jsonl",
        "ai-sdk/fullstream/tool-input-deltas.jsonl",
    ),
}
REQUIRED_CHOICE: dict[str, Any] = {
    "chat-completions": ("tool_choice", "required"),
    "responses": ("tool_choice", "required"),
    "anthropic": ("tool_choice", {"type": "any"}),
    "ai-sdk": ("toolChoice", "required"),
}
MAX_FIELD = {
    "chat-completions": "max_tokens",
    "responses": "max_output_tokens",
    "anthropic": "max_tokens",
    "ai-sdk": "maxOutputTokens",
}

WEATHER = ChatTool(
    "weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
HISTORY = [
    ChatMessage.system("You are terse."),
    ChatMessage.user("Weather in Paris?"),
    ChatMessage.assistant([TextPart("Checking."), ToolCallPart("call_1", "weather", {"city": "Paris"})]),
    ChatMessage.user([ToolResultPart("call_1", [TextPart("sunny, 21 C")])]),
]


def body_of(rel: str) -> bytes:
    if rel.endswith(".jsonl"):
        return sse_body(fixture_lines(rel))
    return fixture_body(rel)


def reply(rel: str, **kwargs: Any) -> Reply:
    return Reply.sse(body_of(rel), **kwargs)


class Recorder:
    def __init__(self, cancel_after: int | None = None, source: CancellationTokenSource | None = None) -> None:
        self.parts: list[ResponsePart] = []
        self.cancel_after = cancel_after
        self.source = source

    def report(self, value: ResponsePart) -> None:
        self.parts.append(value)
        if self.source is not None and len(self.parts) == self.cancel_after:
            self.source.cancel()


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    # trust_env=False: a proxy from the environment must not catch loopback traffic
    async with httpx.AsyncClient(trust_env=False, timeout=10) as client:
        yield client


def client_for(fmt: str, upstream: ReplayServer, http: httpx.AsyncClient, **kwargs: Any) -> UpstreamClient:
    kwargs.setdefault("sleep", Sleeps())
    kwargs.setdefault("retry", RetryPolicy(jitter=0.0))
    return FORMATS[fmt][0](
        http,
        base_url=upstream.url + "/v1",
        api_key=KEY,
        provider="replay",
        api_key_env="REPLAY_KEY",
        **kwargs,
    )


# --------------------------------------------------------------------------- streams per format


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("kind", ["text", "tool"])
async def test_stream_over_http(fmt: str, kind: str, upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    _, path, text_rel, tool_rel = FORMATS[fmt]
    rel = text_rel if kind == "text" else tool_rel
    upstream.route("POST", path, reply(rel))
    client = client_for(fmt, upstream, http)
    options = ChatRequestOptions(
        tools=[WEATHER], tool_mode=ToolMode.REQUIRED, model_options={"max_tokens": 256, "temperature": 0.5}
    )
    progress = Recorder()
    result = await client.stream("model-x", HISTORY, options, progress)

    expected = decode_body(fmt, [body_of(rel)])
    assert progress.parts == expected.parts
    assert result.usage == expected.usage and result.usage.input_tokens
    assert result.finish_reason == expected.finish_reason
    if kind == "tool":
        calls = [p for p in progress.parts if isinstance(p, ToolCallPart)]
        assert calls and all(isinstance(c.input, dict) for c in calls)
        assert result.finish_reason == FinishReason.TOOL_CALLS
    else:
        assert any(isinstance(p, TextPart) and p.value for p in progress.parts)

    (request,) = upstream.requests
    assert request.wait_done()
    assert not request.closed_early  # read to the end: a clean finish, not a disconnect
    body = request.json()
    assert body["model"] == "model-x"
    key, value = REQUIRED_CHOICE[fmt]
    assert body[key] == value
    assert body[MAX_FIELD[fmt]] == 256
    assert body["temperature"] == 0.5
    text = json.dumps(body)
    assert "Weather in Paris?" in text and "call_1" in text and "sunny, 21 C" in text
    assert "Current weather for a city" in text
    if fmt == "anthropic":
        assert request.headers["x-api-key"] == KEY
        assert request.headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in request.headers
    else:
        assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["accept"] == "text/event-stream"


async def test_parts_arrive_while_the_upstream_is_still_sending(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    _, path, rel, _ = FORMATS["anthropic"]
    upstream.route("POST", path, reply(rel, delay=0.05))
    client = client_for("anthropic", upstream, http)
    seen_while_open: list[bool] = []

    class Watch(Recorder):
        def report(self, value: ResponsePart) -> None:
            super().report(value)
            seen_while_open.append(upstream.requests[0].ended_at is None)

    await client.stream("c", HISTORY, None, Watch())
    assert seen_while_open and seen_while_open[0] is True


# --------------------------------------------------------------------------- retries


async def test_retries_honour_retry_after_then_stream(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    _, path, rel, _ = FORMATS["chat-completions"]
    upstream.route(
        "POST",
        path,
        [Reply.error(429, retry_after=2), Reply.error(503), Reply.error(502, retry_after=1), reply(rel)],
    )
    sleeps = Sleeps()
    client = client_for(
        "chat-completions", upstream, http, sleep=sleeps,
        retry=RetryPolicy(max_attempts=4, initial_delay=0.25, jitter=0),
    )
    progress = Recorder()
    result = await client.stream("m", HISTORY, None, progress)
    assert [r.status for r in upstream.requests] == [429, 503, 502, 200]
    assert sleeps.waits == [2.0, 0.5, 1.0]  # Retry-After, backoff for attempt 2, Retry-After
    assert result.finish_reason == FinishReason.STOP
    assert progress.parts == decode_body("chat-completions", [body_of(rel)]).parts
    assert len({r.body for r in upstream.requests}) == 1  # the same request each time


async def test_retry_after_as_an_http_date(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    _, path, rel, _ = FORMATS["responses"]
    upstream.route(
        "POST", path, [Reply.error(503, retry_after="Wed, 01 Jan 2025 00:00:05 GMT"), reply(rel)]
    )
    sleeps = Sleeps()
    client = client_for("responses", upstream, http, sleep=sleeps, clock=lambda: 1735689600.0)
    await client.stream("m", HISTORY, None, Recorder())
    assert sleeps.waits == [5.0]
    assert len(upstream.requests) == 2


async def test_attempts_are_capped(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    upstream.route("POST", "/v1/messages", Reply.error(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    sleeps = Sleeps()
    client = client_for("anthropic", upstream, http, sleep=sleeps, retry=RetryPolicy(max_attempts=3, jitter=0))
    with pytest.raises(LanguageModelError, match=r"overloaded \(HTTP 529 after 3 attempts: Overloaded\)"):
        await client.stream("c", HISTORY, None, Recorder())
    assert len(upstream.requests) == 3 and len(sleeps.waits) == 2


async def test_no_retry_after_the_first_byte(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    body = body_of(FORMATS["anthropic"][3])
    cut = body[: body.index(b"input_json_delta") + 200]
    cut = cut[: cut.rindex(b"\n\n") + 2]  # whole events, but the stream stops mid tool call
    upstream.route("POST", "/v1/messages", [Reply.sse(cut), reply(FORMATS["anthropic"][3])])
    sleeps = Sleeps()
    client = client_for("anthropic", upstream, http, sleep=sleeps)
    progress = Recorder()
    with pytest.raises(LanguageModelError, match="cannot read"):
        await client.stream("c", HISTORY, None, progress)
    assert len(upstream.requests) == 1 and sleeps.waits == []
    assert not any(isinstance(p, ToolCallPart) for p in progress.parts)  # no half tool call


async def test_connection_refused_is_retried_then_explained(http: httpx.AsyncClient) -> None:
    with ReplayServer() as gone:
        url = gone.url
    sleeps = Sleeps()
    client = ChatCompletionsClient(
        http, base_url=url + "/v1", api_key=KEY, provider="replay", sleep=sleeps,
        retry=RetryPolicy(max_attempts=3, jitter=0),
    )
    with pytest.raises(LanguageModelError, match=r"cannot reach replay at http://127\.0\.0\.1:\d+/v1 after 3 attempts"):
        await client.stream("m", HISTORY, None, Recorder())
    assert len(sleeps.waits) == 2


# --------------------------------------------------------------------------- errors


ANTHROPIC_ERRORS = {
    401: {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
    404: {"type": "error", "error": {"type": "not_found_error", "message": "model: claude-nope"}},
    429: {"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}},
    400: {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}},
}
OPENAI_ERRORS = {
    401: {"error": {"message": "Incorrect API key provided: sk-ab***cd.", "type": "invalid_request_error", "code": "invalid_api_key"}},
    404: {"error": {"message": "The model `gpt-nope` does not exist or you do not have access to it.", "type": "invalid_request_error", "code": "model_not_found"}},
    429: {"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}},
    400: {"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}},
}
EXPECTED = {
    401: ("NoPermissions", "set the API key with the command 'lmbridge: Set API Key' or the environment variable REPLAY_KEY"),
    404: ("NotFound", "was not found at replay"),
    429: ("Blocked", "retry in 30 s"),
    400: ("Unknown", "the conversation is too long for model"),
}


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("status", [401, 404, 429, 400])
async def test_http_errors_are_mapped(fmt: str, status: int, upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    errors = ANTHROPIC_ERRORS if fmt == "anthropic" else OPENAI_ERRORS
    upstream.route("POST", FORMATS[fmt][1], Reply.error(status, errors[status], retry_after=30))
    client = client_for(fmt, upstream, http, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(LanguageModelError) as info:
        await client.stream("gpt-nope", HISTORY, None, Recorder())
    code, words = EXPECTED[status]
    assert info.value.code == code
    assert words in info.value.message
    assert len(upstream.requests) == 1


async def test_the_key_never_reaches_logs_or_errors(
    upstream: ReplayServer, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx and httpcore trace included
    upstream.route(
        "POST",
        "/v1/chat/completions",
        [
            Reply.error(500, {"error": {"message": f"internal: saw key {KEY}"}}),
            Reply.error(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}}),
        ],
    )
    upstream.route("GET", "/v1/models", Reply.error(401, {"error": {"message": f"bad key {KEY}"}}))
    client = client_for("chat-completions", upstream, http)
    with pytest.raises(LanguageModelError) as chat_error:
        await client.stream("m", HISTORY, None, Recorder())
    with pytest.raises(LanguageModelError) as catalog_error:
        await ModelCatalog(client).models()
    assert upstream.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "saw key [redacted]" in logged
    for err in (chat_error.value, catalog_error.value):
        assert err.code == "NoPermissions"
        for text in (str(err), repr(err), str(err.__cause__), getattr(err.__cause__, "body", "")):
            assert KEY not in text
    assert KEY not in logged


# --------------------------------------------------------------------------- cancellation


@pytest.mark.parametrize("fmt", list(FORMATS))
async def test_cancellation_closes_the_connection_and_reports_nothing_after(
    fmt: str, upstream: ReplayServer, http: httpx.AsyncClient
) -> None:
    _, path, rel, _ = FORMATS[fmt]
    upstream.route("POST", path, reply(rel, delay=0.02, hang=True, hang_timeout=20))
    client = client_for(fmt, upstream, http)
    source = CancellationTokenSource()
    progress = Recorder(cancel_after=2, source=source)
    result = await asyncio.wait_for(client.stream("m", HISTORY, None, progress, source.token), 10)
    assert result.finish_reason == FinishReason.CANCELLED
    assert len(progress.parts) == 2
    (request,) = upstream.requests
    assert await asyncio.to_thread(request.wait_done, 5)
    assert request.closed_early  # the upstream saw the connection close
    assert request.chunks_sent < len(body_of(rel).split(b"\n\n")) - 1
    await asyncio.sleep(0.1)
    assert len(progress.parts) == 2  # and nothing came after


async def test_cancellation_from_another_thread_while_waiting_for_bytes(
    upstream: ReplayServer, http: httpx.AsyncClient
) -> None:
    # the upstream sends nothing for a long time (a model thinking); cancel arrives meanwhile
    upstream.route("POST", "/v1/responses", Reply(headers={"Content-Type": "text/event-stream"}, chunks=[b""], hang=True))
    client = client_for("responses", upstream, http)
    source = CancellationTokenSource()
    loop = asyncio.get_running_loop()
    loop.call_later(0.2, lambda: loop.run_in_executor(None, source.cancel))
    started = loop.time()
    result = await asyncio.wait_for(client.stream("m", HISTORY, None, Recorder(), source.token), 10)
    assert result.finish_reason == FinishReason.CANCELLED
    assert loop.time() - started < 5
    assert await asyncio.to_thread(upstream.requests[0].wait_done, 5)
    assert upstream.requests[0].closed_early


class _SlowClose(httpx.AsyncByteStream):
    """A real response body whose close takes a while, as httpcore's does: on an error while
    reading it closes the connection before re-raising, and once a close began, ``aclose`` does
    nothing more. The wait is room for another cancellation to land in the middle of closing."""

    def __init__(self, stream: httpx.AsyncByteStream, closing: asyncio.Event) -> None:
        self.stream = stream
        self.closing = closing
        self.began = False
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.stream:
                yield chunk
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        if self.began:
            return
        self.began = True
        self.closing.set()
        await asyncio.sleep(0.2)
        await self.stream.aclose()
        self.closed = True


class _SlowCloseTransport(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.real = httpx.AsyncHTTPTransport()
        self.closing = asyncio.Event()
        self.bodies: list[_SlowClose] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.real.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        body = _SlowClose(response.stream, self.closing)
        self.bodies.append(body)
        return httpx.Response(
            response.status_code, headers=response.headers, stream=body,
            extensions=response.extensions,
        )  # fmt: skip

    async def aclose(self) -> None:
        await self.real.aclose()


# One chunk holding two parts (thinking, then text), and the stream stays open.
_TWO_PARTS = Reply(
    headers={"Content-Type": "text/event-stream"},
    chunks=[
        b'data: {"choices":[{"index":0,"delta":{"reasoning_content":"Hm."}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    ],
    hang=True,
    hang_timeout=20,
)


@pytest.mark.parametrize("landing", ["reading", "reporting"])
async def test_a_cancelled_request_closes_its_connection_whatever_else_cancels_it_meanwhile(
    landing: str, upstream: ReplayServer
) -> None:
    """The host cancels a request twice: its token (whose cancel of the exchange reaches the
    loop a step later) and its task. Any second cancellation that lands while the response
    closes stops the close half-way: the connection stayed open and the upstream went on
    generating to the end of its answer. The token fires on the first part: while the client
    is waiting for bytes ("reading": the cancel then lands in the read), or while a chunk's
    second part is still to report ("reporting": the client stops itself and the token's
    cancel arrives during the close). The caller is cancelled too, while the close runs."""
    if landing == "reading":
        rel = FORMATS["chat-completions"][2]
        upstream.route("POST", "/v1/chat/completions", reply(rel, delay=0.02, hang=True, hang_timeout=20))
    else:
        upstream.route("POST", "/v1/chat/completions", _TWO_PARTS)
    transport = _SlowCloseTransport()
    async with httpx.AsyncClient(transport=transport, trust_env=False, timeout=10) as http:
        client = client_for("chat-completions", upstream, http)
        source = CancellationTokenSource()
        progress = Recorder(cancel_after=1, source=source)
        call = asyncio.ensure_future(client.stream("m", HISTORY, None, progress, source.token))
        await asyncio.wait_for(transport.closing.wait(), 10)
        call.cancel()  # while the close is under way
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(call, 10)
        (body,) = transport.bodies
        assert body.closed  # the close ran to its end
        (request,) = upstream.requests
        assert await asyncio.to_thread(request.wait_done, 5)
        assert request.closed_early  # and the upstream saw the connection close
        assert len(progress.parts) == 1  # nothing was reported after the token fired


async def test_cancellation_interrupts_the_retry_wait(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    upstream.route("POST", "/v1/chat/completions", Reply.error(503, retry_after=30))
    client = client_for("chat-completions", upstream, http, sleep=asyncio.sleep)
    source = CancellationTokenSource()
    loop = asyncio.get_running_loop()

    async def cancel_once_asked() -> None:
        # once the upstream has the first request (its 503 says: again in 30 s)
        await asyncio.to_thread(upstream.wait_for_requests, 1, 10.0)
        source.cancel()

    canceller = asyncio.ensure_future(cancel_once_asked())
    started = loop.time()
    result = await client.stream("m", HISTORY, None, Recorder(), source.token)
    await canceller
    assert result.finish_reason == FinishReason.CANCELLED
    assert loop.time() - started < 5
    assert len(upstream.requests) == 1


# --------------------------------------------------------------------------- catalog and provider

GATEWAY = {
    "object": "list",
    "data": [
        {
            "id": "anthropic/claude-sonnet-4",
            "object": "model",
            "owned_by": "anthropic",
            "name": "Claude Sonnet 4",
            "context_window": 200000,
            "max_tokens": 64000,
            "type": "language",
            "tags": ["tool-use", "vision", "reasoning"],
        },
        {"id": "openai/text-embedding-3-small", "object": "model", "type": "embedding"},
    ],
}


async def test_catalog_over_http_with_ttl_and_change_event(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    changed = {**GATEWAY, "data": [*GATEWAY["data"], {"id": "xai/grok-4", "type": "language", "context_window": 256000, "max_tokens": 32000, "tags": ["tool-use"]}]}
    upstream.route("GET", "/v1/models", [Reply.json(GATEWAY), Reply.json(GATEWAY), Reply.json(changed)])
    now = [0.0]
    events: list[str] = []
    client = client_for("chat-completions", upstream, http)
    catalog = ModelCatalog(client, ttl=30, clock=lambda: now[0], on_change=lambda: events.append("changed"))
    first = await catalog.models()
    assert [m.info.id for m in first] == ["anthropic/claude-sonnet-4"]
    info = first[0].info
    assert (info.max_input_tokens, info.max_output_tokens, info.detail) == (150_000, 50_000, "replay")
    assert info.capabilities.tool_calling is True and info.capabilities.image_input is True
    await catalog.models()
    assert len(upstream.requests) == 1  # cached
    now[0] = 31
    await catalog.models()
    assert len(upstream.requests) == 2 and events == []  # refetched, unchanged
    now[0] = 62
    third = await catalog.models()
    assert [m.info.id for m in third] == ["anthropic/claude-sonnet-4", "xai/grok-4"]
    assert events == ["changed"]
    assert upstream.requests[0].headers["authorization"] == f"Bearer {KEY}"


def _entry(upstream: ReplayServer, **fields: Any) -> ProviderEntry:
    raw = {"name": "gw", "format": "anthropic", "baseUrl": upstream.url + "/v1", **fields}
    parsed = parse_entries([raw])[0]
    assert isinstance(parsed, ProviderEntry)
    return parsed


async def test_a_configured_provider_end_to_end(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    rel = FORMATS["anthropic"][3]
    upstream.route("GET", "/v1/models", Reply.json(GATEWAY))
    upstream.route("POST", "/v1/messages", reply(rel))
    provider = build_provider(
        _entry(upstream, extraBody={"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}}),
        ProviderContext(name="gw", api_key=KEY),
        http=http,
    )
    (model,) = await provider.provide_language_model_chat_information(ModelInformationOptions(), source_token())
    parts: list[ResponsePart] = []
    result = await respond(provider, model, HISTORY, ChatRequestOptions(tools=[WEATHER]), parts.append)
    assert parts == decode_body("anthropic", [body_of(rel)]).parts
    assert result.finish_reason == FinishReason.TOOL_CALLS
    posted = upstream.requests_to("/v1/messages")[0].json()
    assert posted["max_tokens"] == 50_000
    assert posted["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}
    assert posted["tool_choice"] == {"type": "auto"}


@pytest.mark.parametrize(("setting", "shown"), [("part", "part"), ("text", "text"), ("off", None), ("drop", None)])
async def test_the_thinking_setting_shows_reasoning_as_parts_as_text_or_not_at_all(
    upstream: ReplayServer, http: httpx.AsyncClient, setting: str, shown: str | None
) -> None:
    rel = "anthropic/anthropic-clear-thinking.1.chunks.txt"
    upstream.route("POST", "/v1/messages", reply(rel))
    provider = build_provider(
        _entry(upstream, models=["claude-sonnet-4-5"], thinking=setting),
        ProviderContext(name="gw", api_key=KEY),
        http=http,
    )
    (model,) = await provider.provide_language_model_chat_information(ModelInformationOptions(), source_token())
    parts: list[ResponsePart] = []
    await respond(provider, model, HISTORY, ChatRequestOptions(), parts.append)
    as_parts = decode_body("anthropic", [body_of(rel)]).parts
    reasoning = "".join(p.value for p in as_parts if isinstance(p, ThinkingPart) and isinstance(p.value, str))
    assert reasoning.strip()
    got_thinking = [p for p in parts if isinstance(p, ThinkingPart)]
    text = "".join(p.value for p in parts if isinstance(p, TextPart))
    if shown == "part":
        assert parts == as_parts
    elif shown == "text":
        assert not got_thinking and reasoning.strip()[:40] in text
    else:
        assert not got_thinking and reasoning.strip()[:40] not in text
        assert text == "".join(p.value for p in as_parts if isinstance(p, TextPart))


async def test_a_provider_cancelled_through_respond_closes_the_upstream(
    upstream: ReplayServer, http: httpx.AsyncClient
) -> None:
    rel = FORMATS["chat-completions"][2]
    upstream.route("POST", "/v1/chat/completions", reply(FORMATS["chat-completions"][2], delay=0.05, hang=True))
    provider = build_provider(
        _entry(upstream, format="chat-completions", models=["deepseek-chat"]),
        ProviderContext(name="gw", api_key=KEY),
        http=http,
    )
    (model,) = await provider.provide_language_model_chat_information(ModelInformationOptions(), source_token())
    source = CancellationTokenSource()
    parts: list[ResponsePart] = []

    def on_part(part: ResponsePart) -> None:
        # Cancel once the stream is flowing (not on a timer: a loaded machine may not have sent
        # the request yet), while the upstream still has chunks to send.
        parts.append(part)
        source.cancel()

    result = await asyncio.wait_for(
        respond(provider, model, HISTORY, ChatRequestOptions(), on_part, source.token), 30
    )
    assert result.finish_reason == FinishReason.CANCELLED
    assert await asyncio.to_thread(upstream.requests[0].wait_done, 30)
    assert upstream.requests[0].closed_early
    assert len(parts) < len(decode_body("chat-completions", [body_of(rel)]).parts) or not parts


def source_token() -> Any:
    return CancellationTokenSource().token


async def test_a_content_filter_stop_before_any_text_is_blocked_not_empty(
    upstream: ReplayServer, http: httpx.AsyncClient
) -> None:
    body = (
        b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    upstream.route("POST", FORMATS["chat-completions"][1], Reply.sse(body))
    client = client_for("chat-completions", upstream, http, retry=RetryPolicy(max_attempts=1))
    recorder = Recorder()
    with pytest.raises(LanguageModelError) as info:
        await client.stream("gpt-x", HISTORY, None, recorder)
    assert info.value.code == "Blocked"
    assert "content filter" in info.value.message


async def test_the_key_can_go_in_a_named_header_for_azure_style_upstreams(
    upstream: ReplayServer, http: httpx.AsyncClient
) -> None:
    rel = FORMATS["chat-completions"][3]
    upstream.route("POST", "/v1/chat/completions", reply(rel))
    raw = {
        "name": "az", "format": "chat-completions", "baseUrl": upstream.url + "/v1",
        "apiKeyHeader": "api-key", "models": ["gpt-4o"],
    }
    entry = parse_entries([raw])[0]
    assert isinstance(entry, ProviderEntry)
    provider = build_provider(entry, ProviderContext(name="az", api_key=KEY), http=http)
    (model,) = await provider.provide_language_model_chat_information(ModelInformationOptions(), source_token())
    await respond(provider, model, HISTORY, ChatRequestOptions(), [].append)
    headers = upstream.requests_to("/v1/chat/completions")[0].headers
    assert headers["api-key"] == KEY
    assert "authorization" not in headers
    with pytest.raises(ConfigError, match="apiKeyHeader"):
        build_provider(
            parse_entries([{**raw, "apiKeyHeader": "bad header"}])[0],  # type: ignore[arg-type]
            ProviderContext(name="az", api_key=KEY),
            http=http,
        )


async def test_event_types_a_decoder_ignores_are_logged_once_per_type_at_debug(
    upstream: ReplayServer, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing is ignored without a trace: a new upstream event type shows in the debug log
    the first time it arrives, and only then."""
    lines = [
        '{"type":"message_start","message":{"id":"m1","role":"assistant","content":[],'
        '"usage":{"input_tokens":3,"output_tokens":0}}}',
        '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}',
        '{"type":"brand_new_event_kind","x":1}',
        '{"type":"ping"}',
        '{"type":"brand_new_event_kind","x":2}',
        '{"type":"content_block_stop","index":0}',
        '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}',
        '{"type":"message_stop"}',
    ]
    body = sse_body(lines, event_lines=True)
    upstream.route("POST", "/v1/messages", Reply.sse(body))
    client = client_for("anthropic", upstream, http)
    with caplog.at_level(logging.DEBUG, logger="lmbridge.gateway"):
        for _ in range(2):
            progress = Recorder()
            await client.stream("model-x", HISTORY, ChatRequestOptions(), progress)
            assert [p for p in progress.parts if isinstance(p, TextPart)] == [TextPart("hi")]
    ignored = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    assert ignored.count("anthropic: ignored 'brand_new_event_kind' events (nothing in them is used)") == 1
    assert all(r.levelno == logging.DEBUG for r in caplog.records if "ignored" in r.getMessage())
