"""The loopback endpoint over real HTTP on 127.0.0.1, with a fake bridge behind it: the official
``openai`` client, the native HttpTransport, tokens, the endpoint file, disconnects."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import openai
import pytest

from lmbridge.client.api import LanguageModelClient
from lmbridge.client.classify import ChatRequestError, ErrorKind
from lmbridge.client.discovery import EndpointNotFoundError, read_endpoint_file
from lmbridge.client.endpoint import EndpointServer
from lmbridge.client.guard import RetryPolicy
from lmbridge.client.selectors import ModelSelector
from lmbridge.client.testing import FakeBridge, fake_model
from lmbridge.client.transport import HttpTransport
from lmbridge.errors import LanguageModelError
from lmbridge.parts import (
    ChatMessage,
    ChatTool,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolMode,
    message_to_wire,
)

GPT = fake_model("gpt-4o-id", vendor="copilot", family="gpt-4o")
FAST_RETRY = RetryPolicy(retries=1, base_delay=0.01)
"""Rate limits before the first part are retried once, at once."""
OWN = fake_model("openai/gpt-4o", vendor="lmbridge", family="gpt-4o")


@pytest.fixture
def bridge() -> FakeBridge:
    return FakeBridge([GPT, OWN])


@pytest.fixture
async def server(bridge: FakeBridge, tmp_path: Path) -> AsyncIterator[EndpointServer]:
    srv = EndpointServer(
        bridge,
        endpoint_file=tmp_path / "lmbridge" / "endpoint.json",
        keepalive=0.2,
        retry=FAST_RETRY,
    )
    await srv.start()
    try:
        yield srv
    finally:
        await srv.aclose()


def oai(server: EndpointServer, token: str | None = None) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=f"{server.url}/v1",
        api_key=token if token is not None else server.token,
        max_retries=0,
        http_client=httpx.AsyncClient(trust_env=False),
    )


# --------------------------------------------------------------------------- token and file


async def test_endpoint_file_is_private_and_removed(server: EndpointServer, tmp_path: Path) -> None:
    path = tmp_path / "lmbridge" / "endpoint.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    info = read_endpoint_file(path)
    assert info.url == server.url and info.token == server.token and info.pid == os.getpid()
    assert server.url.startswith("http://127.0.0.1:")
    await server.aclose()
    assert not path.exists()


def test_endpoint_file_checks(tmp_path: Path) -> None:
    path = tmp_path / "endpoint.json"
    with pytest.raises(EndpointNotFoundError, match="no lmbridge endpoint file"):
        read_endpoint_file(path)
    path.write_text(json.dumps({"url": "http://127.0.0.1:1", "token": "t", "pid": os.getpid()}))
    path.chmod(0o644)
    with pytest.raises(EndpointNotFoundError, match="readable by other users"):
        read_endpoint_file(path)
    path.chmod(0o600)
    assert read_endpoint_file(path).token == "t"
    path.write_text(json.dumps({"url": "http://127.0.0.1:1", "token": "t", "pid": 2**22 + 12345}))
    with pytest.raises(EndpointNotFoundError, match="stale"):
        read_endpoint_file(path)


def test_only_loopback() -> None:
    with pytest.raises(ValueError, match="loopback only"):
        EndpointServer(FakeBridge(), host="0.0.0.0")


async def test_openai_client_without_or_with_a_wrong_token_is_refused(
    server: EndpointServer,
) -> None:
    # (the openai client insists on some key: "without" is the raw request below)
    for token in ("wrong-token", server.token[:-1]):
        client = oai(server, token)
        with pytest.raises(openai.AuthenticationError) as info:
            await client.models.list()
        assert info.value.status_code == 401
        assert "token" in info.value.message
        await client.close()
    async with httpx.AsyncClient(trust_env=False) as http:
        for route in ("/lm/selectChatModels", "/v1/chat/completions"):
            response = await http.post(f"{server.url}{route}", json={})
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == "Bearer"


async def test_unknown_route_and_bad_http(server: EndpointServer) -> None:
    async with httpx.AsyncClient(trust_env=False) as http:
        auth = {"Authorization": f"Bearer {server.token}"}
        assert (await http.get(f"{server.url}/nope", headers=auth)).status_code == 404
        assert (
            await http.get(f"{server.url}/v1/chat/completions", headers=auth)
        ).status_code == 405
    host, port = server.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GARBAGE\r\n\r\n")
    await writer.drain()
    answer = await reader.read(1000)
    assert answer.startswith(b"HTTP/1.1 400")
    writer.close()


# --------------------------------------------------------------------------- OpenAI-compatible


async def test_openai_models(server: EndpointServer) -> None:
    client = oai(server)
    models = await client.models.list()
    assert [m.id for m in models.data] == ["gpt-4o-id", "openai/gpt-4o"]
    assert models.data[0].owned_by == "copilot"
    one = await client.models.retrieve("gpt-4o-id")
    assert one.id == "gpt-4o-id"
    await client.close()


async def test_openai_chat_non_streaming(server: EndpointServer, bridge: FakeBridge) -> None:
    bridge.script(GPT.id, [TextPart("Hello "), TextPart("world")])
    client = oai(server)
    completion = await client.chat.completions.create(
        model="gpt-4o-id",
        messages=[{"role": "system", "content": "be nice"}, {"role": "user", "content": "hi"}],
        temperature=0.2,
    )
    assert completion.choices[0].message.content == "Hello world"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 3
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + 3
    sent = bridge.requests[0]
    assert [m.text for m in sent.messages] == ["be nice", "hi"]
    assert sent.options.model_options == {"temperature": 0.2}
    await client.close()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("vscodelm/auto", GPT),
        ("auto", GPT),
        ("openai/gpt-4o", OWN),
        ("vscodelm/lmbridge", OWN),
        ("lmbridge/gpt-4o", OWN),
    ],
)
async def test_openai_model_names_are_ids_or_selectors(
    server: EndpointServer, bridge: FakeBridge, name: str, expected: object
) -> None:
    client = oai(server)
    await client.chat.completions.create(model=name, messages=[{"role": "user", "content": "x"}])
    assert bridge.requests[-1].model == expected
    await client.close()


async def test_openai_streaming_text_thinking_and_tool_calls(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    bridge.script(
        GPT.id,
        [
            ThinkingPart("plan"),
            TextPart("Checking"),
            ToolCallPart("call_1", "get_weather", {"city": "Paris"}),
            ToolCallPart("call_2", "get_time", {}),
        ],
    )
    client = oai(server)
    tools = [
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "get_time", "description": "now"}},
    ]
    stream = await client.chat.completions.create(
        model="gpt-4o-id",
        messages=[{"role": "user", "content": "weather?"}],
        tools=tools,  # type: ignore[arg-type]
        tool_choice="required",
        stream=True,
        stream_options={"include_usage": True},
    )
    text, calls, finish, usage = "", {}, None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": call.id, "name": "", "args": ""})
                entry["name"] += call.function.name or ""
                entry["args"] += call.function.arguments or ""
            finish = choice.finish_reason or finish
    assert text == "Checking"
    assert calls == {
        0: {"id": "call_1", "name": "get_weather", "args": '{"city": "Paris"}'},
        1: {"id": "call_2", "name": "get_time", "args": "{}"},
    }
    assert finish == "tool_calls"
    assert usage is not None and usage.completion_tokens > 0
    sent = bridge.requests[0]
    assert sent.options.tool_mode is ToolMode.REQUIRED
    assert sent.options.tools == [
        ChatTool("get_weather", "", {"type": "object"}),
        ChatTool("get_time", "now", None),
    ]
    await client.close()


async def test_openai_tool_history_round_trip(server: EndpointServer, bridge: FakeBridge) -> None:
    client = oai(server)
    await client.chat.completions.create(
        model="gpt-4o-id",
        messages=[
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "w", "arguments": '{"c":"P"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ],
    )
    sent = bridge.requests[0].messages
    assert sent[1].content == [ToolCallPart("c1", "w", {"c": "P"})]
    await client.close()


@pytest.mark.parametrize(
    ("error", "exc_type", "status"),
    [
        (LanguageModelError("not signed in", "NoPermissions"), openai.PermissionDeniedError, 403),
        (LanguageModelError("rate limit", "Blocked"), openai.RateLimitError, 429),
        (LanguageModelError("gone", "NotFound"), openai.NotFoundError, 404),
        (RuntimeError("boom"), openai.APIStatusError, 502),
    ],
)
async def test_openai_errors_before_the_first_part_get_a_status(
    server: EndpointServer, bridge: FakeBridge, error: BaseException, exc_type: type, status: int
) -> None:
    bridge.script(GPT.id, [error])
    client = oai(server)
    for stream in (False, True):
        with pytest.raises(exc_type) as info:
            await client.chat.completions.create(
                model="gpt-4o-id", messages=[{"role": "user", "content": "x"}], stream=stream
            )
        assert info.value.status_code == status  # type: ignore[attr-defined]
    # a rate limit is retried before it is answered, as on every agents' API
    assert len(bridge.requests) == (4 if status == 429 else 2)
    await client.close()


async def test_openai_error_mid_stream(server: EndpointServer, bridge: FakeBridge) -> None:
    bridge.script(GPT.id, [TextPart("partial"), LanguageModelError("quota", "Blocked")])
    client = oai(server)
    stream = await client.chat.completions.create(
        model="gpt-4o-id", messages=[{"role": "user", "content": "x"}], stream=True
    )
    text = ""
    with pytest.raises(openai.APIError, match="rate limited"):
        async for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
    assert text == "partial"
    await client.close()


async def test_openai_bad_requests(server: EndpointServer) -> None:
    client = oai(server)
    with pytest.raises(openai.NotFoundError, match="no VS Code language model"):
        await client.chat.completions.create(
            model="nobody", messages=[{"role": "user", "content": "x"}]
        )
    with pytest.raises(openai.BadRequestError, match=r"messages\[0\]"):
        await client.chat.completions.create(
            model="auto", messages=[{"role": "robot", "content": "x"}]
        )  # type: ignore[misc,list-item]
    with pytest.raises(openai.BadRequestError, match="tool_choice"):
        await client.chat.completions.create(
            model="auto",
            messages=[{"role": "user", "content": "x"}],
            tool_choice={"type": "function", "function": {"name": "missing"}},
        )
    await client.close()


async def test_client_disconnect_cancels_the_vscode_request(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    bridge.script(GPT.id, [TextPart("one"), 30.0, TextPart("never")])
    client = oai(server)
    stream = await client.chat.completions.create(
        model="gpt-4o-id", messages=[{"role": "user", "content": "x"}], stream=True
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content == "one":
            break
    await stream.close()
    for _ in range(200):
        if bridge.active_streams == 0:
            break
        await asyncio.sleep(0.01)
    assert bridge.active_streams == 0 and bridge.requests[0].cancelled
    await client.close()


# --------------------------------------------------------------------------- native routes via HttpTransport


@pytest.fixture
async def transport(server: EndpointServer, tmp_path: Path) -> AsyncIterator[HttpTransport]:
    t = HttpTransport.discover(tmp_path / "lmbridge" / "endpoint.json")
    try:
        yield t
    finally:
        await t.aclose()


async def test_http_transport_select_count_and_stream(
    transport: HttpTransport, bridge: FakeBridge
) -> None:
    assert await transport.select_chat_models(ModelSelector(vendor="lmbridge")) == [OWN]
    assert await transport.count_tokens(GPT, "abcdefgh") == 2
    assert await transport.count_tokens(GPT, ChatMessage.user("abcd")) == 1
    call = ToolCallPart("c", "f", {"a": [1, 2]})
    bridge.script(OWN.id, [TextPart("x"), ThinkingPart("t", "id1"), call])
    client = LanguageModelClient(transport, selector="vscodelm/lmbridge/gpt-4o/openai/gpt-4o")
    response = await client.send_request(
        [ChatMessage.user("hi")], tools=[ChatTool("f")], justification="why"
    )
    assert [p async for p in response] == [TextPart("x"), ThinkingPart("t", "id1"), call]
    assert bridge.requests[0].justification == "why"
    assert bridge.requests[0].options.tools == [ChatTool("f")]
    assert response.usage.input_tokens is not None and response.usage.input_tokens > 0


async def test_http_transport_errors_are_classified(
    transport: HttpTransport, bridge: FakeBridge
) -> None:
    bridge.script(
        GPT.id,
        [TextPart("a"), LanguageModelError("Please sign in to use Copilot", "NoPermissions")],
    )
    client = LanguageModelClient(transport)
    response = await client.send_request([ChatMessage.user("hi")])
    with pytest.raises(ChatRequestError) as info:
        await response.text()
    assert info.value.kind is ErrorKind.NOT_SIGNED_IN
    assert info.value.raw_code == "NoPermissions"
    assert response.parts == [TextPart("a")]
    bridge.select_error = LanguageModelError("Blocked for now", "Blocked")
    with pytest.raises(ChatRequestError) as info:
        await transport.select_chat_models(ModelSelector())
    assert info.value.kind is ErrorKind.RATE_LIMITED


async def test_http_transport_wrong_token(server: EndpointServer) -> None:
    t = HttpTransport(server.url, "wrong")
    with pytest.raises(ChatRequestError, match="refused the token") as info:
        await t.select_chat_models(ModelSelector())
    assert info.value.kind is ErrorKind.NO_PERMISSION
    await t.aclose()


async def test_http_transport_unreachable() -> None:
    t = HttpTransport("http://127.0.0.1:9", "t")
    with pytest.raises(ChatRequestError, match="not reachable"):
        await t.select_chat_models(ModelSelector())
    await t.aclose()


async def test_http_transport_abort_cancels_the_vscode_request(
    transport: HttpTransport, bridge: FakeBridge
) -> None:
    bridge.script(GPT.id, [TextPart("one"), 30.0, TextPart("never")])
    abort = asyncio.Event()
    response = await LanguageModelClient(transport).send_request(
        [ChatMessage.user("x")], cancel=abort
    )
    with pytest.raises(ChatRequestError) as info:
        async for _ in response:
            abort.set()
    assert info.value.kind is ErrorKind.CANCELLED
    for _ in range(200):
        if bridge.active_streams == 0:
            break
        await asyncio.sleep(0.01)
    assert bridge.active_streams == 0 and bridge.requests[0].cancelled


async def test_http_transport_model_change_events_invalidate_the_client(
    transport: HttpTransport, bridge: FakeBridge, server: EndpointServer
) -> None:
    client = LanguageModelClient(transport, debounce=0.01)
    seen: list[str] = []
    client.on_models_changed(lambda: seen.append("models"))
    transport.on_config_changed(seen.append)
    assert await client.model() == GPT
    for _ in range(100):  # wait for the event stream to be connected
        if len(bridge._models_changed) >= 1:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    bridge.models = [OWN]
    bridge.fire_models_changed()
    bridge.fire_config_changed("lmbridge")
    for _ in range(200):
        if seen == ["models", "lmbridge"]:
            break
        await asyncio.sleep(0.01)
    assert seen == ["models", "lmbridge"]
    assert await client.model() == OWN


# --------------------------------------------------------------------------- what real clients send


async def test_openai_usage_chunk_only_when_asked(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    client = oai(server)
    for include in (False, True):
        bridge.script(GPT.id, [TextPart("hi")])
        stream = await client.chat.completions.create(
            model="gpt-4o-id",
            messages=[{"role": "user", "content": "x"}],
            stream=True,
            stream_options={"include_usage": include},
        )
        chunks = [chunk async for chunk in stream]
        usage = [c.usage for c in chunks if c.usage is not None]
        if include:
            assert len(usage) == 1 and chunks[-1].choices == [] and chunks[-1].usage == usage[0]
            assert usage[0].completion_tokens > 0
            assert usage[0].total_tokens == usage[0].prompt_tokens + usage[0].completion_tokens
        else:
            assert usage == []
    await client.close()


async def test_openai_parallel_tool_calls_and_max_completion_tokens(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    client = oai(server)
    await client.chat.completions.create(
        model="gpt-4o-id",
        messages=[{"role": "user", "content": "x"}],
        tools=[{"type": "function", "function": {"name": "f"}}],
        parallel_tool_calls=False,
        max_completion_tokens=50,
        temperature=0,
    )
    sent = bridge.requests[0].options
    assert sent.model_options == {"max_tokens": 50, "temperature": 0}
    assert [t.name for t in sent.tools] == ["f"]
    await client.close()


async def test_openai_n_above_one_is_refused_in_openai_shape(server: EndpointServer) -> None:
    client = oai(server)
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(
            model="gpt-4o-id", messages=[{"role": "user", "content": "x"}], n=2
        )
    assert info.value.status_code == 400
    body = info.value.body
    assert isinstance(body, dict)
    assert body["param"] == "n" and body["type"] == "invalid_request_error"
    assert "one choice" in body["message"]
    completion = await client.chat.completions.create(
        model="gpt-4o-id", messages=[{"role": "user", "content": "x"}], n=1
    )
    assert len(completion.choices) == 1
    await client.close()


async def test_openai_json_object_becomes_an_instruction(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    bridge.script(GPT.id, [TextPart('{"ok": true}')])
    client = oai(server)
    completion = await client.chat.completions.create(
        model="gpt-4o-id",
        messages=[{"role": "system", "content": "be nice"}, {"role": "user", "content": "x"}],
        response_format={"type": "json_object"},
    )
    assert json.loads(completion.choices[0].message.content or "") == {"ok": True}
    sent = bridge.requests[0]
    texts = [m.text for m in sent.messages]
    assert texts[0] == "be nice" and "JSON object" in texts[1] and texts[2] == "x"
    assert "response_format" not in sent.options.model_options
    await client.close()


async def test_openai_sdk_parse_with_a_json_schema(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    from pydantic import BaseModel

    class City(BaseModel):
        name: str
        population: int

    bridge.script(GPT.id, [TextPart('{"name": "Paris", '), TextPart('"population": 2100000}')])
    client = oai(server)
    completion = await client.chat.completions.parse(
        model="gpt-4o-id", messages=[{"role": "user", "content": "a city"}], response_format=City
    )
    assert completion.choices[0].message.parsed == City(name="Paris", population=2100000)
    instruction = bridge.requests[0].messages[0].text
    assert "JSON Schema named 'City'" in instruction and '"population"' in instruction
    with pytest.raises(openai.BadRequestError, match="response_format"):
        await client.chat.completions.create(
            model="gpt-4o-id",
            messages=[{"role": "user", "content": "x"}],
            response_format={"type": "xml"},  # type: ignore[typeddict-item]
        )
    await client.close()


# --------------------------------------------------------------------------- the streaming path


@pytest.fixture
async def slow_server(bridge: FakeBridge) -> AsyncIterator[EndpointServer]:
    srv = EndpointServer(
        bridge, endpoint_file=False, keepalive=0.05, first_part_wait=0.1, retry=FAST_RETRY
    )
    await srv.start()
    try:
        yield srv
    finally:
        await srv.aclose()


async def test_a_silent_model_gets_keepalives_on_both_stream_kinds(
    slow_server: EndpointServer, bridge: FakeBridge
) -> None:
    auth = {"Authorization": f"Bearer {slow_server.token}"}
    chat = {"model": "gpt-4o-id", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    native = {"model": GPT.ref, "messages": [message_to_wire(ChatMessage.user("x"))]}
    async with httpx.AsyncClient(trust_env=False, headers=auth) as http:
        for route, body, ping, text in [
            ("/v1/chat/completions", chat, ": keep-alive", '"content": "late"'),
            ("/lm/sendRequest", native, "{}", '"late"'),
        ]:
            bridge.script(GPT.id, [0.4, TextPart("late")])
            async with http.stream("POST", f"{slow_server.url}{route}", json=body) as response:
                assert response.status_code == 200  # answered after first_part_wait
                lines = [line async for line in response.aiter_lines() if line]
            first_text = next(i for i, line in enumerate(lines) if text in line)
            assert ping in lines[:first_text], lines
    # the clients skip the keep-alives
    bridge.script(GPT.id, [0.3, TextPart("late")])
    client = oai(slow_server)
    stream = await client.chat.completions.create(
        model="gpt-4o-id", messages=[{"role": "user", "content": "x"}], stream=True
    )
    assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == "late"
    await client.close()
    bridge.script(GPT.id, [0.3, TextPart("late")])
    transport = HttpTransport(slow_server.url, slow_server.token)
    response = await LanguageModelClient(transport).send_request([ChatMessage.user("x")])
    assert await response.text() == "late"
    await transport.aclose()


async def test_a_failure_after_the_first_part_wait_is_an_error_event(
    slow_server: EndpointServer, bridge: FakeBridge
) -> None:
    bridge.script(GPT.id, [0.3, LanguageModelError("quota", "Blocked")])
    client = oai(slow_server)
    stream = await client.chat.completions.create(
        model="gpt-4o-id", messages=[{"role": "user", "content": "x"}], stream=True
    )
    with pytest.raises(openai.APIError, match="rate limited"):
        async for _ in stream:
            pass
    await client.close()


# The host's refusal, as VS Code hands it to a consumer (a LanguageModelError's message).
HOST_REFUSAL = (
    "the conversation is too long for gpt-4o-id: about 3,145 tokens (estimated for the "
    "messages, tools and system prompt) against its input limit of 2,000, 1,145 tokens over; "
    "nothing was sent"
)


@pytest.mark.parametrize("refusal", [LanguageModelError(HOST_REFUSAL), RuntimeError(HOST_REFUSAL)])
@pytest.mark.parametrize("stream", [False, True])
async def test_every_api_answers_a_refusal_as_too_long_with_its_own_context_length_error(
    server: EndpointServer, bridge: FakeBridge, refusal: Exception, stream: bool
) -> None:
    bridge.script(GPT.id, [refusal])
    user = [{"role": "user", "content": "x"}]
    async with httpx.AsyncClient(base_url=server.url, trust_env=False) as http:
        auth = {"authorization": f"Bearer {server.token}"}
        chat = await http.post(
            "/v1/chat/completions",
            json={"model": "gpt-4o-id", "messages": user, "stream": stream},
            headers=auth,
        )
        responses = await http.post(
            "/v1/responses", json={"model": "gpt-4o-id", "input": "x", "stream": stream}, headers=auth
        )
        anthropic = await http.post(
            "/v1/messages",
            json={"model": "gpt-4o-id", "messages": user, "max_tokens": 10, "stream": stream},
            headers={"x-api-key": server.token, "anthropic-version": "2023-06-01"},
        )
    for answer in (chat, responses):  # OpenAI's: what Codex and OpenAI's SDKs compact on
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["code"] == "context_length_exceeded", error
        assert error["type"] == "invalid_request_error"
        assert "3145 tokens > 2000 maximum" in error["message"]
    assert anthropic.status_code == 400, anthropic.text  # Anthropic's: what Claude Code compacts on
    body = anthropic.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("prompt is too long: 3145 tokens > 2000 maximum")


class _TellingBridge(FakeBridge):
    """A bridge that, like the host's, can tell the user an app runs degraded."""

    def __init__(self) -> None:
        super().__init__([])
        self.told: list[str] = []

    def report_degraded(self, cause: str) -> None:
        self.told.append(cause)


