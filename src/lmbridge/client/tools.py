"""VS Code's tools for Python: list them, invoke one, and a tool loop on VS Code's models.

VS Code knows the tools every extension registers and every MCP server it runs
(``vscode.lm.tools``); ``vscode.lm.invokeTool`` runs one. The user's setting
``lmbridge.endpoint.tools`` (an allowlist of names or shell-style patterns, ``["*"]`` for all;
empty, the default, for none; read from user settings only) says which of them lmbridge offers:
to apps in the host, to processes through the loopback endpoint (``/lm/tools``,
``/lm/invokeTool`` and the MCP server at ``/mcp``). A tool that asks for confirmation in VS
Code still asks there.

::

    from lmbridge.client import LanguageModelClient
    from lmbridge.client.tools import ToolBox, run_tool_loop

    tools = ToolBox()                                   # the default transport's tools
    print([t.name for t in await tools.list()])
    result = await tools.invoke("my_tool", {"city": "Paris"})  # [TextPart | DataPart]
    answer = await run_tool_loop(LanguageModelClient(), "What is the weather in Paris?", tools)

Every input is checked against the tool's JSON schema before the tool runs
(:func:`validate_input`: types, required and unknown properties, enums, bounds; the common
subset of JSON Schema that tools declare); a bad one raises :class:`ToolError` naming the field,
and in the tool loop goes back to the model as the tool's error so it can fix the call.
"""

from __future__ import annotations

import fnmatch
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..parts import (
    ChatMessage,
    ChatRole,
    DataPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from ._tool_types import ToolContent, ToolError, VSCodeTool, result_from_wire
from .transport import get_default_transport

__all__ = [
    "ToolAllowlist",
    "ToolBox",
    "ToolContent",
    "ToolError",
    "ToolLoopResult",
    "ToolTransport",
    "VSCodeTool",
    "result_from_wire",
    "run_tool_loop",
    "validate_input",
]

_log = logging.getLogger("lmbridge.client.tools")


@dataclass(frozen=True, slots=True)
class ToolAllowlist:
    """``lmbridge.endpoint.tools``: tool names or shell-style patterns (``*``, ``?``, ``[..]``);
    empty allows nothing."""

    patterns: tuple[str, ...] = ()

    @classmethod
    def from_setting(cls, value: Any) -> tuple[ToolAllowlist, list[str]]:
        """The allowlist of a setting value and a problem for each unusable entry."""
        if value is None:
            return cls(), []
        if not isinstance(value, list):
            return cls(), [f"lmbridge.endpoint.tools: expected a list, got {type(value).__name__}"]
        good = [v.strip() for v in value if isinstance(v, str) and v.strip()]
        problems = []
        if len(good) != len(value):
            bad = [v for v in value if not (isinstance(v, str) and v.strip())]
            problems.append(f"lmbridge.endpoint.tools: ignored entries that are not names: {bad!r}")
        return cls(tuple(dict.fromkeys(good))), problems

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def allows(self, name: str) -> bool:
        """Whether ``name`` matches an entry (case-sensitive, as VS Code names tools)."""
        return any(fnmatch.fnmatchcase(name, p) for p in self.patterns)


@runtime_checkable
class ToolTransport(Protocol):
    """A transport that reaches VS Code's tools (the host's, the endpoint's, the test double)."""

    async def list_tools(self) -> list[VSCodeTool]:
        """The tools VS Code offers (already limited by the user's allowlist)."""
        ...

    async def invoke_tool(
        self, name: str, input: Mapping[str, Any], cancel: Any = None
    ) -> ToolContent:
        """Run one tool; raises :class:`ToolError`. ``cancel`` (an ``asyncio.Event``) cancels."""
        ...


# --------------------------------------------------------------------------- input check

_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, Mapping),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def validate_input(schema: Any, value: Any, where: str = "input") -> list[str]:
    """What is wrong with ``value`` for the JSON schema ``schema`` (empty: nothing).

    Checks the subset tools use: ``type`` (one or a list), ``enum``, ``const``,
    ``properties`` / ``required`` / ``additionalProperties``, ``items``, ``minItems`` /
    ``maxItems``, ``minLength`` / ``maxLength``, ``pattern``, ``minimum`` / ``maximum`` (and
    the exclusive ones), ``anyOf`` / ``oneOf`` (one must fit), ``allOf``. Keywords it does not
    know are not checked (a tool may still refuse its input).
    """
    if not isinstance(schema, Mapping):
        return []
    problems: list[str] = []
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else None
    if kinds is not None:
        known = [k for k in kinds if k in _TYPES]
        if known and not any(_TYPES[k](value) for k in known):
            return [f"{where}: expected {' or '.join(known)}, got {_describe(value)}"]
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        problems.append(f"{where}: expected one of {schema['enum']!r}, got {value!r}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{where}: expected {schema['const']!r}, got {value!r}")
    if isinstance(value, Mapping):
        problems += _check_object(schema, value, where)
    elif isinstance(value, list):
        problems += _check_array(schema, value, where)
    elif isinstance(value, str):
        problems += _check_string(schema, value, where)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        problems += _check_number(schema, value, where)
    for sub in schema.get("allOf") or []:
        problems += validate_input(sub, value, where)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if (
            isinstance(options, list)
            and options
            and all(validate_input(o, value, where) for o in options)
        ):
            problems.append(f"{where}: fits none of the {len(options)} allowed shapes ({key})")
    return problems


