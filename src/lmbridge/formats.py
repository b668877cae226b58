"""The wire formats lmbridge speaks: one registration each, read by every layer.

A wire format is the shape of one upstream API. Its registration names everything that
knows the format, one module per layer:

=====================  =====================================================================
field                  what it is
=====================  =====================================================================
``decoder``            the sans-IO stream decoder (:mod:`lmbridge.upstream`)
``converter``          VS Code messages -> the request body (:mod:`lmbridge.convert`)
``client``             the async HTTP client (:mod:`lmbridge.gateway`)
``catalog``            the model-list parser (``GET models`` answer -> catalog models)
``detect``             the rule that tells a recorded stream of this format (``lmbridge replay``)
``consumer``           the format's history -> VS Code messages, where that direction exists
=====================  =====================================================================

The CLI's choices (``lmbridge replay --format``, ``lmbridge convert --to`` / ``--from``),
replay's detection (in registration order), the configuration's known formats, the VS Code
settings schema (``extension/package.json``, kept equal by a test) and the docs' tables read
from :data:`FORMATS`. Adding a format is one new module per layer plus one entry here.

Each layer is named by ``"module:attribute"`` and imported when first asked for, never as a
side effect of importing this module: the registry is data, cheap to import from anywhere
(the configuration reads it without loading the HTTP stack). Only these built-in entries
are ever imported; nothing a setting says is. The registry knows the layers by name only (not
even for type checking): it sits below them, and each layer types what it loads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = ["FORMATS", "WireFormat", "consumer_formats", "detect", "get", "names"]


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True, slots=True)
class WireFormat:
    """One wire format's registration (see the module docstring)."""

    name: str
    """The one name of the format, in settings, on the command line and in code."""
    title: str
    """What speaks it, for docs and help texts."""
    decoder: str
    """``module:Class`` of its :class:`~lmbridge.upstream.StreamDecoder`."""
    converter: str
    """``module:function`` turning VS Code messages + options into the request body."""
    converter_args: tuple[str, ...]
    """The request-level arguments the converter takes besides messages, options and the
    :class:`~lmbridge.convert.ConversionPolicy` fields (``model``, ``max_tokens`` ...)."""
    client: str
    """``module:Class`` of its :class:`~lmbridge.gateway.UpstreamClient`."""
    catalog: str
    """``module:function`` parsing its model list (see :data:`lmbridge.gateway.catalog.CatalogParser`)."""
    detect: str
    """``module:function(obj, event_name) -> bool``: whether a parsed event is of this format."""
    consumer: str | None = None
    """``module:function`` turning the format's history into VS Code messages, if any."""

    def decoder_class(self) -> type[Any]:
        """The decoder class (a :class:`~lmbridge.upstream.StreamDecoder`)."""
        cls: type[Any] = _load(self.decoder)
        return cls

    def converter_function(self) -> Callable[..., dict[str, Any]]:
        """The request converter."""
        fn: Callable[..., dict[str, Any]] = _load(self.converter)
        return fn

    def client_class(self) -> type[Any]:
        """The HTTP client class (a :class:`~lmbridge.gateway.UpstreamClient`)."""
        cls: type[Any] = _load(self.client)
        return cls

    def catalog_parser(self) -> Callable[..., Any]:
        """The model-list parser (a :data:`lmbridge.gateway.catalog.CatalogParser`)."""
        fn: Callable[..., Any] = _load(self.catalog)
        return fn

    def detector(self) -> Callable[[Mapping[str, Any], str], bool]:
        """The detection rule."""
        fn: Callable[[Mapping[str, Any], str], bool] = _load(self.detect)
        return fn

    def consumer_function(self) -> Callable[..., list[Any]] | None:
        """The history -> VS Code messages converter, or ``None``."""
        if self.consumer is None:
            return None
        fn: Callable[..., list[Any]] = _load(self.consumer)
        return fn


_OPENAI_CATALOG = "lmbridge.gateway.catalog:parse_catalog"

FORMATS: Mapping[str, WireFormat] = MappingProxyType(
    {
        f.name: f
        for f in (
            WireFormat(
                "chat-completions",
                "OpenAI Chat Completions and compatible servers (Azure, xAI, DeepSeek, Groq, "
                "Mistral, OpenRouter, vLLM, Ollama, LM Studio ...)",
                decoder="lmbridge.upstream.chat_completions:ChatCompletionsDecoder",
                converter="lmbridge.convert.chat_completions:to_chat_completions",
                converter_args=("model", "reasoning_content"),
                client="lmbridge.gateway.chat_completions:ChatCompletionsClient",
                catalog=_OPENAI_CATALOG,
                detect="lmbridge.upstream.chat_completions:detect",
                consumer="lmbridge.convert.from_chat_completions:from_chat_completions",
            ),
            WireFormat(
                "responses",
                "OpenAI Responses API and OpenResponses servers",
                decoder="lmbridge.upstream.responses:ResponsesDecoder",
                converter="lmbridge.convert.responses:to_responses",
                converter_args=("model",),
                client="lmbridge.gateway.responses:ResponsesClient",
                catalog=_OPENAI_CATALOG,
                detect="lmbridge.upstream.responses:detect",
            ),
            WireFormat(
                "anthropic",
                "Anthropic Messages",
                decoder="lmbridge.upstream.anthropic:AnthropicDecoder",
                converter="lmbridge.convert.anthropic:to_anthropic",
                converter_args=("model", "max_tokens"),
                client="lmbridge.gateway.anthropic:AnthropicClient",
                catalog=_OPENAI_CATALOG,
                detect="lmbridge.upstream.anthropic:detect",
                consumer="lmbridge.convert.from_anthropic:from_anthropic",
            ),
            WireFormat(
                "ai-sdk",
                "Vercel AI SDK streams (fullStream, provider-level and UI message stream parts)",
                decoder="lmbridge.upstream.ai_sdk:AISDKDecoder",
                converter="lmbridge.convert.ai_sdk:to_ai_sdk",
                converter_args=(),
                client="lmbridge.gateway.ai_sdk:AISDKClient",
                catalog=_OPENAI_CATALOG,
                detect="lmbridge.upstream.ai_sdk:detect",
            ),
            WireFormat(
                "gemini",
                "Google Gemini API and Vertex AI (streamGenerateContent)",
                decoder="lmbridge.upstream.gemini:GeminiDecoder",
                converter="lmbridge.convert.gemini:to_gemini",
                converter_args=(),
                client="lmbridge.gateway.gemini:GeminiClient",
                catalog="lmbridge.gateway.gemini:parse_gemini_catalog",
                detect="lmbridge.upstream.gemini:detect",
                consumer="lmbridge.convert.from_gemini:from_gemini",
            ),
        )
    }
)
"""Every wire format by name, in detection order."""


def names() -> tuple[str, ...]:
    """The format names, in registration order."""
    return tuple(FORMATS)


def get(name: str) -> WireFormat:
    """The registration of ``name``; ``ValueError`` lists the known names."""
    try:
        return FORMATS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown wire format {name!r} (known: {', '.join(FORMATS)})"
        ) from None


def consumer_formats() -> tuple[str, ...]:
    """The formats whose history can be turned into VS Code messages."""
    return tuple(name for name, f in FORMATS.items() if f.consumer is not None)


def detect(obj: Mapping[str, Any], event_name: str = "") -> str | None:
    """The format one parsed event belongs to (the first rule that says yes), or ``None``."""
    for name, f in FORMATS.items():
        if f.detector()(obj, event_name):
            return name
    return None
