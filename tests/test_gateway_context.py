"""Long conversations: Anthropic context editing and Responses truncation, as the upstream sees
them (the real host as a subprocess, a real HTTP server on 127.0.0.1 recording each request)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from lmbridge.gateway.anthropic import context_management_supported
from lmbridge.host.client import HostClient
from lmbridge.parts import ChatMessage, ChatRequestOptions
from support.replay_server import RecordedRequest, ReplayServer, Reply

ANTHROPIC_TEXT = "anthropic/anthropic-text.chunks.txt"
RESPONSES_TEXT = "openai-responses/openai-phase.1.chunks.txt"
BETA = "context-management-2025-06-27"
CLEAR_TOOLS = {"type": "clear_tool_uses_20250919"}
CLEAR_THINKING = {"type": "clear_thinking_20251015"}


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        server.route("POST", "/v1/messages", Reply.fixture(ANTHROPIC_TEXT))
        server.route("POST", "/v1/responses", Reply.fixture(RESPONSES_TEXT))
        yield server


def anthropic(server: ReplayServer, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "format": "anthropic",
        "baseUrl": server.url + "/v1",
        "models": ["claude-sonnet-4-5-20250929", "claude-3-7-sonnet-20250219"],
        "retry": {"maxAttempts": 1},
        **extra,
    }


def responses(server: ReplayServer, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "format": "responses",
        "baseUrl": server.url + "/v1",
        "models": ["gpt-5"],
        "retry": {"maxAttempts": 1},
        **extra,
    }


@pytest.fixture
async def host(upstream: ReplayServer) -> AsyncIterator[HostClient]:
    async with HostClient.start([], env=dict(os.environ)) as client:
        result = await client.initialize(
            providers=[
                anthropic(upstream, "claude", headers={"Anthropic-Beta": "prompt-caching-2024-07-31"}),
                anthropic(upstream, "plain", contextManagement=False),
                anthropic(
                    upstream,
                    "custom",
                    extraBody={"context_management": {"edits": [{**CLEAR_TOOLS, "keep": 5}]}},
                ),
                responses(upstream, "oai"),
                responses(upstream, "keep", truncation="disabled"),
                responses(upstream, "extra", extraBody={"truncation": "disabled"}),
            ],
            secrets={},
        )
        assert all(p["ok"] for p in result["providers"]), result
        yield client


async def sent(
    host: HostClient, server: ReplayServer, model: str, options: ChatRequestOptions | None = None
) -> RecordedRequest:
    before = len(server.requests)
    await host.chat(model, [ChatMessage.user("hi")], options)
    (request,) = server.requests[before:]
    return request


async def test_claude_4_gets_tool_use_clearing_and_the_beta_header_merged(
    host: HostClient, upstream: ReplayServer
) -> None:
    request = await sent(host, upstream, "claude/claude-sonnet-4-5-20250929")
    assert request.json()["context_management"] == {"edits": [CLEAR_TOOLS]}
    assert request.headers["anthropic-beta"] == f"prompt-caching-2024-07-31,{BETA}"


async def test_with_thinking_on_old_thinking_is_cleared_too_and_listed_first(
    host: HostClient, upstream: ReplayServer
) -> None:
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    request = await sent(
        host, upstream, "claude/claude-sonnet-4-5-20250929", ChatRequestOptions(model_options=thinking)
    )
    body = request.json()
    assert body["thinking"] == thinking["thinking"]
    assert body["context_management"] == {"edits": [CLEAR_THINKING, CLEAR_TOOLS]}
    assert BETA in request.headers["anthropic-beta"].split(",")


async def test_older_models_and_the_option_off_send_neither_field_nor_header(
    host: HostClient, upstream: ReplayServer
) -> None:
    for model in ("claude/claude-3-7-sonnet-20250219", "plain/claude-sonnet-4-5-20250929"):
        request = await sent(host, upstream, model)
        assert "context_management" not in request.json(), model
        assert BETA not in request.headers.get("anthropic-beta", ""), model


async def test_a_configured_context_management_is_sent_as_given_with_the_header(
    host: HostClient, upstream: ReplayServer
) -> None:
    request = await sent(host, upstream, "custom/claude-sonnet-4-5-20250929")
    assert request.json()["context_management"] == {"edits": [{**CLEAR_TOOLS, "keep": 5}]}
    assert request.headers["anthropic-beta"] == BETA


async def test_responses_ask_for_auto_truncation_unless_told_otherwise(
    host: HostClient, upstream: ReplayServer
) -> None:
    assert (await sent(host, upstream, "oai/gpt-5")).json()["truncation"] == "auto"
    assert (await sent(host, upstream, "keep/gpt-5")).json()["truncation"] == "disabled"
    assert (await sent(host, upstream, "extra/gpt-5")).json()["truncation"] == "disabled"
    options = ChatRequestOptions(model_options={"truncation": "disabled"})
    assert (await sent(host, upstream, "oai/gpt-5", options)).json()["truncation"] == "disabled"


async def test_bad_option_values_name_the_option(upstream: ReplayServer) -> None:
    async with HostClient.start([], env=dict(os.environ)) as client:
        result = await client.initialize(
            providers=[
                anthropic(upstream, "a", contextManagement="yes"),
                responses(upstream, "r", truncation="sometimes"),
            ],
            secrets={},
        )
    errors = {p["name"]: p.get("error", "") for p in result["providers"]}
    assert "contextManagement: expected true or false" in errors["a"]
    assert "truncation: expected 'auto' or 'disabled'" in errors["r"]


@pytest.mark.parametrize(
    ("model", "supported"),
    [
        ("claude-sonnet-4-5-20250929", True),
        ("claude-opus-4-1", True),
        ("claude-haiku-4-5", True),
        ("claude-sonnet-4-20250514", True),
        ("anthropic.claude-opus-4-20250514-v1:0", True),
        ("claude-opus-5", True),
        ("claude-3-7-sonnet-20250219", False),
        ("claude-3-5-haiku-latest", False),
        ("claude-instant-1.2", False),
        ("gpt-4o", False),
    ],
)
def test_which_models_take_context_editing(model: str, supported: bool) -> None:
    assert context_management_supported(model) is supported


async def test_the_catalog_says_which_models_take_context_editing(upstream: ReplayServer) -> None:
    def model(model_id: str, supported: bool | None) -> dict[str, Any]:
        caps = {} if supported is None else {"context_management": {"supported": supported}}
        return {"type": "model", "id": model_id, "display_name": model_id, "capabilities": caps}

    catalog = {
        "data": [
            model("claude-next", True),  # no generation in the id: the catalog decides
            model("claude-sonnet-4-5-20250929", False),  # the catalog overrides the id
            model("claude-opus-4-1", None),  # the catalog does not say: by id
        ],
        "has_more": False,
    }
    upstream.route("GET", "/v1/models", Reply.json(catalog))
    entry = {k: v for k, v in anthropic(upstream, "cat").items() if k != "models"}
    async with HostClient.start([], env=dict(os.environ)) as host:
        await host.initialize(providers=[entry], secrets={})
        await host.request("models/list", {"silent": False})
        on = await sent(host, upstream, "cat/claude-next")
        off = await sent(host, upstream, "cat/claude-sonnet-4-5-20250929")
        by_id = await sent(host, upstream, "cat/claude-opus-4-1")
    assert on.json()["context_management"] == {"edits": [CLEAR_TOOLS]}
    assert on.headers["anthropic-beta"] == BETA
    assert "context_management" not in off.json() and "anthropic-beta" not in off.headers
    assert by_id.json()["context_management"] == {"edits": [CLEAR_TOOLS]}
