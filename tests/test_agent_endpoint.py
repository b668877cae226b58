"""The agents' APIs on the loopback endpoint over real HTTP on 127.0.0.1, driven by the real
``anthropic`` and ``openai`` SDKs, with a scripted fake VS Code behind it."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from lmbridge.client.endpoint import EndpointServer
from lmbridge.client.endpoint.apis import ModelList
from lmbridge.client.guard import RetryPolicy
from lmbridge.client.model_names import ModelNameMap
from lmbridge.client.testing import FakeBridge, fake_model
from lmbridge.errors import LanguageModelError
from lmbridge.parts import (
    ChatRole,
    ModelCapabilities,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolMode,
    ToolResultPart,
)

CLAUDE = fake_model(
    "claude-sonnet-4.6",
    vendor="copilot",
    family="claude-sonnet-4.6",
    max_input_tokens=4000,
    capabilities=ModelCapabilities(image_input=True, tool_calling=True),
)
GPT = fake_model("gpt-4o", vendor="copilot", family="gpt-4o", max_input_tokens=4000)
OWN = fake_model("openai/gpt-5", vendor="lmbridge", family="gpt-5")
WEATHER = {
    "name": "weather",
    "description": "Weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture
def bridge() -> FakeBridge:
    return FakeBridge([CLAUDE, GPT, OWN])


@pytest.fixture
async def server(bridge: FakeBridge) -> AsyncIterator[EndpointServer]:
    srv = EndpointServer(
        bridge,
        endpoint_file=False,
        keepalive=0.1,
        first_part_wait=0.5,
        retry=RetryPolicy(retries=1, base_delay=0.01),
        names=ModelNameMap.from_setting({"my-model": "vscodelm/copilot/gpt-4o"})[0],
    )
    await srv.start()
    try:
        yield srv
    finally:
        await srv.aclose()


def claude(server: EndpointServer, **kwargs: Any) -> anthropic.AsyncAnthropic:
    kwargs.setdefault("api_key", server.token)
    return anthropic.AsyncAnthropic(base_url=server.url, max_retries=0, **kwargs)


def oai(server: EndpointServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=f"{server.url}/v1",
        api_key=server.token,
        max_retries=0,
        http_client=httpx.AsyncClient(trust_env=False),
    )


# --------------------------------------------------------------------------- Anthropic SDK


async def test_anthropic_stream_with_thinking_text_and_a_tool_call(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    bridge.script(
        CLAUDE.id,
        [
            ThinkingPart("Check the ", "r"),
            ThinkingPart("weather.", "r", {"signature": "S1"}),
            TextPart("Let me look."),
            ToolCallPart("toolu_1", "weather", {"city": "Paris"}),
        ],
    )
    client = claude(server)
    async with client.messages.stream(
        model="claude-sonnet-4-6-20991231",
        max_tokens=1000,
        system=[{"type": "text", "text": "Sys", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[WEATHER],  # type: ignore[list-item]
        thinking={"type": "enabled", "budget_tokens": 1024},
    ) as stream:
        texts = [t async for t in stream.text_stream]
        final = await stream.get_final_message()
    assert "".join(texts) == "Let me look."
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[0].signature == "S1"  # type: ignore[union-attr]
    assert final.content[2].input == {"city": "Paris"}  # type: ignore[union-attr]
    assert final.stop_reason == "tool_use" and final.usage.input_tokens > 0
    sent = bridge.requests[0]
    assert sent.model.id == CLAUDE.id  # the dated Claude name found the family
    assert [t.name for t in sent.options.tools] == ["weather"]
    assert sent.options.model_options["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert sent.messages[0].role == ChatRole.ASSISTANT and sent.messages[0].text == "Sys"
    await client.close()


async def test_anthropic_tool_result_round_and_beta_path(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    bridge.script(CLAUDE.id, [TextPart("It is sunny.")])
    client = claude(server)
    message = await client.beta.messages.create(  # posts to /v1/messages?beta=true
        model="claude-sonnet-4-6",
        max_tokens=100,
        messages=[
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "P"}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sun"}],
            },
        ],
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice={"type": "any"},
        betas=["context-management-2025-06-27"],
    )
    assert message.content[0].text == "It is sunny."  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    sent = bridge.requests[0]
    assert sent.options.tool_mode == ToolMode.REQUIRED
    result = sent.messages[-1].content[0]
    assert isinstance(result, ToolResultPart) and result.content == [TextPart("sun")]
    # usage comes from the guard's estimate: no countTokens round trip per message
    assert bridge.count_calls == 0 and message.usage.input_tokens > 0
    await client.close()


async def test_anthropic_count_tokens(server: EndpointServer) -> None:
    client = claude(server)
    short = await client.messages.count_tokens(
        model="claude-sonnet-4-6", messages=[{"role": "user", "content": "hi"}]
    )
    long = await client.messages.count_tokens(
        model="claude-sonnet-4-6",
        messages=[{"role": "user", "content": "hello there " * 100}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert 0 < short.input_tokens < long.input_tokens
    await client.close()


async def test_anthropic_count_tokens_counts_the_tools_beside_the_same_messages(
    server: EndpointServer,
) -> None:
    client = claude(server)
    messages = [{"role": "user", "content": "hello there " * 10}]
    bare = await client.messages.count_tokens(model="claude-sonnet-4-6", messages=messages)  # type: ignore[arg-type]
    with_tools = await client.messages.count_tokens(
        model="claude-sonnet-4-6",
        messages=messages,  # type: ignore[arg-type]
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert 0 < bare.input_tokens < with_tools.input_tokens
    await client.close()


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "beArer"])
async def test_the_bearer_scheme_is_read_whatever_its_case(
    server: EndpointServer, scheme: str
) -> None:
    async with httpx.AsyncClient(base_url=server.url, trust_env=False) as http:
        for path in ("/v1/models", "/v1/chat/completions"):
            good = {"authorization": f"{scheme} {server.token}"}
            if path == "/v1/models":
                response = await http.get(path, headers=good)
            else:
                body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
                response = await http.post(path, headers=good, json=body)
            assert response.status_code == 200, response.text
        wrong = {"authorization": f"{scheme} not-the-token"}
        assert (await http.get("/v1/models", headers=wrong)).status_code == 401
        basic = {"authorization": f"Basic {server.token}"}
        assert (await http.get("/v1/models", headers=basic)).status_code == 401


async def test_anthropic_errors(server: EndpointServer, bridge: FakeBridge) -> None:
    client = claude(server)
    msgs = [{"role": "user", "content": "x"}]
    with pytest.raises(anthropic.NotFoundError) as nf:
        await client.messages.create(model="llama-7", max_tokens=5, messages=msgs)  # type: ignore[arg-type]
    assert nf.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    # too long for the model: refused before VS Code sees it, with the text Claude Code reads
    with pytest.raises(anthropic.BadRequestError) as big:
        await client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=5,
            messages=[{"role": "user", "content": "word " * 5000}],
        )
    assert "prompt is too long:" in big.value.message and "> 4000 maximum" in big.value.message
    assert bridge.requests == []
    # a rate limit before the first part: retried, then 429 with retry-after
    bridge.script(CLAUDE.id, [LanguageModelError("rate limit, retry after 100ms", "Blocked")])
    for stream in (False, True):
        with pytest.raises(anthropic.RateLimitError) as rate:
            await client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=5,
                messages=msgs,  # type: ignore[arg-type]
                stream=stream,  # type: ignore[call-overload]
            )
        assert rate.value.response.headers["retry-after"] == "1"
    assert len(bridge.requests) == 4  # two attempts each
    # a bad request names the problem
    with pytest.raises(anthropic.BadRequestError, match="tool_choice"):
        await client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=5,
            messages=msgs,  # type: ignore[arg-type]
            tool_choice={"type": "tool", "name": "nope"},
        )
    await client.close()
    wrong = claude(server, api_key="wrong")
    with pytest.raises(anthropic.AuthenticationError) as auth:
        await wrong.messages.create(model="claude-sonnet-4-6", max_tokens=5, messages=msgs)  # type: ignore[arg-type]
    assert auth.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    await wrong.close()
    # Claude Code's other way: the token as a bearer auth token
    bridge.script(CLAUDE.id, [TextPart("ok")])
    bearer = anthropic.AsyncAnthropic(base_url=server.url, auth_token=server.token, max_retries=0)
    reply = await bearer.messages.create(model="claude-sonnet-4-6", max_tokens=5, messages=msgs)  # type: ignore[arg-type]
    assert reply.content[0].text == "ok"  # type: ignore[union-attr]
    await bearer.close()


async def test_anthropic_error_mid_stream_keeps_the_text(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    bridge.script(CLAUDE.id, [TextPart("partial"), LanguageModelError("quota", "Blocked")])
    client = claude(server)
    got = ""
    with pytest.raises(anthropic.APIStatusError, match="rate"):
        async with client.messages.stream(
            model="claude-sonnet-4-6", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        ) as stream:
            async for text in stream.text_stream:
                got += text
    assert got == "partial"
    await client.close()


async def test_pings_while_the_model_thinks(server: EndpointServer, bridge: FakeBridge) -> None:
    bridge.script(CLAUDE.id, [0.8, TextPart("late")])
    body = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 5,
        "stream": True,
        "messages": [{"role": "user", "content": "x"}],
    }
    async with httpx.AsyncClient(trust_env=False) as http:
        response = await http.post(
            f"{server.url}/v1/messages?beta=true",
            json=body,
            headers={"x-api-key": server.token, "anthropic-version": "2023-06-01"},
        )
    names = [line[7:] for line in response.text.splitlines() if line.startswith("event: ")]
    assert names[0] == "message_start" and "ping" in names
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]


async def test_claude_code_request_shape_is_understood(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    from test_api_anthropic import claude_code_body

    bridge.script(CLAUDE.id, [TextPart("done")])
    async with httpx.AsyncClient(trust_env=False) as http:
        response = await http.post(
            f"{server.url}/v1/messages?beta=true",
            json=claude_code_body("claude-sonnet-4-5-20250929"),
            headers={
                "x-api-key": server.token,
                "anthropic-version": "2023-06-01",
                "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
            },
        )
    assert response.status_code == 200, response.text
    data = [
        json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")
    ]
    assert "".join(d["delta"]["text"] for d in data if d["type"] == "content_block_delta") == "done"
    assert [t.name for t in bridge.requests[0].options.tools] == ["Read", "Later"]


async def test_model_lists_in_each_shape(server: EndpointServer) -> None:
    client = claude(server)
    page = await client.models.list()
    ids = [m.id for m in page.data]
    assert ids == ["claude-sonnet-4.6", "gpt-4o", "openai/gpt-5", "my-model"]
    one = await client.models.retrieve("claude-opus-4-1")  # mapped by the default rule
    assert one.id == "claude-opus-4-1" and one.display_name == CLAUDE.name
    await client.close()
    o = oai(server)
    models = await o.models.list()
    assert [m.id for m in models.data] == ids
    # the SDK percent-encodes the slash of lmbridge's ids
    assert (await o.models.retrieve("openai/gpt-5")).id == "openai/gpt-5"
    with pytest.raises(openai.NotFoundError):
        await o.models.retrieve("nobody")
    await o.close()


# --------------------------------------------------------------------------- OpenAI SDK


FN_TOOL = {
    "type": "function",
    "name": "weather",
    "description": "Weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": False,
}


async def test_responses_stream_with_a_function_tool(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    bridge.script(
        GPT.id,
        [
            ThinkingPart("hmm"),
            TextPart("Checking."),
            ToolCallPart("call_1", "weather", {"city": "Oslo"}),
        ],
    )
    client = oai(server)
    stream = await client.responses.create(
        model="gpt-4o",
        instructions="Be brief.",
        input=[{"role": "user", "content": [{"type": "input_text", "text": "Oslo?"}]}],
        tools=[FN_TOOL],  # type: ignore[list-item]
        stream=True,
        store=False,
        include=["reasoning.encrypted_content"],
        reasoning={"summary": "auto"},
        prompt_cache_key="k",
    )
    types = []
    completed = None
    async for event in stream:
        types.append(event.type)
        if event.type == "response.completed":
            completed = event.response
    assert types[:2] == ["response.created", "response.in_progress"]
    assert "response.function_call_arguments.delta" in types and types[-1] == "response.completed"
    assert completed is not None and completed.output_text == "Checking."
    call = completed.output[-1]
    assert call.type == "function_call" and json.loads(call.arguments) == {"city": "Oslo"}
    assert completed.usage is not None and completed.usage.input_tokens > 0
    sent = bridge.requests[0]
    assert sent.messages[0].text == "Be brief." and sent.options.tools[0].name == "weather"
    await client.close()


async def test_responses_stream_helper_and_non_streamed(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    bridge.script(GPT.id, [TextPart("Hello")])
    client = oai(server)
    async with client.responses.stream(model="my-model", input="hi", tools=[FN_TOOL]) as stream:  # type: ignore[list-item]
        final = await stream.get_final_response()
    assert final.output_text == "Hello" and bridge.requests[0].model.id == GPT.id
    plain = await client.responses.create(model="gpt-4o", input="hi")
    assert plain.output_text == "Hello" and plain.status == "completed"
    await client.close()


async def test_responses_errors(server: EndpointServer, bridge: FakeBridge) -> None:
    client = oai(server)
    with pytest.raises(openai.BadRequestError) as big:
        await client.responses.create(model="gpt-4o", input="word " * 5000, stream=True)
    assert big.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError, match="stateless"):
        await client.responses.create(model="gpt-4o", input="x", previous_response_id="resp_1")
    bridge.script(GPT.id, [TextPart("partial"), LanguageModelError("quota", "Blocked")])
    stream = await client.responses.create(model="gpt-4o", input="x", stream=True)
    last = None
    async for event in stream:
        last = event
    assert last is not None and last.type == "response.failed"
    assert last.response.error is not None and last.response.error.code == "rate_limit_exceeded"  # type: ignore[comparison-overlap]
    assert bridge.active_streams == 0
    await client.close()


# --------------------------------------------------------------------------- bad input, disconnects


async def test_bad_bodies_get_each_apis_error_shape(server: EndpointServer) -> None:
    async with httpx.AsyncClient(base_url=server.url, trust_env=False) as http:
        auth = {"x-api-key": server.token}
        for body in (b"{not json", b"[1, 2]"):
            got = await http.post("/v1/messages", content=body, headers=auth)
            assert got.status_code == 400
            assert got.json()["type"] == "error"
            assert got.json()["error"]["type"] == "invalid_request_error"
            got = await http.post(
                "/v1/responses", content=body, headers={"Authorization": f"Bearer {server.token}"}
            )
            assert got.status_code == 400 and got.json()["error"]["type"] == "invalid_request_error"
        # wrong types deep inside name where they are
        got = await http.post(
            "/v1/messages",
            json={
                "model": "claude-sonnet-4-6",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": 5}],
            },
            headers=auth,
        )
        assert got.status_code == 400 and "messages[0].content" in got.json()["error"]["message"]
        got = await http.post(
            "/v1/responses",
            json={
                "model": "gpt-4o",
                "input": [
                    {"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1]"}
                ],
            },
            headers={"Authorization": f"Bearer {server.token}"},
        )
        assert got.status_code == 400 and "input[0].arguments" in got.json()["error"]["message"]
        # the server is still there
        assert (await http.get("/v1/models", headers=auth)).status_code == 200


@pytest.mark.parametrize("number", ["1e999", "-1e999", "NaN", "Infinity"])
@pytest.mark.parametrize("with_orjson", [True, False])
async def test_a_number_json_cannot_carry_is_a_bad_body_not_a_request(
    server: EndpointServer,
    bridge: FakeBridge,
    monkeypatch: pytest.MonkeyPatch,
    number: str,
    with_orjson: bool,
) -> None:
    """Python's own parser reads 1e999 (and NaN, Infinity) as floats no body can carry: a tool
    call's arguments with one went on to VS Code and the upstream as `Infinity`, which neither
    reads (found by the fuzzing pass of the converters)."""
    import lmbridge._json

    if not with_orjson:
        monkeypatch.setattr(lmbridge._json, "_fast", None)
    body = (
        '{"model": "claude-sonnet-4-6", "max_tokens": 5, "messages": ['
        '{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": '
        '"tool_use", "id": "t1", "name": "f", "input": {"a": NUMBER}}]}, {"role": "user", '
        '"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]}'
    ).replace("NUMBER", number)
    async with httpx.AsyncClient(base_url=server.url, trust_env=False) as http:
        got = await http.post("/v1/messages", content=body, headers={"x-api-key": server.token})
        assert got.status_code == 400, got.text
        assert got.json()["error"]["type"] == "invalid_request_error"
        assert "JSON" in got.json()["error"]["message"]
        assert bridge.requests == []  # nothing reached VS Code
        ok = body.replace(number, "1.5")
        got = await http.post("/v1/messages", content=ok, headers={"x-api-key": server.token})
        assert got.status_code == 200, got.text


@pytest.mark.parametrize("route", ["/v1/messages", "/v1/responses"])
async def test_a_client_that_leaves_cancels_the_vscode_request(
    server: EndpointServer, bridge: FakeBridge, route: str
) -> None:
    bridge.script(CLAUDE.id, [TextPart("first "), *([0.05, TextPart("more ")] * 100)])
    body: dict[str, Any] = {"model": "claude-sonnet-4-6", "stream": True}
    if route == "/v1/messages":
        body |= {"max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    else:
        body |= {"input": "x"}
    async with (
        httpx.AsyncClient(base_url=server.url, trust_env=False) as http,
        http.stream("POST", route, json=body, headers={"x-api-key": server.token}) as response,
    ):
        async for chunk in response.aiter_bytes():
            if b"first" in chunk:
                break
    for _ in range(100):
        if bridge.requests and bridge.requests[0].cancelled and bridge.active_streams == 0:
            break
        await asyncio.sleep(0.02)
    assert bridge.requests[0].cancelled and not bridge.requests[0].finished
    assert bridge.active_streams == 0


async def test_images_to_a_model_without_image_input_become_placeholders(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    blind = fake_model(
        "blind", vendor="copilot", family="blind", capabilities=ModelCapabilities(False, True)
    )
    bridge.models.append(blind)
    bridge.script("blind", [TextPart("I cannot see it.")])
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 8).decode()
    client = claude(server)
    await client.messages.create(
        model="blind",
        max_tokens=5,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": png},
                    },
                ],
            }
        ],
    )
    await client.close()
    o = oai(server)
    await o.responses.create(
        model="blind",
        input=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "input_image",
                        "image_url": f"data:image/png;base64,{png}",
                        "detail": "auto",
                    }
                ],
            }
        ],
    )
    await o.close()
    for sent in bridge.requests:
        assert sent.messages[-1].content[-1] == TextPart("[image omitted: image/png, 16 bytes]")


async def test_chat_completions_resolve_names_the_same_way(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    client = oai(server)
    for name, expected in (("my-model", GPT), ("claude-sonnet-4-6-20991231", CLAUDE)):
        await client.chat.completions.create(
            model=name, messages=[{"role": "user", "content": "x"}]
        )
        assert bridge.requests[-1].model == expected
    with pytest.raises(openai.NotFoundError) as info:
        await client.chat.completions.create(
            model="llama-7", messages=[{"role": "user", "content": "x"}]
        )
    assert info.value.code == "model_not_found"
    await client.close()


async def test_chat_completions_never_wait_on_vscode_token_counts(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    """Chat Completions take the agents' shared path: the input is the guard's estimate, made
    at once, not one VS Code ``countTokens`` round trip per message before the request goes."""
    bridge.script(GPT.id, [TextPart("Hello "), TextPart("world")])
    client = oai(server)
    history = [
        {"role": "system", "content": "be brief " * 40},
        {"role": "user", "content": "hi " * 40},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "again"},
    ]
    completion = await client.chat.completions.create(model="gpt-4o", messages=history)  # type: ignore[arg-type]
    assert completion.choices[0].message.content == "Hello world"
    assert completion.usage is not None and completion.usage.prompt_tokens > 40
    stream = await client.chat.completions.create(
        model="gpt-4o",
        messages=history,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    usage = [chunk.usage async for chunk in stream if chunk.usage is not None]
    assert usage and usage[0].prompt_tokens == completion.usage.prompt_tokens
    assert bridge.count_calls == 0
    await client.close()


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_completions_too_long_is_refused_before_vscode_sees_it(
    server: EndpointServer, bridge: FakeBridge, stream: bool
) -> None:
    """Longer than the model's input limit: OpenAI's 400 ``context_length_exceeded`` (what
    agents compact on), and nothing is sent."""
    client = oai(server)
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "word " * 5000}], stream=stream
        )
    await client.close()
    assert info.value.code == "context_length_exceeded"
    assert "> 4000 maximum" in info.value.message
    assert bridge.requests == []


async def test_chat_completions_are_retried_cleaned_and_fitted_like_every_agents_api(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    # a rate limit before the first part: retried (once here), then 429 with retry-after
    bridge.script(GPT.id, [LanguageModelError("rate limit", "Blocked")])
    client = oai(server)
    with pytest.raises(openai.RateLimitError) as rate:
        await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "x"}]
        )
    assert rate.value.response.headers["retry-after"] == "1"
    assert len(bridge.requests) == 2
    # terminal output in tool results is cleaned; images become placeholders for a blind model
    blind = fake_model(
        "blind", vendor="copilot", family="blind", capabilities=ModelCapabilities(False, True)
    )
    bridge.models.append(blind)
    bridge.script("blind", [TextPart("ok")])
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 8).decode()
    await client.chat.completions.create(
        model="blind",
        messages=[
            {"role": "user", "content": "build"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": COLOURED},
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}],
            },
        ],
    )
    await client.close()
    sent = bridge.requests[-1].messages
    result = sent[2].content[0]
    assert isinstance(result, ToolResultPart) and result.content == [TextPart(" build 100%\ndone")]
    assert sent[-1].content[-1] == TextPart("[image omitted: image/png, 16 bytes]")


# --------------------------------------------------------------------------- the kept model list


async def test_requests_resolve_their_model_from_one_listing_until_vscode_says_models_changed(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    """Listing VS Code's models makes VS Code ask every provider again: a round trip through
    the extension host and the workbench. The endpoint lists once and keeps the list."""
    bridge.script(GPT.id, [TextPart("ok")])
    bridge.script(CLAUDE.id, [TextPart("ok")])
    o, c = oai(server), claude(server)
    user = [{"role": "user", "content": "x"}]
    for _ in range(3):
        await o.chat.completions.create(model="gpt-4o", messages=user)  # type: ignore[arg-type]
        await o.responses.create(model="gpt-4o", input="x")
        await c.messages.create(model="claude-sonnet-4-6", max_tokens=5, messages=user)  # type: ignore[arg-type]
    assert len(bridge.requests) == 9 and len(bridge.selections) == 1
    # VS Code's models changed: the next request lists them again and sees the new one
    newer = fake_model("gpt-5", vendor="copilot", family="gpt-5")
    bridge.models.append(newer)
    bridge.script(newer.id, [TextPart("new")])
    bridge.fire_models_changed()
    reply = await o.chat.completions.create(model="gpt-5", messages=user)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "new" and len(bridge.selections) == 2
    # a model gone without notice is not answered from the kept list forever: a name the kept
    # list does not know is looked up anew (a model added without an event is found)
    quiet = fake_model("quiet-1", vendor="other", family="quiet")
    bridge.models.append(quiet)
    bridge.script(quiet.id, [TextPart("found")])
    reply = await o.chat.completions.create(model="quiet-1", messages=user)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "found" and len(bridge.selections) == 3
    # the model lists clients ask for are always listed anew
    assert "quiet-1" in [m.id for m in (await o.models.list()).data]
    assert len(bridge.selections) == 4
    await o.close()
    await c.close()


async def test_the_kept_model_list_ages_and_a_change_during_a_listing_is_not_lost() -> None:
    now = [0.0]
    bridge = FakeBridge([GPT])
    models = ModelList(bridge, max_age=60.0, clock=lambda: now[0])
    assert models.kept() is None
    assert await models.listed() == [GPT] and models.kept() == [GPT]
    now[0] = 59.0
    assert models.kept() == [GPT]
    now[0] = 60.0
    assert models.kept() is None, "too old: listed again"
    # VS Code's models change while a listing is under way: that listing is not kept
    await models.listed()
    gate = asyncio.Event()

    class Slow(FakeBridge):
        async def select_chat_models(self, selector: Any) -> list[Any]:
            await gate.wait()
            return await super().select_chat_models(selector)

    slow = ModelList(Slow([GPT]), clock=lambda: 0.0)
    listing = asyncio.ensure_future(slow.listed())
    await asyncio.sleep(0)
    slow.forget()
    gate.set()
    assert await listing == [GPT]
    assert slow.kept() is None


# --------------------------------------------------------------------------- terminal output

COLOURED = "\x1b[1;32mPASS\x1b[0m build 10%\r build 100%\n\x1b]0;title\x07done\x07"


def _anthropic_tool_round(output: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "\x1b[31mRun the build\x1b[0m"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"c": "x"}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": output}],
        },
    ]


@pytest.mark.parametrize(
    ("header", "result_text", "user_text"),
    [
        (None, " build 100%\ndone", "\x1b[31mRun the build\x1b[0m"),
        ("all", " build 100%\ndone", "Run the build"),
        ("off", COLOURED, "\x1b[31mRun the build\x1b[0m"),
    ],
)
async def test_terminal_output_in_tool_results_is_cleaned_by_default_and_per_request(
    server: EndpointServer, bridge: FakeBridge, header: str | None, result_text: str, user_text: str
) -> None:
    """An agent forwarding coloured build output: by default the escapes and redraws are gone
    from tool results (and only there); a request's header asks for all text or none."""
    bridge.script(CLAUDE.id, [TextPart("ok")])
    headers = {"X-Lmbridge-Clean-Terminal": header} if header else {}
    client = claude(server, default_headers=headers)
    await client.messages.create(
        model="claude-sonnet-4-6", max_tokens=50, messages=_anthropic_tool_round(COLOURED)  # type: ignore[arg-type]
    )
    await client.close()
    sent = bridge.requests[0].messages
    assert sent[0].text == user_text
    result = sent[-1].content[0]
    assert isinstance(result, ToolResultPart) and result.content == [TextPart(result_text)]


