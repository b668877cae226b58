"""Sans-IO decoders for every upstream stream format, and the shared part assembler.

=====================  ======================================================  ==========================
format                 what it decodes                                         decoder
=====================  ======================================================  ==========================
``chat-completions``   OpenAI Chat Completions chunks and compatible vendors   :class:`ChatCompletionsDecoder`
``responses``          OpenAI Responses API and OpenResponses events           :class:`ResponsesDecoder`
``anthropic``          Anthropic Messages events                               :class:`AnthropicDecoder`
``ai-sdk``             Vercel AI SDK fullStream, provider-level and UI         :class:`AISDKDecoder`
                       message stream parts
=====================  ======================================================  ==========================
"""

from __future__ import annotations

import importlib
from typing import Any

from ._assembler import AssemblerOptions, PartAssembler, ThinkingPolicy, parse_tool_arguments
from ._base import ByteStreamDecoder, StreamDecoder, StreamResult, set_json_loads

__all__ = [
    "FORMATS",
    "AssemblerOptions",
    "ByteStreamDecoder",
    "PartAssembler",
    "StreamDecoder",
    "StreamResult",
    "ThinkingPolicy",
    "decoder_for",
    "parse_tool_arguments",
    "set_json_loads",
]

FORMATS: dict[str, tuple[str, str]] = {
    "chat-completions": ("chat_completions", "ChatCompletionsDecoder"),
    "responses": ("responses", "ResponsesDecoder"),
    "anthropic": ("anthropic", "AnthropicDecoder"),
    "ai-sdk": ("ai_sdk", "AISDKDecoder"),
}
"""Format name -> (module in this package, decoder class)."""


def decoder_class(format: str) -> type[StreamDecoder]:
    """The decoder class for a format name; ValueError lists the known ones."""
    try:
        module, cls = FORMATS[format]
    except KeyError:
        known = ", ".join(sorted(FORMATS))
        raise ValueError(f"unknown stream format {format!r} (known: {known})") from None
    decoder: type[StreamDecoder] = getattr(importlib.import_module(f"{__name__}.{module}"), cls)
    return decoder


def decoder_for(format: str, options: AssemblerOptions | None = None, **kwargs: Any) -> StreamDecoder:
    """A fresh decoder for a format name."""
    return decoder_class(format)(options, **kwargs)
