"""Async HTTP clients for every upstream wire format, the model catalog, and the providers built on them.

=====================  ====================================  =======================================
format                 client                                request
=====================  ====================================  =======================================
``chat-completions``   :class:`ChatCompletionsClient`        ``POST {base}/chat/completions``, Bearer
``responses``          :class:`ResponsesClient`              ``POST {base}/responses``, Bearer
``anthropic``          :class:`AnthropicClient`              ``POST {base}/messages``, ``x-api-key``
``ai-sdk``             :class:`AISDKClient`                  ``POST {base}/chat``, Bearer
=====================  ====================================  =======================================

Which client serves a format is said by its registration in :mod:`lmbridge.formats`.

Each client turns VS Code messages + options into the upstream's body with the matching
converter (:mod:`lmbridge.convert`), sends it with an injected :class:`httpx.AsyncClient`,
retries failures that happen before the first body byte (:class:`RetryPolicy`), decodes the
event stream with the format's decoder (:mod:`lmbridge.upstream`) and reports parts as they
arrive. Failures become :class:`~lmbridge.errors.LanguageModelError` with messages that say what
to do; the API key is redacted from every message and log line.

:class:`UpstreamProvider` serves a client's models (:class:`ModelCatalog`) through the Python
provider API; :func:`build_provider` makes one from a configuration entry (the configuration
calls it for every ``"format"`` entry). Importing this package registers nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._client import UpstreamClient, UpstreamRequest
    from ._errors import ErrorContext, parse_retry_after, redact
    from ._provider import (
        DEFAULT_TIMEOUT,
        UpstreamProvider,
        build_provider,
        default_http_client,
    )
    from ._retry import RetryPolicy, is_retryable_status
    from .ai_sdk import AISDKClient
    from .anthropic import AnthropicClient
    from .catalog import (
        DEFAULT_CATALOG_TTL,
        DEFAULT_OUTPUT_RESERVE,
        CatalogModel,
        ModelCatalog,
        ModelDefaults,
        output_reserve,
        parse_catalog,
        parse_static_models,
    )
    from .chat_completions import ChatCompletionsClient
    from .responses import ResponsesClient

# Loaded on first use (see lmbridge._lazy): importing the package costs nothing more.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    globals(),
    {
        "._client": ("UpstreamClient", "UpstreamRequest"),
        "._errors": ("ErrorContext", "parse_retry_after", "redact"),
        "._provider": (
            "DEFAULT_TIMEOUT", "UpstreamProvider", "build_provider", "default_http_client",
        ),
        "._retry": ("RetryPolicy", "is_retryable_status"),
        ".ai_sdk": ("AISDKClient",),
        ".anthropic": ("AnthropicClient",),
        ".catalog": (
            "DEFAULT_CATALOG_TTL", "DEFAULT_OUTPUT_RESERVE", "CatalogModel", "ModelCatalog",
            "ModelDefaults", "output_reserve", "parse_catalog", "parse_static_models",
        ),
        ".chat_completions": ("ChatCompletionsClient",),
        ".responses": ("ResponsesClient",),
    },
)

__all__ = [
    "DEFAULT_CATALOG_TTL",
    "DEFAULT_OUTPUT_RESERVE",
    "DEFAULT_TIMEOUT",
    "AISDKClient",
    "AnthropicClient",
    "CatalogModel",
    "ChatCompletionsClient",
    "ErrorContext",
    "ModelCatalog",
    "ModelDefaults",
    "ResponsesClient",
    "RetryPolicy",
    "UpstreamClient",
    "UpstreamProvider",
    "UpstreamRequest",
    "build_provider",
    "default_http_client",
    "is_retryable_status",
    "output_reserve",
    "parse_catalog",
    "parse_retry_after",
    "parse_static_models",
    "redact",
]