async def test_a_degraded_app_outside_vs_code_is_told_to_the_user_through_the_endpoint(
    tmp_path: Path,
) -> None:
    """A Python app on the endpoint that finds no model gets the fallback answer, and the host
    hears of it (``POST /lm/degraded``) so the extension can tell the user, once."""
    bridge = _TellingBridge()
    srv = EndpointServer(bridge, endpoint_file=False, keepalive=0.2)
    await srv.start()
    transport = HttpTransport(srv.url, srv.token)
    try:
        client = LanguageModelClient(transport)
        for _ in range(2):
            response = await client.send_request([ChatMessage.user("x")])
            assert response.degraded and await response.text()
    finally:
        await transport.aclose()
        await srv.aclose()
    assert bridge.told == ["no model matches vscodelm/auto"]


async def test_lm_select_offers_a_workspaces_model_only_to_a_selector_naming_its_id(
    tmp_path: Path,
) -> None:
    evil = fake_model("evil/gpt-4o", vendor="lmbridge", family="gpt-4o", workspace="http://x:80")
    srv = EndpointServer(FakeBridge([evil, GPT, OWN]), endpoint_file=False)
    await srv.start()
    try:
        headers = {"Authorization": f"Bearer {srv.token}"}
        async with httpx.AsyncClient(trust_env=False, headers=headers) as http:

            async def ids(selector: dict[str, str]) -> list[str]:
                r = await http.post(f"{srv.url}/lm/selectChatModels", json={"selector": selector})
                return [m["id"] for m in r.json()["models"]]

            assert await ids({}) == ["gpt-4o-id", "openai/gpt-4o"]
            assert await ids({"family": "gpt-4o"}) == ["gpt-4o-id", "openai/gpt-4o"]
            r = await http.post(f"{srv.url}/lm/selectChatModels", json={"selector": {"id": "evil/gpt-4o"}})
            assert r.json()["models"] == [evil.to_wire()]
            assert evil.to_wire()["workspace"] == "http://x:80"
    finally:
        await srv.aclose()