def _describe(value: Any) -> str:
    names = {bool: "a boolean", str: "a string", list: "an array", type(None): "null"}
    for t, name in names.items():
        if isinstance(value, t):
            return name
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _check_object(schema: Mapping[str, Any], value: Mapping[str, Any], where: str) -> list[str]:
    problems: list[str] = []
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    required = schema.get("required")
    for name in required if isinstance(required, list) else []:
        if isinstance(name, str) and name not in value:
            problems.append(f"{where}.{name}: required")
    extra = schema.get("additionalProperties")
    for name, item in value.items():
        if name in props:
            problems += validate_input(props[name], item, f"{where}.{name}")
        elif extra is False:
            problems.append(f"{where}.{name}: not a property of this tool's input")
        elif isinstance(extra, Mapping):
            problems += validate_input(extra, item, f"{where}.{name}")
    return problems


def _check_array(schema: Mapping[str, Any], value: list[Any], where: str) -> list[str]:
    problems: list[str] = []
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            problems += validate_input(items, item, f"{where}[{i}]")
    low, high = schema.get("minItems"), schema.get("maxItems")
    if isinstance(low, int) and len(value) < low:
        problems.append(f"{where}: at least {low} items, got {len(value)}")
    if isinstance(high, int) and len(value) > high:
        problems.append(f"{where}: at most {high} items, got {len(value)}")
    return problems


def _check_string(schema: Mapping[str, Any], value: str, where: str) -> list[str]:
    problems: list[str] = []
    low, high = schema.get("minLength"), schema.get("maxLength")
    if isinstance(low, int) and len(value) < low:
        problems.append(f"{where}: at least {low} characters, got {len(value)}")
    if isinstance(high, int) and len(value) > high:
        problems.append(f"{where}: at most {high} characters, got {len(value)}")
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            if re.search(pattern, value) is None:
                problems.append(f"{where}: does not match the pattern {pattern!r}")
        except re.error:
            pass  # a pattern Python cannot read (ECMA-only syntax) is the tool's to check
    return problems


def _check_number(schema: Mapping[str, Any], value: float, where: str) -> list[str]:
    problems: list[str] = []
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{where}: expected a finite number"]
    bounds: tuple[tuple[str, Callable[[float], bool], str], ...] = (
        ("minimum", lambda b: value < b, "at least"),
        ("maximum", lambda b: value > b, "at most"),
        ("exclusiveMinimum", lambda b: value <= b, "more than"),
        ("exclusiveMaximum", lambda b: value >= b, "less than"),
    )
    for key, broken, words in bounds:
        bound = schema.get(key)
        if isinstance(bound, (int, float)) and not isinstance(bound, bool) and broken(bound):
            problems.append(f"{where}: expected {words} {bound}, got {value}")
    return problems


# --------------------------------------------------------------------------- the tool box


