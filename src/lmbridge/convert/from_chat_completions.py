"""OpenAI Chat Completions history -> VS Code messages (consumer side).

- ``system`` / ``developer`` messages become Assistant messages in place (VS Code's stable API
  has no System role; providers read leading assistant messages as the system prompt), or
  System (3) messages with ``system_as="system"``;
- ``tool`` messages become ToolResultParts in a User message; consecutive tool messages and
  the user message right after them share that one User message, results first;
- assistant ``tool_calls`` become ToolCallParts whose input is the parsed ``arguments``
  (invalid JSON or a non-object is a :class:`ConversionError`); ``reasoning_content`` (the
  field name is configurable) becomes a ThinkingPart before the text;
- ``image_url`` parts with a data URL become ``DataPart.image`` when the target takes images,
  else a placeholder naming the media type; http(s) image URLs (nothing is fetched here) and
  audio are placeholders; ``file`` parts with ``file_data`` become DataParts chosen by
  :mod:`lmbridge.mime`;
- ``clean_terminal=True`` strips ANSI escapes and control characters from all text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..errors import ConversionError
from ..mime import data_part
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
from ._common import clean_terminal_output, parse_data_url, valid_unicode
from .from_anthropic import tool_input

__all__ = ["from_chat_completions"]


def from_chat_completions(
    messages: Sequence[Mapping[str, Any]],
    system: str | None = None,
    *,
    image_input: bool = True,
    system_as: Literal["assistant", "system"] = "assistant",
    reasoning_field: str = "reasoning_content",
    clean_terminal: bool = False,
) -> list[ChatMessage]:
    """VS Code messages for a Chat Completions ``messages`` list; :class:`ConversionError` on bad input.

    ``system``, when given, is a system prompt before the messages (as a ``system`` message).
    """
    if system_as not in ("assistant", "system"):
        raise ConversionError(f"system_as must be 'assistant' or 'system', got {system_as!r}")
    if not isinstance(messages, (list, tuple)):
        raise ConversionError(f"messages: expected a list, got {type(messages).__name__}")
    if system is not None:
        if not isinstance(system, str):
            raise ConversionError(f"system: expected a string, got {type(system).__name__}")
        messages = [{"role": "system", "content": system}, *messages]
    # Lone surrogates become U+FFFD (see from_anthropic).
    messages = valid_unicode(messages)
    conv = _Converter(image_input, clean_terminal)
    out: list[ChatMessage] = []
    # Results of consecutive tool messages wait here for the user message that may follow.
    pending: list[Part] = []

    def flush(extra: list[Part] | None = None) -> None:
        parts = pending + (extra or [])
        pending.clear()
        if parts:
            out.append(ChatMessage(ChatRole.USER, parts))

    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, Mapping):
            raise ConversionError(f"{where}: expected an object, got {type(msg).__name__}")
        role = msg.get("role")
        if role == "tool":
            call_id = msg.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise ConversionError(f"{where}.tool_call_id: expected a non-empty string")
            inner = [
                p
                for p in conv.content(msg.get("content"), where, "user")
                if isinstance(p, (TextPart, DataPart))
            ]
            pending.append(ToolResultPart(call_id, list(inner)))
        elif role == "user":
            flush(conv.content(msg.get("content"), where, "user"))
        elif role in ("system", "developer"):
            flush()
            text = "".join(
                p.value
                for p in conv.content(msg.get("content"), where, "system")
                if isinstance(p, TextPart)
            )
            if text:
                out.append(
                    ChatMessage.system(text)
                    if system_as == "system"
                    else ChatMessage.assistant(text)
                )
        elif role == "assistant":
            flush()
            parts = conv.assistant(msg, where, reasoning_field)
            if parts:
                out.append(ChatMessage(ChatRole.ASSISTANT, parts))
        else:
            raise ConversionError(
                f"{where}.role: expected 'system', 'developer', 'user', 'assistant' or 'tool', got {role!r}"
            )
    flush()
    return out


class _Converter:
    def __init__(self, image_input: bool, clean: bool) -> None:
        self.image_input = image_input
        self.clean = clean

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise ConversionError(f"{where}: expected a string, got {type(value).__name__}")
        return clean_terminal_output(value) if self.clean else value

    def content(self, content: Any, where: str, role: str) -> list[Part]:
        if content is None:
            return []
        if isinstance(content, str):
            text = self.text(content, f"{where}.content")
            return [TextPart(text)] if text else []
        if not isinstance(content, list):
            raise ConversionError(f"{where}.content: expected a string or a list of parts")
        out: list[Part] = []
        for j, item in enumerate(content):
            pwhere = f"{where}.content[{j}]"
            if not isinstance(item, Mapping):
                raise ConversionError(f"{pwhere}: expected a content part object")
            kind = item.get("type")
            if kind in ("text", "refusal"):
                text = self.text(item.get(kind), f"{pwhere}.{kind}")
                if text:
                    out.append(TextPart(text))
            elif kind == "image_url" and role == "user":
                out.append(self.image(item.get("image_url"), pwhere))
            elif kind == "input_audio" and role == "user":
                audio = item.get("input_audio")
                fmt = audio.get("format") if isinstance(audio, Mapping) else None
                out.append(TextPart(f"[audio ({fmt or 'unknown format'}): not supported here]"))
            elif kind == "file" and role == "user":
                out.append(self.file(item.get("file"), pwhere))
            else:
                raise ConversionError(
                    f"{pwhere}: unsupported content part type {kind!r} in {role} messages"
                )
        return out

    def image(self, obj: Any, where: str) -> Part:
        url = obj.get("url") if isinstance(obj, Mapping) else obj
        if not isinstance(url, str):
            raise ConversionError(f"{where}.image_url.url: expected a string")
        if not url.startswith("data:"):
            return TextPart(f"[image ({url}): not fetched]")
        data, mime = parse_data_url(url, f"{where}.image_url.url")
        if not self.image_input:
            return TextPart(f"[image: {mime} not supported here]")
        return data_part(data, mime)

    def file(self, obj: Any, where: str) -> Part:
        if not isinstance(obj, Mapping):
            raise ConversionError(f"{where}.file: expected an object")
        file_data = obj.get("file_data")
        if isinstance(file_data, str):
            data, mime = parse_data_url(file_data, f"{where}.file.file_data")
            return data_part(data, mime)
        return TextPart(
            f"[file {obj.get('filename') or obj.get('file_id') or ''}: not available here]"
        )

    def assistant(self, msg: Mapping[str, Any], where: str, reasoning_field: str) -> list[Part]:
        parts: list[Part] = []
        reasoning = msg.get(reasoning_field)
        if isinstance(reasoning, str) and reasoning:
            parts.append(ThinkingPart(self.text(reasoning, f"{where}.{reasoning_field}")))
        parts.extend(self.content(msg.get("content"), where, "assistant"))
        calls = msg.get("tool_calls")
        if calls is None:
            return parts
        if not isinstance(calls, list):
            raise ConversionError(f"{where}.tool_calls: expected a list")
        for k, call in enumerate(calls):
            cwhere = f"{where}.tool_calls[{k}]"
            if not isinstance(call, Mapping):
                raise ConversionError(f"{cwhere}: expected an object")
            call_id = call.get("id")
            fn = call.get("function")
            if not isinstance(call_id, str) or not call_id:
                raise ConversionError(f"{cwhere}.id: expected a non-empty string")
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
                raise ConversionError(f"{cwhere}.function.name: expected a non-empty string")
            name = fn["name"]
            parts.append(
                ToolCallPart(
                    call_id,
                    name,
                    tool_input(fn.get("arguments"), f"{cwhere}.function.arguments", name),
                )
            )
        return parts
