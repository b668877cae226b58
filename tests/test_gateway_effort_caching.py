"""Thinking effort and prompt caching in the upstream request, per format.

The effort comes from VS Code's model picker (``options.modelConfiguration``, from the
per-model ``configurationSchema`` the provider declares) or from the provider's
``reasoningEffort`` option; the chat session's id (``modelOptions._conversationId``) becomes
OpenAI's ``prompt_cache_key``; Anthropic requests without cache markers get breakpoints.
Requests are built by the real clients (``build_request``); nothing is sent.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from lmbridge.gateway import AnthropicClient, ChatCompletionsClient, ResponsesClient, UpstreamClient
from lmbridge.gateway._client import session_cache_key
from lmbridge.gateway.gemini import GeminiClient
from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

HISTORY = [
    ChatMessage.system("You are terse."),
    ChatMessage.user("Weather in Paris?"),
    ChatMessage.assistant([TextPart("Checking."), ToolCallPart("call_1", "weather", {"city": "Paris"})]),
    ChatMessage.user([ToolResultPart("call_1", [TextPart("sunny, 21 C")])]),
]
WEATHER = ChatTool("weather", "Current weather", {"type": "object", "properties": {}})


def client(cls: type[UpstreamClient], **kwargs: Any) -> UpstreamClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    return cls(http, base_url="https://upstream.test/v1", api_key="k", provider="p", **kwargs)


def body(c: UpstreamClient, model: str, options: ChatRequestOptions, max_tokens: int = 50_000) -> dict[str, Any]:
    return c.build_request(model, HISTORY, options, default_max_tokens=max_tokens).body


def effort(value: str) -> ChatRequestOptions:
    return ChatRequestOptions(model_configuration={"reasoningEffort": value})


# --------------------------------------------------------------------------- thinking effort


def test_the_pickers_effort_reaches_each_formats_request() -> None:
    assert body(client(ChatCompletionsClient), "o3", effort("high"))["reasoning_effort"] == "high"
    assert body(client(ResponsesClient), "gpt-5", effort("minimal"))["reasoning"] == {"effort": "minimal"}
    thinking = body(client(AnthropicClient), "claude-sonnet-4-5", effort("medium"))["thinking"]
    assert thinking == {"type": "enabled", "budget_tokens": 8_192}
    gemini = client(GeminiClient)
    config = body(gemini, "gemini-2.5-pro", effort("low"))["generationConfig"]["thinkingConfig"]
    assert config == {"thinkingBudget": 1_024}
    config = body(gemini, "gemini-3-pro-preview", effort("high"))["generationConfig"]["thinkingConfig"]
    assert config == {"thinkingLevel": "high"}


def test_no_choice_asks_for_nothing_and_the_provider_option_is_the_default() -> None:
    plain = client(ChatCompletionsClient)
    assert "reasoning_effort" not in body(plain, "o3", ChatRequestOptions())
    configured = client(ChatCompletionsClient)
    configured.reasoning_effort = "low"
    assert body(configured, "o3", ChatRequestOptions())["reasoning_effort"] == "low"
    assert body(configured, "o3", effort("high"))["reasoning_effort"] == "high"  # the picker wins


def test_anthropic_keeps_the_thinking_budget_under_max_tokens_and_drops_temperature() -> None:
    c = client(AnthropicClient)
    options = ChatRequestOptions(
        model_options={"temperature": 0.2}, model_configuration={"reasoningEffort": "high"}
    )
    b = body(c, "claude-opus-4-1", options, max_tokens=10_000)
    assert b["thinking"] == {"type": "enabled", "budget_tokens": 10_000 - 1_024}
    assert "temperature" not in b
    assert "thinking" not in body(c, "claude-opus-4-1", effort("high"), max_tokens=1_500)


def test_reasoning_models_get_the_pickers_entry() -> None:
    assert client(ChatCompletionsClient).effort_levels("openai/gpt-5-mini")[0] == "minimal"
    assert client(ChatCompletionsClient).effort_levels("o4-mini") == ("low", "medium", "high")
    assert client(ChatCompletionsClient).effort_levels("gpt-4o") == ()
    assert client(AnthropicClient).effort_levels("claude-sonnet-4-5") == ("low", "medium", "high")
    assert client(AnthropicClient).effort_levels("claude-3-5-haiku") == ()
    assert client(GeminiClient).effort_levels("gemini-3-pro-preview") == ("low", "high")


# --------------------------------------------------------------------------- prompt caching


@pytest.mark.parametrize("cls", [ChatCompletionsClient, ResponsesClient])
def test_the_chat_session_becomes_openais_prompt_cache_key(cls: type[UpstreamClient]) -> None:
    c = client(cls)
    session = ChatRequestOptions(model_options={"_conversationId": "3f1c-session"})
    key = body(c, "gpt-4o", session)["prompt_cache_key"]
    assert key == session_cache_key("3f1c-session") and "3f1c-session" not in key
    assert body(c, "gpt-4o", session)["prompt_cache_key"] == key  # stable within the session
    assert "prompt_cache_key" not in body(c, "gpt-4o", ChatRequestOptions())
    assert "_conversationId" not in str(body(c, "gpt-4o", session))


def test_anthropic_requests_without_markers_get_breakpoints_on_tools_system_and_last_turns() -> None:
    c = client(AnthropicClient)
    b = body(c, "claude-sonnet-4-5", ChatRequestOptions(tools=[WEATHER]))
    eph = {"type": "ephemeral"}
    assert b["tools"][-1]["cache_control"] == eph
    assert b["system"] == [{"type": "text", "text": "You are terse.", "cache_control": eph}]
    users = [m for m in b["messages"] if m["role"] == "user"]
    assert users[-1]["content"][-1]["cache_control"] == eph  # the latest turn
    assert users[-2]["content"][-1]["cache_control"] == eph  # the turn before: read back
    marks = str(b).count("cache_control")
    assert marks == 4  # the API's most


def test_anthropic_keeps_the_callers_own_markers() -> None:
    c = client(AnthropicClient)
    marked = [*HISTORY[:2], ChatMessage.assistant([TextPart("ok")]), HISTORY[3]]
    from lmbridge.parts import DataPart

    marked[1] = ChatMessage.user([TextPart("Weather in Paris?"), DataPart(b"ephemeral", "cache_control")])
    b = c.build_request("claude-sonnet-4-5", marked, ChatRequestOptions(), default_max_tokens=1000).body
    assert str(b).count("cache_control") == 1


async def test_the_provider_declares_the_thinking_effort_entry_on_reasoning_models() -> None:
    from lmbridge.config import ProviderContext, parse_entries
    from lmbridge.gateway import build_provider
    from lmbridge.parts import model_info_to_wire
    from lmbridge.provider import CancellationToken, ModelInformationOptions

    [entry] = parse_entries(
        [{"name": "p", "format": "chat-completions", "baseUrl": "https://upstream.test/v1",
          "models": ["o3", "gpt-4o"]}]
    )  # fmt: skip
    assert not isinstance(entry, Exception)
    provider = build_provider(entry, ProviderContext(name="p", api_key="k"))
    try:
        models = await provider.provide_language_model_chat_information(
            ModelInformationOptions(silent=True), CancellationToken.NONE
        )
    finally:
        await provider.aclose()
    wire = {m.id: model_info_to_wire(m) for m in models}
    entry_schema = wire["o3"]["configurationSchema"]["properties"]["reasoningEffort"]
    assert entry_schema["enum"] == ["low", "medium", "high"]
    assert entry_schema["group"] == "navigation" and "default" not in entry_schema
    assert "configurationSchema" not in wire["gpt-4o"]
