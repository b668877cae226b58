"""lmbridge: Python language models in VS Code, and VS Code's language models in Python.

Serve a model to VS Code (the provider side)::

    from lmbridge import chat_model

    @chat_model("shout")
    async def shout(messages, options, token):
        yield messages[-1].text.upper()

Use VS Code's models (the consumer side; :class:`SyncLanguageModelClient` without an event
loop, :class:`LanguageModelClient` in async code)::

    from lmbridge import SyncLanguageModelClient

    with SyncLanguageModelClient() as client:
        answer = client.complete([{"role": "user", "content": "Hi"}], format="chat-completions")
        print(answer.text, answer.usage, answer.finish_reason)

Errors: every error is an :class:`LMBridgeError`; a failed request to a VS Code model is a
:class:`ChatRequestError` (a :class:`LanguageModelError`) whose ``kind`` is an
:class:`ErrorKind`. The provider and consumer names load on first use; ``dir(lmbridge)`` and
``help(lmbridge)`` list them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    ConfigError,
    ConversionError,
    LanguageModelError,
    LMBridgeError,
    ToolArgumentsError,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamProtocolError,
    UpstreamReportedError,
    WireError,
)
from .parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatRole,
    ChatTool,
    DataPart,
    FinishReason,
    ModelCapabilities,
    ModelInfo,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolMode,
    ToolResultPart,
    Usage,
)

if TYPE_CHECKING:
    from .client import (
        ChatModel,
        ChatRequestError,
        ChatResponse,
        Completion,
        EndpointNotFoundError,
        ErrorKind,
        LanguageModelClient,
        PromptTooLongError,
        RetryPolicy,
        SelectorError,
        SyncChatResponse,
        SyncLanguageModelClient,
        select_chat_models,
    )
    from .provider import (
        CancellationToken,
        CancellationTokenSource,
        LanguageModelChatProvider,
        Progress,
        chat_model,
        model_info,
        provider_factory,
    )

# The provider and consumer APIs pull in asyncio and httpx: load them on first use, so that
# `import lmbridge` (and commands such as `lmbridge replay`) stay quick.
_LAZY = {
    "CancellationToken": "provider",
    "CancellationTokenSource": "provider",
    "LanguageModelChatProvider": "provider",
    "Progress": "provider",
    "chat_model": "provider",
    "model_info": "provider",
    "provider_factory": "provider",
    "ChatModel": "client",
    "ChatRequestError": "client",
    "ChatResponse": "client",
    "Completion": "client",
    "EndpointNotFoundError": "client",
    "ErrorKind": "client",
    "LanguageModelClient": "client",
    "PromptTooLongError": "client",
    "RetryPolicy": "client",
    "SelectorError": "client",
    "SyncChatResponse": "client",
    "SyncLanguageModelClient": "client",
    "select_chat_models": "client",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lmbridge' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    # the lazily loaded names too, so that dir() and help() show them before their first use
    return sorted(set(globals()) | set(__all__))


__version__ = "0.1.0"

__all__ = [
    "CancellationToken",
    "CancellationTokenSource",
    "ChatMessage",
    "ChatModel",
    "ChatRequestError",
    "ChatRequestOptions",
    "ChatResponse",
    "ChatRole",
    "ChatTool",
    "Completion",
    "ConfigError",
    "ConversionError",
    "DataPart",
    "EndpointNotFoundError",
    "ErrorKind",
    "FinishReason",
    "LMBridgeError",
    "LanguageModelChatProvider",
    "LanguageModelClient",
    "LanguageModelError",
    "ModelCapabilities",
    "ModelInfo",
    "Progress",
    "PromptTooLongError",
    "RetryPolicy",
    "SelectorError",
    "SyncChatResponse",
    "SyncLanguageModelClient",
    "TextPart",
    "ThinkingPart",
    "ToolArgumentsError",
    "ToolCallPart",
    "ToolMode",
    "ToolResultPart",
    "UpstreamError",
    "UpstreamHTTPError",
    "UpstreamProtocolError",
    "UpstreamReportedError",
    "Usage",
    "WireError",
    "__version__",
    "chat_model",
    "model_info",
    "provider_factory",
    "select_chat_models",
]
