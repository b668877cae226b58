"""lmbridge: Python language models in VS Code, and VS Code's language models in Python."""

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
    from .client import LanguageModelClient, select_chat_models
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
    "LanguageModelClient": "client",
    "select_chat_models": "client",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lmbridge' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    "CancellationToken",
    "CancellationTokenSource",
    "ChatMessage",
    "ChatRequestOptions",
    "ChatRole",
    "ChatTool",
    "ConfigError",
    "ConversionError",
    "DataPart",
    "FinishReason",
    "LMBridgeError",
    "LanguageModelChatProvider",
    "LanguageModelClient",
    "LanguageModelError",
    "ModelCapabilities",
    "ModelInfo",
    "Progress",
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
