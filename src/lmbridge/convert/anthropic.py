"""VS Code messages -> an Anthropic Messages API request (``POST /v1/messages``).

Written against the Messages API of ``anthropic-version: 2023-06-01``:

- the system prompt goes in the ``system`` parameter (a string, or text blocks when a
  ``cache_control`` marker follows it);
- tool calls are ``tool_use`` blocks, results ``tool_result`` blocks placed first in the next
  user turn (the API rejects anything else); placeholder results carry ``is_error: true``;
- images are base64 ``image`` blocks (JPEG, PNG, GIF, WebP), PDFs ``document`` blocks; other
  binary data becomes a placeholder naming its type;
- consecutive messages of one role are merged, so roles alternate as the API requires (the
  text of the second starts with a blank line, so the two stay apart);
- a conversation whose last message is a user message ends on a user turn: when that
  message holds nothing the API takes (only whitespace, which it rejects), its text is
  :data:`EMPTY_TURN_TEXT`, since a request ending on an assistant turn is a prefill;
- reasoning is replayed as ``thinking`` blocks with their ``signature`` and as
  ``redacted_thinking`` blocks with their ``data``; reasoning without either cannot be
  replayed (the API rejects unsigned thinking) and is left out;
- Copilot's ``cache_control`` data part puts ``cache_control: {"type": "ephemeral"}`` on the
  block before it.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from ..errors import ConversionError
from ..parts import ChatMessage, ChatRequestOptions, ChatRole, Part, ToolMode
from ._common import (
    ANTHROPIC_IMAGE_TYPES,
    Block,
    CacheBlock,
    CallBlock,
    ConversionPolicy,
    MediaBlock,
    ResultBlock,
    TextBlock,
    ThinkingBlock,
    media_kind,
    placeholder_for,
    policy_from,
    prepare,
    sampling_options,
    tool_schema,
    valid_unicode,
)

__all__ = ["ANTHROPIC_IMAGE_TYPES", "EMPTY_TURN_TEXT", "to_anthropic", "to_anthropic_message"]

EMPTY_TURN_TEXT = "[empty message]"
"""The text of a last user message that has no content the API takes (only whitespace)."""

_EPHEMERAL = {"type": "ephemeral"}


def to_anthropic(
    messages: Sequence[ChatMessage],
    options: ChatRequestOptions | None = None,
    *,
    model: str,
    max_tokens: int,
    policy: ConversionPolicy | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """The streaming Messages request body for ``messages``.

    ``max_tokens`` is required by the API; a ``max_tokens`` model option, when smaller, wins.
    ``overrides`` are :class:`~lmbridge.convert.ConversionPolicy` fields.
    """
    options = options or ChatRequestOptions()
    pol = policy_from(policy, overrides)
    turns = prepare(messages, pol)
    system_blocks: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for turn in turns:
        if turn.role == "system":
            system_blocks.extend(_content(turn.blocks))
            continue
        content = _content(turn.blocks)
        if not content:
            continue
        if out and out[-1]["role"] == turn.role:
            out[-1]["content"].extend(content)
        else:
            out.append({"role": turn.role, "content": content})
    if _ends_on_user(messages) and (not out or out[-1]["role"] != "user"):
        # The API rejects whitespace-only text, so an empty last user message has nothing to
        # send; without it the request would end on an assistant turn, which the API takes as
        # a prefill to continue, not a question to answer. A placeholder keeps the user's turn.
        out.append({"role": "user", "content": [{"type": "text", "text": EMPTY_TURN_TEXT}]})
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        raise ConversionError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    sampling = sampling_options(options)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": min(max_tokens, sampling.get("max_tokens") or max_tokens),
    }
    if system_blocks:
        if any("cache_control" in b for b in system_blocks):
            body["system"] = system_blocks
        else:
            body["system"] = "\n\n".join(b["text"] for b in system_blocks)
    body["messages"] = out
    if options.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": tool_schema(t)}
            for t in options.tools
        ]
        body["tool_choice"] = {"type": "any" if options.tool_mode == ToolMode.REQUIRED else "auto"}
    for key, field in (
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("stop", "stop_sequences"),
    ):
        if key in sampling:
            body[field] = sampling[key]
    body["stream"] = True
    return valid_unicode(body)


def _ends_on_user(messages: Sequence[ChatMessage]) -> bool:
    last = messages[-1] if messages else None
    return isinstance(last, ChatMessage) and last.role == ChatRole.USER


def to_anthropic_message(
    parts: Sequence[Part], *, include_unsigned_thinking: bool = False
) -> dict[str, Any]:
    """VS Code response parts as an Anthropic ``{"role": "assistant", "content": [...]}``.

    Thinking without a signature is left out unless ``include_unsigned_thinking`` (then it is
    a ``thinking`` block with an empty signature, which only non-Anthropic readers accept).
    """
    pol = ConversionPolicy(leading_assistant_as_system=False)
    turns = prepare([ChatMessage.assistant(list(parts))], pol)
    blocks = turns[0].blocks if turns and turns[0].role == "assistant" else []
    return valid_unicode(
        {
            "role": "assistant",
            "content": _content(blocks, include_unsigned_thinking=include_unsigned_thinking),
        }
    )


def _content(
    blocks: list[Block], *, include_unsigned_thinking: bool = False
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, CacheBlock):
            if out:
                out[-1]["cache_control"] = dict(_EPHEMERAL)
        elif isinstance(b, TextBlock):
            # The API rejects empty and whitespace-only text blocks.
            if b.text.strip():
                out.append({"type": "text", "text": b.text})
        elif isinstance(b, ThinkingBlock):
            block = _thinking(b, include_unsigned_thinking)
            if block is not None:
                out.append(block)
        elif isinstance(b, CallBlock):
            out.append({"type": "tool_use", "id": b.call_id, "name": b.name, "input": b.input})
        elif isinstance(b, ResultBlock):
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": b.call_id}
            inner = [_result_item(c) for c in b.content]
            inner = [c for c in inner if c is not None]
            if inner:
                result["content"] = inner
            if b.synthetic:
                result["is_error"] = True
            out.append(result)
        elif isinstance(b, MediaBlock):
            out.append(_media(b))
    return out


def _thinking(b: ThinkingBlock, include_unsigned: bool) -> dict[str, Any] | None:
    redacted = b.metadata.get("redactedData")
    if isinstance(redacted, str) and redacted:
        return {"type": "redacted_thinking", "data": redacted}
    signature = b.metadata.get("signature")
    if isinstance(signature, str) and signature:
        return {"type": "thinking", "thinking": b.text, "signature": signature}
    if include_unsigned and b.text:
        return {"type": "thinking", "thinking": b.text, "signature": ""}
    return None


def _base64(b: MediaBlock) -> str:
    return base64.b64encode(b.data).decode("ascii")


def _media(b: MediaBlock) -> dict[str, Any]:
    kind = media_kind(b, ANTHROPIC_IMAGE_TYPES)
    if kind == "image":
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": b.mime, "data": _base64(b)},
        }
    if kind == "pdf":
        return {
            "type": "document",
            "source": {"type": "base64", "media_type": b.mime, "data": _base64(b)},
        }
    return {"type": "text", "text": placeholder_for(b.data, b.mime)}


def _result_item(c: TextBlock | MediaBlock) -> dict[str, Any] | None:
    if isinstance(c, TextBlock):
        return {"type": "text", "text": c.text} if c.text.strip() else None
    if media_kind(c, ANTHROPIC_IMAGE_TYPES) == "image":
        return _media(c)
    return {"type": "text", "text": placeholder_for(c.data, c.mime)}
