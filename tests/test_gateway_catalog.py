"""The model catalog: parsing each shape, the output reserve, static models, TTL and change events."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from lmbridge.errors import ConfigError, LanguageModelError
from lmbridge.gateway import (
    AnthropicClient,
    ChatCompletionsClient,
    ModelCatalog,
    ModelDefaults,
    output_reserve,
    parse_catalog,
    parse_static_models,
)

GATEWAY_MODELS: dict[str, Any] = {
    "object": "list",
    "data": [
        {
            "id": "anthropic/claude-sonnet-4",
            "object": "model",
            "created": 1747958400,
            "owned_by": "anthropic",
            "name": "Claude Sonnet 4",
            "description": "Anthropic's balanced model.",
            "context_window": 200000,
            "max_tokens": 64000,
            "type": "language",
            "tags": ["reasoning", "tool-use", "vision", "file-input", "implicit-caching"],
        },
        {
            "id": "openai/gpt-4o-mini",
            "object": "model",
            "owned_by": "openai",
            "name": "GPT-4o mini",
            "context_window": 128000,
            "max_tokens": 16384,
            "type": "language",
            "tags": ["tool-use"],
        },
        {
            "id": "openai/text-embedding-3-small",
            "object": "model",
            "context_window": 8192,
            "type": "embedding",
            "tags": [],
        },
        {"id": "bfl/flux-pro", "object": "model", "type": "image"},
    ],
}

OPENAI_MODELS: dict[str, Any] = {
    "object": "list",
    "data": [
        {"id": "gpt-4o-2024-08-06", "object": "model", "created": 1722814719, "owned_by": "system"},
        {"id": "text-embedding-3-large", "object": "model", "owned_by": "system"},
        {"id": "whisper-1", "object": "model", "owned_by": "openai-internal"},
        {"id": "dall-e-3", "object": "model", "owned_by": "system"},
        {"id": "gpt-4o-mini-tts", "object": "model", "owned_by": "system"},
    ],
}


def by_id(models: list[Any]) -> dict[str, Any]:
    return {m.info.id: m for m in models}


# --------------------------------------------------------------------------- parsing


def test_gateway_catalog_limits_capabilities_and_types() -> None:
    models = by_id(parse_catalog(GATEWAY_MODELS, provider="gateway"))
    assert set(models) == {"anthropic/claude-sonnet-4", "openai/gpt-4o-mini"}  # no embeddings, images
    sonnet = models["anthropic/claude-sonnet-4"]
    info = sonnet.info
    assert info.name == "Claude Sonnet 4"
    assert info.detail == "gateway"
    assert info.family == "claude-sonnet-4"
    # reserve = min(64000, 25% of 200000) = 50000; input + output = the 200,000 window (what
    # Copilot takes as the context window), the model's own 64,000 in the tooltip
    assert (info.max_input_tokens, info.max_output_tokens) == (150_000, 50_000)
    assert sonnet.context_window == info.max_input_tokens + info.max_output_tokens
    assert "max output 64,000" in (info.tooltip or "")
    assert sonnet.default_max_tokens == 50_000
    assert sonnet.context_window == 200_000
    assert info.capabilities.tool_calling is True
    assert info.capabilities.image_input is True
    assert info.tooltip is not None
    assert "Anthropic's balanced model." in info.tooltip
    assert "150,000 for input" in info.tooltip
    mini = models["openai/gpt-4o-mini"].info
    assert (mini.max_input_tokens, mini.max_output_tokens) == (128_000 - 16_384, 16_384)
    assert mini.capabilities.image_input is False  # tags present, no vision tag
    assert mini.capabilities.tool_calling is True


def test_plain_openai_catalog_uses_defaults_and_drops_non_chat_models() -> None:
    models = parse_catalog(OPENAI_MODELS, provider="openai")
    assert [m.info.id for m in models] == ["gpt-4o-2024-08-06"]
    info = models[0].info
    assert info.family == "gpt-4o"
    assert info.name == "gpt-4o-2024-08-06"
    assert (info.max_input_tokens, info.max_output_tokens) == (128_000 - 4_096, 4_096)
    assert info.capabilities.tool_calling is True  # the configurable default
    assert info.capabilities.image_input is False


def test_configured_defaults_apply_to_models_without_limits() -> None:
    defaults = ModelDefaults(context_window=32_768, max_output_tokens=8_192, image_input=True, tool_calling=False)
    info = parse_catalog(OPENAI_MODELS, provider="lmstudio", defaults=defaults)[0].info
    assert (info.max_input_tokens, info.max_output_tokens) == (32_768 - 8_192, 8_192)
    assert info.capabilities.image_input is True
    assert info.capabilities.tool_calling is False


def test_openrouter_vllm_and_anthropic_shapes() -> None:
    payload = {
        "data": [
            {
                "id": "vendor/m1",
                "name": "M1",
                "context_length": 64000,
                "top_provider": {"max_completion_tokens": 8000},
                "architecture": {"input_modalities": ["text", "image"]},
                "supported_parameters": ["temperature", "tools"],
            },
            {"id": "local-llama", "object": "model", "max_model_len": 32768},
            {"type": "model", "id": "claude-opus-4-20250514", "display_name": "Claude Opus 4"},
        ]
    }
    models = by_id(parse_catalog(payload, provider="p"))
    m1 = models["vendor/m1"].info
    assert (m1.max_input_tokens, m1.max_output_tokens) == (56_000, 8_000)
    assert m1.capabilities.image_input is True
    assert m1.capabilities.tool_calling is True
    assert models["local-llama"].context_window == 32_768
    opus = models["claude-opus-4-20250514"].info
    assert opus.name == "Claude Opus 4"
    assert opus.family == "claude-opus-4"


def test_unreadable_entries_are_skipped_and_a_bad_payload_is_an_error() -> None:
    assert parse_catalog({"data": [{"name": "no id"}, "x", {"id": "ok"}]}, provider="p")[0].info.id == "ok"
    with pytest.raises(ValueError, match="expected"):
        parse_catalog({"object": "list"}, provider="p")


# --------------------------------------------------------------------------- the reserve


@pytest.mark.parametrize(
    ("window", "max_out", "reserve", "expected"),
    [
        (200_000, 64_000, 0.25, 50_000),  # a quarter of the window caps a large output limit
        (128_000, 16_384, 0.25, 16_384),  # the whole output limit when it is smaller
        (128_000, 16_384, 4_000, 4_000),  # >= 1: a number of tokens
        (8_192, 8_192, 0.99, 8_110),
        (100, 1_000_000, 10_000, 99),  # both budgets stay positive
    ],
)
def test_output_reserve(window: int, max_out: int, reserve: float, expected: int) -> None:
    assert output_reserve(window, max_out, reserve) == expected


def test_bad_defaults_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="outputReserve"):
        ModelDefaults(output_reserve=0)
    with pytest.raises(ConfigError, match="context_window"):
        ModelDefaults(context_window=-1)
    with pytest.raises(ConfigError, match="contextWindow must be at least 2"):
        ModelDefaults(context_window=1)


def test_a_catalog_window_with_no_room_for_both_budgets_counts_as_not_given() -> None:
    """A one-token window would leave no input at all (the fuzzer found it): the model gets the
    provider's defaults, both limits positive."""
    (model,) = parse_catalog({"data": [{"id": "m", "context_length": 1}]}, provider="p")
    assert (model.info.max_input_tokens, model.info.max_output_tokens) == (128_000 - 4_096, 4_096)
    (two,) = parse_catalog({"data": [{"id": "m", "context_length": 2}]}, provider="p")
    assert (two.info.max_input_tokens, two.info.max_output_tokens) == (1, 1)


