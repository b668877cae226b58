"""VS Code messages -> an OpenAI Chat Completions request (``POST /v1/chat/completions``).

- the system prompt is a ``system`` message (or ``developer``, for OpenAI's reasoning models);
- assistant tool calls are ``tool_calls`` with JSON-string ``arguments``; each result is a
  ``tool`` message with its ``tool_call_id``, right after the assistant message (the API
  rejects a request where a call is not answered there);
- images in user messages are ``image_url`` parts with a data URL, for the types OpenAI takes
  (PNG, JPEG, GIF, WebP: :data:`~lmbridge.convert._common.OPENAI_IMAGE_TYPES`); PDFs are
  ``file`` parts; other images (SVG, BMP, HEIC ...), other binary data, and images in tool
  results (tool messages take text only) become a placeholder naming the type;
- consecutive messages of one role are merged; the text of the second starts with a blank
  line, so ``"a1"`` and ``"a2"`` do not become ``"a1a2"``;
- reasoning is replayed only when asked: DeepSeek (thinking mode) and Kimi reject tool turns
  whose ``reasoning_content`` is missing, while plain OpenAI rejects the unknown field
  (``reasoning_content="tool-calls"`` or ``"always"``; the field name is configurable, e.g.
  ``"reasoning"`` for OpenRouter-style servers); the message's reasoning blocks are joined
  with a blank line between them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from ..errors import ConversionError
from ..parts import ChatMessage, ChatRequestOptions, Part, ToolMode
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

__all__ = ["ReasoningReplay", "to_chat_completions", "to_chat_completions_message"]

ReasoningReplay = Literal["never", "tool-calls", "always"]
"""When assistant messages carry their reasoning back (``reasoning_content``)."""


def to_chat_completions(
    messages: Sequence[ChatMessage],
    options: ChatRequestOptions | None = None,
    *,
    model: str,
    system_role: Literal["system", "developer"] = "system",
    reasoning_content: ReasoningReplay = "never",
    reasoning_field: str = "reasoning_content",
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
    policy: ConversionPolicy | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """The streaming Chat Completions request body for ``messages``.

    ``reasoning_content``: ``"never"`` (plain OpenAI), ``"tool-calls"`` (every assistant
    message with tool calls carries its reasoning, empty if none, as DeepSeek requires) or
    ``"always"`` (also messages without tool calls, when they have reasoning).
    ``max_tokens_field``: OpenAI's reasoning models want ``max_completion_tokens``; most
    compatible servers only know ``max_tokens``. ``overrides`` are
    :class:`~lmbridge.convert.ConversionPolicy` fields.
    """
    if system_role not in ("system", "developer"):
        raise ConversionError(f"system_role must be 'system' or 'developer', got {system_role!r}")
    if reasoning_content not in ("never", "tool-calls", "always"):
        raise ConversionError(
            f"reasoning_content must be 'never', 'tool-calls' or 'always', got {reasoning_content!r}"
        )
    if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
        raise ConversionError("max_tokens_field must be 'max_tokens' or 'max_completion_tokens'")
    options = options or ChatRequestOptions()
    pol = policy_from(policy, overrides)
    out: list[dict[str, Any]] = []
    for turn in prepare(messages, pol):
        if turn.role == "system":
            text = "\n\n".join(b.text for b in turn.blocks if isinstance(b, TextBlock))
            out.append({"role": system_role, "content": text})
        elif turn.role == "user":
            out.extend(_user(turn.blocks))
        else:
            msg = _assistant(turn.blocks, reasoning_content, reasoning_field)
            if msg is not None:
                out.append(msg)
    body: dict[str, Any] = {"model": model, "messages": out}
    if options.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": tool_schema(t),
                },
            }
            for t in options.tools
        ]
        body["tool_choice"] = "required" if options.tool_mode == ToolMode.REQUIRED else "auto"
    sampling = sampling_options(options)
    for key in ("temperature", "top_p", "stop", "seed"):
        if key in sampling:
            body[key] = sampling[key]
    if "max_tokens" in sampling:
        body[max_tokens_field] = sampling["max_tokens"]
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    return valid_unicode(body)


def to_chat_completions_message(
    parts: Sequence[Part], *, reasoning_field: str | None = None
) -> dict[str, Any]:
    """VS Code response parts as an OpenAI ``{"role": "assistant", ...}`` message.

    The reasoning goes in ``reasoning_field`` (e.g. ``"reasoning_content"``) when given.
    """
    pol = ConversionPolicy(leading_assistant_as_system=False)
    turns = prepare([ChatMessage.assistant(list(parts))], pol)
    blocks = turns[0].blocks if turns and turns[0].role == "assistant" else []
    mode: ReasoningReplay = "always" if reasoning_field else "never"
    msg = _assistant(blocks, mode, reasoning_field or "reasoning_content")
    return valid_unicode(msg if msg is not None else {"role": "assistant", "content": ""})


def _result_text(b: ResultBlock) -> str:
    # Tool messages take text only: data the tool returned is named, not dropped silently.
    pieces = [
        c.text if isinstance(c, TextBlock) else placeholder_for(c.data, c.mime) for c in b.content
    ]
    return "".join(pieces)


def _user(blocks: list[Block]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, ResultBlock):
            out.append({"role": "tool", "tool_call_id": b.call_id, "content": _result_text(b)})
        elif isinstance(b, TextBlock):
            content.append({"type": "text", "text": b.text})
        elif isinstance(b, MediaBlock):
            content.append(_media(b))
    if content:
        if len(content) == 1 and content[0]["type"] == "text":
            out.append({"role": "user", "content": content[0]["text"]})
        else:
            out.append({"role": "user", "content": content})
    return out


def _media(b: MediaBlock) -> dict[str, Any]:
    kind = media_kind(b, OPENAI_IMAGE_TYPES)
    if kind == "image":
        return {"type": "image_url", "image_url": {"url": data_url(b.data, b.mime)}}
    if kind == "pdf":
        return {
            "type": "file",
            "file": {"filename": "document.pdf", "file_data": data_url(b.data, b.mime)},
        }
    return {"type": "text", "text": placeholder_for(b.data, b.mime)}


def _assistant(
    blocks: list[Block], reasoning: ReasoningReplay, field: str
) -> dict[str, Any] | None:
    texts = [b.text for b in blocks if isinstance(b, TextBlock)]
    # One field carries all the reasoning: separate blocks are kept apart by a blank line.
    thinking = "\n\n".join(b.text for b in blocks if isinstance(b, ThinkingBlock) and b.text)
    calls = [b for b in blocks if isinstance(b, CallBlock)]
    msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        msg["tool_calls"] = [
            {
                "id": c.call_id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": json.dumps(c.input, ensure_ascii=False, separators=(",", ":")),
                },
            }
            for c in calls
        ]
    if (reasoning == "tool-calls" and calls) or (reasoning == "always" and (calls or thinking)):
        msg[field] = thinking
    if msg["content"] is None and len(msg) == 2:
        return None
    if msg["content"] is None and not calls:
        # Only reasoning: the API wants content to be a string when there are no tool calls.
        msg["content"] = ""
    return msg
