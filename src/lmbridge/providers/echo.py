"""The echo model: a provider that needs no network and no key (the built-in default).

It answers deterministically, so it also serves as a fixture for tests and the end-to-end run:

- a plain message: a short thinking part, then "You said: ..." streamed word by word;
- when tools are offered and the tool mode is *required*, or the message names a tool
  ("call get_weather ..."): a thinking part, then one tool call whose input fills the tool's
  required string fields with the message text;
- a tool result as the last message: "Tool result for <call id>: <its text>";
- images and other data in the message are described ("an image/png of 1234 bytes");
- ``/error <Code> [message]``: fails with that ``LanguageModelError`` code (NoPermissions,
  Blocked, NotFound, Unknown), for trying error paths;
- ``modelOptions`` (or constructor options) ``delay`` (seconds between chunks), ``thinking``
  (false: none) and ``script`` (a list of wire parts to answer with, verbatim).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

from ..errors import LanguageModelError, LanguageModelErrorCode
from ..parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    DataPart,
    FinishReason,
    ModelInfo,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolMode,
    ToolResultPart,
    Usage,
    parts_from_wire,
)
from ..provider import (
    CancellationToken,
    LanguageModelChatProvider,
    ResponseItem,
    ResponseProgress,
    estimate_tokens,
    model_info,
)

__all__ = ["EchoProvider"]

_ERROR_CODES = {"NoPermissions", "Blocked", "NotFound", "Unknown"}


class EchoProvider(LanguageModelChatProvider):
    """Echoes the last user message; calls a tool when asked to. See the module docstring."""

    def __init__(
        self,
        *,
        delay: float = 0.015,
        thinking: bool = True,
        script: list[Any] | None = None,
        models: Sequence[Any] | None = None,
    ) -> None:
        super().__init__()
        self.delay = float(delay)
        self.thinking = bool(thinking)
        self.script = parts_from_wire(script, "script") if script is not None else None
        ids = [m if isinstance(m, str) else str(m.get("id")) for m in (models or ["echo"])]
        self.models = [
            model_info(
                i,
                name=f"Echo ({i})" if i != "echo" else "Echo",
                family="echo",
                max_input_tokens=32_000,
                max_output_tokens=4_096,
                tool_calling=True,
                image_input=True,
                tooltip="Answers with what you wrote; needs no network or API key.",
            )
            for i in ids
        ]

    async def provide_language_model_chat_response(
        self,
        model: ModelInfo,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        progress: ResponseProgress,
        token: CancellationToken,
    ) -> AsyncIterator[ResponseItem]:
        """Stream the echo answer (an async generator)."""
        mo = options.model_options
        delay = float(mo.get("delay", self.delay))
        thinking = bool(mo.get("thinking", self.thinking))
        script = (
            parts_from_wire(mo["script"], "modelOptions.script") if "script" in mo else self.script
        )
        input_tokens = sum(estimate_tokens(model, m) for m in messages)
        out: list[str] = []

        async def pause() -> None:
            if delay > 0:
                await asyncio.sleep(delay)

        if script is not None:
            for part in script:
                await pause()
                yield part  # type: ignore[misc]  # a scripted ToolResultPart is refused by the guard
            yield Usage(input_tokens=input_tokens, output_tokens=len(script))
            return

        last = messages[-1] if messages else ChatMessage.user("")
        text = last.text.strip()
        match = re.match(r"/error\s+(\w+)\s*(.*)", text)
        if match:
            code = cast(
                LanguageModelErrorCode,
                match.group(1) if match.group(1) in _ERROR_CODES else "Unknown",
            )
            raise LanguageModelError(
                match.group(2) or f"the echo model was asked to fail ({code})", code
            )

        results = [p for p in last.content if isinstance(p, ToolResultPart)]
        tool = _tool_to_call(text, options)
        if results:
            answer = " ".join(
                f"Tool result for {r.call_id}: "
                + "".join(c.value for c in r.content if isinstance(c, TextPart))
                for r in results
            )
        elif tool is not None:
            if thinking:
                yield ThinkingPart(
                    f"The request asks for the tool {tool.name}; calling it.", id="t0"
                )
            await pause()
            yield ToolCallPart(
                f"call_{len(messages)}_{tool.name}", tool.name, _input_for(tool, text)
            )
            yield Usage(input_tokens=input_tokens, output_tokens=8)
            yield FinishReason.TOOL_CALLS
            return
        else:
            described = [_describe(p) for p in last.content if isinstance(p, DataPart)]
            answer = "You said: " + (text or "(nothing)")
            if described:
                answer += " (with " + ", ".join(described) + ")"
        if thinking:
            what = "the tool result" if results else f"{len(text)} characters"
            yield ThinkingPart(f"Echoing {what}.", id="t0")
        for word in re.findall(r"\S+\s*", answer):
            await pause()
            out.append(word)
            yield TextPart(word)
        yield Usage(input_tokens=input_tokens, output_tokens=estimate_tokens(model, "".join(out)))


def _tool_to_call(text: str, options: ChatRequestOptions) -> ChatTool | None:
    if not options.tools:
        return None
    for tool in options.tools:
        if re.search(rf"\b{re.escape(tool.name)}\b", text):
            return tool
    if options.tool_mode == ToolMode.REQUIRED:
        return options.tools[0]
    return None


def _input_for(tool: ChatTool, text: str) -> dict[str, Any]:
    schema = tool.input_schema or {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return {}
    required = schema.get("required") or list(props)
    args: dict[str, Any] = {}
    for name in required:
        prop = props.get(name) if isinstance(props.get(name), dict) else {}
        kind = prop.get("type") if isinstance(prop, dict) else None
        if kind in ("integer", "number"):
            numbers = re.findall(r"-?\d+(?:\.\d+)?", text)
            args[name] = (int if kind == "integer" else float)(numbers[0]) if numbers else 0
        elif kind == "boolean":
            args[name] = True
        elif kind in ("string", None):
            args[name] = _string_argument(text)
    return args


_QUOTED = re.compile(r"[\"'“‘]([^\"'”’]+)[\"'”’]")
_NAMED = re.compile(r"\b(?:in|for|of|at|about|to)\s+([A-Z][\w-]*(?:\s+[A-Z][\w-]*)*)")


def _string_argument(text: str) -> str:
    """A plausible string argument: a quoted phrase, a capitalised name after a preposition
    ("weather in Paris" -> "Paris"), else the whole message."""
    for pattern in (_QUOTED, _NAMED):
        m = pattern.search(text)
        if m:
            return m.group(1).strip()
    return text


def _describe(part: DataPart) -> str:
    kind = "an image" if part.mime_type.startswith("image/") else "data"
    return f"{kind} {part.mime_type} of {len(part.data)} bytes"
