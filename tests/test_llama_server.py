"""lmbridge against a real LLM server: llama.cpp's ``llama-server`` serving SmolLM2-135M-Instruct.

Three providers (the README's local-model recipe), one per wire format the server speaks, go
through the real host (``python -m lmbridge host``) to the same server. Each answer is compared
with the server's own non-streamed answer to the same request: with temperature 0 and a fixed
seed the model is deterministic, so the streamed text must be exactly that answer (once: the
Responses stream used to double it), with the server's usage and finish reason.

Skipped unless ``scripts/llama-setup`` has built the server (``scripts/check`` runs it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lmbridge import formats
from lmbridge.host.client import HostClient
from lmbridge.host.jsonrpc import RemoteError
from lmbridge.parts import ChatMessage, ChatRequestOptions, ChatTool, TextPart, ToolCallPart
from support.llama_server import (
    FORMATS,
    MODEL_ALIAS,
    README,
    SEED,
    LlamaServer,
    llama_env,
    provider_entries,
    run_llama_server,
    server_args,
)
from support.streams import join_text, tool_calls

ENV = llama_env()
pytestmark = pytest.mark.skipif(
    ENV is None, reason="llama-server is not built: run scripts/llama-setup (scripts/check does)"
)

PROMPT = "Write one sentence about the sea."
MAX_TOKENS = 12
WEATHER = ChatTool(
    "get_weather",
    "Get the current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TOOL_PROMPT = "What is the weather in Paris? Call the get_weather tool."


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    assert ENV is not None
    with run_llama_server(ENV, tmp_path_factory.mktemp("llama")) as server:
        yield server


@pytest.fixture
async def host(llama: LlamaServer, tmp_path: Path) -> AsyncIterator[HostClient]:
    config = tmp_path / "providers.json"
    config.write_text(json.dumps({"providers": provider_entries(llama.url)}))
    with (tmp_path / "host-stderr.txt").open("wb") as err:
        async with HostClient.start(["--config", str(config)], stderr=err) as client:
            await client.initialize(providers=[], secrets={})
            yield client


def _options(max_tokens: int, tools: list[ChatTool] | None = None) -> ChatRequestOptions:
    return ChatRequestOptions(
        tools=tools or [],
        model_options={"temperature": 0, "seed": SEED, "max_tokens": max_tokens},
    )


async def _reference(
    llama: LlamaServer, fmt: str, prompt: str, options: ChatRequestOptions
) -> dict[str, Any]:
    """The server's own non-streamed answer to the request lmbridge sends (the same body, with
    ``stream`` off): text, tool calls, usage, and lmbridge's name for its finish reason."""
    async with httpx.AsyncClient() as http:
        client = formats.get(fmt).client_class()(http, base_url=f"{llama.url}/v1")
        request = client.build_request(MODEL_ALIAS, [ChatMessage.user(prompt)], options)
    body = {**request.body, "stream": False}
    body.pop("stream_options", None)
    answer = await asyncio.to_thread(llama.post, request.url.removeprefix(llama.url), body)
    if fmt == "chat-completions":
        choice = answer["choices"][0]
        return {
            "text": choice["message"].get("content") or "",
            "calls": [
                (c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in choice["message"].get("tool_calls") or []
            ],
            "finish": {"stop": "stop", "length": "length", "tool_calls": "tool-calls"}[
                choice["finish_reason"]
            ],
            "input": answer["usage"]["prompt_tokens"],
            "output": answer["usage"]["completion_tokens"],
        }
    if fmt == "responses":
        output = answer["output"]
        calls = [
            (item["name"], json.loads(item["arguments"]))
            for item in output
            if item["type"] == "function_call"
        ]
        return {
            "text": "".join(
                c.get("text", "")
                for item in output
                if item["type"] == "message"
                for c in item["content"]
            ),
            "calls": calls,
            "finish": "length"
            if answer.get("status") == "incomplete"
            else ("tool-calls" if calls else "stop"),
            "input": answer["usage"]["input_tokens"],
            "output": answer["usage"]["output_tokens"],
        }
    usage = answer["usage"]
    return {
        "text": "".join(b["text"] for b in answer["content"] if b["type"] == "text"),
        "calls": [(b["name"], b["input"]) for b in answer["content"] if b["type"] == "tool_use"],
        "finish": {"end_turn": "stop", "max_tokens": "length", "tool_use": "tool-calls"}[
            answer["stop_reason"]
        ],
        # Anthropic's input_tokens leaves out the cached prompt tokens (lmbridge counts them)
        "input": sum(
            usage.get(k) or 0
            for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        ),
        "output": usage["output_tokens"],
    }


@pytest.mark.parametrize("provider", list(FORMATS))
async def test_greedy_stream_equals_the_servers_answer_with_usage_and_finish(
    llama: LlamaServer, host: HostClient, provider: str
) -> None:
    want = await _reference(llama, FORMATS[provider], PROMPT, _options(MAX_TOKENS))
    assert want["text"].strip(), want  # the model said something
    parts, result = await host.chat(
        f"{provider}/{MODEL_ALIAS}", [ChatMessage.user(PROMPT)], _options(MAX_TOKENS)
    )
    assert join_text(parts) == want["text"]
    assert result["finishReason"] == want["finish"]
    if FORMATS[provider] != "responses":  # llama-server's Responses API never says incomplete
        assert want["finish"] == "length"  # the short limit was hit, and the server said so
    assert result["usage"]["inputTokens"] == want["input"]
    assert result["usage"]["outputTokens"] == want["output"] == MAX_TOKENS
    assert llama.busy_slots() == 0


COUNT_PROMPT = "Write the numbers from 1 to 500 separated by commas."
# Long enough (the limit of a 1024-token context) that a loaded machine, slow to pass the
# cancellation on, still stops the server far from the end.
COUNT_LIMIT = 900
_full_lengths: list[int] = []


async def _full_count_length(llama: LlamaServer) -> int:
    """Tokens in the whole answer to COUNT_PROMPT when nobody stops it (asked once)."""
    if not _full_lengths:
        answer = await _reference(llama, "chat-completions", COUNT_PROMPT, _options(COUNT_LIMIT))
        _full_lengths.append(answer["output"])
    assert _full_lengths[0] > 500, _full_lengths  # long enough that stopping early shows
    return _full_lengths[0]


@pytest.mark.parametrize("provider", list(FORMATS))
async def test_cancelling_frees_the_server_at_once(
    llama: LlamaServer, host: HostClient, provider: str
) -> None:
    full = await _full_count_length(llama)
    before = await asyncio.to_thread(llama.decode_calls)
    got_some = asyncio.Event()
    call = host.start_chat(
        f"{provider}/{MODEL_ALIAS}",
        [ChatMessage.user(COUNT_PROMPT)],
        _options(COUNT_LIMIT),
        on_parts=lambda parts: got_some.set(),
    )
    await asyncio.wait_for(got_some.wait(), 60)
    assert await asyncio.to_thread(llama.busy_slots) == 1  # still generating
    host.cancel(call)
    with pytest.raises(RemoteError) as info:
        await asyncio.wait_for(call.result(), 10)
    assert info.value.code == -32800
    await asyncio.to_thread(llama.wait_idle, 10)
    decoded = await asyncio.to_thread(llama.decode_calls) - before
    # the server stopped soon after the client left, far from the whole answer, and stays idle
    assert 0 < decoded < full // 2, (decoded, full)
    await asyncio.sleep(0.3)
    assert await asyncio.to_thread(llama.decode_calls) - before == decoded


async def test_model_list_is_the_servers(llama: LlamaServer, host: HostClient) -> None:
    served = [m["id"] for m in llama.get("/v1/models")["data"]]
    assert served == [MODEL_ALIAS]
    models = (await host.request("models/list", {"silent": True}))["models"]
    assert sorted(m["id"] for m in models) == sorted(f"{p}/{m}" for p in FORMATS for m in served)


@pytest.mark.parametrize("provider", list(FORMATS))
async def test_tool_request_round_trips_the_servers_answer(
    llama: LlamaServer, host: HostClient, provider: str
) -> None:
    """The tool reaches the model through the tool-capable template, and whatever the model
    answers (this small one talks about the tool rather than calling it) comes back as is."""
    options = _options(48, [WEATHER])
    want = await _reference(llama, FORMATS[provider], TOOL_PROMPT, options)
    plain = await _reference(llama, FORMATS[provider], TOOL_PROMPT, _options(1))
    assert want["input"] > plain["input"] + 30  # the template put the tool into the prompt
    parts, result = await host.chat(
        f"{provider}/{MODEL_ALIAS}", [ChatMessage.user(TOOL_PROMPT)], options
    )
    assert [(name, args) for _id, name, args in tool_calls(parts)] == want["calls"]
    assert join_text(parts) == want["text"]
    assert result["finishReason"] == want["finish"]
    assert all(isinstance(p, (TextPart, ToolCallPart)) for p in parts)


def test_the_server_runs_with_the_readme_recipes_options() -> None:
    """The README's llama-server command is what these tests start (plus test-only options)."""
    assert ENV is not None
    section = README.read_text(encoding="utf-8").split("### Local models", 1)[1]
    command = next(line for line in section.splitlines() if "`llama-server -m" in line)
    recipe = command.split("`llama-server ", 1)[1].split("`", 1)[0].split()
    args = server_args(ENV, 8080)
    assert [a for a in recipe if a.startswith("--")] == ["--jinja", "--port"]
    assert all(a in args for a in recipe if a.startswith("--"))
    assert len(FORMATS) == 3 and set(FORMATS.values()) == {
        "chat-completions",
        "responses",
        "anthropic",
    }
