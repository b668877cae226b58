"""Upstream-backed providers: built from configuration, driven through the provider API."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest

from lmbridge.config import (
    ProviderContext,
    ProviderEntry,
    load_providers,
    parse_entries,
)
from lmbridge.errors import ConfigError, LanguageModelError
from lmbridge.gateway import (
    AnthropicClient,
    ChatCompletionsClient,
    UpstreamProvider,
    build_provider,
)
from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    DataPart,
    FinishReason,
    ResponsePart,
    TextPart,
)
from lmbridge.provider import CancellationToken, ModelInformationOptions, respond
from support.streams import decode_body, fixture_body

KEY = "sk-provider-test-key-123456"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def entry(**fields: Any) -> ProviderEntry:
    raw = {"name": "acme", "format": "chat-completions", "baseUrl": "https://upstream.test/v1", **fields}
    parsed = parse_entries([raw])[0]
    assert isinstance(parsed, ProviderEntry), parsed
    return parsed


def context() -> ProviderContext:
    return ProviderContext(name="acme", api_key=KEY)


class Upstream:
    """``GET /models`` from a payload, ``POST`` answered with a fixture body; records requests."""

    def __init__(self, catalog: Any, body: bytes) -> None:
        self.catalog = catalog
        self.body = body
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.method == "GET":
            return httpx.Response(200, json=self.catalog)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=self.body)

    def posted(self) -> dict[str, Any]:
        return json.loads([r for r in self.requests if r.method == "POST"][-1].content)


CATALOG = {
    "data": [
        {
            "id": "anthropic/claude-sonnet-4",
            "name": "Claude Sonnet 4",
            "context_window": 200000,
            "max_tokens": 64000,
            "type": "language",
            "tags": ["tool-use", "vision"],
        },
        {"id": "text-only", "context_window": 32000, "max_tokens": 4000, "type": "language", "tags": ["tool-use"]},
    ]
}


async def test_every_registered_format_builds_its_own_client() -> None:
    from lmbridge import formats

    for name in formats.names():
        async with httpx.AsyncClient() as http:
            provider = build_provider(entry(format=name), context(), http=http)
        assert provider.client.format == name
        assert type(provider.client) is formats.get(name).client_class()


async def test_load_providers_builds_upstream_providers_with_the_key_from_the_environment() -> None:
    loaded = load_providers(
        [
            {"name": "oai", "format": "responses", "baseUrl": "https://api.openai.test/v1", "apiKeyEnv": "OAI_KEY"},
            {"name": "claude", "format": "anthropic", "baseUrl": "https://api.anthropic.test/v1", "models": ["claude-x"]},
        ],
        environ={"OAI_KEY": KEY},
        secrets={"claude": "sk-ant-from-secret-storage"},
        entry_points=False,
    )
    assert [p.ok for p in loaded] == [True, True], [p.error for p in loaded]
    oai, claude = (p.provider for p in loaded)
    assert isinstance(oai, UpstreamProvider) and isinstance(claude, UpstreamProvider)
    assert oai.client.format == "responses" and oai.client.has_key
    assert isinstance(claude.client, AnthropicClient)
    assert claude.client.auth_headers()["x-api-key"] == "sk-ant-from-secret-storage"
    assert KEY not in repr(oai) and KEY not in repr(oai.client)
    infos = await claude.provide_language_model_chat_information(ModelInformationOptions(), CancellationToken.NONE)
    assert [i.id for i in infos] == ["claude-x"]
    assert infos[0].detail == "claude"
    for p in (oai, claude):
        await p.aclose()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"temperature": 1}, "unknown option"),
        ({"retry": {"maxAttempts": 0}}, r"retry\.maxAttempts: expected an integer of at least 1, got 0"),
        ({"retry": {"maxAttempts": True}}, r"retry\.maxAttempts: expected an integer"),
        ({"retry": {"tries": 3}}, r"retry\.tries: unknown option \(known: maxAttempts"),
        ({"catalogTtl": -1}, r"catalogTtl: expected a number of seconds \(>= 0\), got -1"),
        ({"apiKeyHeader": "api key"}, "apiKeyHeader: expected an HTTP header name"),
        ({"contextCheck": "yes"}, "contextCheck: expected true or false, got 'yes'"),
        ({"truncation": "sometimes"}, "truncation"),  # a Responses option: unknown here
        ({"contextManagement": True}, "unknown option"),  # Anthropic only
        ({"vertex": True}, "unknown option"),  # Gemini only
        ({"conversion": {"systemRole": "boss"}}, "conversion"),
        ({"conversion": {"noSuchPolicy": True}}, "conversion"),
        ({"extraBody": [1]}, "extraBody: expected an object"),
        ({"thinking": "loud"}, "thinking"),
        ({"outputReserve": -1}, "outputReserve"),
        ({"timeout": 0}, "timeout"),
        ({"models": [{"id": "a", "contextWindow": "x"}]}, r"models\[0\]\.contextWindow"),
    ],
)
def test_bad_options_are_config_errors_naming_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        build_provider(entry(**fields), context(), http=httpx.AsyncClient())
    assert "providers[0] ('acme')" in str(info.value)


def test_a_bad_entry_fails_alone() -> None:
    loaded = load_providers(
        [
            {"name": "bad", "format": "chat-completions", "baseUrl": "https://x.test/v1", "colour": "red"},
            {"name": "good", "format": "chat-completions", "baseUrl": "https://x.test/v1", "models": ["m"]},
        ],
        environ={},
        entry_points=False,
    )
    assert [p.ok for p in loaded] == [False, True]
    assert loaded[0].error is not None and "colour" in loaded[0].error.message


async def test_catalog_models_and_a_response_through_the_provider_api() -> None:
    body = fixture_body("anthropic/anthropic-text.chunks.txt")
    upstream = Upstream(CATALOG, body)
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as http:
        provider = build_provider(entry(format="anthropic"), context(), http=http)
        infos = await provider.provide_language_model_chat_information(
            ModelInformationOptions(), CancellationToken.NONE
        )
        assert [i.id for i in infos] == ["anthropic/claude-sonnet-4", "text-only"]
        sonnet = infos[0]
        assert (sonnet.max_input_tokens, sonnet.max_output_tokens) == (150_000, 50_000)
        parts: list[ResponsePart] = []
        result = await respond(provider, sonnet, [ChatMessage.user("Hello")], ChatRequestOptions(), parts.append)
    expected = decode_body("anthropic", [body])
    assert parts == expected.parts
    assert result.usage == expected.usage
    assert result.finish_reason == FinishReason.STOP
    posted = upstream.posted()
    assert posted["model"] == "anthropic/claude-sonnet-4"
    assert posted["max_tokens"] == 50_000  # the model's reserve: a full prompt still fits


async def test_images_become_placeholders_for_models_without_image_input() -> None:
    upstream = Upstream(CATALOG, fixture_body("openai-chat/openai-text.chunks.txt"))
    message = ChatMessage.user([TextPart("What is this?"), DataPart.image(PNG, "image/png")])
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as http:
        provider = build_provider(entry(), context(), http=http)
        vision, text_only = await provider.provide_language_model_chat_information(
            ModelInformationOptions(), CancellationToken.NONE
        )
        await respond(provider, vision, [message], ChatRequestOptions(), lambda p: None)
        with_image = json.dumps(upstream.posted())
        await respond(provider, text_only, [message], ChatRequestOptions(), lambda p: None)
        without = json.dumps(upstream.posted())
    assert "data:image/png;base64" in with_image
    assert "data:image/png;base64" not in without


async def test_static_model_extra_body_reaches_its_requests() -> None:
    upstream = Upstream({}, fixture_body("openai-chat/openai-text.chunks.txt"))
    fields = {
        "models": [{"id": "o3", "extraBody": {"reasoning_effort": "high"}}, "plain"],
        "extraBody": {"store": False},
    }
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as http:
        provider = build_provider(entry(**fields), context(), http=http)
        o3, plain = await provider.provide_language_model_chat_information(
            ModelInformationOptions(), CancellationToken.NONE
        )
        await respond(provider, o3, [ChatMessage.user("hi")], ChatRequestOptions(), lambda p: None)
        first = upstream.posted()
        await respond(provider, plain, [ChatMessage.user("hi")], ChatRequestOptions(), lambda p: None)
        second = upstream.posted()
    assert (first["reasoning_effort"], first["store"]) == ("high", False)
    assert "reasoning_effort" not in second and second["store"] is False
    assert not [r for r in upstream.requests if r.method == "GET"]  # static: no catalog


async def test_catalog_failure_is_empty_when_silent_and_an_error_otherwise() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": "no key"}})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        provider = build_provider(entry(apiKeyEnv="ACME_KEY"), ProviderContext(name="acme"), http=http)
        silent = await provider.provide_language_model_chat_information(
            ModelInformationOptions(silent=True), CancellationToken.NONE
        )
        assert silent == []
        with pytest.raises(LanguageModelError, match="ACME_KEY") as info:
            await provider.provide_language_model_chat_information(
                ModelInformationOptions(), CancellationToken.NONE
            )
    assert info.value.code == "NoPermissions"


async def test_a_changed_catalog_fires_the_providers_change_event() -> None:
    upstream = Upstream(CATALOG, b"")
    fired: list[int] = []
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as http:
        provider = build_provider(entry(catalogTtl=0), context(), http=http)
        provider.on_did_change_language_model_chat_information(lambda: fired.append(1))
        await provider.provide_language_model_chat_information(ModelInformationOptions(), CancellationToken.NONE)
        await provider.provide_language_model_chat_information(ModelInformationOptions(), CancellationToken.NONE)
        assert fired == []
        upstream.catalog = {"data": CATALOG["data"][:1]}
        infos = await provider.provide_language_model_chat_information(
            ModelInformationOptions(), CancellationToken.NONE
        )
    assert len(infos) == 1
    assert fired == [1]


class FakeEstimator:
    def __init__(self) -> None:
        self.observed: list[tuple[int, int]] = []

    def count_text(self, text: str) -> int:
        return len(text)

    def count_message(self, message: ChatMessage) -> int:
        return 1000

    def observe(self, messages: Any, options: Any, actual_input_tokens: int) -> None:
        self.observed.append((len(messages), actual_input_tokens))


async def test_token_counts_and_usage_feeds_the_estimator() -> None:
    body = fixture_body("openai-chat/openai-text.chunks.txt")
    upstream = Upstream({}, body)
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as http:
        provider = build_provider(entry(models=["gpt-4o"]), context(), http=http)
        (model,) = await provider.provide_language_model_chat_information(
            ModelInformationOptions(), CancellationToken.NONE
        )
        fallback = provider.provide_token_count(model, "hello world, hello world", CancellationToken.NONE)
        assert isinstance(fallback, int) and fallback > 0
        fake = FakeEstimator()
        provider._estimators[model.id] = fake  # type: ignore[assignment]
        assert provider.provide_token_count(model, "abc", CancellationToken.NONE) == 3
        assert provider.provide_token_count(model, ChatMessage.user("x"), CancellationToken.NONE) == 1000
        await respond(provider, model, [ChatMessage.user("hi")], ChatRequestOptions(), lambda p: None)
    assert fake.observed == [(1, decode_body("chat-completions", [body]).usage.input_tokens)]


async def test_the_provider_closes_only_a_client_it_made() -> None:
    http = httpx.AsyncClient()
    given = build_provider(entry(models=["m"]), context(), http=http)
    await given.aclose()
    assert not http.is_closed
    await http.aclose()
    own = build_provider(entry(models=["m"]), context())
    assert isinstance(own.client, ChatCompletionsClient)
    await own.aclose()
    assert own.client.http.is_closed


async def test_the_real_estimator_learns_into_the_storage_folder(tmp_path: Any) -> None:
    body = fixture_body("openai-chat/openai-text.chunks.txt")
    upstream = Upstream({}, body)
    ctx = ProviderContext(name="acme", api_key=KEY, storage_path=str(tmp_path))
    messages = [ChatMessage.user("Tell me about a holiday that does not exist. " * 3)]
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as http:
        provider = build_provider(entry(models=["gpt-4o"]), ctx, http=http)
        (model,) = await provider.provide_language_model_chat_information(
            ModelInformationOptions(), CancellationToken.NONE
        )
        await respond(provider, model, messages, ChatRequestOptions(), lambda p: None)
        estimator = provider._estimator(model)
    assert estimator is not None and estimator.family == "openai"
    assert (tmp_path / "tokens.sqlite").exists()
    # the message's count is now what the upstream reported, less the request overhead
    reported = decode_body("chat-completions", [body]).usage.input_tokens
    assert reported is not None
    assert abs(estimator.count_message(messages[0]) - (reported - estimator.costs.request)) <= 1


async def test_a_string_count_is_multiplied_by_the_learnt_calibration_factor(tmp_path: Any) -> None:
    """VS Code counts a bare string (a tool definition, a prompt piece) with
    ``provideTokenCount``: it must get the model's calibration as messages do."""
    body = fixture_body("openai-chat/openai-text.chunks.txt")
    upstream = Upstream({}, body)
    ctx = ProviderContext(name="acme", api_key=KEY, storage_path=str(tmp_path))
    text = "A string VS Code counts by itself, such as a tool's description. " * 20
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as http:
        provider = build_provider(entry(models=["gpt-4o"]), ctx, http=http)
        (model,) = await provider.provide_language_model_chat_information(
            ModelInformationOptions(), CancellationToken.NONE
        )
        estimator = provider._estimator(model)
        assert estimator is not None
        before = provider.provide_token_count(model, text, CancellationToken.NONE)
        assert before == math.ceil(estimator.raw_text(text) - 1e-9)  # factor 1 at first
        estimator.calibration.factor = 1.6  # as if the upstream had reported 60% more
        after = provider.provide_token_count(model, text, CancellationToken.NONE)
    assert after == math.ceil(estimator.raw_text(text) * 1.6 - 1e-9)
    assert after > before * 1.5
