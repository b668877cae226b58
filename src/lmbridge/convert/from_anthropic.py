"""Anthropic ``MessageParam`` history (+ system prompt) -> VS Code messages (consumer side).

As Cline does it, with its losses fixed:

- the system prompt becomes an Assistant message first (VS Code's stable API has no System
  role; providers read leading assistant messages as the system prompt), or a System (3)
  message with ``system_as="system"``;
- in user turns, ``tool_result`` blocks come first (as ToolResultParts), then the rest;
- in assistant turns the block order is kept (Cline moved tool calls before the text);
  ``tool_use`` becomes a ToolCallPart whose input is an object (a JSON string input is parsed;
  anything else is a :class:`ConversionError`);
- ``thinking`` and ``redacted_thinking`` become ThinkingParts with ``signature`` /
  ``redactedData`` metadata, so the history can be replayed to Anthropic;
- base64 images become ``DataPart.image`` when the target takes images, else a placeholder
  naming the media type; URL images (nothing is fetched here) and images in assistant turns
  are placeholders too; base64 documents become DataParts chosen by :mod:`lmbridge.mime`,
  text documents text;
- ``clean_terminal=True`` strips ANSI escapes and control characters from all text.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..errors import ConversionError, WireError
from ..mime import data_part, parse_mime
from ..parts import (
    ChatMessage,
    ChatRole,
    DataPart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from ._common import clean_terminal_output, valid_unicode

__all__ = ["from_anthropic"]


def from_anthropic(
    messages: Sequence[Mapping[str, Any]],
    system: str | Sequence[Mapping[str, Any]] | None = None,
    *,
    image_input: bool = True,
    system_as: Literal["assistant", "system"] = "assistant",
    clean_terminal: bool = False,
) -> list[ChatMessage]:
    """VS Code messages for an Anthropic conversation; :class:`ConversionError` on bad input."""
    if system_as not in ("assistant", "system"):
        raise ConversionError(f"system_as must be 'assistant' or 'system', got {system_as!r}")
    if not isinstance(messages, (list, tuple)):
        raise ConversionError(f"messages: expected a list, got {type(messages).__name__}")
    # Lone surrogates (JSON escapes of half a UTF-16 pair) become U+FFFD: VS Code messages
    # carry valid Unicode only.
    messages = valid_unicode(messages)
    system = valid_unicode(system)
    conv = _Converter(image_input, clean_terminal)
    out: list[ChatMessage] = []
    system_text = conv.system(system)
    if system_text:
        out.append(
            ChatMessage.system(system_text)
            if system_as == "system"
            else ChatMessage.assistant(system_text)
        )
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, Mapping):
            raise ConversionError(f"{where}: expected an object, got {type(msg).__name__}")
        role = msg.get("role")
        if role not in ("user", "assistant"):
            raise ConversionError(f"{where}.role: expected 'user' or 'assistant', got {role!r}")
        parts = conv.content(msg.get("content"), role, where)
        if parts:
            out.append(ChatMessage(ChatRole.USER if role == "user" else ChatRole.ASSISTANT, parts))
    return out


class _Converter:
    def __init__(self, image_input: bool, clean: bool) -> None:
        self.image_input = image_input
        self.clean = clean

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise ConversionError(f"{where}: expected a string, got {type(value).__name__}")
        return clean_terminal_output(value) if self.clean else value

    def system(self, system: Any) -> str:
        if system is None:
            return ""
        if isinstance(system, str):
            return self.text(system, "system")
        if not isinstance(system, Sequence):
            raise ConversionError("system: expected a string or a list of text blocks")
        texts = []
        for i, block in enumerate(system):
            if not isinstance(block, Mapping) or block.get("type") != "text":
                raise ConversionError(f"system[{i}]: expected a text block")
            texts.append(self.text(block.get("text"), f"system[{i}].text"))
        return "\n\n".join(t for t in texts if t)

    def content(self, content: Any, role: str, where: str) -> list[Part]:
        if isinstance(content, str):
            text = self.text(content, f"{where}.content")
            return [TextPart(text)] if text else []
        if not isinstance(content, list):
            raise ConversionError(
                f"{where}.content: expected a string or a list of blocks, got {type(content).__name__}"
            )
        results: list[Part] = []
        rest: list[Part] = []
        for j, block in enumerate(content):
            bwhere = f"{where}.content[{j}]"
            if not isinstance(block, Mapping):
                raise ConversionError(f"{bwhere}: expected a content block object")
            kind = block.get("type")
            if kind == "tool_result" and role == "user":
                results.append(self.tool_result(block, bwhere))
            elif kind == "text":
                text = self.text(block.get("text"), f"{bwhere}.text")
                if text:
                    rest.append(TextPart(text))
            elif kind in ("image", "document"):
                rest.append(self.media(block, role, bwhere))
            elif kind == "tool_use" and role == "assistant":
                rest.append(self.tool_use(block, bwhere))
            elif kind == "thinking" and role == "assistant":
                meta = (
                    {"signature": block["signature"]}
                    if isinstance(block.get("signature"), str)
                    else None
                )
                rest.append(
                    ThinkingPart(self.text(block.get("thinking"), f"{bwhere}.thinking"), None, meta)
                )
            elif kind == "redacted_thinking" and role == "assistant":
                data = block.get("data")
                if not isinstance(data, str):
                    raise ConversionError(f"{bwhere}.data: expected a string")
                rest.append(ThinkingPart("", None, {"redactedData": data}))
            else:
                raise ConversionError(
                    f"{bwhere}: unsupported content block type {kind!r} in {role} messages"
                )
        # Tool results first, then the rest: a user turn answers the calls before saying more.
        return results + rest

    def tool_use(self, block: Mapping[str, Any], where: str) -> ToolCallPart:
        call_id = block.get("id")
        name = block.get("name")
        if not isinstance(call_id, str) or not call_id:
            raise ConversionError(f"{where}.id: expected a non-empty string")
        if not isinstance(name, str) or not name:
            raise ConversionError(f"{where}.name: expected a non-empty string")
        return ToolCallPart(call_id, name, tool_input(block.get("input"), f"{where}.input", name))

    def tool_result(self, block: Mapping[str, Any], where: str) -> ToolResultPart:
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str) or not call_id:
            raise ConversionError(f"{where}.tool_use_id: expected a non-empty string")
        content = block.get("content")
        inner: list[TextPart | DataPart | ThinkingPart] = []
        if isinstance(content, str):
            text = self.text(content, f"{where}.content")
            if text:
                inner.append(TextPart(text))
        elif isinstance(content, list):
            for k, item in enumerate(content):
                iwhere = f"{where}.content[{k}]"
                if not isinstance(item, Mapping):
                    raise ConversionError(f"{iwhere}: expected a content block object")
                if item.get("type") == "text":
                    text = self.text(item.get("text"), f"{iwhere}.text")
                    if text:
                        inner.append(TextPart(text))
                elif item.get("type") in ("image", "document"):
                    part = self.media(item, "user", iwhere)
                    if isinstance(part, (TextPart, DataPart)):
                        inner.append(part)
                else:
                    raise ConversionError(
                        f"{iwhere}: unsupported block type {item.get('type')!r} in a tool result"
                    )
        elif content is not None:
            raise ConversionError(f"{where}.content: expected a string or a list of blocks")
        return ToolResultPart(call_id, inner)

    def media(self, block: Mapping[str, Any], role: str, where: str) -> Part:
        kind = block.get("type")
        source = block.get("source")
        if not isinstance(source, Mapping):
            raise ConversionError(f"{where}.source: expected an object")
        stype = source.get("type")
        if stype == "url":
            return TextPart(f"[{kind} ({source.get('url')}): not fetched]")
        if stype == "text" and kind == "document":
            return TextPart(self.text(source.get("data"), f"{where}.source.data"))
        if stype != "base64":
            raise ConversionError(f"{where}.source.type: unsupported source type {stype!r}")
        mime = source.get("media_type")
        if not isinstance(mime, str):
            raise ConversionError(f"{where}.source.media_type: expected a string")
        try:
            parse_mime(mime)
        except WireError as exc:
            raise ConversionError(f"{where}.source.media_type: {exc}") from None
        raw = source.get("data")
        if not isinstance(raw, str):
            raise ConversionError(f"{where}.source.data: expected a base64 string")
        try:
            data = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ConversionError(f"{where}.source.data: not valid base64 ({exc})") from None
        is_img = kind == "image"
        if role != "user" or (is_img and not self.image_input):
            label = "Image" if is_img else "Document"
            return TextPart(f"[{label} (base64): {mime} not supported here]")
        return data_part(data, mime)


def tool_input(value: Any, where: str, name: str) -> dict[str, Any]:
    """A tool call's input as an object: objects as is, JSON strings parsed, else an error."""
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            value = valid_unicode(json.loads(value))
        except ValueError as exc:
            raise ConversionError(
                f"{where}: input of tool {name!r} is not valid JSON ({exc})"
            ) from None
        except RecursionError:
            raise ConversionError(
                f"{where}: input of tool {name!r} is JSON nested too deeply to read"
            ) from None
    if not isinstance(value, dict):
        raise ConversionError(
            f"{where}: input of tool {name!r} must be a JSON object, got {type(value).__name__}"
        )
    return value
