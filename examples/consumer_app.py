"""Use VS Code's models from Python: every consumer feature, one scenario each.

Run by the host inside VS Code (``await main(HostTransport(connection))``), from any process
while the loopback endpoint is on (``python examples/consumer_app.py``), or without VS Code
against a scripted stand-in behind a real loopback endpoint (``--demo``). Prints a JSON report,
one entry per scenario, ``{"ok": bool, ...}``; the end-to-end harness asserts on it.

``--selector`` (or ``$LMBRIDGE_E2E_SELECTOR``) picks the model the streaming, tool-call and
cancellation scenarios use; a model that can call tools is needed for ``tool_call``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from lmbridge.client import (
    AUTO,
    BridgeTransport,
    ChatModel,
    ChatRequestError,
    ErrorKind,
    HttpTransport,
    LanguageModelClient,
    ModelSelector,
    format_selector,
    select_chat_models,
)
from lmbridge.parts import ChatMessage, ChatRequestOptions, ChatTool, ToolMode

WEATHER = ChatTool(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


async def main(transport: BridgeTransport, selector: str = AUTO) -> dict[str, Any]:
    """Run every scenario through ``transport``; a report of what worked."""
    report: dict[str, Any] = {}

    async def scenario(name: str, coro: Any) -> None:
        try:
            report[name] = {"ok": True, **(await asyncio.wait_for(coro, 120))}
        except Exception as exc:  # the report says what failed; the other scenarios still run
            report[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

    models = await select_chat_models(None, transport=transport)
    report["models"] = [m.to_wire() for m in models]
    if not models:
        await scenario("fallback", _fallback(transport))
        return report
    await scenario("selectors", _selectors(transport, models))
    await scenario("stream_text", _stream_text(transport, selector))
    await scenario("tool_call", _tool_call(transport, selector))
    await scenario("cancellation", _cancellation(transport, selector))
    await scenario("fallback", _fallback(transport))
    await scenario("setting_switch", _setting_switch(transport, models))
    await scenario("error_classified", _error_classified(transport))
    return report


async def _selectors(transport: BridgeTransport, models: list[ChatModel]) -> dict[str, Any]:
    m = models[-1]  # not the first, so that "any model" could not pass by accident
    forms = {
        "auto": (AUTO, models[0]),
        "empty": ("", models[0]),
        "vscodelm/vendor/family": (f"vscodelm/{m.vendor}/{m.family}", None),
        "vscodelm/vendor/family/id": (f"vscodelm/{m.vendor}/{m.family}/{m.id}", m),
        "cline": (format_selector(ModelSelector(m.vendor, m.family, m.version, m.id), "cline"), m),
    }
    out = {}
    for name, (text, expected) in forms.items():
        chosen = await LanguageModelClient(transport, selector=text).model()
        ok = chosen == expected if expected is not None else chosen.family == m.family
        if not ok:
            raise AssertionError(f"{name} ({text!r}) selected {chosen.id}")
        out[name] = {"selector": text, "model": chosen.id}
    return out


async def _stream_text(transport: BridgeTransport, selector: str) -> dict[str, Any]:
    client = LanguageModelClient(transport, selector=selector)
    response = await client.send_request(
        [{"role": "user", "content": "Say hello in five words."}],
        system="You are terse.",
        format="chat-completions",
    )
    chunks = [p async for p in response]
    text = await response.text()
    if not text or response.degraded:
        raise AssertionError(f"no text (degraded={response.degraded})")
    usage = response.usage
    return {
        "model": response.model.id,
        "parts": len(chunks),
        "text": text[:200],
        "usage": {"input": usage.input_tokens, "output": usage.output_tokens},
    }


async def _tool_call(transport: BridgeTransport, selector: str) -> dict[str, Any]:
    client = LanguageModelClient(transport, selector=selector)
    response = await client.send_request(
        [ChatMessage.user("call get_weather for Paris")],
        ChatRequestOptions(tools=[WEATHER], tool_mode=ToolMode.REQUIRED),
    )
    await response.text()
    if not response.tool_calls:
        raise AssertionError("the model answered without a tool call")
    call = response.tool_calls[0]
    return {"name": call.name, "input": call.input, "output_tokens": response.usage.output_tokens}


async def _cancellation(transport: BridgeTransport, selector: str) -> dict[str, Any]:
    client = LanguageModelClient(transport, selector=selector)
    abort = asyncio.Event()
    response = await client.send_request(
        [ChatMessage.user("Count slowly from 1 to 500, one number per line.")], cancel=abort
    )
    try:
        async for _ in response:
            abort.set()
    except ChatRequestError as exc:
        if exc.kind is not ErrorKind.CANCELLED:
            raise
    return {
        "finished": response.finished,
        "kind": response.error.kind.value if response.error else None,
        "parts_before_cancel": len(response.parts),
        "usage": {"input": response.usage.input_tokens, "output": response.usage.output_tokens},
    }


async def _fallback(transport: BridgeTransport) -> dict[str, Any]:
    client = LanguageModelClient(transport, selector="vscodelm/no-such-vendor/no-such-family")
    response = await client.send_request([ChatMessage.user("hello")])
    text = await response.text()
    if not response.degraded:
        raise AssertionError("expected a degraded response")
    return {"degraded": True, "message": text}


async def _setting_switch(transport: BridgeTransport, models: list[ChatModel]) -> dict[str, Any]:
    setting = {"model": AUTO}
    client = LanguageModelClient(transport, selector=lambda: setting["model"])
    first = await client.model()
    target = models[-1]
    setting["model"] = f"vscodelm/{target.vendor}/{target.family}/{target.id}"
    second = await client.model()
    if second != target:
        raise AssertionError(f"after the switch: {second.id}, expected {target.id}")
    return {"before": first.id, "after": second.id}


async def _error_classified(transport: BridgeTransport) -> dict[str, Any]:
    ghost = ChatModel("lmbridge-no-such-model", "ghost", "nobody", "ghost", "0", 0)
    try:
        async for _ in transport.send_request(ghost, [ChatMessage.user("x")], ChatRequestOptions()):
            pass
    except ChatRequestError as exc:
        return {"kind": exc.kind.value, "code": exc.raw_code, "message": exc.user_message}
    raise AssertionError("a request to a model that does not exist succeeded")


async def _demo() -> dict[str, Any]:
    """Without VS Code: a scripted bridge behind a real loopback endpoint."""
    import tempfile

    from lmbridge.client.endpoint import EndpointServer
    from lmbridge.client.testing import FakeBridge, fake_model
    from lmbridge.parts import TextPart, ToolCallPart

    bridge = FakeBridge([fake_model("echo", vendor="demo"), fake_model("tools", vendor="demo")])

    def answer(_m: ChatModel, messages: Any, options: ChatRequestOptions) -> list[Any]:
        if options.tools:
            return [ToolCallPart("call_1", options.tools[0].name, {"city": "Paris"})]
        out: list[Any] = []
        for word in messages[-1].text.split():
            out += [TextPart(word + " "), 0.02]  # word by word, with room to cancel
        return out

    bridge.script("echo", answer)
    bridge.script("tools", answer)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "endpoint.json"
        # nested semantics: the transport reads the file the started server wrote
        async with (
            EndpointServer(bridge, endpoint_file=path),
            HttpTransport.discover(path) as transport,
        ):
            return await main(transport, selector="vscodelm/demo/echo")


def _cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--selector", default=os.environ.get("LMBRIDGE_E2E_SELECTOR", AUTO))
    parser.add_argument("--endpoint-file", type=Path, default=None)
    parser.add_argument("--demo", action="store_true", help="run against a scripted stand-in")
    args = parser.parse_args()

    async def run() -> dict[str, Any]:
        if args.demo:
            return await _demo()
        async with HttpTransport.discover(args.endpoint_file) as transport:
            return await main(transport, args.selector)

    report = asyncio.run(run())
    json.dump(report, sys.stdout, indent=2)
    print()
    scenarios = [v for k, v in report.items() if k != "models"]
    return 0 if all(v["ok"] for v in scenarios) else 1


if __name__ == "__main__":
    sys.exit(_cli())
