"""A Python function as a tool-calling model.

``function_tool_model(fn)`` makes a provider whose one model knows one tool: the function.
When VS Code offers a tool of that name, the model calls it (a ``ToolCallPart`` with the
arguments read from the message); when the tool's result comes back, the model reports it;
when the tool is not offered, the model runs the function itself and answers in text. No
network, deterministic: a fixture for end-to-end runs of the tool-calling loop.

Configuration (with this folder on ``PYTHONPATH``)::

    {"name": "calc", "provider": "function_tool_provider:calculator"}
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    ModelInfo,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from lmbridge.provider import (
    CancellationToken,
    LanguageModelChatProvider,
    ResponseItem,
    ResponseProgress,
    model_info,
)

__all__ = ["FunctionToolProvider", "add", "calculator", "function_tool_model"]

_JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}


class FunctionToolProvider(LanguageModelChatProvider):
    """One model that calls (or runs) one Python function."""

    def __init__(self, fn: Callable[..., Any], model_id: str | None = None) -> None:
        super().__init__()
        self.fn = fn
        hints = typing.get_type_hints(fn)  # resolves string annotations
        self.params = {name: hints.get(name, str) for name in inspect.signature(fn).parameters}
        self.tool = ChatTool(
            fn.__name__,
            inspect.getdoc(fn) or "",
            {
                "type": "object",
                "properties": {
                    name: {"type": _JSON_TYPES.get(kind, "string")}
                    for name, kind in self.params.items()
                },
                "required": list(self.params),
            },
        )
        """The tool to offer in requests (its schema comes from the signature)."""
        self.models = [model_info(model_id or fn.__name__, tool_calling=True)]

    def arguments(self, text: str) -> dict[str, Any]:
        """Read the function's arguments from ``text``: numbers for numeric parameters in
        order, the remaining words for string parameters."""
        numbers = iter(re.findall(r"-?\d+(?:\.\d+)?", text))
        words = iter(w for w in re.findall(r"[A-Za-z]\w*", text) if w != self.tool.name)
        args: dict[str, Any] = {}
        for name, kind in self.params.items():
            if kind in (int, float):
                args[name] = kind(next(numbers, "0"))
            elif kind is bool:
                args[name] = True
            else:
                args[name] = next(words, "")
        return args

    async def provide_language_model_chat_response(
        self,
        model: ModelInfo,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        progress: ResponseProgress,
        token: CancellationToken,
    ) -> AsyncIterator[ResponseItem]:
        """Call the tool, report its result, or run the function: see the module docstring."""
        last = messages[-1] if messages else ChatMessage.user("")
        results = [p for p in last.content if isinstance(p, ToolResultPart)]
        if results:
            text = "".join(c.value for c in results[0].content if isinstance(c, TextPart))
            yield TextPart(f"{self.tool.name} returned {text}.")
            return
        args = self.arguments(last.text)
        if any(t.name == self.tool.name for t in options.tools):
            yield ToolCallPart(f"call_{self.tool.name}_{len(messages)}", self.tool.name, args)
            return
        shown = ", ".join(repr(v) for v in args.values())
        yield TextPart(f"{self.tool.name}({shown}) = {self.fn(**args)!r}")


def function_tool_model(
    fn: Callable[..., Any], model_id: str | None = None
) -> FunctionToolProvider:
    """A provider serving ``fn`` as a tool-calling model (model id: the function's name)."""
    return FunctionToolProvider(fn, model_id)


def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


calculator = function_tool_model(add, "calculator")
"""The example instance: ``function_tool_provider:calculator`` in a configuration."""
