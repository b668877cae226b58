"""The Gemini client over real HTTP (the replay server on 127.0.0.1): Gemini API and Vertex AI
credentials, the model list, streamed text and a tool round whose second request must carry
the thought signature (the server checks it, as Gemini 3 does), the JSON-array form, errors."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lmbridge.config import ProviderContext, ProviderEntry, parse_entries
from lmbridge.errors import ConfigError, LanguageModelError
from lmbridge.gateway import RetryPolicy, build_provider
from lmbridge.gateway.catalog import ModelCatalog
from lmbridge.gateway.gemini import TOKEN_COMMAND_ENV, GeminiClient
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
from lmbridge.provider import CancellationToken, ModelInformationOptions, respond
from support.replay_server import RecordedRequest, ReplayServer, Reply
from support.streams import FIXTURES, decode_body, fixture_body, fixture_lines

KEY = "AIza-gemini-DO-NOT-LEAK-0123456789"
STREAM = "/v1beta/models/gemini-3-pro-preview:streamGenerateContent"
WEATHER = ChatTool(
    "weather",
    "Current weather for a city",
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"location": {"type": "string", "format": "uri-reference"}},
        "required": ["location", "ghost"],
        "additionalProperties": False,
    },
)


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


class Recorder:
    def __init__(self) -> None:
        self.parts: list[ResponsePart] = []

    def report(self, part: ResponsePart) -> None:
        self.parts.append(part)


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(trust_env=False, timeout=10) as client:
        yield client


def client(upstream: ReplayServer, http: httpx.AsyncClient, **kwargs: Any) -> GeminiClient:
    kwargs.setdefault("sleep", Sleeps())
    kwargs.setdefault("retry", RetryPolicy(jitter=0.0))
    kwargs.setdefault("api_key", KEY)
    return GeminiClient(http, base_url=upstream.url + "/v1beta", provider="gem", **kwargs)


def parts_of(rel: str) -> list[ResponsePart]:
    return decode_body("gemini", [fixture_body(rel)]).parts


# --------------------------------------------------------------------------- streaming


async def test_text_streams_with_the_key_header_and_sse(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    rel = "google/google-reasoning.chunks.txt"
    upstream.route("POST", STREAM, Reply.fixture(rel))
    progress = Recorder()
    options = ChatRequestOptions(model_options={"max_tokens": 300, "thinkingConfig": {"includeThoughts": True}})
    history = [ChatMessage.assistant("Be brief."), ChatMessage.user("How many r in strawberry?")]
    result = await client(upstream, http).stream("gemini-3-pro-preview", history, options, progress)

    expected = decode_body("gemini", [fixture_body(rel)])
    assert progress.parts == expected.parts
    assert "strawberry" in "".join(p.value for p in progress.parts if isinstance(p, TextPart))
    assert result.usage == expected.usage and result.usage.reasoning_tokens == 256
    assert result.finish_reason is FinishReason.STOP
    (request,) = upstream.requests
    assert request.query == {"alt": ["sse"]}
    assert request.headers["x-goog-api-key"] == KEY and "authorization" not in request.headers
    body = request.json()
    assert "model" not in body
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "How many r in strawberry?"}]}]
    assert body["generationConfig"] == {"maxOutputTokens": 300, "thinkingConfig": {"includeThoughts": True}}


def _signature_check(signature: str) -> Any:
    """What Gemini 3 does: a function call in the history without its signature is a 400."""

    def check(request: RecordedRequest) -> Reply | None:
        body = request.json()
        calls = [
            p for c in body["contents"] if c["role"] == "model" for p in c["parts"] if "functionCall" in p
        ]
        if any(p.get("thoughtSignature") != signature for p in calls[:1]):
            return Reply.json(
                {
                    "error": {
                        "code": 400,
                        "message": "Function call is missing a thought_signature in functionCall parts.",
                        "status": "INVALID_ARGUMENT",
                    }
                },
                status=400,
            )
        return None

    return check


async def test_a_tool_round_replays_the_thought_signature(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    rel = "google/google-tool-call-gemini3.chunks.txt"
    signature = json.loads(fixture_lines(rel)[0])["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    upstream.route("POST", STREAM, Reply.fixture(rel))
    gem = client(upstream, http)
    options = ChatRequestOptions(tools=[WEATHER], tool_mode=ToolMode.REQUIRED)
    question = ChatMessage.user("Weather in San Francisco?")
    first = Recorder()
    result = await gem.stream("gemini-3-pro-preview", [question], options, first)
    assert result.finish_reason is FinishReason.TOOL_CALLS
    (call,) = [p for p in first.parts if isinstance(p, ToolCallPart)]
    assert (call.name, call.input) == ("weather", {"location": "San Francisco"})
    sent = upstream.requests[0].json()
    assert sent["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    (declaration,) = sent["tools"][0]["functionDeclarations"]
    # the schema in the subset Gemini takes
    assert declaration["parameters"] == {
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "required": ["location"],
    }

    # The second request: the answer as VS Code keeps it, then the tool's result.
    upstream.route("POST", STREAM, Reply.fixture("google/google-text.chunks.txt"), check=_signature_check(signature))
    history = [
        question,
        ChatMessage.assistant(list(first.parts)),
        ChatMessage.user([ToolResultPart(call.call_id, [TextPart("foggy, 14 C")])]),
    ]
    second = Recorder()
    result = await gem.stream("gemini-3-pro-preview", history, options, second)
    assert result.finish_reason is FinishReason.STOP
    assert upstream.requests[1].status == 200
    contents = upstream.requests[1].json()["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [
            {
                "functionCall": {"name": "weather", "args": {"location": "San Francisco"}, "id": call.call_id},
                "thoughtSignature": signature,
            }
        ],
    }
    assert contents[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "weather", "id": call.call_id, "response": {"output": "foggy, 14 C"}}}
        ],
    }

    # Without the signature (history from another model) the server refuses it, as Gemini does.
    stripped = [question, ChatMessage.assistant([call]), history[2]]
    with pytest.raises(LanguageModelError, match="thought_signature"):
        await gem.stream("gemini-3-pro-preview", stripped, options, Recorder())


async def test_the_json_array_form_is_read_too(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    rel = "google/google-stream-tool-call-arguments.chunks.txt"
    body = ("[" + ",\r\n".join(fixture_lines(rel)) + "]").encode()
    upstream.route(
        "POST",
        STREAM,
        Reply(headers={"Content-Type": "application/json"}, chunks=[body[i : i + 97] for i in range(0, len(body), 97)]),
    )
    gem = client(upstream, http, chat_path="/models/{model}:streamGenerateContent")
    progress = Recorder()
    await gem.stream("gemini-3-pro-preview", [ChatMessage.user("hi")], None, progress)
    assert progress.parts == parts_of(rel)
    assert upstream.requests[0].query == {}


# --------------------------------------------------------------------------- errors


GOOGLE_429 = json.loads((FIXTURES / "google" / "google-429-retry-info.json").read_text("utf-8"))


async def test_429_waits_for_retry_info_then_succeeds(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    upstream.route("POST", STREAM, [Reply.json(GOOGLE_429, status=429), Reply.fixture("google/google-text.chunks.txt")])
    sleeps = Sleeps()
    gem = client(upstream, http, sleep=sleeps, retry=RetryPolicy(jitter=0.0, max_retry_after=60))
    progress = Recorder()
    await gem.stream("gemini-3-pro-preview", [ChatMessage.user("hi")], None, progress)
    assert sleeps.delays == [34.4]
    assert len(upstream.requests) == 2 and progress.parts


@pytest.mark.parametrize(
    ("status", "body", "code", "words"),
    [
        (429, GOOGLE_429, "Blocked", "retry in 34 s"),
        (
            400,
            {"error": {"code": 400, "message": "Invalid JSON payload received.", "status": "INVALID_ARGUMENT"}},
            "Unknown",
            "Invalid JSON payload",
        ),
        (
            400,
            {
                "error": {
                    "code": 400,
                    "message": "API key not valid. Please pass a valid API key.",
                    "status": "INVALID_ARGUMENT",
                    "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}],
                }
            },
            "NoPermissions",
            "rejected the API key",
        ),
        (403, {"error": {"code": 403, "message": "Permission denied.", "status": "PERMISSION_DENIED"}}, "NoPermissions", "Permission denied"),
        (404, {"error": {"code": 404, "message": "models/nope is not found", "status": "NOT_FOUND"}}, "NotFound", "check the model id"),
    ],
)
async def test_http_errors_are_mapped(
    status: int, body: Any, code: str, words: str, upstream: ReplayServer, http: httpx.AsyncClient
) -> None:
    upstream.route("POST", STREAM, Reply.json(body, status=status))
    gem = client(upstream, http, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(LanguageModelError) as info:
        await gem.stream("gemini-3-pro-preview", [ChatMessage.user("hi")], None, Recorder())
    assert info.value.code == code and words in str(info.value)
    assert KEY not in str(info.value)


async def test_a_blocked_prompt_in_the_stream_is_a_blocked_error(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    body = b'data: {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}}\n\n'
    upstream.route("POST", STREAM, Reply.sse(body))
    with pytest.raises(LanguageModelError) as info:
        await client(upstream, http).stream("gemini-3-pro-preview", [ChatMessage.user("hi")], None, Recorder())
    assert info.value.code == "Blocked" and "SAFETY" in str(info.value)


# --------------------------------------------------------------------------- models and Vertex


def entry(**fields: Any) -> ProviderEntry:
    raw = {"name": "gem", "format": "gemini", **fields}
    parsed = parse_entries([raw])[0]
    assert isinstance(parsed, ProviderEntry), parsed
    return parsed


async def test_the_model_list_pages_filters_and_reads_limits(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    upstream.route(
        "GET",
        "/v1beta/models",
        [
            Reply.json(
                {
                    "models": [
                        {
                            "name": "models/gemini-2.5-pro",
                            "displayName": "Gemini 2.5 Pro",
                            "inputTokenLimit": 1048576,
                            "outputTokenLimit": 65536,
                            "supportedGenerationMethods": ["generateContent", "countTokens"],
                            "thinking": True,
                        },
                        {"name": "models/text-embedding-004", "supportedGenerationMethods": ["embedContent"]},
                    ],
                    "nextPageToken": "p2",
                }
            ),
            Reply.json({"models": [{"name": "models/gemini-2.0-flash", "inputTokenLimit": 1000000, "outputTokenLimit": 8192}]}),
        ],
    )
    provider = build_provider(
        entry(baseUrl=upstream.url + "/v1beta"), ProviderContext(name="gem", api_key=KEY), http=http
    )
    models = await provider.provide_language_model_chat_information(ModelInformationOptions(), CancellationToken.NONE)
    assert [(m.id, m.name, m.max_input_tokens, m.max_output_tokens) for m in models] == [
        ("gemini-2.5-pro", "Gemini 2.5 Pro", 1048576, 65536),
        ("gemini-2.0-flash", "gemini-2.0-flash", 1000000, 8192),
    ]
    assert "thinks" in (models[0].tooltip or "") and "thinks" not in (models[1].tooltip or "")
    assert all(m.capabilities.tool_calling and m.capabilities.image_input for m in models)
    pages = upstream.requests_to("/v1beta/models")
    assert [r.query for r in pages] == [{}, {"pageToken": ["p2"]}]
    assert pages[0].headers["x-goog-api-key"] == KEY

    # a response through the provider: its counts come from the google token family
    upstream.route("POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", Reply.fixture("google/google-text.chunks.txt"))
    await respond(provider, models[0], [ChatMessage.user("hi")], ChatRequestOptions(), lambda p: None)
    estimator = provider._estimator(models[0])
    assert estimator is not None and estimator.family == "google"


async def test_vertex_sends_the_access_token_as_bearer(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    base = upstream.url + "/v1/projects/p/locations/us-central1/publishers/google"
    upstream.route("POST", "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent", Reply.fixture("google/google-text.chunks.txt"))
    provider = build_provider(
        entry(baseUrl=base, vertex=True, models=["gemini-2.5-pro"]),
        ProviderContext(name="gem", api_key="ya29.token-from-env"),
        http=http,
    )
    (model,) = await provider.provide_language_model_chat_information(ModelInformationOptions(), CancellationToken.NONE)
    await respond(provider, model, [ChatMessage.user("hi")], ChatRequestOptions(), lambda p: None)
    (request,) = upstream.requests
    assert request.headers["authorization"] == "Bearer ya29.token-from-env"
    assert "x-goog-api-key" not in request.headers
    with pytest.raises(ConfigError, match="vertex"):
        build_provider(entry(baseUrl=base, vertex="yes"), ProviderContext(name="gem"), http=http)
    with pytest.raises(ConfigError, match="unknown option"):
        other = ProviderEntry(name="a", index=0, format="anthropic", base_url=base, options={"vertex": True})
        build_provider(other, ProviderContext(name="a"), http=http)


async def test_vertex_token_command_comes_from_the_environment_only(
    upstream: ReplayServer, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    count = tmp_path / "runs"
    script = tmp_path / "token.py"
    script.write_text(
        f"import pathlib; p = pathlib.Path({str(count)!r}); "
        "p.write_text(p.read_text() + 'x' if p.exists() else 'x'); print('ya29.from-command')\n"
    )
    upstream.route("POST", STREAM, Reply.fixture("google/google-text.chunks.txt"))
    environ = {TOKEN_COMMAND_ENV: f"{sys.executable} {script}"}
    gem = client(upstream, http, api_key=None, vertex=True, environ=environ)
    for _ in range(2):
        await gem.stream("gemini-3-pro-preview", [ChatMessage.user("hi")], None, Recorder())
    assert [r.headers["authorization"] for r in upstream.requests] == ["Bearer ya29.from-command"] * 2
    assert count.read_text() == "x"  # run once, then cached
    assert "ya29.from-command" not in gem.redact("token ya29.from-command")

    # not Vertex, a key already given, or a base URL that is not Google's: never run
    assert client(upstream, http, api_key=None, environ=environ)._token_command is None
    assert client(upstream, http, vertex=True, environ=environ)._token_command is None
    elsewhere = GeminiClient(
        http, base_url="https://evil.example/v1", vertex=True, environ=environ, provider="x"
    )
    assert elsewhere._token_command is None
    google = GeminiClient(
        http,
        base_url="https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/l/publishers/google",
        vertex=True,
        environ=environ,
        provider="x",
    )
    assert google._token_command is not None

    failing = client(upstream, http, api_key=None, vertex=True, environ={TOKEN_COMMAND_ENV: f"{sys.executable} -c 'import sys; sys.exit(3)'"})
    with pytest.raises(LanguageModelError) as info:
        await failing.stream("gemini-3-pro-preview", [ChatMessage.user("hi")], None, Recorder())
    assert info.value.code == "NoPermissions" and "exit 3" in str(info.value)


def test_thinking_parts_of_the_recordings_carry_signatures() -> None:
    parts = parts_of("google/google-tool-call.chunks.txt")
    signed = [p for p in parts if isinstance(p, ThinkingPart)]
    assert signed and signed[0].metadata and signed[0].metadata["signedPart"] == "functionCall"


def test_a_workspace_cannot_turn_vertex_on() -> None:
    # vertex may run the user's token command and send its token: user settings only
    from lmbridge.config import merge_workspace_entries

    merged, ignored = merge_workspace_entries(
        [], [{"name": "w", "format": "gemini", "baseUrl": "https://evil.example/v1", "vertex": True}]
    )
    assert merged == [{"name": "w", "format": "gemini", "baseUrl": "https://evil.example/v1"}]
    assert [(i.field, "user settings" in i.reason) for i in ignored] == [("vertex", True)]


async def test_the_vertex_token_goes_only_to_the_base_urls_origin(
    upstream: ReplayServer, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    # An absolute chatPath / modelsPath at another origin gets the command's token no more than
    # it would get a key.
    script = tmp_path / "token.py"
    script.write_text("print('ya29.vertex-token-DO-NOT-LEAK')\n")
    environ = {TOKEN_COMMAND_ENV: f"{sys.executable} {script}"}
    with ReplayServer() as elsewhere:
        elsewhere.route("POST", "/steal:streamGenerateContent", Reply.fixture("google/google-text.chunks.txt"))
        elsewhere.route("GET", "/steal/models", Reply.json({"models": [{"name": "models/g"}]}))
        upstream.route("POST", STREAM, Reply.fixture("google/google-text.chunks.txt"))
        home = client(upstream, http, api_key=None, vertex=True, environ=environ)
        away = client(
            upstream, http, api_key=None, vertex=True, environ=environ,
            chat_path=elsewhere.url + "/steal:streamGenerateContent",
            models_path=elsewhere.url + "/steal/models",
        )  # fmt: skip
        assert home._token_command is not None and away._token_command is not None
        await home.stream("gemini-3-pro-preview", [ChatMessage.user("hi")], None, Recorder())
        await away.stream("gemini-3-pro-preview", [ChatMessage.user("hi")], None, Recorder())
        assert away._token == "ya29.vertex-token-DO-NOT-LEAK"  # it has one, and keeps it home
        await ModelCatalog(away).fetch()
        assert upstream.requests[0].headers["authorization"] == "Bearer ya29.vertex-token-DO-NOT-LEAK"
        assert [r.path for r in elsewhere.requests] == ["/steal:streamGenerateContent", "/steal/models"]
        for request in elsewhere.requests:
            assert "authorization" not in request.headers
            assert b"ya29" not in request.body
