"""The tool types the transports and :mod:`.tools` share (re-exported there): a tool of
``vscode.lm.tools``, what a tool returns, and why a tool call failed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import LMBridgeError, WireError
from ..parts import ChatTool, DataPart, TextPart, ThinkingPart, part_from_wire

__all__ = ["ToolContent", "ToolError", "VSCodeTool", "result_from_wire"]

ToolContent = list[TextPart | DataPart]
"""What a tool returned: text and data parts (images, JSON ...)."""


class ToolError(LMBridgeError):
    """A tool could not be invoked or failed. ``reason`` says which:

    ``not_found`` (no such tool, or not allowed by ``lmbridge.endpoint.tools``; the two look
    the same so a client learns nothing of tools it may not use), ``invalid_input`` (the input
    does not fit the tool's schema), ``failed`` (the tool ran and failed, or VS Code refused:
    the user declined its confirmation ...), ``cancelled``, ``unavailable`` (no tools here:
    an old extension, or the setting is empty)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class VSCodeTool:
    """One tool of ``vscode.lm.tools``."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] | None = None
    """The JSON schema of its input (None: it takes none)."""
    tags: tuple[str, ...] = ()

    def as_chat_tool(self) -> ChatTool:
        """The tool as a model sees it in a request."""
        return ChatTool(self.name, self.description, self.input_schema)

    def to_wire(self) -> dict[str, Any]:
        """``{"name", "description", "inputSchema", "tags"}`` (``lm/tools``)."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "tags": list(self.tags),
        }

    @classmethod
    def from_wire(cls, obj: Any, where: str = "tool") -> VSCodeTool:
        """The inverse of :meth:`to_wire`; :class:`~lmbridge.errors.WireError` when malformed."""
        if not isinstance(obj, Mapping) or not isinstance(obj.get("name"), str) or not obj["name"]:
            raise WireError(f"{where}.name: expected a non-empty string")
        schema = obj.get("inputSchema")
        tags = obj.get("tags")
        description = obj.get("description")
        return cls(
            obj["name"],
            description if isinstance(description, str) else "",
            dict(schema) if isinstance(schema, Mapping) else None,
            tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else (),
        )


def result_from_wire(obj: Any, where: str = "result") -> ToolContent:
    """``{"content": [wire parts]}`` of ``lm/invokeTool`` as text and data parts (a part of
    another kind becomes its JSON text)."""
    content = obj.get("content") if isinstance(obj, Mapping) else None
    if not isinstance(content, list):
        raise WireError(f"{where}.content: expected a list of parts")
    out: ToolContent = []
    for i, raw in enumerate(content):
        part = part_from_wire(raw, f"{where}.content[{i}]")
        if isinstance(part, (TextPart, DataPart)):
            out.append(part)
        elif isinstance(part, ThinkingPart):
            out.append(TextPart(part.text))
        else:
            out.append(TextPart(json.dumps(raw, ensure_ascii=False)))
    return out
