"""``lmbridge demo``: the first command to run. No network, no API key. Both directions:

1. **Provider side** (Python serves VS Code): starts the real host as a subprocess with the
   built-in echo model and speaks the bridge protocol to it exactly as the VS Code extension does
   (``initialize``, ``models/list``, ``chat/response`` with a tool, ``tokens/count``).
2. **Consumer side** (Python uses VS Code's models): VS Code is played by the test double
   :class:`~lmbridge.client.testing.FakeBridge` behind the real loopback endpoint; the Python
   client streams from it and completes a tool call, and plain HTTP requests in OpenAI's and
   Anthropic's shapes (what the ``openai`` and ``anthropic`` SDKs, Codex and Claude Code send)
   get their answers.

``--side provider|consumer`` runs one of them.
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
    p.add_argument(
        "--side",
        choices=["both", "provider", "consumer"],
        default="both",
        help="provider: Python serving VS Code; consumer: Python using VS Code's models",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo; exit 0 when every step worked."""
    try:
        if args.side in ("both", "provider"):
            asyncio.run(_demo(verbose=args.verbose))
        if args.side in ("both", "consumer"):
            asyncio.run(_consumer_demo(verbose=args.verbose))
        return 0
    except Exception as exc:
        print(f"\nlmbridge demo failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def _say(text: str = "", end: str = "\n") -> None:
    sys.stdout.write(text + end)
    sys.stdout.flush()


async def _demo(verbose: bool) -> int:
    from ..host.client import HostClient

    _say(
        "== 1. Provider side: Python serves models to VS Code ==\n"
        "VS Code's side of the bridge is played by Python here. No network, no key.\n"
    )
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
        "\nThe host shut down cleanly. Serve your own provider with `lmbridge host --config "
        "providers.toml`\n(see examples/), or install the VS Code extension.\n"
    )
    return 0


async def _consumer_demo(verbose: bool) -> None:
    import logging
    import tempfile
    from pathlib import Path

    import httpx

    from ..client import LanguageModelClient, SyncLanguageModelClient
    from ..client.endpoint import EndpointServer
    from ..client.testing import FakeBridge, fake_model
    from ..parts import ModelCapabilities

    if not verbose:
        # the stand-in's requests are logged at info level; the demo prints what matters
        logging.getLogger("lmbridge").setLevel(logging.WARNING)
    _say(
        "== 2. Consumer side: Python uses VS Code's models ==\n"
        "VS Code is played by lmbridge.client.testing.FakeBridge (the test double for your own "
        "apps' tests)\nbehind the real loopback endpoint that lmbridge opens in VS Code.\n"
    )
    tools = ModelCapabilities(tool_calling=True)
    bridge = FakeBridge(
        [
            fake_model("gpt-4o", vendor="copilot", family="gpt-4o", capabilities=tools),
            fake_model("claude-sonnet-4.5", vendor="copilot", capabilities=tools),
        ]
    )

    def answer(model: Any, messages: Any, options: ChatRequestOptions) -> list[Any]:
        if options.tools:
            return [ToolCallPart("call_1", options.tools[0].name, {"city": "Paris"})]
        words = f"{model.id} (stand-in) heard: {messages[-1].text}".split()
        return [TextPart(w + (" " if i < len(words) - 1 else "")) for i, w in enumerate(words)]

    for m in bridge.models:
        bridge.script(m.id, answer)
    with tempfile.TemporaryDirectory() as folder:
        endpoint_file = Path(folder) / "endpoint.json"
        async with EndpointServer(bridge, endpoint_file=endpoint_file) as server:
            _say(
                f"* the endpoint listens on {server.url}; its token is in {endpoint_file.name} (0600)"
            )

            client = LanguageModelClient(bridge, selector="vscodelm/copilot/gpt-4o")
            _say(
                '\n* LanguageModelClient(bridge, selector="vscodelm/copilot/gpt-4o").send_request(...),'
                " streamed in-process (as in your app's tests)"
            )
            response = await client.send_request([ChatMessage.user("Hello from Python!")])
            _say("    text      ", end="")
            async for part in response:
                if isinstance(part, TextPart):
                    _say(part.value, end="")
            _say(
                f"\n    -> usage: input {response.usage.input_tokens} / output "
                f"{response.usage.output_tokens} tokens (estimated)"
            )

            def sync_complete() -> Any:
                with SyncLanguageModelClient(endpoint_file=endpoint_file) as sync:
                    return sync.complete(
                        [{"role": "user", "content": "Weather in Paris?"}],
                        format="chat-completions",
                        tools=[{"type": "function", "function": {"name": "get_weather"}}],
                    )

            _say(
                "\n* SyncLanguageModelClient(endpoint_file=...).complete(..., tools=[get_weather])"
                " (no event loop; over HTTP)"
            )
            done = await asyncio.to_thread(sync_complete)
            for call in done.tool_calls:
                _say(f"    tool call {call.name}({json.dumps(call.input)})  [id {call.call_id}]")
            _say(
                f"    -> finish: {done.finish_reason.value}, model {done.model.vendor}/{done.model.id}"
            )

            auth = {"Authorization": f"Bearer {server.token}"}
            async with httpx.AsyncClient(
                base_url=server.url, headers=auth, trust_env=False
            ) as http:
                _say(
                    "\n* POST /v1/chat/completions, as openai.OpenAI(base_url=url + '/v1', "
                    "api_key=token) and Codex send it"
                )
                r = await http.post(
                    "/v1/chat/completions",
                    json={
                        "model": "gpt-4o",
                        "messages": [{"role": "user", "content": "Hi, OpenAI shape"}],
                    },
                )
                r.raise_for_status()
                _say(f"    {r.status_code}: {r.json()['choices'][0]['message']['content']}")
                _say(
                    "\n* POST /v1/messages, as anthropic.Anthropic(base_url=url, api_key=token)"
                    " and Claude Code send it"
                )
                r = await http.post(
                    "/v1/messages",
                    json={
                        "model": "claude-sonnet-4-5",
                        "max_tokens": 100,
                        "messages": [{"role": "user", "content": "Hi, Anthropic shape"}],
                    },
                )
                r.raise_for_status()
                _say(f"    {r.status_code}: {r.json()['content'][0]['text']}")
    _say(
        "\nDone. In VS Code, turn on lmbridge.endpoint.enabled and the same calls reach "
        "Copilot's models.\nEvery consumer feature, scenario by scenario: "
        "python examples/consumer_app.py --demo"
    )


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
