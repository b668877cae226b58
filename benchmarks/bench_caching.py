"""What lmbridge's default prompt caching saves on a multi-turn agent conversation.

The conversation is an agent session over this repository, built deterministically: a system
prompt (the first 12,000 characters of README.md), 14 tool definitions, and 16 turns in which
the agent reads a source file of ``src/lmbridge`` (the tool result is the file's first 6,000
characters), then answers. Each turn's request is what lmbridge's real Anthropic client builds
(``AnthropicClient.build_request``) from the conversation so far, as VS Code hands it over by a
consumer that places no cache markers (every extension but Copilot).

Anthropic bills input at three rates: a cache write at 1.25x, a cache read at 0.1x, the rest at
1x. The model here follows Anthropic's rule: a breakpoint whose prefix (tools, system, messages
up to the marked block) an earlier request wrote is read; the request writes the prefixes of its
other breakpoints. Tokens are counted with lmbridge's estimator for Claude. *Before*: the same
requests without breakpoints (what lmbridge sent before, and what a consumer without markers
gets elsewhere): every token at 1x. *After*: with the breakpoints lmbridge adds.

It also checks, for every format, that each request's history is an unchanged prefix of the
next one's (what OpenAI's and Gemini's implicit caches need: a reordered or rewritten history
would miss them), and that the session id's ``prompt_cache_key`` is the same on every turn.

Run: ``.venv/bin/python benchmarks/bench_caching.py [--write]`` (``--write`` rewrites
docs/benchmarks/caching.md).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import httpx

from lmbridge.gateway import AnthropicClient, ChatCompletionsClient, ResponsesClient, UpstreamClient
from lmbridge.gateway.gemini import GeminiClient
from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from lmbridge.tokens import TokenEstimator

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks" / "caching.md"
TURNS = 16
WRITE, READ = 1.25, 0.10  # Anthropic's cache write and read prices, relative to input
MODEL = "claude-sonnet-4-5"
SESSION = "bench-session"


def conversation() -> tuple[list[list[ChatMessage]], list[ChatTool]]:
    """The requests of the session, turn by turn (each the whole history so far)."""
    system = (ROOT / "README.md").read_text("utf-8")[:12_000]
    tools = [
        ChatTool(
            f"tool_{i}",
            f"Tool {i}: reads, searches or edits files of the workspace. " * 4,
            {
                "type": "object",
                "properties": {f"arg{j}": {"type": "string", "description": "a path"} for j in range(4)},
            },
        )
        for i in range(14)
    ]
    files = sorted((ROOT / "src" / "lmbridge").glob("*.py"))[:TURNS]
    history = [ChatMessage.system(system), ChatMessage.user("Review the module layout of lmbridge.")]
    requests = []
    for i, path in enumerate(files):
        requests.append(list(history))
        call = ToolCallPart(f"call_{i}", "tool_0", {"arg0": str(path.relative_to(ROOT))})
        history.append(ChatMessage.assistant([TextPart(f"Reading {path.name}."), call]))
        text = path.read_text("utf-8")[:6_000]
        history.append(ChatMessage.user([ToolResultPart(f"call_{i}", [TextPart(text)])]))
    requests.append(list(history))
    return requests, tools


def _client(cls: type[UpstreamClient]) -> UpstreamClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    return cls(http, base_url="https://upstream.test/v1", api_key="k", provider="bench")


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The prompt's blocks in Anthropic's cache order: tools, system, then messages."""
    out: list[dict[str, Any]] = list(body.get("tools") or [])
    system = body.get("system")
    out += system if isinstance(system, list) else [{"type": "text", "text": system or ""}]
    for message in body["messages"]:
        out += [{**b, "_role": message["role"]} for b in message["content"]]
    return out


