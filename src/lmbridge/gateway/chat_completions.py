"""OpenAI Chat Completions and compatible servers (``POST {base}/chat/completions``).

The body comes from :func:`lmbridge.convert.to_chat_completions` (tools as ``function`` tools,
``tool_choice`` ``"required"`` for :attr:`~lmbridge.parts.ToolMode.REQUIRED`, ``max_tokens`` or
``max_completion_tokens`` per its ``max_tokens_field``); credentials are ``Authorization: Bearer``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..convert import to_chat_completions
from ..parts import ChatMessage, ChatRequestOptions
from ._client import UpstreamClient, bare_model

_OPENAI_REASONING = re.compile(r"^(o\d|gpt-5|gpt-oss|codex)")


def openai_effort_levels(model: str) -> tuple[str, ...]:
    """The reasoning efforts of OpenAI's reasoning models (``minimal`` from GPT-5 on)."""
    name = bare_model(model)
    if not _OPENAI_REASONING.match(name):
        return ()
    return ("minimal", "low", "medium", "high") if name.startswith("gpt-5") else ("low", "medium", "high")

__all__ = ["ChatCompletionsClient"]


class ChatCompletionsClient(UpstreamClient):
    """Streams OpenAI-compatible Chat Completions."""

    format = "chat-completions"
    chat_path = "/chat/completions"
    cache_key_field = "prompt_cache_key"
    passthrough_options = frozenset(
        {
            "reasoning_effort",
            "parallel_tool_calls",
            "response_format",
            "service_tier",
            "user",
            "frequency_penalty",
            "presence_penalty",
            "logit_bias",
            "verbosity",
        }
    )

    def effort_levels(self, model: str) -> tuple[str, ...]:
        """OpenAI's reasoning models (o-series, GPT-5, gpt-oss)."""
        return openai_effort_levels(model)

    def apply_effort(self, body: dict[str, Any], effort: str, model: str) -> None:
        """``reasoning_effort``."""
        body["reasoning_effort"] = effort

    def build_body(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        *,
        default_max_tokens: int | None = None,
        image_input: bool = True,
    ) -> dict[str, Any]:
        """The body by :func:`~lmbridge.convert.to_chat_completions`; the output budget is sent
        only when the options ask (``max_tokens`` is optional here, and OpenAI's reasoning
        models reject it under that name)."""
        kwargs = {"image_input": image_input, **self.converter_options}
        return to_chat_completions(messages, options, model=model, **kwargs)
