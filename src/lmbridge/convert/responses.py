"""VS Code messages -> an OpenAI Responses / OpenResponses request (``POST /v1/responses``).

- the system prompt is a ``developer`` message in place (or ``system``), or the request's
  ``instructions`` (``system_as="instructions"``);
- user content is ``input_text`` / ``input_image`` (data URL; PNG, JPEG, GIF and WebP only,
  as OpenAI's vision guide lists: other image types become the placeholder text every target
  uses) / ``input_file`` (PDF); assistant text is ``output_text`` in an assistant message;
- consecutive messages of one role are merged, the text of the second starting with a blank
  line;
- tool calls are ``function_call`` items (JSON-string ``arguments``) and results
  ``function_call_output`` items (a string, or a list with ``input_image`` items when the
  tool returned images);
- reasoning is replayed as ``reasoning`` items carrying the item ``id`` and
  ``encrypted_content`` from the thinking metadata (needed with ``store: false``); reasoning
  with neither cannot be replayed and is left out;
- function tools are sent with ``strict: false``: VS Code's tool schemas are not written for
  strict mode, which would reject them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from ..errors import ConversionError
from ..parts import ChatMessage, ChatRequestOptions, ToolMode
from ._common import (
    OPENAI_IMAGE_TYPES,
    Block,
    CallBlock,
    ConversionPolicy,
    MediaBlock,
    ResultBlock,
    TextBlock,
    ThinkingBlock,
    data_url,
    media_kind,
    placeholder_for,
    policy_from,
    prepare,
    sampling_options,
    tool_schema,
    valid_unicode,
)

__all__ = ["to_responses"]


def to_responses(
    messages: Sequence[ChatMessage],
    options: ChatRequestOptions | None = None,
    *,
    model: str,
    system_as: Literal["developer", "system", "instructions"] = "developer",
    policy: ConversionPolicy | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """The streaming Responses request body for ``messages``.

    ``overrides`` are :class:`~lmbridge.convert.ConversionPolicy` fields.
    """
    if system_as not in ("developer", "system", "instructions"):
        raise ConversionError(
            f"system_as must be 'developer', 'system' or 'instructions', got {system_as!r}"
        )
    options = options or ChatRequestOptions()
    pol = policy_from(policy, overrides)
    items: list[dict[str, Any]] = []
    instructions: list[str] = []
    for turn in prepare(messages, pol):
        if turn.role == "system":
            text = "\n\n".join(b.text for b in turn.blocks if isinstance(b, TextBlock))
            if system_as == "instructions":
                instructions.append(text)
            else:
                items.append({"role": system_as, "content": text})
        elif turn.role == "user":
            items.extend(_user(turn.blocks))
        else:
            items.extend(_assistant(turn.blocks))
    body: dict[str, Any] = {"model": model}
    if instructions:
        body["instructions"] = "\n\n".join(instructions)
    body["input"] = items
    if options.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": tool_schema(t),
                "strict": False,
            }
            for t in options.tools
        ]
        body["tool_choice"] = "required" if options.tool_mode == ToolMode.REQUIRED else "auto"
    sampling = sampling_options(options)
    for key in ("temperature", "top_p"):
        if key in sampling:
            body[key] = sampling[key]
    if "max_tokens" in sampling:
        body["max_output_tokens"] = sampling["max_tokens"]
    body["stream"] = True
    return valid_unicode(body)


def _media(b: MediaBlock) -> dict[str, Any]:
    kind = media_kind(b, OPENAI_IMAGE_TYPES)
    if kind == "image":
        return {"type": "input_image", "image_url": data_url(b.data, b.mime), "detail": "auto"}
    if kind == "pdf":
        return {
            "type": "input_file",
            "filename": "document.pdf",
            "file_data": data_url(b.data, b.mime),
        }
    return {"type": "input_text", "text": placeholder_for(b.data, b.mime)}


def _output(b: ResultBlock) -> str | list[dict[str, Any]]:
    if not any(isinstance(c, MediaBlock) for c in b.content):
        return b.text
    out: list[dict[str, Any]] = []
    for c in b.content:
        if isinstance(c, TextBlock):
            out.append({"type": "input_text", "text": c.text})
        elif media_kind(c, OPENAI_IMAGE_TYPES) == "image":
            out.append(_media(c))
        else:
            out.append({"type": "input_text", "text": placeholder_for(c.data, c.mime)})
    return out


def _user(blocks: list[Block]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, ResultBlock):
            out.append({"type": "function_call_output", "call_id": b.call_id, "output": _output(b)})
        elif isinstance(b, TextBlock):
            content.append({"type": "input_text", "text": b.text})
        elif isinstance(b, MediaBlock):
            content.append(_media(b))
    if content:
        out.append({"role": "user", "content": content})
    return out


def _assistant(blocks: list[Block]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    texts: list[str] = []

    def flush() -> None:
        if texts:
            out.append(
                {"role": "assistant", "content": [{"type": "output_text", "text": "".join(texts)}]}
            )
            texts.clear()

    for b in blocks:
        if isinstance(b, TextBlock):
            texts.append(b.text)
            continue
        if isinstance(b, ThinkingBlock):
            item = _reasoning(b)
            if item is not None:
                flush()
                out.append(item)
        elif isinstance(b, CallBlock):
            flush()
            out.append(
                {
                    "type": "function_call",
                    "call_id": b.call_id,
                    "name": b.name,
                    "arguments": json.dumps(b.input, ensure_ascii=False, separators=(",", ":")),
                }
            )
    flush()
    return out


def _reasoning(b: ThinkingBlock) -> dict[str, Any] | None:
    item_id = b.metadata.get("itemId")
    encrypted = b.metadata.get("encryptedContent")
    if not isinstance(item_id, str):
        item_id = None
    if not isinstance(encrypted, str):
        encrypted = None
    if item_id is None and encrypted is None:
        return None
    item: dict[str, Any] = {"type": "reasoning"}
    if item_id is not None:
        item["id"] = item_id
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    item["summary"] = [{"type": "summary_text", "text": b.text}] if b.text else []
    return item