async def test_a_bad_clean_terminal_header_is_a_400_naming_it(server: EndpointServer) -> None:
    client = claude(server, default_headers={"X-Lmbridge-Clean-Terminal": "sometimes"})
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(
            model="claude-sonnet-4-6", max_tokens=50, messages=[{"role": "user", "content": "x"}]
        )
    await client.close()
    assert "X-Lmbridge-Clean-Terminal" in str(info.value) and "sometimes" in str(info.value)


# --------------------------------------------------------------------------- workspace models


async def test_a_workspaces_models_answer_only_the_users_own_mapping() -> None:
    """A repository's provider (allowed by the user) names its models like the ones agents ask
    for: no client name, family, pattern or default reaches them; a user's selector naming the
    model's id does."""
    evil = fake_model(
        "evil/claude-haiku-4-5", vendor="lmbridge", family="claude-haiku-4-5",
        workspace="http://127.0.0.1:9",
    )  # fmt: skip
    codex = fake_model(
        "evil/gpt-5-codex", vendor="lmbridge", family="gpt-5-codex", workspace="http://127.0.0.1:9"
    )
    bridge = FakeBridge([evil, codex, OWN, GPT])
    names = ModelNameMap.from_setting(
        {"mine-*": "vscodelm/lmbridge//evil/gpt-5-codex", "claude-*": "vscodelm/lmbridge/claude-haiku-4-5"}
    )[0]
    srv = EndpointServer(bridge, endpoint_file=False, names=names)
    await srv.start()
    try:
        client = oai(srv)
        asked = {}
        for name in (
            "claude-haiku-4-5", "claude-haiku-4-5-20251001", "gpt-5-codex", "gpt-5.1", "auto",
            "mine-1",
        ):  # fmt: skip
            await client.chat.completions.create(
                model=name, messages=[{"role": "user", "content": "the secret is 4711"}]
            )
            asked[name] = bridge.requests[-1].model.id
        assert asked == {
            # the family, the id, a selector, the user's pattern by family, the default: the
            # first model that is the user's
            "claude-haiku-4-5": "openai/gpt-5",
            "claude-haiku-4-5-20251001": "openai/gpt-5",
            "gpt-5-codex": "openai/gpt-5",
            "gpt-5.1": "openai/gpt-5",
            "auto": "openai/gpt-5",
            # the user's own entry naming the model's id
            "mine-1": "evil/gpt-5-codex",
        }
        # a client naming the model's id or a selector of its own finds nothing
        for name in ("evil/claude-haiku-4-5", "vscodelm/lmbridge/claude-haiku-4-5"):
            with pytest.raises(openai.NotFoundError):
                await client.chat.completions.create(
                    model=name, messages=[{"role": "user", "content": "x"}]
                )
        listed = [m.id for m in (await client.models.list()).data]
        assert listed == ["openai/gpt-5", "gpt-4o"]  # a workspace's model only as the user named it
        await client.close()
    finally:
        await srv.aclose()
