"""OpenAI Responses API and OpenResponses servers (``POST {base}/responses``).

The body comes from :func:`lmbridge.convert.to_responses` (``function`` tools with
``strict: false``, ``tool_choice`` ``"required"`` for :attr:`~lmbridge.parts.ToolMode.REQUIRED`,
``max_output_tokens``); credentials are ``Authorization: Bearer``. To replay reasoning with
``store: false``, configure ``"extraBody": {"store": false, "include":
["reasoning.encrypted_content"]}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..convert import to_responses
from ..parts import ChatMessage, ChatRequestOptions
from ._client import UpstreamClient

__all__ = ["ResponsesClient"]


class ResponsesClient(UpstreamClient):
    """Streams the Responses API."""

    format = "responses"
    chat_path = "/responses"
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