# --------------------------------------------------------------------------- static models


def test_static_models_ids_and_objects() -> None:
    models = parse_static_models(
        [
            "gpt-4o",
            {
                "id": "big",
                "name": "Big",
                "contextWindow": 1_000_000,
                "maxOutputTokens": 32_000,
                "capabilities": {"imageInput": True, "toolCalling": 64},
                "extraBody": {"reasoning_effort": "high"},
            },
            {"id": "exact", "maxInputTokens": 30_000, "maxOutputTokens": 2_000, "toolCalling": False},
        ],
        provider="mine",
    )
    plain, big, exact = (m.info for m in models)
    assert plain.detail == "mine"
    assert (plain.max_input_tokens, plain.max_output_tokens) == (128_000 - 4_096, 4_096)
    assert (big.max_input_tokens, big.max_output_tokens) == (968_000, 32_000)
    assert big.capabilities.tool_calling == 64
    assert big.capabilities.image_input is True
    assert models[1].extra_body == {"reasoning_effort": "high"}
    # explicit input limits are taken as given
    assert (exact.max_input_tokens, exact.max_output_tokens) == (30_000, 2_000)
    assert exact.capabilities.tool_calling is False
    assert models[2].default_max_tokens == 2_000


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([42], r"models\[0\]: expected a model id or an object"),
        ([{"name": "x"}], r"models\[0\]\.id: expected a non-empty string"),
        (["a", "a"], r"models\[1\]\.id: 'a' is listed twice"),
        ([{"id": "a", "contextWindow": "big"}], r"models\[0\]\.contextWindow: expected a positive integer"),
        ([{"id": "a", "contextWindow": 1000, "maxInputTokens": 1000}], "less than contextWindow"),
        ([{"id": "a", "contextWindow": 1}], r"models\[0\]\.contextWindow: must be at least 2"),
        ([{"id": "a", "capabilities": {"imageInput": "yes"}}], r"capabilities\.imageInput"),
        ([{"id": "a", "maxTokens": 5}], "unknown field"),
    ],
)
def test_static_model_errors_name_the_field(raw: list[Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_static_models(raw, provider="p")


# --------------------------------------------------------------------------- fetching


class CatalogServer:
    """A ``GET /models`` handler whose answer can change between calls."""

    def __init__(self, payload: Any, status: int = 200) -> None:
        self.payload = payload
        self.status = status
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.params.get("after_id") == "page1-last":
            return httpx.Response(200, json={"data": [{"id": "claude-2"}], "has_more": False})
        return httpx.Response(self.status, content=json.dumps(self.payload).encode())


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_catalog_caches_for_the_ttl_and_reports_changes() -> None:
    server = CatalogServer(GATEWAY_MODELS)
    clock = Clock()
    changes: list[int] = []
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        client = ChatCompletionsClient(http, base_url="https://gw.test/v1", api_key="sk-catalog-key", provider="gw")
        catalog = ModelCatalog(client, ttl=60, clock=clock, on_change=lambda: changes.append(1))
        first = await catalog.models()
        assert len(first) == 2
        assert str(server.requests[0].url) == "https://gw.test/v1/models"
        assert server.requests[0].headers["authorization"] == "Bearer sk-catalog-key"
        clock.now += 59
        await catalog.models()
        assert len(server.requests) == 1  # still fresh
        clock.now += 2
        await catalog.models()
        assert len(server.requests) == 2
        assert changes == []  # same list: no event
        server.payload = {"data": [*GATEWAY_MODELS["data"], {"id": "new/model", "type": "language"}]}
        clock.now += 61
        third = await catalog.models()
        assert [m.info.id for m in third][-1] == "new/model"
        assert changes == [1]
        assert catalog.get("new/model") is not None
        await catalog.models(force=True)
        assert len(server.requests) == 4
        assert changes == [1]


async def test_concurrent_callers_share_one_fetch() -> None:
    import asyncio

    server = CatalogServer(GATEWAY_MODELS)
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        catalog = ModelCatalog(ChatCompletionsClient(http, base_url="https://gw.test/v1"))
        results = await asyncio.gather(*(catalog.models() for _ in range(5)))
    assert len(server.requests) == 1
    assert all(len(r) == 2 for r in results)


async def test_failed_refresh_keeps_the_last_list_and_first_failure_raises() -> None:
    server = CatalogServer(GATEWAY_MODELS)
    clock = Clock()
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        client = ChatCompletionsClient(http, base_url="https://gw.test/v1", api_key="sk-secret-abcdef")
        catalog = ModelCatalog(client, ttl=10, clock=clock)
        await catalog.models()
        server.status, server.payload = 503, {"error": {"message": "down"}}
        clock.now += 11
        assert len(await catalog.models()) == 2
        fresh = ModelCatalog(client, ttl=10, clock=clock)
        server.status, server.payload = 401, {"error": {"message": "bad key sk-secret-abcdef"}}
        with pytest.raises(LanguageModelError) as info:
            await fresh.models()
    assert info.value.code == "NoPermissions"
    assert "sk-secret-abcdef" not in info.value.message


async def test_missing_catalog_says_to_list_models() -> None:
    server = CatalogServer({"error": "not here"}, status=404)
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        catalog = ModelCatalog(ChatCompletionsClient(http, base_url="http://127.0.0.1:9/api", provider="local"))
        with pytest.raises(LanguageModelError, match="'models' setting") as info:
            await catalog.models()
    assert info.value.code == "NotFound"


async def test_static_models_skip_the_catalog() -> None:
    server = CatalogServer(GATEWAY_MODELS)
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        client = ChatCompletionsClient(http, base_url="https://gw.test/v1")
        static = parse_static_models(["a", "b"], provider="p")
        catalog = ModelCatalog(client, static=static)
        assert [m.info.id for m in await catalog.models()] == ["a", "b"]
    assert server.requests == []


async def test_anthropic_catalog_pages_and_headers() -> None:
    server = CatalogServer(
        {"data": [{"type": "model", "id": "claude-1", "display_name": "C1"}], "has_more": True, "last_id": "page1-last"}
    )
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        client = AnthropicClient(http, base_url="https://api.anthropic.test/v1", api_key="sk-ant-abcdef")
        models = await ModelCatalog(client).models()
    assert [m.info.id for m in models] == ["claude-1", "claude-2"]
    headers = server.requests[0].headers
    assert headers["x-api-key"] == "sk-ant-abcdef"
    assert headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers
