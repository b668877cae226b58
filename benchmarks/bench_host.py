"""The host's cost: time to first part and parts per second over stdio vs in-process.

One provider (:class:`FloodProvider`: text parts in "network chunks" of ``CHUNK`` parts, the
event loop turning between chunks as it does between upstream reads) is run, in the same run:

- in-process: :func:`lmbridge.provider.respond` with a list as the sink;
- through the host: ``python -m lmbridge host`` as a subprocess, spoken to over its pipes by
  :class:`lmbridge.host.client.HostClient` as the extension would (framing, JSON, batching,
  the client decoding every part back into objects).

Time to first part: from sending ``chat/response`` (in-process: from calling ``respond``) to
the first part in the client's hands, median and p95 over ``TTFP_RUNS`` requests. Parts per
second: ``FLOOD_PARTS`` parts from request to result, best of ``REPEATS``. Results go to
docs/benchmarks/host.md. Run: ``.venv/bin/python benchmarks/bench_host.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from lmbridge.host.client import HostClient
from lmbridge.host.framing import _orjson
from lmbridge.parts import ChatMessage, ChatRequestOptions, ModelInfo, ResponsePart, TextPart
from lmbridge.provider import (
    CancellationToken,
    LanguageModelChatProvider,
    ResponseItem,
    ResponseProgress,
    model_info,
    respond,
)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "benchmarks" / "host.md"
CHUNK = 10
FLOOD_PARTS = 100_000
TTFP_RUNS = 300
REPEATS = 3
GOAL_TTFP_MS = 2.0
GOAL_PARTS_PER_S = 20_000


class FloodProvider(LanguageModelChatProvider):
    """``modelOptions.parts`` text parts, ``CHUNK`` per turn of the event loop."""

    models = (model_info("flood"),)

    async def provide_language_model_chat_response(
        self,
        model: ModelInfo,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        progress: ResponseProgress,
        token: CancellationToken,
    ) -> AsyncIterator[ResponseItem]:
        """Yield the parts."""
        n = int(options.model_options.get("parts", 1))
        for i in range(n):
            yield TextPart("tok ")
            if i % CHUNK == CHUNK - 1:
                await asyncio.sleep(0)


def options(parts: int) -> ChatRequestOptions:
    return ChatRequestOptions(model_options={"parts": parts})


MESSAGES = [ChatMessage.user("go")]


async def in_process() -> tuple[list[float], float]:
    provider = FloodProvider()
    model = provider.models[0]
    ttfp: list[float] = []
    for _ in range(TTFP_RUNS):
        first: list[float] = []
        t0 = time.perf_counter()

        def sink(part: ResponsePart, first: list[float] = first) -> None:
            if not first:
                first.append(time.perf_counter())

        await respond(provider, model, MESSAGES, options(20), sink)
        ttfp.append(first[0] - t0)
    best = 0.0
    for _ in range(REPEATS):
        got: list[ResponsePart] = []
        t0 = time.perf_counter()
        await respond(provider, model, MESSAGES, options(FLOOD_PARTS), got.append)
        best = max(best, len(got) / (time.perf_counter() - t0))
    return ttfp, best


async def through_host() -> tuple[list[float], float, int]:
    config = {"providers": [{"name": "bench", "provider": "bench_host:FloodProvider"}]}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "providers.json"
        path.write_text(json.dumps(config))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")])
        async with HostClient.start(
            ["--config", str(path), "--log-level", "warning"], env=env
        ) as host:
            await host.initialize()
            await host.request("models/list", {"silent": True})
            ttfp: list[float] = []
            for _ in range(TTFP_RUNS):
                first: list[float] = []
                t0 = time.perf_counter()

                def on_parts(parts: list[ResponsePart], first: list[float] = first) -> None:
                    if not first:
                        first.append(time.perf_counter())

                await host.chat("bench/flood", MESSAGES, options(20), on_parts)
                ttfp.append(first[0] - t0)
            best = 0.0
            notes = 0
            for _ in range(REPEATS):
                t0 = time.perf_counter()
                call = host.start_chat("bench/flood", MESSAGES, options(FLOOD_PARTS))
                await call.result()
                rate = len(call.parts) / (time.perf_counter() - t0)
                assert len(call.parts) == FLOOD_PARTS
                if rate > best:
                    best, notes = rate, call.notifications
    return ttfp, best, notes


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def p95(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.95)]


async def main() -> None:
    ip_ttfp, ip_rate = await in_process()
    h_ttfp, h_rate, notes = await through_host()
    added = statistics.median(h_ttfp) - statistics.median(ip_ttfp)
    rows = [
        (
            "time to first part, median (ms)",
            ms(statistics.median(ip_ttfp)),
            ms(statistics.median(h_ttfp)),
        ),
        ("time to first part, p95 (ms)", ms(p95(ip_ttfp)), ms(p95(h_ttfp))),
        ("parts per second", f"{ip_rate:,.0f}", f"{h_rate:,.0f}"),
    ]
    lines = [
        "# Host benchmark: the cost of the stdio hop",
        "",
        "Generated by `benchmarks/bench_host.py` (run: `.venv/bin/python benchmarks/bench_host.py`).",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs (shared with other work), "
        f"Python {platform.python_version()}, JSON: {'orjson' if _orjson else 'json'}.",
        "",
        f"One provider yields text parts, {CHUNK} per turn of the event loop (as a decoder "
        "does per network read). In-process: `lmbridge.provider.respond` into a list. Through "
        "the host: `python -m lmbridge host` as a subprocess, driven over its pipes by the "
        "Python client exactly as the extension drives it, the client decoding every part back "
        f"into objects. Time to first part: {TTFP_RUNS} requests, from sending the request to "
        f"the first part in hand. Parts per second: {FLOOD_PARTS:,} parts, request to result, "
        f"best of {REPEATS}.",
        "",
        "| measure | in-process | through the host | ratio |",
        "|---|---:|---:|---:|",
    ]
    for name, a, b in rows:
        ratio = float(b.replace(",", "")) / float(a.replace(",", ""))
        lines.append(f"| {name} | {a} | {b} | {ratio:.2f}x |")
    lines += [
        "",
        f"- The host adds **{added * 1000:.3f} ms** to the median time to first part "
        f"(goal: < {GOAL_TTFP_MS} ms): {'met' if added * 1000 < GOAL_TTFP_MS else 'NOT met'}.",
        f"- It delivers **{h_rate:,.0f} parts/s** over stdio (goal: >= {GOAL_PARTS_PER_S:,}): "
        f"{'met' if h_rate >= GOAL_PARTS_PER_S else 'NOT met'}; "
        f"{FLOOD_PARTS:,} parts arrived in {notes:,} `chat/parts` notifications "
        f"({FLOOD_PARTS / max(notes, 1):.0f} parts each).",
        "- In-process figures are the floor: the provider and the contract guard alone. The "
        "host's figures include the client's own decoding, which the TypeScript extension does "
        "in the extension host instead.",
        "",
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
