"""The Python side of the VS Code benchmark (``benchmarks/bench_vscode.py``): scripted parts.

:class:`BenchProvider` serves one model, ``flood``, that answers with ``modelOptions.parts``
parts of ``modelOptions.scenario`` (see :func:`part_at`), ``CHUNK`` parts per turn of the event
loop, as a decoder yields them per network read. The TypeScript provider in
``benchmarks/vscode-bench/src/extension.ts`` builds the very same sequence (``partAt`` there),
so the consumer in VS Code receives identical parts from both and the benchmark checks it.

The host imports this module as ``vscode_bench_provider:BenchProvider`` with ``benchmarks/``
on ``PYTHONPATH`` (the benchmark's ``lmbridge.pythonCommand`` sets it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    ModelInfo,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from lmbridge.provider import (
    CancellationToken,
    LanguageModelChatProvider,
    ResponseItem,
    ResponseProgress,
    model_info,
)

__all__ = ["CHUNK", "SCENARIOS", "BenchProvider", "part_at"]

CHUNK = 10
"""Parts per turn of the event loop (one upstream read's worth)."""
SCENARIOS = ("text", "mixed")
"""``text``: text parts only. ``mixed``: thinking for the first quarter, then text with a tool
call every 500 parts."""


def part_at(i: int, n: int, scenario: str) -> ResponsePart:
    """Part ``i`` of ``n`` in ``scenario`` (must match ``partAt`` in the TypeScript provider)."""
    if scenario == "mixed":
        if i < n // 4:
            return ThinkingPart(f" r{i}", id="r0")
        if i % 500 == 499:
            return ToolCallPart(f"call_{i}", "get_weather", {"city": f"c{i}"})
    elif scenario != "text":
        raise ValueError(f"modelOptions.scenario: expected one of {SCENARIOS}, got {scenario!r}")
    return TextPart(f" w{i}")


class BenchProvider(LanguageModelChatProvider):
    """``modelOptions.parts`` scripted parts of ``modelOptions.scenario``, as fast as it can."""

    def __init__(self) -> None:
        super().__init__()
        self.models = [
            model_info(
                "flood",
                name="Benchmark flood (Python)",
                family="bench",
                max_input_tokens=100_000,
                max_output_tokens=1_000_000,
                tool_calling=True,
            )
        ]

    async def provide_language_model_chat_response(
        self,
        model: ModelInfo,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        progress: ResponseProgress,
        token: CancellationToken,
    ) -> AsyncIterator[ResponseItem]:
        """Yield the parts, letting the event loop turn every ``CHUNK`` parts."""
        n = int(options.model_options.get("parts", 1))
        scenario = str(options.model_options.get("scenario", "text"))
        for i in range(n):
            yield part_at(i, n, scenario)
            if i % CHUNK == CHUNK - 1:
                await asyncio.sleep(0)
