"""What ``lmbridge.pace`` costs: requests through :class:`~lmbridge.client.HostTransport` with
the pace off, on with limits that never bite, and without the pace code at all.

The extension is the test double served over a real in-process JSON-RPC pair (the host's own
connection class, JSON framing included), as in ``tests/test_host_apps.py``. In the same run,
interleaved (so the machine's load hits all alike), for each variant:

- short requests: ``SHORT`` requests of one part each, one after another (per-request cost);
- a flood: one request of ``FLOOD`` parts (per-part cost).

Reported: the median over ``REPEATS`` rounds, and each variant's ratio to "no pace code". Run:
``.venv/bin/python benchmarks/bench_pace.py --write`` (to docs/benchmarks/pace.md).
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from lmbridge.client.pace import Pace
from lmbridge.client.testing import FakeBridge, fake_model, serve_bridge_over_rpc
from lmbridge.client.transport import HostTransport
from lmbridge.host.jsonrpc import JsonRpcConnection
from lmbridge.parts import ChatMessage, ChatRequestOptions, ResponsePart, TextPart

SHORT = 300
FLOOD = 5000
REPEATS = 7
MODEL = fake_model("m", vendor="bench")
OUT = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "pace.md"


class NoPace(HostTransport):
    """HostTransport as it was before the pace: the stream, without the check."""

    def send_request(  # type: ignore[override]
        self,
        model: Any,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        cancel: asyncio.Event | None = None,
        *,
        justification: str | None = None,
    ) -> AsyncIterator[ResponsePart]:
        return self._send(model, messages, options, cancel, justification)


def pair(variant: str) -> HostTransport:
    loop = asyncio.get_running_loop()
    host: JsonRpcConnection
    extension: JsonRpcConnection
    host = JsonRpcConnection(lambda data: loop.call_soon(extension.feed, data), name="extension")
    extension = JsonRpcConnection(lambda data: loop.call_soon(host.feed, data), name="host")
    bridge = FakeBridge([MODEL])
    bridge.script(
        MODEL.id,
        lambda _m, msgs, _o: [TextPart("x")] * (FLOOD if msgs[0].text == "flood" else 1),
    )
    serve_bridge_over_rpc(extension, bridge)
    transport = (NoPace if variant == "no pace code" else HostTransport)(host)
    if variant == "on, not biting":
        transport.pacer.pace = Pace.from_setting(
            {"maxConcurrent": 1000, "perMinute": 1_000_000, "perModel": {"maxConcurrent": 1000}}
        )[0]
    return transport


async def run(transport: HostTransport, text: str, times: int) -> float:
    options = ChatRequestOptions()
    start = time.perf_counter()
    for _ in range(times):
        async for _part in transport.send_request(MODEL, [ChatMessage.user(text)], options):
            pass
    return time.perf_counter() - start


async def main() -> dict[str, dict[str, float]]:
    variants = ["no pace code", "off", "on, not biting"]
    transports = {v: pair(v) for v in variants}
    short: dict[str, list[float]] = {v: [] for v in variants}
    flood: dict[str, list[float]] = {v: [] for v in variants}
    for v in variants:  # warm up
        await run(transports[v], "hi", 20)
    for _ in range(REPEATS):
        for v in variants:
            short[v].append(await run(transports[v], "hi", SHORT) / SHORT)
            flood[v].append(await run(transports[v], "flood", 1) / FLOOD)
    return {
        v: {
            "request_us": statistics.median(short[v]) * 1e6,
            "part_us": statistics.median(flood[v]) * 1e6,
        }
        for v in variants
    }


def report(results: dict[str, dict[str, float]]) -> str:
    base = results["no pace code"]
    lines = [
        "# What `lmbridge.pace` costs",
        "",
        "`benchmarks/bench_pace.py`: requests through `HostTransport` to the test double of VS",
        "Code over an in-process JSON-RPC pair, in one run, interleaved; medians of "
        f"{REPEATS} rounds of {SHORT} one-part requests and of one {FLOOD}-part request.",
        f"Python {platform.python_version()} on {platform.machine()} ({sys.platform}).",
        "",
        "| variant | per request (µs) | ratio | per part (µs) | ratio |",
        "|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['request_us']:.1f} | {r['request_us'] / base['request_us']:.3f} "
            f"| {r['part_us']:.2f} | {r['part_us'] / base['part_us']:.3f} |"
        )
    lines += [
        "",
        "Off, a request costs one check of the setting and its stream is returned as it is: the",
        "ratios of `off` differ from 1 by the run's noise only (the same code path, measured",
        "interleaved on a shared machine: several percent either way). `on, not biting` adds",
        "the slot's bookkeeping once per request and one generator step per part.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    text = report(asyncio.run(main()))
    print(text)
    if "--write" in sys.argv:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(text, encoding="utf-8")
