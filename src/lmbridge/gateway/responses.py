"""OpenAI Responses API and OpenResponses servers (``POST {base}/responses``).

The body comes from :func:`lmbridge.convert.to_responses` (``function`` tools with
``strict: false``, ``tool_choice`` ``"required"`` for :attr:`~lmbridge.parts.ToolMode.REQUIRED`,
``max_output_tokens``); credentials are ``Authorization: Bearer``. Every request asks for
``"truncation": "auto"`` (the upstream drops the oldest items of a conversation that outgrows
the context window instead of failing) unless ``extraBody`` or the model options set
``truncation``; the provider option ``"truncation": "disabled"`` sends that instead. To replay reasoning with
``store: false``, configure ``"extraBody": {"store": false, "include":
["reasoning.encrypted_content"]}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import httpx

from ..convert import to_responses
from ..parts import ChatMessage, ChatRequestOptions
from ._client import UpstreamClient, UpstreamRequest
from .chat_completions import openai_effort_levels

__all__ = ["ResponsesClient"]


class ResponsesClient(UpstreamClient):
    """Streams the Responses API."""

    format = "responses"
    chat_path = "/responses"
    cache_key_field = "prompt_cache_key"
    passthrough_options = frozenset(
        {
            "reasoning",
            "text",
            "parallel_tool_calls",
            "service_tier",
            "store",
            "include",
            "truncation",
            "user",
            "metadata",
        }
    )
    provider_options: ClassVar[frozenset[str]] = frozenset({"truncation"})

    def __init__(self, http: httpx.AsyncClient, *, truncation: str = "auto", **kwargs: Any) -> None:
        super().__init__(http, **kwargs)
        if truncation not in ("auto", "disabled"):
            raise TypeError(f"truncation: expected 'auto' or 'disabled', got {truncation!r}")
        self.truncation = truncation
        """The ``truncation`` every request asks for unless it sets its own."""

    def effort_levels(self, model: str) -> tuple[str, ...]:
        """OpenAI's reasoning models (o-series, GPT-5, gpt-oss)."""
        return openai_effort_levels(model)

    def apply_effort(self, body: dict[str, Any], effort: str, model: str) -> None:
        """``reasoning.effort``."""
        body["reasoning"] = {**(body.get("reasoning") or {}), "effort": effort}

    def build_body(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        *,
        default_max_tokens: int | None = None,
        image_input: bool = True,
    ) -> dict[str, Any]:
        """The body by :func:`~lmbridge.convert.to_responses` (``max_output_tokens`` only when
        the options ask)."""
        kwargs = {"image_input": image_input, **self.converter_options}
        return to_responses(messages, options, model=model, **kwargs)

    def finish_request(self, request: UpstreamRequest) -> UpstreamRequest:
        """The request, with ``truncation`` when nothing else set it."""
        request.body.setdefault("truncation", self.truncation)
        return request
