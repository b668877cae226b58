"""lmbridge: Python language models in VS Code, and VS Code's language models in Python."""

from __future__ import annotations

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

__version__ = "0.1.0"

__all__ = [
    "ChatMessage",
    "ChatRequestOptions",
    "ChatRole",
    "ChatTool",
    "ConfigError",
    "ConversionError",
    "DataPart",
    "FinishReason",
    "LMBridgeError",
    "LanguageModelError",
    "ModelCapabilities",
    "ModelInfo",
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
]
