"""Sans-IO decoders for every upstream stream format, and the shared part assembler.

Each wire format registered in :mod:`lmbridge.formats` names its decoder here, one module per
format (``chat_completions``, ``responses``, ``anthropic``, ``ai_sdk``, ``gemini``);
:func:`decoder_for` makes one by format name.
"""

from __future__ import annotations

from typing import Any

from .. import formats
from ._assembler import AssemblerOptions, PartAssembler, ThinkingPolicy, parse_tool_arguments
from ._base import ByteStreamDecoder, StreamDecoder, StreamResult, set_json_loads, stdlib_loads

__all__ = [
    "AssemblerOptions",
    "ByteStreamDecoder",
    "PartAssembler",
    "StreamDecoder",
    "StreamResult",
    "ThinkingPolicy",
    "decoder_class",
    "decoder_for",
    "parse_tool_arguments",
    "set_json_loads",
    "stdlib_loads",
]


_CLASSES: dict[str, type[StreamDecoder]] = {}


def decoder_class(format: str) -> type[StreamDecoder]:
    """The decoder class for a format name; ValueError lists the known ones."""
    cls = _CLASSES.get(format)
    if cls is None:
        cls = _CLASSES[format] = formats.get(format).decoder_class()
    return cls


def decoder_for(format: str, options: AssemblerOptions | None = None, **kwargs: Any) -> StreamDecoder:
    """A fresh decoder for a format name (``kwargs``: that decoder's own options)."""
    return decoder_class(format)(options, **kwargs)
