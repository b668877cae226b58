"""Anthropic Messages (``POST {base}/messages``, ``anthropic-version: 2023-06-01``).

The body comes from :func:`lmbridge.convert.to_anthropic` (tools with ``input_schema``,
``tool_choice`` ``{"type": "any"}`` for :attr:`~lmbridge.parts.ToolMode.REQUIRED`). The API
requires ``max_tokens``: the options' value when they name one, else the model's output
reserve (see :mod:`lmbridge.gateway.catalog`). Credentials are ``x-api-key``.

Beta features need their header as well as their field, e.g. context management::

    {"name": "claude", "format": "anthropic", "baseUrl": "https://api.anthropic.com/v1",
     "apiKeyEnv": "ANTHROPIC_API_KEY",
     "headers": {"anthropic-beta": "context-management-2025-06-27"},
     "extraBody": {"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}}}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..convert import sampling_options, to_anthropic
from ..parts import ChatMessage, ChatRequestOptions
from ._client import UpstreamClient

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "AnthropicClient"]

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent (the converter is written against it)."""

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when neither the options nor the model information give one."""


class AnthropicClient(UpstreamClient):
    """Streams Anthropic Messages."""

    format = "anthropic"
    chat_path = "/messages"
    passthrough_options = frozenset(
        {"thinking", "top_k", "metadata", "service_tier", "context_management"}
    )

    def protocol_headers(self) -> dict[str, str]:
        """``anthropic-version``."""
        return {"anthropic-version": ANTHROPIC_VERSION}

    def key_headers(self, key: str) -> dict[str, str]:
        """``x-api-key``."""
        return {"x-api-key": key}

    def build_body(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        *,
        default_max_tokens: int | None = None,
        image_input: bool = True,
    ) -> dict[str, Any]:
        """The body by :func:`~lmbridge.convert.to_anthropic`; ``max_tokens`` is the options'
        value, else ``default_max_tokens``, else :data:`DEFAULT_MAX_TOKENS`."""
        requested = sampling_options(options).get("max_tokens")
        max_tokens = requested or default_max_tokens or DEFAULT_MAX_TOKENS
        kwargs = {"image_input": image_input, **self.converter_options}
        return to_anthropic(messages, options, model=model, max_tokens=max_tokens, **kwargs)