class ToolBox:
    """VS Code's tools through a transport: :meth:`list`, :meth:`invoke` (input checked first).

    ``transport`` defaults to the client's default transport (the host's inside VS Code, the
    endpoint's elsewhere); ``allow`` limits the tools further (the endpoint passes the user's
    ``lmbridge.endpoint.tools``; the extension applies it to every transport anyway).
    """

    def __init__(self, transport: Any = None, *, allow: ToolAllowlist | None = None) -> None:
        self._transport = transport
        self.allow = allow
        """The allowlist applied here (None: what the transport offers)."""

    @property
    def transport(self) -> ToolTransport:
        """The transport, checked to reach tools."""
        transport = self._transport if self._transport is not None else get_default_transport()
        if not isinstance(transport, ToolTransport):
            raise ToolError(
                "unavailable", f"{type(transport).__name__} does not reach VS Code's tools"
            )
        return transport

    async def list(self) -> list[VSCodeTool]:
        """The tools offered (an empty list while ``lmbridge.endpoint.tools`` is empty)."""
        tools = await self.transport.list_tools()
        if self.allow is not None:
            tools = [t for t in tools if self.allow.allows(t.name)]
        return tools

    async def find(self, name: str) -> VSCodeTool:
        """The tool named ``name``; :class:`ToolError` ``not_found`` if it is not offered."""
        if self.allow is not None and not self.allow.allows(name):
            raise _not_found(name)
        for tool in await self.list():
            if tool.name == name:
                return tool
        raise _not_found(name)

    async def invoke(
        self, name: str, input: Mapping[str, Any] | None = None, cancel: Any = None
    ) -> ToolContent:
        """Run the tool ``name`` with ``input`` after checking it against the tool's schema.

        Raises :class:`ToolError` (``not_found``, ``invalid_input``, ``failed``, ``cancelled``).
        """
        tool = await self.find(name)
        value: Any = {} if input is None else input
        if not isinstance(value, Mapping):
            raise ToolError("invalid_input", f"input: expected an object, got {_describe(value)}")
        problems = validate_input(tool.input_schema, value)
        if problems:
            raise ToolError(
                "invalid_input",
                f"the input of tool {name!r} does not fit its schema: " + "; ".join(problems[:10]),
            )
        return await self.transport.invoke_tool(name, dict(value), cancel)


def _not_found(name: str) -> ToolError:
    return ToolError(
        "not_found",
        f"no tool {name!r}: the tools offered are VS Code's tools that the user setting "
        "lmbridge.endpoint.tools allows",
    )


# --------------------------------------------------------------------------- the tool loop


@dataclass
class ToolLoopResult:
    """What :func:`run_tool_loop` ends with."""

    text: str
    """The model's last answer."""
    messages: list[ChatMessage] = field(default_factory=list)
    """The whole conversation, tool calls and results included (continue it if you like)."""
    calls: list[tuple[ToolCallPart, ToolContent | ToolError]] = field(default_factory=list)
    """Every tool call and what it returned (or the error the model was told)."""


async def run_tool_loop(
    client: Any,
    messages: str | Sequence[ChatMessage],
    tools: ToolBox | None = None,
    *,
    names: Sequence[str] | None = None,
    system: str | None = None,
    max_rounds: int = 10,
) -> ToolLoopResult:
    """Send ``messages`` to ``client`` (a :class:`~.api.LanguageModelClient`) with VS Code's
    tools, invoke the calls the model makes, send the results back, until it answers without
    a call (or after ``max_rounds`` rounds: the last answer, tool calls unanswered).

    ``names`` limits the tools sent (all that ``tools`` offers by default). A tool that fails
    or gets a bad input answers the model with the error, so that it can recover.
    """
    box = tools or ToolBox()
    offered = await box.list()
    if names is not None:
        offered = [t for t in offered if t.name in set(names)]
    chat_tools = [t.as_chat_tool() for t in offered]
    history: list[ChatMessage] = (
        [ChatMessage.user(messages)] if isinstance(messages, str) else list(messages)
    )
    result = ToolLoopResult("", history)
    for _ in range(max(1, max_rounds)):
        done = await client.complete(history, system=system, tools=chat_tools or None)
        result.text = done.text
        history.append(
            ChatMessage(
                ChatRole.ASSISTANT,
                [p for p in done.parts if isinstance(p, (TextPart, ToolCallPart, ThinkingPart))],
            )
        )
        if not done.tool_calls:
            break
        answers: list[TextPart | DataPart | ToolResultPart | ThinkingPart | ToolCallPart] = []
        for call in done.tool_calls:
            try:
                content: ToolContent | ToolError = await box.invoke(call.name, call.input)
            except ToolError as exc:
                _log.info("tool loop: %s failed: %s", call.name, exc)
                content = exc
            result.calls.append((call, content))
            parts = [TextPart(f"error: {content}")] if isinstance(content, ToolError) else content
            answers.append(ToolResultPart(call.call_id, list(parts)))
        history.append(ChatMessage(ChatRole.USER, answers))
    result.messages = history
    return result