def _unmarked(value: Any) -> Any:
    """``value`` without any ``cache_control``."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _plain(block: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in block.items() if k != "cache_control"}, sort_keys=True)


def anthropic_costs(requests: list[list[ChatMessage]], tools: list[ChatTool], marks: bool) -> dict[str, float]:
    client = _client(AnthropicClient)
    estimator = TokenEstimator("claude", model_id=MODEL)
    written: set[str] = set()
    totals = {"input": 0.0, "read": 0.0, "write": 0.0, "billed": 0.0}
    for messages in requests:
        request = client.build_request(MODEL, messages, ChatRequestOptions(tools=tools), default_max_tokens=8_000)
        body = request.body
        if not marks:
            body = _unmarked(body)
        blocks = _blocks(body)
        sizes = [estimator.count_text(_plain(b)) for b in blocks]
        total = sum(sizes)
        prefix_keys, prefix_tokens = [], []
        digest = hashlib.sha256()
        running = 0
        for block, size in zip(blocks, sizes, strict=True):
            digest.update(_plain(block).encode())
            running += size
            if "cache_control" in block:
                prefix_keys.append(digest.hexdigest())
                prefix_tokens.append(running)
        read = max((t for k, t in zip(prefix_keys, prefix_tokens, strict=True) if k in written), default=0)
        write = max(prefix_tokens, default=0) - read if prefix_tokens else 0
        written.update(prefix_keys)
        totals["input"] += total
        totals["read"] += read
        totals["write"] += max(0, write)
        totals["billed"] += (total - read - max(0, write)) + WRITE * max(0, write) + READ * read
    return totals


def prefix_stable(requests: list[list[ChatMessage]], tools: list[ChatTool]) -> dict[str, bool]:
    """Whether each format's request history is a prefix of the next request's."""
    keys = {"chat-completions": "messages", "responses": "input", "gemini": "contents"}
    out = {}
    for name, cls in (("chat-completions", ChatCompletionsClient), ("responses", ResponsesClient),
                      ("gemini", GeminiClient)):  # fmt: skip
        client = _client(cls)
        options = ChatRequestOptions(tools=tools, model_options={"_conversationId": SESSION})
        bodies = [client.build_request("m", m, options).body for m in requests]
        ok = all(
            later[keys[name]][: len(earlier[keys[name]])] == earlier[keys[name]]
            and earlier.get("tools") == later.get("tools")
            and earlier.get("prompt_cache_key") == later.get("prompt_cache_key")
            for earlier, later in itertools.pairwise(bodies)
        )
        out[name] = ok
    return out


def report() -> str:
    requests, tools = conversation()
    before = anthropic_costs(requests, tools, marks=False)
    after = anthropic_costs(requests, tools, marks=True)
    stable = prefix_stable(requests, tools)
    saving = 1 - after["billed"] / before["billed"]
    rows = "\n".join(f"| {name} | {'yes' if ok else 'no'} |" for name, ok in stable.items())
    return f"""# Prompt caching benchmark

Generated by `benchmarks/bench_caching.py` (rerun with `--write` to refresh). The method and the
conversation are described in the script's docstring: an agent session of {len(requests)}
requests over this repository ({len(tools)} tool definitions, a 12,000-character system prompt,
one file read per turn), built by lmbridge's real Anthropic client for a consumer that sets no
cache markers, billed at Anthropic's rates (cache write 1.25x, read 0.1x).

## Anthropic: breakpoints lmbridge adds

| | input tokens | read from cache | written to cache | billed (input-token equivalents) |
|---|---|---|---|---|
| before (no breakpoints) | {before['input']:,.0f} | 0 | 0 | {before['billed']:,.0f} |
| after (tools, system, last two user turns) | {after['input']:,.0f} | {after['read']:,.0f} | {after['write']:,.0f} | {after['billed']:,.0f} |

Saving on the conversation's input: **{saving:.0%}** of what it cost before.

## OpenAI and Gemini: a stable prefix

OpenAI (Chat Completions, Responses) and Gemini cache a prompt's prefix on their own; a history
that changed between turns would never hit. Each request's history is an unchanged prefix of
the next request's, tool definitions and the session's `prompt_cache_key` included:

| format | prefix unchanged on every turn |
|---|---|
{rows}

The share of those hits the upstream grants cannot be measured without it (OpenAI routes by
`prompt_cache_key`, which lmbridge now sends for every request of a chat session).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {DOC.relative_to(ROOT)}")
    args = parser.parse_args()
    text = report()
    if args.write:
        DOC.write_text(text, "utf-8")
    print(text)


if __name__ == "__main__":
    main()
