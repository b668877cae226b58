"""The upstream clients with the network swapped for a function (``httpx.MockTransport``).

What needs no real socket is tested here: request bodies and headers per format, parts
reported exactly as the format's decoder produces them, retries (counted, with a fake sleep),
no retry once the body began, error mapping, and that the API key never reaches a log line or
an error message. Connection-level behaviour (the upstream seeing the connection close on
cancellation) is tested over real HTTP in ``test_gateway_http.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from lmbridge.errors import LanguageModelError
from lmbridge.gateway import (
    AISDKClient,
    AnthropicClient,
    ChatCompletionsClient,
    ResponsesClient,
    RetryPolicy,
    UpstreamClient,
)
from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    FinishReason,
    ResponsePart,
    TextPart,
    ToolCallPart,
    ToolMode,
    ToolResultPart,
)
from lmbridge.provider import CancellationTokenSource
from support.streams import decode_body, fixture_body, fixture_lines, sse_body

KEY = "sk-live-DO-NOT-LEAK-4242424242"

# format -> client class, text fixture, tool-call fixture
FORMATS: dict[str, tuple[type[UpstreamClient], str, str]] = {
    "chat-completions": (
        ChatCompletionsClient,
        "openai-chat/openai-text.chunks.txt",
        "deepseek/deepseek-tool-call.chunks.txt",
    ),
    "responses": (
        ResponsesClient,
        "open-responses/lmstudio-basic.1.chunks.txt",
        "open-responses/lmstudio-tool-call.1.chunks.txt",
    ),
    "anthropic": (
        AnthropicClient,
        "anthropic/anthropic-text.chunks.txt",
        "anthropic/anthropic-json-tool.1.chunks.txt",
    ),
    "ai-sdk": (
        AISDKClient,
        "ai-sdk/fullstream/text-deltas.jsonl",
        "ai-sdk/fullstream/tool-input-deltas.jsonl",
    ),
}


def body_of(rel: str) -> bytes:
    """The HTTP body for a fixture (AI SDK JSON lines become SSE ``data:`` events)."""
    if rel.endswith(".jsonl"):
        return sse_body(fixture_lines(rel))
    return fixture_body(rel)


def sse(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(
        status, headers={"content-type": "text/event-stream", **(headers or {})}, content=body
    )


Handler = Callable[[httpx.Request], httpx.Response]


@dataclass
class Script:
    """Answers requests in turn from a list of responses (or exceptions, or handlers)."""

    answers: list[httpx.Response | Exception | Handler]
    requests: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer) and not isinstance(answer, httpx.Response):
            return answer(request)
        return answer

    def body(self, i: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[i].content)


class Recorder:
    """A progress that records parts (and when each arrived, relative to events)."""

    def __init__(self, on_part: Callable[[ResponsePart], None] | None = None) -> None:
        self.parts: list[ResponsePart] = []
        self.on_part = on_part

    def report(self, value: ResponsePart) -> None:
        self.parts.append(value)
        if self.on_part is not None:
            self.on_part(value)


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def make(
    fmt: str,
    script: Script,
    *,
    sleep: Sleeps | None = None,
    retry: RetryPolicy | None = None,
    **kwargs: Any,
) -> tuple[UpstreamClient, httpx.AsyncClient]:
    cls = FORMATS[fmt][0]
    http = httpx.AsyncClient(transport=httpx.MockTransport(script))
    client = cls(
        http,
        base_url="https://upstream.test/v1",
        api_key=KEY,
        provider="acme",
        api_key_env="ACME_KEY",
        sleep=sleep or Sleeps(),
        retry=retry or RetryPolicy(jitter=0.0),
        **kwargs,
    )
    return client, http


HISTORY = [
    ChatMessage.system("You are terse."),
    ChatMessage.user("Weather in Paris?"),
    ChatMessage.assistant([TextPart("Checking."), ToolCallPart("call_1", "weather", {"city": "Paris"})]),
    ChatMessage.user([ToolResultPart("call_1", [TextPart("sunny, 21 C")])]),
]
WEATHER = ChatTool(
    "weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


# --------------------------------------------------------------------------- streaming per format


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("kind", ["text", "tool"])
async def test_reports_exactly_the_decoders_parts_with_usage(fmt: str, kind: str) -> None:
    rel = FORMATS[fmt][1 if kind == "text" else 2]
    body = body_of(rel)
    expected = decode_body(fmt, [body])
    assert expected.error is None and expected.parts
    script = Script([sse(body)])
    client, http = make(fmt, script)
    progress = Recorder()
    async with http:
        result = await client.stream("m-1", HISTORY, ChatRequestOptions(tools=[WEATHER]), progress)
    assert progress.parts == expected.parts
    assert result.usage == expected.usage
    assert result.usage.input_tokens is not None
    assert result.finish_reason == expected.finish_reason
    if kind == "tool":
        assert any(isinstance(p, ToolCallPart) for p in progress.parts)
        assert result.finish_reason == FinishReason.TOOL_CALLS
    assert len(script.requests) == 1


# --------------------------------------------------------------------------- request shape


def _tool_names(fmt: str, body: dict[str, Any]) -> list[str]:
    tools = body["tools"]
    if fmt == "chat-completions":
        return [t["function"]["name"] for t in tools]
    if fmt == "ai-sdk":
        return list(tools)
    return [t["name"] for t in tools]


REQUIRED_CHOICE = {
    "chat-completions": "required",
    "responses": "required",
    "anthropic": {"type": "any"},
    "ai-sdk": "required",
}
MAX_FIELD = {
    "chat-completions": "max_tokens",
    "responses": "max_output_tokens",
    "anthropic": "max_tokens",
    "ai-sdk": "maxOutputTokens",
}
TOP_P_FIELD = {"chat-completions": "top_p", "responses": "top_p", "anthropic": "top_p", "ai-sdk": "topP"}
ENDPOINT = {
    "chat-completions": "https://upstream.test/v1/chat/completions",
    "responses": "https://upstream.test/v1/responses",
    "anthropic": "https://upstream.test/v1/messages",
    "ai-sdk": "https://upstream.test/v1/chat",
}


@pytest.mark.parametrize("fmt", list(FORMATS))
async def test_request_body_and_headers(fmt: str) -> None:
    script = Script([sse(body_of(FORMATS[fmt][1]))])
    client, http = make(fmt, script)
    options = ChatRequestOptions(
        tools=[WEATHER],
        tool_mode=ToolMode.REQUIRED,
        model_options={"temperature": 0.3, "top_p": 0.9, "max_tokens": 321},
    )
    async with http:
        await client.stream("m-1", HISTORY, options, Recorder())
    request = script.requests[0]
    body = script.body()
    assert request.method == "POST"
    assert str(request.url) == ENDPOINT[fmt]
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    if fmt == "anthropic":
        assert request.headers["x-api-key"] == KEY
        assert request.headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in request.headers
    else:
        assert request.headers["authorization"] == f"Bearer {KEY}"
    assert body["model"] == "m-1"
    assert _tool_names(fmt, body) == ["weather"]
    assert body.get("toolChoice" if fmt == "ai-sdk" else "tool_choice") == REQUIRED_CHOICE[fmt]
    assert body[MAX_FIELD[fmt]] == 321
    assert body["temperature"] == 0.3
    assert body[TOP_P_FIELD[fmt]] == 0.9
    if fmt != "ai-sdk":
        assert body["stream"] is True
    # the converted history: the tool call and its result made it, in the format's words
    text = json.dumps(body)
    assert "call_1" in text and "sunny, 21 C" in text and "Weather in Paris?" in text


async def test_anthropic_max_tokens_defaults_to_the_models_reserve() -> None:
    script = Script([sse(body_of(FORMATS["anthropic"][1]))] * 3)
    client, http = make("anthropic", script)
    async with http:
        await client.stream("c", HISTORY, None, Recorder(), default_max_tokens=50_000)
        await client.stream("c", HISTORY, None, Recorder())
        await client.stream(
            "c", HISTORY, ChatRequestOptions(model_options={"max_tokens": 60_000}), Recorder(),
            default_max_tokens=50_000,
        )
    assert [script.body(i)["max_tokens"] for i in range(3)] == [50_000, 4096, 60_000]


async def test_chat_completions_sends_no_max_tokens_unless_asked_and_honours_the_field_option() -> None:
    script = Script([sse(body_of(FORMATS["chat-completions"][1]))] * 2)
    client, http = make(
        "chat-completions", script, converter_options={"max_tokens_field": "max_completion_tokens"}
    )
    async with http:
        await client.stream("o3", HISTORY, None, Recorder(), default_max_tokens=1000)
        await client.stream("o3", HISTORY, ChatRequestOptions(model_options={"maxTokens": 77}), Recorder())
    assert "max_tokens" not in script.body(0) and "max_completion_tokens" not in script.body(0)
    assert script.body(1)["max_completion_tokens"] == 77
    assert "max_tokens" not in script.body(1)


async def test_extra_body_fills_in_and_merges_and_passthrough_options() -> None:
    script = Script([sse(body_of(FORMATS["anthropic"][1]))])
    client, http = make(
        "anthropic",
        script,
        extra_body={
            "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
            "metadata": {"user_id": "u1"},
            "temperature": 1.0,
        },
        headers={"anthropic-beta": "context-management-2025-06-27"},
    )
    options = ChatRequestOptions(
        model_options={"temperature": 0.2, "thinking": {"type": "enabled", "budget_tokens": 2048}, "not_allowed": 1}
    )
    async with http:
        await client.stream(
            "c", HISTORY, options, Recorder(), extra_body={"metadata": {"tier": "x"}}
        )
    body = script.body()
    assert body["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}
    assert body["metadata"] == {"user_id": "u1", "tier": "x"}  # nested objects merge
    assert body["temperature"] == 0.2  # the request wins over the configured default
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}  # passthrough option
    assert "not_allowed" not in body
    assert script.requests[0].headers["anthropic-beta"] == "context-management-2025-06-27"


async def test_a_conversation_the_converter_refuses_is_a_clear_error_and_sends_nothing() -> None:
    script = Script([sse(b"")])
    client, http = make("chat-completions", script, converter_options={"orphan_tool_result": "error"})
    orphan = [ChatMessage.user([ToolResultPart("nope", [TextPart("x")])])]
    async with http:
        with pytest.raises(LanguageModelError, match="cannot be sent as chat-completions"):
            await client.stream("m", orphan, None, Recorder())
    assert script.requests == []


# --------------------------------------------------------------------------- retries


async def test_retries_429_and_5xx_honouring_retry_after_then_streams() -> None:
    ok = body_of(FORMATS["chat-completions"][1])
    script = Script(
        [
            httpx.Response(429, headers={"retry-after": "3"}, json={"error": {"message": "slow down"}}),
            httpx.Response(503, json={"error": {"message": "busy"}}),
            httpx.ConnectError("connection refused"),
            sse(ok),
        ]
    )
    sleeps = Sleeps()
    client, http = make("chat-completions", script, sleep=sleeps, retry=RetryPolicy(max_attempts=5, initial_delay=0.5, jitter=0))
    progress = Recorder()
    async with http:
        result = await client.stream("m", HISTORY, None, progress)
    assert len(script.requests) == 4
    assert sleeps.waits == [3.0, 1.0, 2.0]  # Retry-After, then backoff for attempts 2 and 3
    assert progress.parts == decode_body("chat-completions", [ok]).parts
    assert result.finish_reason == FinishReason.STOP


async def test_retry_after_http_date_uses_the_injected_clock() -> None:
    script = Script(
        [
            httpx.Response(503, headers={"retry-after": "Wed, 01 Jan 2025 00:00:10 GMT"}),
            sse(body_of(FORMATS["chat-completions"][1])),
        ]
    )
    sleeps = Sleeps()
    client, http = make("chat-completions", script, sleep=sleeps, clock=lambda: 1735689600.0)
    async with http:
        await client.stream("m", HISTORY, None, Recorder())
    assert sleeps.waits == [10.0]


async def test_attempts_are_capped() -> None:
    script = Script([httpx.Response(502, text="Bad Gateway")])
    sleeps = Sleeps()
    client, http = make("responses", script, sleep=sleeps, retry=RetryPolicy(max_attempts=3, jitter=0))
    async with http:
        with pytest.raises(LanguageModelError, match="after 3 attempts") as info:
            await client.stream("m", HISTORY, None, Recorder())
    assert len(script.requests) == 3
    assert len(sleeps.waits) == 2
    assert info.value.code == "Unknown"


async def test_a_retry_after_beyond_the_cap_fails_at_once_saying_when() -> None:
    script = Script([httpx.Response(429, headers={"retry-after": "600"}, json={"error": {"message": "quota window"}})])
    sleeps = Sleeps()
    client, http = make("anthropic", script, sleep=sleeps)
    async with http:
        with pytest.raises(LanguageModelError, match="retry in 10 min") as info:
            await client.stream("m", HISTORY, None, Recorder())
    assert info.value.code == "Blocked"
    assert len(script.requests) == 1 and sleeps.waits == []


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_not_retried(status: int) -> None:
    script = Script([httpx.Response(status, json={"error": {"message": "no"}})])
    client, http = make("chat-completions", script)
    async with http:
        with pytest.raises(LanguageModelError):
            await client.stream("m", HISTORY, None, Recorder())
    assert len(script.requests) == 1


async def test_insufficient_quota_is_not_retried() -> None:
    script = Script([httpx.Response(429, json={"error": {"message": "quota", "code": "insufficient_quota"}})])
    client, http = make("chat-completions", script)
    async with http:
        with pytest.raises(LanguageModelError, match="billing"):
            await client.stream("m", HISTORY, None, Recorder())
    assert len(script.requests) == 1


class BreakingStream(httpx.AsyncByteStream):
    """Yields some bytes, then fails as a dropped connection would."""

    def __init__(self, head: bytes, error: Exception | None = None) -> None:
        self.head = head
        self.error = error or httpx.ReadError("connection reset by peer")
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.head:
            yield self.head
        raise self.error

    async def aclose(self) -> None:
        self.closed = True


async def test_no_retry_once_the_body_began() -> None:
    body = body_of(FORMATS["chat-completions"][1])
    head = body[: body.index(b"\n\n", 2000) + 2]
    stream = BreakingStream(head)
    script = Script([httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)])
    sleeps = Sleeps()
    client, http = make("chat-completions", script, sleep=sleeps)
    progress = Recorder()
    async with http:
        with pytest.raises(LanguageModelError, match="broke off during the response"):
            await client.stream("m", HISTORY, None, progress)
    assert len(script.requests) == 1 and sleeps.waits == []
    assert progress.parts == decode_body("chat-completions", [head]).parts
    assert progress.parts  # what came before the break was reported
    assert stream.closed


async def test_a_connection_lost_before_the_first_byte_is_retried() -> None:
    script = Script(
        [
            httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=BreakingStream(b"")),
            sse(body_of(FORMATS["anthropic"][1])),
        ]
    )
    sleeps = Sleeps()
    client, http = make("anthropic", script, sleep=sleeps)
    progress = Recorder()
    async with http:
        await client.stream("m", HISTORY, None, progress)
    assert len(script.requests) == 2 and len(sleeps.waits) == 1
    assert progress.parts == decode_body("anthropic", [body_of(FORMATS["anthropic"][1])]).parts


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "body", "code", "words"),
    [
        (401, {"error": {"message": "Incorrect API key provided"}}, "NoPermissions", "ACME_KEY"),
        (403, {"error": {"message": "forbidden"}}, "NoPermissions", "lmbridge: Set API Key"),
        (404, {"error": {"message": "The model `m` does not exist", "code": "model_not_found"}}, "NotFound", "model 'm' was not found"),
        (429, {"error": {"message": "Rate limit reached"}}, "Blocked", "retry in 7 s"),
        (400, {"error": {"message": "This model's maximum context length is 8192 tokens", "code": "context_length_exceeded"}}, "Unknown", "too long for model 'm'"),
    ],
)
async def test_http_errors_are_mapped(status: int, body: Any, code: str, words: str) -> None:
    script = Script([httpx.Response(status, headers={"retry-after": "7"}, json=body)])
    client, http = make("chat-completions", script, retry=RetryPolicy(max_attempts=1))
    async with http:
        with pytest.raises(LanguageModelError) as info:
            await client.stream("m", HISTORY, None, Recorder())
    assert info.value.code == code
    assert words in info.value.message


async def test_unreachable_upstream_is_a_clear_error() -> None:
    script = Script([httpx.ConnectError("[Errno 111] Connection refused")])
    client, http = make("responses", script, retry=RetryPolicy(max_attempts=2, jitter=0))
    async with http:
        with pytest.raises(LanguageModelError, match=r"cannot reach acme at https://upstream.test/v1 after 2 attempts"):
            await client.stream("m", HISTORY, None, Recorder())


async def test_an_error_inside_the_stream_is_raised_after_the_parts_before_it() -> None:
    head = b'data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"c","usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
    head += b'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    head += b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}\n\n'
    err = b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    script = Script([sse(head + err)])
    client, http = make("anthropic", script)
    progress = Recorder()
    async with http:
        with pytest.raises(LanguageModelError, match="Overloaded") as info:
            await client.stream("m", HISTORY, None, progress)
    assert progress.parts == [TextPart("Hello")]
    assert info.value.code == "Blocked"


async def test_a_json_answer_instead_of_a_stream_is_explained() -> None:
    script = Script([httpx.Response(200, json={"id": "x", "choices": []})])
    client, http = make("chat-completions", script)
    async with http:
        with pytest.raises(LanguageModelError, match="JSON document instead of an event stream"):
            await client.stream("m", HISTORY, None, Recorder())


async def test_the_key_never_reaches_logs_or_errors(caplog: pytest.LogCaptureFixture) -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}}
    script = Script(
        [
            httpx.Response(503, json={"error": {"message": f"upstream saw {KEY}"}}),
            httpx.ConnectError(f"proxy refused {KEY}"),
            httpx.Response(401, json=echo),
        ]
    )
    client, http = make("chat-completions", script)
    caplog.set_level(logging.DEBUG)
    async with http:
        with pytest.raises(LanguageModelError) as info:
            await client.stream("m", HISTORY, None, Recorder())
    assert len(script.requests) == 3
    assert info.value.code == "NoPermissions"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "upstream saw [redacted]" in logged  # the body was logged, redacted
    for text in (logged, str(info.value), repr(info.value), str(info.value.__cause__), repr(client)):
        assert KEY not in text
    assert KEY not in getattr(info.value.__cause__, "body", "")


# --------------------------------------------------------------------------- cancellation


async def test_cancellation_interrupts_a_retry_wait() -> None:
    script = Script([httpx.Response(503, headers={"retry-after": "30"})])
    client, http = make("chat-completions", script, sleep=None)
    client._sleep = asyncio.sleep  # the real wait
    source = CancellationTokenSource()
    loop = asyncio.get_running_loop()
    loop.call_later(0.05, source.cancel)
    started = loop.time()
    async with http:
        result = await client.stream("m", HISTORY, None, Recorder(), source.token)
    assert loop.time() - started < 5
    assert result.finish_reason == FinishReason.CANCELLED
    assert len(script.requests) == 1


class EndlessStream(httpx.AsyncByteStream):
    """Yields one chunk, then waits forever (a slow upstream); records that it was closed."""

    def __init__(self, head: bytes) -> None:
        self.head = head
        self.closed = asyncio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.head
        await asyncio.Event().wait()
        yield b""  # pragma: no cover

    async def aclose(self) -> None:
        self.closed.set()


async def test_cancellation_mid_stream_closes_the_response_and_reports_nothing_after() -> None:
    body = body_of(FORMATS["chat-completions"][1])
    head = body[: body.index(b"\n\n", 500) + 2]
    stream = EndlessStream(head)
    script = Script([httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)])
    client, http = make("chat-completions", script)
    source = CancellationTokenSource()
    progress = Recorder(on_part=lambda _p: source.cancel())
    async with http:
        result = await asyncio.wait_for(
            client.stream("m", HISTORY, None, progress, source.token), timeout=5
        )
    assert result.finish_reason == FinishReason.CANCELLED
    assert len(progress.parts) == 1  # cancelled while reporting the first: nothing after it
    assert stream.closed.is_set()


async def test_an_already_cancelled_token_sends_nothing() -> None:
    script = Script([sse(b"")])
    client, http = make("chat-completions", script)
    source = CancellationTokenSource()
    source.cancel()
    async with http:
        result = await client.stream("m", HISTORY, None, Recorder(), source.token)
    assert result.finish_reason == FinishReason.CANCELLED
    assert script.requests == []


async def test_cancelling_the_calling_task_propagates() -> None:
    stream = EndlessStream(b": keep-alive\n\n")
    script = Script([httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)])
    client, http = make("chat-completions", script)
    async with http:
        task = asyncio.create_task(client.stream("m", HISTORY, None, Recorder()))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert stream.closed.is_set()


async def test_an_upstream_that_stays_open_after_its_end_marker_is_closed() -> None:
    body = body_of(FORMATS["chat-completions"][1])  # ends with data: [DONE]
    stream = EndlessStream(body)
    script = Script([httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)])
    client, http = make("chat-completions", script)
    client.drain_timeout = 0.05  # type: ignore[misc]
    progress = Recorder()
    async with http:
        result = await asyncio.wait_for(client.stream("m", HISTORY, None, progress), timeout=5)
    assert result.finish_reason == FinishReason.STOP
    assert progress.parts == decode_body("chat-completions", [body]).parts
    assert stream.closed.is_set()
