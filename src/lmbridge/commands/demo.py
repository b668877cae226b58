"""``lmbridge demo``: the first command to run. No network, no API key.

Starts the real host as a subprocess with the built-in echo model and speaks the bridge
protocol to it exactly as the VS Code extension does (``initialize``, ``models/list``,
``chat/response`` with a tool, ``tokens/count``), printing what happens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from ..parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    DataPart,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["add_parser", "run"]

_WEATHER = ChatTool(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def add_parser(sub: Any) -> None:
    """Register the subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="try the bridge: the built-in echo model through the real host (no network)",
        description=(
            "Start the lmbridge host with the built-in echo model and talk to it as VS Code "
            "would: list models, stream a chat response with a tool call, count tokens."
        ),
    )
    p.add_argument("--verbose", action="store_true", help="also show the host's log (stderr)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo; exit 0 when every step worked."""
    try:
        return asyncio.run(_demo(verbose=args.verbose))
    except Exception as exc:
        print(f"\nlmbridge demo failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def _say(text: str = "", end: str = "\n") -> None:
    sys.stdout.write(text + end)
    sys.stdout.flush()


async def _demo(verbose: bool) -> int:
    from ..host.client import HostClient

    _say("lmbridge demo: VS Code's side of the bridge, played by Python. No network, no key.\n")
    # An empty config: the host serves its built-in default, the echo model.
    stderr = None if verbose else asyncio.subprocess.DEVNULL
    async with HostClient.start(stderr=stderr) as host:
        init = await host.initialize(providers=[], secrets={})
        status = ", ".join(
            p["name"] + (" (ok)" if p["ok"] else f" (error: {p['error']})")
            for p in init["providers"]
        )
        _say(f"* started `lmbridge host` (pid {host.process.pid}); providers: {status}")

        models = (await host.request("models/list", {"silent": True}))["models"]
        _say("* models/list")
        for m in models:
            caps = m["capabilities"]
            _say(
                f"    {m['id']:<12} {m['name']:<8} input {m['maxInputTokens']:,} / output "
                f"{m['maxOutputTokens']:,} tokens, tools: {_yes(caps['toolCalling'])}, "
                f"images: {_yes(caps['imageInput'])}"
            )
        model_id = models[0]["id"]

        question = ChatMessage.user("Hello! What is lmbridge?")
        _say(f'\n* chat/response: "{question.text}"')
        await _stream(host, model_id, [question], ChatRequestOptions())

        ask = ChatMessage.user("What's the weather in Paris? Please call get_weather.")
        options = ChatRequestOptions(tools=[_WEATHER])
        _say(f'\n* chat/response with a tool offered (get_weather): "{ask.text}"')
        parts = await _stream(host, model_id, [ask], options)
        call = next((p for p in parts if isinstance(p, ToolCallPart)), None)
        if call is not None:
            answer = ToolResultPart(call.call_id, [TextPart("18 C, sunny")])
            history = [ask, ChatMessage.assistant([call]), ChatMessage.user([answer])]
            _say('\n* chat/response with the tool\'s result ("18 C, sunny")')
            await _stream(host, model_id, history, options)

        text = "Hello, world! Counting tokens."
        tokens = (await host.request("tokens/count", {"modelId": model_id, "text": text}))["tokens"]
        _say(f'\n* tokens/count "{text}" -> {tokens} tokens')

    _say(
        "\nDone: the host shut down cleanly. Next: `lmbridge host --config providers.toml` "
        "to serve your own\nprovider (see examples/), or install the VS Code extension."
    )
    return 0


async def _stream(
    host: Any, model_id: str, messages: list[ChatMessage], options: ChatRequestOptions
) -> list[ResponsePart]:
    started = time.perf_counter()
    first: list[float] = []
    state = {"kind": ""}

    def show(parts: list[ResponsePart]) -> None:
        if not first:
            first.append(time.perf_counter() - started)
        for part in parts:
            kind = part.kind
            if kind != state["kind"]:
                if state["kind"]:
                    _say()
                _say(f"    {kind:<9} ", end="")
                state["kind"] = kind
            if isinstance(part, TextPart):
                _say(part.value, end="")
            elif isinstance(part, ThinkingPart):
                _say(part.text, end="")
            elif isinstance(part, ToolCallPart):
                _say(f"{part.name}({json.dumps(part.input)})  [id {part.call_id}]", end="")
            elif isinstance(part, DataPart):
                _say(f"{part.mime_type}, {len(part.data)} bytes", end="")

    parts: list[ResponsePart]
    parts, result = await host.chat(model_id, messages, options, on_parts=show)
    _say()
    usage = result.get("usage") or {}
    took = (time.perf_counter() - started) * 1000
    _say(
        f"    -> finish: {result.get('finishReason')}, usage: input {usage.get('inputTokens', '?')}"
        f" / output {usage.get('outputTokens', '?')} tokens; {len(parts)} parts, first after "
        f"{first[0] * 1000:.1f} ms, all after {took:.0f} ms"
        if first
        else f"    -> finish: {result.get('finishReason')}, no parts"
    )
    return parts


def _yes(value: Any) -> str:
    return "yes" if value else "no"
