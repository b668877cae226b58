"""What went wrong with a request to one of VS Code's models, in words a user can act on.

VS Code reports failures as ``vscode.LanguageModelError`` with a ``code`` (``NoPermissions``,
``Blocked``, ``NotFound``, ``Unknown``, or what a provider chose) and a message whose wording
varies by provider. :func:`classify_error` sorts any failure into one :class:`ErrorKind` and
gives a :class:`ChatRequestError`: a :class:`~lmbridge.errors.LanguageModelError` (so code that
catches the VS Code error keeps working) with ``kind``, a user-facing ``message`` saying what to
do, the original ``code`` and ``name``, and the underlying ``detail``.
"""

from __future__ import annotations

import asyncio
import enum
import re
from collections.abc import Mapping
from typing import Any

from ..errors import LanguageModelError, LanguageModelErrorCode

__all__ = [
    "API_KEY_MESSAGE",
    "REQUEST_CANCELLED",
    "ChatRequestError",
    "ErrorKind",
    "classify_error",
    "error_from_rpc",
]

REQUEST_CANCELLED = -32800
"""JSON-RPC (LSP) error code of a cancelled request."""


class ErrorKind(str, enum.Enum):
    """Why a request failed, from the user's point of view."""

    NOT_SIGNED_IN = "not-signed-in"
    NO_PERMISSION = "no-permission"
    RATE_LIMITED = "rate-limited"
    MODEL_NOT_FOUND = "model-not-found"
    CANCELLED = "cancelled"
    INTERNAL = "internal"


_USER_MESSAGES = {
    ErrorKind.NOT_SIGNED_IN: (
        "You are not signed in to the service that provides this model: sign in to GitHub "
        "Copilot (or the extension that provides the model) in VS Code, then try again."
    ),
    ErrorKind.NO_PERMISSION: (
        "VS Code did not allow this app to use the model: accept the language model access "
        "prompt, or allow it under 'Manage Language Model Access' in the Accounts menu."
    ),
    ErrorKind.RATE_LIMITED: (
        "The model is rate limited or your quota is used up: wait a moment and try again, "
        "or pick another model."
    ),
    ErrorKind.MODEL_NOT_FOUND: (
        "The selected model is not available in VS Code: check the model setting "
        "(vscodelm/auto picks the first model) and that its extension is installed and enabled."
    ),
    ErrorKind.CANCELLED: "The request was cancelled.",
    ErrorKind.INTERNAL: "The language model request failed.",
}

API_KEY_MESSAGE = (
    "The model's provider has no valid API key: for lmbridge's models, set the key with the "
    "command 'lmbridge: Set API Key' (or the environment variable named by the provider's "
    "apiKeyEnv), then try again."
)
"""What to tell the user when an API key was rejected or is missing (kind ``no-permission``)."""


# Providers word the same failure differently; these match what Copilot and common providers
# say. They decide only when the code does not (see _classify).
_API_KEY = re.compile(r"api[ _-]?key|invalid_api_key|x-api-key", re.IGNORECASE)
_SIGN_IN = re.compile(
    r"sign(ed)?[ -]?in|log(ged)?[ -]?in|not authenticated|unauthori[sz]ed|no (github )?session"
    r"|authentication",
    re.IGNORECASE,
)
_RATE = re.compile(
    r"rate[ _-]?limit|too many requests|quota|\b429\b|exceeded your|throttl", re.IGNORECASE
)
_PERMISSION = re.compile(r"permission|consent|not allowed|forbidden|\b403\b|access denied", re.I)
_NOT_FOUND = re.compile(r"not found|no such model|unknown model|does not exist|ENOENT", re.I)
_CANCELLED_NAMES = frozenset({"Canceled", "Cancelled", "CancellationError", "AbortError"})


