"""Every error lmbridge raises, by whose fault it is.

::

    LMBridgeError
    ├── LanguageModelError        the error VS Code's API knows (code: NoPermissions, Blocked,
    │   │                         NotFound, Unknown); what a provider raises and a consumer gets
    │   └── ContextLengthError    the request does not fit the model's context window
    ├── UpstreamError             the upstream LLM API failed or misbehaved
    │   ├── UpstreamProtocolError     it sent something that breaks its own wire format
    │   │   │                         (malformed SSE or JSON, impossible event order, truncation)
    │   │   └── ToolArgumentsError    a tool call's arguments are not a JSON object
    │   ├── UpstreamReportedError     it reported an error inside the stream (an ``error`` event)
    │   └── UpstreamHTTPError         it answered with a non-success HTTP status
    ├── ConversionError           the caller's messages cannot be expressed for the target
    ├── WireError                 a wire-form JSON value is malformed (also a ValueError)
    └── ConfigError               the configuration is invalid

Errors that end a stream keep what was already produced: decoders stop, the parts they
returned before the error stay valid, and the error object says what went wrong.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "ConfigError",
    "ContextLengthError",
    "ConversionError",
    "LMBridgeError",
    "LanguageModelError",
    "LanguageModelErrorCode",
    "ToolArgumentsError",
    "UpstreamError",
    "UpstreamHTTPError",
    "UpstreamProtocolError",
    "UpstreamReportedError",
    "WireError",
]

LanguageModelErrorCode = Literal["NoPermissions", "Blocked", "NotFound", "Unknown"]


class LMBridgeError(Exception):
    """Base of every lmbridge error."""


class LanguageModelError(LMBridgeError):
    """``vscode.LanguageModelError``: the error kinds VS Code's language-model API defines.

    ``code`` is one of ``NoPermissions``, ``Blocked``, ``NotFound`` or ``Unknown``; the message
    says what the user can do about it.
    """

    def __init__(self, message: str, code: LanguageModelErrorCode = "Unknown") -> None:
        super().__init__(message)
        self.code: LanguageModelErrorCode = code

    @property
    def message(self) -> str:
        """The user-facing message."""
        return str(self)

    @classmethod
    def no_permissions(cls, message: str) -> LanguageModelError:
        """The caller may not use the model (missing or rejected credentials, no consent)."""
        return cls(message, "NoPermissions")

    @classmethod
    def blocked(cls, message: str) -> LanguageModelError:
        """The request was refused for now (rate limit, quota, content filter)."""
        return cls(message, "Blocked")

    @classmethod
    def not_found(cls, message: str) -> LanguageModelError:
        """The model does not exist."""
        return cls(message, "NotFound")

    def __repr__(self) -> str:
        return f"LanguageModelError({str(self)!r}, code={self.code!r})"


class ContextLengthError(LanguageModelError):
    """The request does not fit the model's context window: refused before sending, or by the
    model's service (then ``upstream`` holds what the service said, redacted). The host
    answers either with one message (:func:`lmbridge.context.too_long_message`)."""

    def __init__(self, message: str, *, upstream: str | None = None) -> None:
        super().__init__(message)
        self.upstream = upstream
        """The service's own words, when it refused the request (``None``: lmbridge did)."""


class UpstreamError(LMBridgeError):
    """The upstream LLM API failed or misbehaved."""


class UpstreamProtocolError(UpstreamError):
    """The upstream sent data that breaks its wire format (the remote's fault)."""


class ToolArgumentsError(UpstreamProtocolError):
    """A tool call's arguments did not form a JSON object by the end of the call."""

    def __init__(self, tool_name: str, call_id: str, raw_arguments: str, reason: str) -> None:
        shown = raw_arguments if len(raw_arguments) <= 500 else raw_arguments[:500] + "..."
        super().__init__(
            f"tool call {call_id!r} to {tool_name!r} has invalid arguments ({reason}): {shown!r}"
        )
        self.tool_name = tool_name
        self.call_id = call_id
        self.raw_arguments = raw_arguments
        self.reason = reason


class UpstreamReportedError(UpstreamError):
    """The upstream reported an error inside the stream.

    ``error_type`` and ``code`` are the upstream's own words (``overloaded_error``,
    ``rate_limit_exceeded`` ...); ``body`` is the error object as received.
    """

    def __init__(
        self,
        message: str,
        *,
        error_type: str | None = None,
        code: str | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.code = code
        self.body = body


class UpstreamHTTPError(UpstreamError):
    """The upstream answered with a non-success HTTP status."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        body: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body
        self.retry_after = retry_after


class ConversionError(LMBridgeError, ValueError):
    """The caller's conversation cannot be expressed in the target shape (the local side's fault)."""


class WireError(LMBridgeError, ValueError):
    """A wire-form JSON value does not describe a valid part, message or option.

    The message names the offending field and its position (``messages[2].content[0]``).
    """


class ConfigError(LMBridgeError, ValueError):
    """The configuration is invalid; the message names the provider and the field."""
