"""Gemini ``contents`` (+ ``systemInstruction``) -> VS Code messages (consumer side).

- ``user`` turns become User messages, ``model`` turns Assistant messages; the system
  instruction (a string, a ``Content`` or a list of parts) becomes a leading Assistant
  message (VS Code's stable API has no System role), or a System (3) message with
  ``system_as="system"``;
- ``text`` parts become text; ``thought: true`` parts thinking; a ``thoughtSignature`` is kept
  the way :mod:`lmbridge.upstream.gemini` reports it (in the thought part's metadata, or as an
  empty thinking part before the part it was on), so that :func:`~lmbridge.convert.to_gemini`
  puts it back;
- ``functionCall`` parts become tool calls (the call's ``id``, else ``<name>_<n>``);
  ``functionResponse`` parts tool results answering the call of that id, else the first
  unanswered call of that name that had no id either, else the first of that name; the response object is the result's text (its
  ``output`` when that is a string, else the object as JSON);
- ``inlineData`` becomes a data part (an image only when the model takes images, else a
  placeholder naming the type); ``fileData``, ``executableCode`` and ``codeExecutionResult``
  become text that says what they were (nothing is fetched here);
- ``clean_terminal=True`` strips ANSI escapes and control characters from all text.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..errors import ConversionError, WireError
from ..mime import data_part, is_image, parse_mime
from ..parts import (
    ChatMessage,
    ChatRole,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from ._common import clean_terminal_output, placeholder_for, valid_unicode
from .from_anthropic import tool_input

__all__ = ["from_gemini"]


def from_gemini(
    contents: Sequence[Mapping[str, Any]],
    system: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    *,
    image_input: bool = True,
    system_as: Literal["assistant", "system"] = "assistant",
    clean_terminal: bool = False,
) -> list[ChatMessage]:
    """VS Code messages for a Gemini conversation; :class:`ConversionError` on bad input."""
    if system_as not in ("assistant", "system"):
        raise ConversionError(f"system_as must be 'assistant' or 'system', got {system_as!r}")
    if not isinstance(contents, (list, tuple)):
        raise ConversionError(f"contents: expected a list, got {type(contents).__name__}")
    contents = valid_unicode(contents)
    conv = _Converter(image_input, clean_terminal)
    out: list[ChatMessage] = []
    system_text = conv.system(valid_unicode(system))
    if system_text:
        out.append(
            ChatMessage.system(system_text) if system_as == "system" else ChatMessage.assistant(system_text)
        )
    for i, content in enumerate(contents):
        where = f"contents[{i}]"
        if not isinstance(content, Mapping):
            raise ConversionError(f"{where}: expected an object, got {type(content).__name__}")
        role = content.get("role", "user")
        if role not in ("user", "model"):
            raise ConversionError(f"{where}.role: expected 'user' or 'model', got {role!r}")
        parts = conv.parts(content.get("parts"), role, where)
        if parts:
            out.append(ChatMessage(ChatRole.USER if role == "user" else ChatRole.ASSISTANT, parts))
    return out


class _Converter:
    def __init__(self, image_input: bool, clean: bool) -> None:
        self.image_input = image_input
        self.clean = clean
        self.calls = 0
        self.open_calls: dict[str, str] = {}  # call id -> name, still unanswered
        self.generated: set[str] = set()  # ids made here, for calls Gemini gave none
        self.signatures = 0

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise ConversionError(f"{where}: expected a string, got {type(value).__name__}")
        return clean_terminal_output(value) if self.clean else value

    def system(self, system: Any) -> str:
        if system is None or isinstance(system, str):
            return self.text(system or "", "system")
        parts = system.get("parts") if isinstance(system, Mapping) else system
        if not isinstance(parts, Sequence):
            raise ConversionError("system: expected a string, a Content or a list of parts")
        texts = []
        for i, part in enumerate(parts):
            if not isinstance(part, Mapping) or "text" not in part:
                raise ConversionError(f"system.parts[{i}]: expected a text part")
            texts.append(self.text(part["text"], f"system.parts[{i}].text"))
        return "\n\n".join(t for t in texts if t)

    def parts(self, parts: Any, role: str, where: str) -> list[Part]:
        if not isinstance(parts, list):
            raise ConversionError(f"{where}.parts: expected a list of parts")
        results: list[Part] = []
        rest: list[Part] = []
        for j, part in enumerate(parts):
            pwhere = f"{where}.parts[{j}]"
            if not isinstance(part, Mapping):
                raise ConversionError(f"{pwhere}: expected a part object")
            signature = part.get("thoughtSignature")
            if signature is not None and not isinstance(signature, str):
                raise ConversionError(f"{pwhere}.thoughtSignature: expected a string")
            if "functionResponse" in part:
                if role != "user":
                    raise ConversionError(f"{pwhere}: a functionResponse belongs in a user turn")
                results.append(self.response(part["functionResponse"], pwhere))
                continue
            if "text" in part and part.get("thought"):
                if role == "model":
                    meta = {"thoughtSignature": signature} if signature else None
                    rest.append(ThinkingPart(self.text(part["text"], f"{pwhere}.text"), None, meta))
                continue
            kind = next(
                (k for k in ("text", "functionCall", "inlineData", "fileData", "executableCode",
                             "codeExecutionResult") if k in part),
                None,
            )
            if kind is None:
                raise ConversionError(f"{pwhere}: unknown part ({', '.join(sorted(part)) or 'empty'})")
            if signature and role == "model":
                self.signatures += 1
                rest.append(
                    ThinkingPart("", f"sig-{self.signatures}", {"thoughtSignature": signature, "signedPart": kind})
                )
            rest.extend(self.content(kind, part[kind], role, pwhere))
        return results + rest

    def content(self, kind: str, value: Any, role: str, where: str) -> list[Part]:
        if kind == "text":
            text = self.text(value, f"{where}.text")
            return [TextPart(text)] if text else []
        if not isinstance(value, Mapping):
            raise ConversionError(f"{where}.{kind}: expected an object")
        if kind == "functionCall":
            if role != "model":
                raise ConversionError(f"{where}: a functionCall belongs in a model turn")
            name = value.get("name")
            if not isinstance(name, str) or not name:
                raise ConversionError(f"{where}.functionCall.name: expected a non-empty string")
            self.calls += 1
            given = value.get("id")
            call_id = given if isinstance(given, str) and given else f"{name}_{self.calls}"
            if call_id != given:
                self.generated.add(call_id)
            self.open_calls[call_id] = name
            return [ToolCallPart(call_id, name, tool_input(value.get("args") or {}, f"{where}.functionCall.args", name))]
        if kind == "inlineData":
            mime = value.get("mimeType")
            if not isinstance(mime, str) or not mime:
                raise ConversionError(f"{where}.inlineData.mimeType: expected a MIME type")
            try:
                parse_mime(mime)
            except WireError as exc:
                raise ConversionError(f"{where}.inlineData.mimeType: {exc}") from None
            try:
                data = base64.b64decode(value.get("data") or "", validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ConversionError(f"{where}.inlineData.data: not valid base64 ({exc})") from None
            if is_image(mime) and not self.image_input:
                return [TextPart(placeholder_for(data, mime))]
            return [data_part(data, mime)]
        if kind == "fileData":
            return [TextPart(f"[file: {value.get('fileUri')} ({value.get('mimeType') or 'unknown type'})]")]
        if kind == "executableCode":
            return [TextPart(f"```{str(value.get('language', '')).lower()}\n{value.get('code', '')}\n```")]
        return [TextPart(f"[code execution {value.get('outcome', '')}]\n{value.get('output', '')}")]

    def response(self, value: Any, where: str) -> ToolResultPart:
        if not isinstance(value, Mapping):
            raise ConversionError(f"{where}.functionResponse: expected an object")
        name = value.get("name")
        call_id = value.get("id")
        if not isinstance(call_id, str) or call_id not in self.open_calls:
            # without an id: a call of that name that had none either, else any of that name
            named = [cid for cid, n in self.open_calls.items() if n == name]
            call_id = next((c for c in named if c in self.generated), named[0] if named else None)
        if call_id is None:
            raise ConversionError(
                f"{where}.functionResponse: no unanswered call of {name!r} before it"
            )
        self.open_calls.pop(call_id)
        response = value.get("response")
        if isinstance(response, Mapping) and set(response) <= {"output", "error"} and len(response) == 1:
            inner = next(iter(response.values()))
            text = inner if isinstance(inner, str) else json.dumps(inner, ensure_ascii=False)
        else:
            text = json.dumps(response, ensure_ascii=False)
        return ToolResultPart(call_id, [TextPart(text)])