class ChatRequestError(LanguageModelError):
    """A failed request to a VS Code model, classified.

    ``str(error)`` and :attr:`message` are the user-facing message (it ends with the underlying
    detail); :attr:`code` is VS Code's ``LanguageModelError.code`` as received.
    """

    def __init__(
        self,
        kind: ErrorKind,
        detail: str = "",
        *,
        code: str = "Unknown",
        name: str | None = None,
        user_message: str | None = None,
    ) -> None:
        self.kind = kind
        """The classified reason."""
        self.user_message = user_message or _USER_MESSAGES[kind]
        """What to tell the user, without the detail."""
        self.detail = detail
        """The underlying error's own message."""
        self.raw_code = code
        """VS Code's ``LanguageModelError.code`` exactly as received (may be a provider's own)."""
        self.name = name
        """The underlying error's name (``LanguageModelError``, ``Canceled`` ...), when known."""
        text = self.user_message
        if detail and detail not in text:
            text = f"{text} ({detail})"
        super().__init__(text, _as_known_code(code))

    def to_wire(self) -> dict[str, Any]:
        """A JSON form for the loopback endpoint: enough to rebuild the same error."""
        return {
            "kind": self.kind.value,
            "message": self.user_message,
            "detail": self.detail,
            "languageModelError": self.raw_code,
            "name": self.name,
        }

    @classmethod
    def from_wire(cls, obj: Any) -> ChatRequestError:
        """Rebuild an error sent by :meth:`to_wire`; anything unexpected becomes ``internal``."""
        if not isinstance(obj, Mapping):
            return cls(ErrorKind.INTERNAL, f"malformed error: {obj!r}")
        try:
            kind = ErrorKind(obj.get("kind"))
        except ValueError:
            return classify_error(
                str(obj.get("detail") or obj.get("message") or ""),
                code=_str_or_none(obj.get("languageModelError")),
                name=_str_or_none(obj.get("name")),
            )
        return cls(
            kind,
            str(obj.get("detail") or ""),
            code=_str_or_none(obj.get("languageModelError")) or "Unknown",
            name=_str_or_none(obj.get("name")),
            user_message=_str_or_none(obj.get("message")),
        )

    def __repr__(self) -> str:
        return (
            f"ChatRequestError(kind={self.kind.value!r}, code={self.raw_code!r}, "
            f"detail={self.detail!r})"
        )


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _as_known_code(code: str) -> LanguageModelErrorCode:
    if code == "NoPermissions":
        return "NoPermissions"
    if code == "Blocked":
        return "Blocked"
    if code == "NotFound":
        return "NotFound"
    return "Unknown"


def classify_error(
    error: BaseException | str,
    *,
    code: str | None = None,
    name: str | None = None,
) -> ChatRequestError:
    """Sort a failure into an :class:`ErrorKind`.

    ``error`` is an exception or the message received; ``code`` and ``name`` are VS Code's
    ``LanguageModelError.code`` and the error's name when the transport got them. An exception
    that is already a :class:`ChatRequestError` is returned unchanged.
    """
    if isinstance(error, ChatRequestError):
        return error
    if isinstance(error, BaseException):
        if isinstance(error, LanguageModelError) and code is None:
            code = error.code
        if isinstance(error, asyncio.CancelledError):
            return ChatRequestError(
                ErrorKind.CANCELLED, str(error), code=code or "Unknown", name=name
            )
        detail = str(error) or type(error).__name__
        name = name or type(error).__name__
    else:
        detail = error
    kind, message = _classify(detail, code, name)
    return ChatRequestError(kind, detail, code=code or "Unknown", name=name, user_message=message)


def _classify(detail: str, code: str | None, name: str | None) -> tuple[ErrorKind, str | None]:
    """The kind, and a user message when the kind's default one does not fit the cause."""
    if name in _CANCELLED_NAMES or code in _CANCELLED_NAMES or detail.strip() in _CANCELLED_NAMES:
        return ErrorKind.CANCELLED, None
    # VS Code's code is what the provider meant; the wording only refines it. (Checking words
    # first made lmbridge's own "p rejected the API key (HTTP 401: Unauthorized)" a Copilot
    # sign-in problem.)
    if code == "NoPermissions":
        if _API_KEY.search(detail):
            return ErrorKind.NO_PERMISSION, API_KEY_MESSAGE
        if _SIGN_IN.search(detail):
            return ErrorKind.NOT_SIGNED_IN, None
        return ErrorKind.NO_PERMISSION, None
    if code == "Blocked":
        return ErrorKind.RATE_LIMITED, None
    if code == "NotFound":
        return ErrorKind.MODEL_NOT_FOUND, None
    # no code, "Unknown" or a provider's own: the words decide
    if code and _RATE.search(code):
        return ErrorKind.RATE_LIMITED, None
    if _API_KEY.search(detail) and not _RATE.search(detail):  # "rate limit for API key x"
        return ErrorKind.NO_PERMISSION, API_KEY_MESSAGE
    if _SIGN_IN.search(detail):
        return ErrorKind.NOT_SIGNED_IN, None
    if _RATE.search(detail):
        return ErrorKind.RATE_LIMITED, None
    if _PERMISSION.search(detail):
        return ErrorKind.NO_PERMISSION, None
    if _NOT_FOUND.search(detail):
        return ErrorKind.MODEL_NOT_FOUND, None
    return ErrorKind.INTERNAL, None


def error_from_rpc(code: int | None, message: str, data: Any = None) -> ChatRequestError:
    """Classify a JSON-RPC error answered to an ``lm/*`` request.

    ``data`` carries ``{"languageModelError": code, "name": name}`` (docs/protocol.md); a
    ``-32800`` (RequestCancelled) answer is a cancellation whatever the message says.
    """
    lm_code = name = None
    if isinstance(data, Mapping):
        lm_code = _str_or_none(data.get("languageModelError"))
        name = _str_or_none(data.get("name"))
    if code == REQUEST_CANCELLED:
        return ChatRequestError(ErrorKind.CANCELLED, message, code=lm_code or "Unknown", name=name)
    return classify_error(message, code=lm_code, name=name)
