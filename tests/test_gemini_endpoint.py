"""The Gemini API on the loopback endpoint over real HTTP on 127.0.0.1, driven by the real
google-genai SDK (and checked by lmbridge's own Gemini decoder, the provider side's reading of
the same format), with a scripted fake VS Code behind it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from lmbridge.client.endpoint import EndpointServer
from lmbridge.client.endpoint.apis.gemini import GeminiStream, parse_generate_request
from lmbridge.client.guard import RetryPolicy
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
from lmbridge.upstream import ByteStreamDecoder
from lmbridge.upstream.gemini import GeminiArrayStreamDecoder, GeminiDecoder
from test_endpoint_limits import connect

GEMINI = fake_model(
    "gemini-2.5-pro",
    vendor="copilot",
    family="gemini-2.5-pro",
    max_input_tokens=4000,
    capabilities=ModelCapabilities(image_input=True, tool_calling=True),
)
GPT = fake_model("gpt-4o", vendor="copilot", family="gpt-4o", max_input_tokens=4000)
WEATHER = types.FunctionDeclaration(
    name="weather",
    description="Weather in a city",
    parameters=types.Schema(
        type=types.Type.OBJECT,
        properties={"city": types.Schema(type=types.Type.STRING)},
        required=["city"],
    ),
)


@pytest.fixture
def bridge() -> FakeBridge:
    return FakeBridge([GEMINI, GPT])


@pytest.fixture
async def server(bridge: FakeBridge) -> AsyncIterator[EndpointServer]:
    srv = EndpointServer(
        bridge,
        endpoint_file=False,
        keepalive=0.1,
        first_part_wait=0.5,
        retry=RetryPolicy(retries=1, base_delay=0.01),
    )
    await srv.start()
    try:
        yield srv
    finally:
        await srv.aclose()


def gemini(server: EndpointServer, api_key: str | None = None) -> genai.Client:
    return genai.Client(
        api_key=api_key or server.token,
        http_options=types.HttpOptions(
            base_url=server.url,
            api_version="v1beta",
            retry_options=types.HttpRetryOptions(attempts=1),
        ),
    )


async def test_sdk_streams_text(server: EndpointServer, bridge: FakeBridge) -> None:
    bridge.script(GEMINI.id, [TextPart("Hello"), TextPart(", world")])
    client = gemini(server)
    chunks = [
        c
        async for c in await client.aio.models.generate_content_stream(
            model="gemini-2.5-pro",
            contents="Say hello",
            config=types.GenerateContentConfig(
                system_instruction="Be brief", temperature=0.2, max_output_tokens=50
            ),
        )
    ]
    assert "".join(c.text or "" for c in chunks) == "Hello, world"
    last = chunks[-1]
    assert last.candidates and last.candidates[0].finish_reason == types.FinishReason.STOP
    assert last.usage_metadata and (last.usage_metadata.prompt_token_count or 0) > 0
    sent = bridge.requests[0]
    assert sent.model.id == GEMINI.id
    assert sent.messages[0].role == ChatRole.ASSISTANT and sent.messages[0].text == "Be brief"
    assert sent.messages[1].text == "Say hello"
    assert sent.options.model_options == {"temperature": 0.2, "max_tokens": 50}


async def test_sdk_function_call_round_trip(server: EndpointServer, bridge: FakeBridge) -> None:
    """Thought signature, function call, the SDK's function response, the final answer."""
    bridge.script(
        GEMINI.id,
        [
            ThinkingPart("Need the weather.", "t1", {"thoughtSignature": "c2lnVA=="}),
            ThinkingPart("", "s1", {"thoughtSignature": "c2lnQw==", "signedPart": "functionCall"}),
            ToolCallPart("call_1", "weather", {"city": "Paris"}),
        ],
    )
    client = gemini(server)
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[WEATHER])],
        tool_config=types.ToolConfig(
            function_calling_config=types.FunctionCallingConfig(
                mode=types.FunctionCallingConfigMode.ANY
            )
        ),
        thinking_config=types.ThinkingConfig(include_thoughts=True),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    history: list[types.Content] = [
        types.Content(role="user", parts=[types.Part(text="Weather in Paris?")])
    ]
    parts: list[types.Part] = []
    async for chunk in await client.aio.models.generate_content_stream(
        model="gemini-2.5-pro", contents=history, config=config
    ):
        assert chunk.candidates and chunk.candidates[0].content
        parts += chunk.candidates[0].content.parts or []
    thought = [p for p in parts if p.thought]
    calls = [p for p in parts if p.function_call]
    assert thought[0].text == "Need the weather."
    assert thought[0].thought_signature == b"c2lnVA==" or thought[0].thought_signature
    assert len(calls) == 1 and calls[0].function_call is not None
    call = calls[0].function_call
    assert (call.name, call.args, call.id) == ("weather", {"city": "Paris"}, "call_1")
    assert calls[0].thought_signature  # the signature is back on the call it came with
    sent = bridge.requests[0]
    assert sent.options.tool_mode == ToolMode.REQUIRED
    assert sent.options.tools[0].name == "weather"
    assert sent.options.tools[0].input_schema == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }

    # the answer goes back with the model's turn as the SDK keeps it (signatures included)
    bridge.script(GEMINI.id, [TextPart("Sunny in Paris.")])
    history += [
        types.Content(role="model", parts=[p for p in parts if p.function_call or p.thought]),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="call_1", name="weather", response={"output": "sunny"}
                    )
                )
            ],
        ),
    ]
    answer = await client.aio.models.generate_content(
        model="gemini-2.5-pro", contents=history, config=config
    )
    assert answer.text == "Sunny in Paris."
    sent = bridge.requests[1]
    model_turn = sent.messages[1]
    assert model_turn.role == ChatRole.ASSISTANT
    call_part = next(p for p in model_turn.content if isinstance(p, ToolCallPart))
    assert (call_part.call_id, call_part.input) == ("call_1", {"city": "Paris"})
    signatures = [
        (p.metadata or {}).get("thoughtSignature")
        for p in model_turn.content
        if isinstance(p, ThinkingPart)
    ]
    assert "c2lnQw==" in signatures and "c2lnVA==" in signatures  # both went back to VS Code
    result = sent.messages[2].content[0]
    assert isinstance(result, ToolResultPart) and result.call_id == "call_1"
    assert result.content == [TextPart("sunny")]


