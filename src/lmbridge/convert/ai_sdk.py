"""VS Code messages -> Vercel AI SDK ``ModelMessage`` list (AI SDK 5/6 ``streamText`` input).

The seeds' ``convertMessages``, with its bugs fixed:

- the callId -> tool name map is built over the whole conversation first, and only calls
  answered in the turn right after them keep their results (no ``"unknown_tool"``);
- tool results are ``output: {type: 'text', value}`` with the text parts concatenated (the
  seeds joined them with spaces), ``{type: 'json', value}`` for one JSON data part,
  ``{type: 'content', value: [...]}`` when the tool returned images, and
  ``{type: 'error-text', value}`` for the placeholder of an unanswered call;
- system messages are ``{role: 'system'}`` messages in place (``system_as="message"``, as the
  seeds' ``fixSystemMessages``) or the ``system`` parameter (``system_as="param"``);
- reasoning is a ``reasoning`` part whose ``providerOptions`` carry the replay data the AI SDK
  providers read: ``anthropic.signature`` / ``anthropic.redactedData`` and
  ``openai.itemId`` / ``openai.reasoningEncryptedContent``;
- empty messages are left out;
- images go as ``image`` parts whatever their type: the AI SDK provider that sends them knows
  which types its API takes (lmbridge does not know the provider here).

Tools are ``{name: {description, inputSchema}}`` (the ``tools`` record of ``streamText``),
with ``toolChoice`` ``'auto'`` or ``'required'``.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, Literal

from ..errors import ConversionError
from ..parts import ChatMessage, ChatRequestOptions, ToolMode
from ._common import (
    Block,
    CallBlock,
    ConversionPolicy,
    MediaBlock,
    ResultBlock,
    TextBlock,
    ThinkingBlock,
    policy_from,
    prepare,
    sampling_options,
    tool_schema,
    valid_unicode,
)

__all__ = ["to_ai_sdk"]


def to_ai_sdk(
    messages: Sequence[ChatMessage],
    options: ChatRequestOptions | None = None,
    *,
    system_as: Literal["message", "param"] = "message",
    policy: ConversionPolicy | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """``{"messages": [ModelMessage], "tools"?, "toolChoice"?, "system"?, settings}``.

    Settings use ``streamText``'s names: ``temperature``, ``topP``, ``maxOutputTokens``,
    ``stopSequences``, ``seed``. ``overrides`` are :class:`~lmbridge.convert.ConversionPolicy`
    fields.
    """
    if system_as not in ("message", "param"):
        raise ConversionError(f"system_as must be 'message' or 'param', got {system_as!r}")
    options = options or ChatRequestOptions()
    pol = policy_from(policy, overrides)
    out: list[dict[str, Any]] = []
    system: list[str] = []
    for turn in prepare(messages, pol):
        if turn.role == "system":
            text = "\n\n".join(b.text for b in turn.blocks if isinstance(b, TextBlock))
            if system_as == "param":
                system.append(text)
            elif text:
                out.append({"role": "system", "content": text})
        elif turn.role == "user":
            out.extend(_user(turn.blocks))
        else:
            content = _assistant(turn.blocks)
            if content:
                out.append({"role": "assistant", "content": content})
    body: dict[str, Any] = {}
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = out
    if options.tools:
        body["tools"] = {
            t.name: {"description": t.description, "inputSchema": tool_schema(t)}
            for t in options.tools
        }
        body["toolChoice"] = "required" if options.tool_mode == ToolMode.REQUIRED else "auto"
    sampling = sampling_options(options)
    for key, name in (
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("max_tokens", "maxOutputTokens"),
        ("stop", "stopSequences"),
        ("seed", "seed"),
    ):
        if key in sampling:
            body[name] = sampling[key]
    return valid_unicode(body)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _output(b: ResultBlock) -> dict[str, Any]:
    if b.synthetic:
        return {"type": "error-text", "value": b.text}
    if any(isinstance(c, MediaBlock) for c in b.content):
        value: list[dict[str, Any]] = []
        for c in b.content:
            if isinstance(c, TextBlock):
                value.append({"type": "text", "text": c.text})
            else:
                value.append({"type": "media", "data": _b64(c.data), "mediaType": c.mime})
        return {"type": "content", "value": value}
    if len(b.content) == 1 and isinstance(b.content[0], TextBlock) and b.content[0].is_json:
        return {"type": "json", "value": b.content[0].json}
    return {"type": "text", "value": b.text}


def _user(blocks: list[Block]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, ResultBlock):
            results.append(
                {
                    "type": "tool-result",
                    "toolCallId": b.call_id,
                    "toolName": b.name or "",
                    "output": _output(b),
                }
            )
        elif isinstance(b, TextBlock):
            content.append({"type": "text", "text": b.text})
        elif isinstance(b, MediaBlock):
            if b.is_image:
                content.append({"type": "image", "image": _b64(b.data), "mediaType": b.mime})
            else:
                content.append({"type": "file", "data": _b64(b.data), "mediaType": b.mime})
    out: list[dict[str, Any]] = []
    if results:
        out.append({"role": "tool", "content": results})
    if content:
        out.append({"role": "user", "content": content})
    return out


def _assistant(blocks: list[Block]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, TextBlock):
            out.append({"type": "text", "text": b.text})
        elif isinstance(b, ThinkingBlock):
            part: dict[str, Any] = {"type": "reasoning", "text": b.text}
            provider = _provider_options(b.metadata)
            if provider:
                part["providerOptions"] = provider
            if b.text or provider:
                out.append(part)
        elif isinstance(b, CallBlock):
            out.append(
                {"type": "tool-call", "toolCallId": b.call_id, "toolName": b.name, "input": b.input}
            )
    return out


def _provider_options(metadata: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for key, provider, name in (
        ("signature", "anthropic", "signature"),
        ("redactedData", "anthropic", "redactedData"),
        ("itemId", "openai", "itemId"),
        ("encryptedContent", "openai", "reasoningEncryptedContent"),
    ):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            out.setdefault(provider, {})[name] = value
    return out
