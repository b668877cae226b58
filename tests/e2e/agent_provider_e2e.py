"""A scripted lmbridge model provider for the agent end-to-end run (tests/e2e/test_vscode_agents.py).

It plays an agent's model for one tool round, whatever the agent:

- the last message carries a tool result: answer ``AGENT-DONE: <the result's text>``;
- the conversation asks ``read <<path>>`` and a file-reading or shell tool is offered: call it
  (Claude Code's ``Read``, Codex's ``shell`` / ``exec_command`` / ``shell_command``, or any
  tool taking a command) to read that file;
- the conversation asks ``use the tool <<name>> with <<word>>`` and that tool is offered
  (by its name, or as an MCP client names it: ``mcp__<server>__<name>``): call it with
  ``{"word": word}``;
- anything else (an agent's side requests: titles, summaries ...): ``AGENT-IDLE``.

Every request is appended, as one JSON line, to the file ``$LMBRIDGE_AGENT_LOG`` (when set):
the tool names offered and what was answered, so the test can tell which client sent what.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    ModelInfo,
    ResponsePart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from lmbridge.provider import (
    CancellationToken,
    LanguageModelChatProvider,
    ResponseItem,
    ResponseProgress,
    model_info,
)

__all__ = ["AgentScriptProvider", "scripted_answer"]

_PATH = re.compile(r"read <<([^<>]+)>>")
_USE = re.compile(r"use the tool <<([^<>]+)>> with <<([^<>]+)>>")


def _tool_call(tool: ChatTool, path: str, n: int) -> ToolCallPart | None:
    schema = tool.input_schema or {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    props = props if isinstance(props, dict) else {}
    call_id = f"call_agent_{n}"
    if tool.name == "Read" or "file_path" in props:
        return ToolCallPart(call_id, tool.name, {"file_path": path})
    if "cmd" in props:
        return ToolCallPart(call_id, tool.name, {"cmd": f"cat {path}"})
    if "command" in props:
        kind = props["command"].get("type") if isinstance(props["command"], dict) else None
        command: Any = ["cat", path] if kind == "array" else f"cat {path}"
        return ToolCallPart(call_id, tool.name, {"command": command})
    return None


_PREFERRED = ("Read", "shell", "exec_command", "shell_command", "Bash")


def scripted_answer(
    messages: Sequence[ChatMessage], options: ChatRequestOptions
) -> tuple[list[ResponsePart], dict[str, Any]]:
    """The parts to answer with, and a log entry saying why."""
    entry: dict[str, Any] = {"tools": [t.name for t in options.tools], "messages": len(messages)}
    last = messages[-1] if messages else ChatMessage.user("")
    results = [p for p in last.content if isinstance(p, ToolResultPart)]
    if results:
        text = "".join(c.value for r in results for c in r.content if isinstance(c, TextPart))
        entry["answer"] = "done"
        return [TextPart(f"AGENT-DONE: {text[:400]}")], entry
    use = next(
        (m for msg in messages for p in msg.content if isinstance(p, TextPart) for m in [_USE.search(p.value)] if m),
        None,
    )
    if use is not None:
        wanted, word = use.group(1), use.group(2)
        tool = next((t for t in options.tools if t.name == wanted or t.name.endswith(f"__{wanted}")), None)
        if tool is not None:
            entry["answer"] = f"call {tool.name}"
            return [ToolCallPart(f"call_tool_{len(messages)}", tool.name, {"word": word})], entry
    asked = next(
        (m.group(1) for msg in messages for p in msg.content if isinstance(p, TextPart) for m in [_PATH.search(p.value)] if m),
        None,
    )
    if asked is not None and options.tools:
        ranked = sorted(
            options.tools, key=lambda t: _PREFERRED.index(t.name) if t.name in _PREFERRED else 99
        )
        for tool in ranked:
            call = _tool_call(tool, asked, len(messages))
            if call is not None:
                entry["answer"] = f"call {tool.name}"
                return [TextPart("Reading the file."), call], entry
    entry["answer"] = "idle"
    return [TextPart("AGENT-IDLE")], entry


def _log(entry: dict[str, Any]) -> None:
    path = os.environ.get("LMBRIDGE_AGENT_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


class AgentScriptProvider(LanguageModelChatProvider):
    """One model, ``agent``, that answers by :func:`scripted_answer`."""

    def __init__(self, **_: Any) -> None:
        super().__init__()
        self.models = [
            model_info(
                "agent",
                name="Agent script",
                family="agent-script",
                max_input_tokens=400_000,
                max_output_tokens=32_000,
                tool_calling=True,
                image_input=True,
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
        """Stream the scripted answer."""
        parts, entry = scripted_answer(messages, options)
        _log(entry)
        for part in parts:
            yield part
        yield Usage(input_tokens=100, output_tokens=10)