async def test_thoughts_hidden_unless_asked_and_signature_moves_to_the_next_part() -> None:
    stream = GeminiStream(model="gemini-2.5-pro", input_tokens=10)
    events = stream.start()
    events += stream.feed(ThinkingPart("secret reasoning", "t", {"thoughtSignature": "S"}))
    events += stream.feed(TextPart("Answer"))
    events += stream.finish(3)
    objects = [data for _, data in events]
    parts = [p for o in objects for p in o["candidates"][0]["content"]["parts"]]
    assert {"text": "Answer", "thoughtSignature": "S"} in parts
    assert not any(p.get("thought") for p in parts)
    # lmbridge's own Gemini decoder (the provider side) reads the same stream back
    sse = [f"data: {json.dumps(obj)}\n\n".encode() for obj in objects]
    result = ByteStreamDecoder(GeminiDecoder()).decode_all(sse)
    got = result.parts
    assert [p for p in got if isinstance(p, TextPart)] == [TextPart("Answer")]
    signed = [p for p in got if isinstance(p, ThinkingPart)]
    assert signed and signed[0].metadata == {"thoughtSignature": "S", "signedPart": "text"}
    assert result.usage is not None and result.usage.input_tokens == 10


async def test_json_array_stream_and_generate_and_models(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    bridge.script(GEMINI.id, [TextPart("a"), TextPart("b")])
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    async with httpx.AsyncClient(base_url=server.url, trust_env=False) as http:
        # no alt=sse: one JSON array; the token as ?key=
        r = await http.post(
            "/v1beta/models/gemini-2.5-pro:streamGenerateContent",
            params={"key": server.token},
            json=body,
        )
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        objects = r.json()
        assert isinstance(objects, list)
        texts = [p.get("text", "") for o in objects for p in o["candidates"][0]["content"]["parts"]]
        assert "".join(texts) == "ab"
        assert objects[-1]["candidates"][0]["finishReason"] == "STOP"
        # lmbridge's Gemini decoder reads the array too
        decoded = GeminiArrayStreamDecoder().decode_all([r.content]).parts
        assert "".join(p.value for p in decoded if isinstance(p, TextPart)) == "ab"

        bridge.script(GEMINI.id, [TextPart("x"), TextPart("y")])
        r = await http.post(
            "/v1beta/models/models/gemini-2.5-pro:generateContent",
            headers={"x-goog-api-key": server.token},
            json=body,
        )
        assert r.json()["candidates"][0]["content"]["parts"] == [{"text": "xy"}]

        r = await http.get("/v1beta/models", headers={"authorization": f"Bearer {server.token}"})
        names = [m["name"] for m in r.json()["models"]]
        assert names == ["models/gemini-2.5-pro", "models/gpt-4o"]


async def test_sdk_count_tokens_and_model_list(server: EndpointServer) -> None:
    client = gemini(server)
    short = await client.aio.models.count_tokens(model="gemini-2.5-pro", contents="hi")
    long = await client.aio.models.count_tokens(model="gemini-2.5-pro", contents="hello " * 200)
    assert 0 < (short.total_tokens or 0) < (long.total_tokens or 0)
    model = await client.aio.models.get(model="gemini-2.5-pro")
    assert model.name == "models/gemini-2.5-pro" and model.input_token_limit == 4000
    listed = [m.name async for m in await client.aio.models.list()]
    assert "models/gpt-4o" in listed


async def test_errors_in_geminis_shape(server: EndpointServer, bridge: FakeBridge) -> None:
    # a wrong key: refused on the head, Gemini's shape
    with pytest.raises(genai_errors.ClientError) as bad_key:
        await gemini(server, api_key="wrong").aio.models.generate_content(
            model="gemini-2.5-pro", contents="x"
        )
    assert bad_key.value.code == 401 and bad_key.value.status == "UNAUTHENTICATED"
    client = gemini(server)
    # an unknown model
    with pytest.raises(genai_errors.ClientError) as missing:
        await client.aio.models.generate_content(model="llama-7", contents="x")
    assert missing.value.code == 404 and missing.value.status == "NOT_FOUND"
    # too long for the model: refused before VS Code sees it, in Gemini's words
    with pytest.raises(genai_errors.ClientError) as big:
        await client.aio.models.generate_content(model="gemini-2.5-pro", contents="word " * 5000)
    assert big.value.code == 400 and big.value.status == "INVALID_ARGUMENT"
    assert "exceeds the maximum number of tokens allowed (4000)" in (big.value.message or "")
    assert bridge.requests == []
    # rate limited: retried once, then 429 RESOURCE_EXHAUSTED with Retry-After and RetryInfo
    bridge.script(GEMINI.id, [LanguageModelError("rate limit, retry after 100ms", "Blocked")])
    with pytest.raises(genai_errors.ClientError) as rate:
        await client.aio.models.generate_content(model="gemini-2.5-pro", contents="x")
    assert rate.value.code == 429 and rate.value.status == "RESOURCE_EXHAUSTED"
    assert rate.value.details["error"]["details"][0]["retryDelay"] == "1s"
    # a bad request names the field
    with pytest.raises(genai_errors.ClientError) as invalid:
        await client.aio.models.generate_content(
            model="gemini-2.5-pro",
            contents="x",
            config=types.GenerateContentConfig(candidate_count=2),
        )
    assert invalid.value.code == 400 and "candidateCount" in (invalid.value.message or "")
    # an error after 200: one more object in the stream, which the SDK raises
    bridge.script(GEMINI.id, [TextPart("partial"), LanguageModelError("boom", "Unknown")])
    got: list[str] = []
    with pytest.raises(genai_errors.APIError) as late:
        async for chunk in await client.aio.models.generate_content_stream(
            model="gemini-2.5-pro", contents="x"
        ):
            got.append(chunk.text or "")
    assert got == ["partial"] and late.value.code == 500


async def test_unknown_method_and_token_checked_before_the_body(server: EndpointServer) -> None:
    async with httpx.AsyncClient(base_url=server.url, trust_env=False) as http:
        r = await http.post(
            "/v1beta/models/gemini-2.5-pro:embedContent",
            headers={"x-goog-api-key": server.token},
            json={},
        )
        assert r.status_code == 404 and r.json()["error"]["status"] == "NOT_FOUND"
    # a wrong key (query or header) is answered from the head alone, in Gemini's shape: not one
    # byte of the 8 MiB body is sent
    for path, headers in [
        ("/v1beta/models/gemini-2.5-pro:generateContent?key=nope", {}),
        ("/v1beta/models/gemini-2.5-pro:generateContent", {"x-goog-api-key": "nope"}),
    ]:
        c = await connect(server)
        await c.request(
            "POST", path, {"Content-Length": str(8 * 1024 * 1024), **headers}, token=False
        )
        status, _, body = await c.answer()
        error = json.loads(body)["error"]
        assert (status, error["code"], error["status"]) == (401, 401, "UNAUTHENTICATED")
        assert "?key=<token>" in error["message"] and "x-goog-api-key" in error["message"]
        c.close()
    # the right key in the query is served
    c = await connect(server)
    await c.request(
        "GET", f"/v1beta/models/gemini-2.5-pro?key={server.token}", token=False, body=b""
    )
    status, _, body = await c.answer()
    assert status == 200 and json.loads(body)["name"] == "models/gemini-2.5-pro"
    c.close()


def test_parse_request_shapes() -> None:
    body: dict[str, Any] = {
        "system_instruction": {"parts": [{"text": "S"}]},
        "contents": [{"role": "user", "parts": [{"text": "q"}]}],
        "tools": [
            {"googleSearch": {}},
            {"functionDeclarations": [{"name": "f", "parametersJsonSchema": {"type": "object"}}]},
        ],
        "generationConfig": {
            "responseMimeType": "application/json",
            "responseSchema": {"type": "OBJECT", "properties": {"a": {"type": "INTEGER"}}},
            "topK": 3,
            "stopSequences": ["END"],
        },
        "toolConfig": {"functionCallingConfig": {"mode": "NONE"}},
    }
    parsed = parse_generate_request(body, model="m")
    assert parsed.left_out_tools == ["googleSearch"]
    assert parsed.options.tools == [] and parsed.options.tool_mode == ToolMode.AUTO
    assert parsed.options.model_options == {"top_k": 3, "stop": ["END"]}
    instruction = parsed.messages[1].text
    assert '"type": "integer"' in instruction and "JSON" in instruction
    with pytest.raises(Exception, match=r"allowedFunctionNames: no function named 'g'"):
        parse_generate_request(
            {
                "contents": [{"parts": [{"text": "q"}]}],
                "tools": [{"functionDeclarations": [{"name": "f"}]}],
                "toolConfig": {
                    "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["g"]}
                },
            }
        )
