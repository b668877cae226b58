"""Consumer side: use VS Code's language models (Copilot and every installed provider) from Python.

::

    from lmbridge.client import LanguageModelClient

    client = LanguageModelClient(selector="vscodelm/auto")
    response = await client.send_request(messages, system="Be brief.", format="chat-completions")
    async for part in response:
        ...
    answer = await client.complete(messages)       # the whole answer: text, tool calls, usage

:class:`SyncLanguageModelClient` has the same methods for code without an event loop.

Inside the host the extension started, the host sets a :class:`HostTransport` as the default
(:func:`set_default_transport`); anywhere else the default is an :class:`HttpTransport` to the
loopback endpoint, found through the endpoint file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from .api import (
        FALLBACK_MODEL,
        MODEL_SETTING,
        ChatResponse,
        Completion,
        LanguageModelClient,
        get_default_transport,
        messages_for_request,
        select_chat_models,
        set_default_transport,
        start_response,
        tools_from,
    )
    from .classify import ChatRequestError, ErrorKind, classify_error
    from .discovery import EndpointInfo, EndpointNotFoundError, find_endpoint
    from .endpoint import EndpointServer
    from .guard import PromptTooLongError, RetryPolicy
    from .model_names import ModelNameMap
    from .selectors import AUTO, ModelSelector, SelectorError, format_selector, parse_selector
    from .sync import SyncChatResponse, SyncLanguageModelClient
    from .transport import BridgeTransport, ChatModel, HostTransport, HttpTransport

# Loaded on first use (see lmbridge._lazy): importing the package costs nothing more.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    globals(),
    {
        ".api": (
            "FALLBACK_MODEL", "MODEL_SETTING", "ChatResponse", "Completion", "LanguageModelClient",
            "get_default_transport", "messages_for_request", "select_chat_models",
            "set_default_transport", "start_response", "tools_from",
        ),
        ".classify": ("ChatRequestError", "ErrorKind", "classify_error"),
        ".discovery": ("EndpointInfo", "EndpointNotFoundError", "find_endpoint"),
        ".endpoint": ("EndpointServer",),
        ".guard": ("PromptTooLongError", "RetryPolicy"),
        ".model_names": ("ModelNameMap",),
        ".selectors": (
            "AUTO", "ModelSelector", "SelectorError", "format_selector", "parse_selector",
        ),
        ".sync": ("SyncChatResponse", "SyncLanguageModelClient"),
        ".transport": ("BridgeTransport", "ChatModel", "HostTransport", "HttpTransport"),
    },
)

__all__ = [
    "AUTO",
    "FALLBACK_MODEL",
    "MODEL_SETTING",
    "BridgeTransport",
    "ChatModel",
    "ChatRequestError",
    "ChatResponse",
    "Completion",
    "EndpointInfo",
    "EndpointNotFoundError",
    "EndpointServer",
    "ErrorKind",
    "HostTransport",
    "HttpTransport",
    "LanguageModelClient",
    "ModelNameMap",
    "ModelSelector",
    "PromptTooLongError",
    "RetryPolicy",
    "SelectorError",
    "SyncChatResponse",
    "SyncLanguageModelClient",
    "classify_error",
    "find_endpoint",
    "format_selector",
    "get_default_transport",
    "messages_for_request",
    "parse_selector",
    "select_chat_models",
    "set_default_transport",
    "start_response",
    "tools_from",
]
