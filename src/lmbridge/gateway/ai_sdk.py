"""A Vercel AI SDK endpoint (``POST {base}/chat``): a route of yours that runs ``streamText``.

The body is :func:`lmbridge.convert.to_ai_sdk` plus the model id, so the route can pass it
almost as is::

    // app/api/chat/route.ts
    export async function POST(req: Request) {
      const { model, tools, ...rest } = await req.json();
      const result = streamText({ model: gateway(model), ...rest,
                                  tools: mapValues(tools, t => tool({ ...t, inputSchema: jsonSchema(t.inputSchema) })) });
      return result.toUIMessageStreamResponse();   // or the fullStream as SSE
    }

The answer may be any AI SDK stream the decoder reads (UI message stream, ``fullStream``
parts, provider-level parts) as ``text/event-stream``. Credentials, when configured, are
``Authorization: Bearer``. Set ``chatPath`` when the route is elsewhere (``""``: the base URL
is the route itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..convert import to_ai_sdk
from ..parts import ChatMessage, ChatRequestOptions
from ._client import UpstreamClient

__all__ = ["AISDKClient"]


class AISDKClient(UpstreamClient):
    """Streams from an AI SDK route."""

    format = "ai-sdk"
    chat_path = "/chat"
    passthrough_options = frozenset(
        {"providerOptions", "topK", "presencePenalty", "frequencyPenalty", "maxRetries"}
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
        """``{"model", ...to_ai_sdk(...)}`` (``maxOutputTokens`` only when the options ask)."""
        kwargs = {"image_input": image_input, **self.converter_options}
        return {"model": model, **to_ai_sdk(messages, options, **kwargs)}
