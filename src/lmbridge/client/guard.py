"""What every request to a VS Code model goes through first: fit, size check, retry decisions.

The Python client (:class:`~.api.LanguageModelClient`) and every API of the loopback endpoint
use these, so they behave alike (sans-IO: the callers do the waiting):

- :func:`fit_to_model` turns images into placeholder text for a model that takes none (an
  image would make the whole request fail);
- :func:`check_context` estimates the request's input tokens and raises
  :class:`PromptTooLongError` only when they are certainly over the model's ``maxInputTokens``
  (over it even if the estimate were :data:`~lmbridge.context.ESTIMATE_ERROR` high), before
  anything reaches VS Code; anything else is sent and VS Code's model decides. A refusal from
  VS Code's side that says the request is too long is read back by :func:`as_prompt_too_long`,
  so every API answers both alike and clients that compact their history on a context-length
  error can do so;
- :class:`RetryPolicy` says whether and when to try again after a rate limit or a server
  error that came before the first part (backoff, or the ``retry-after`` the error names).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import tokens  # the estimator and its weights load with the first estimate
from ..context import ESTIMATE_ERROR, certainly_over, is_context_length_text, numbers_in
from ..convert._common import placeholder_for
from ..errors import ConversionError, LMBridgeError
from ..parts import ChatMessage, ChatRequestOptions, DataPart, Part, TextPart, ToolResultPart
from .classify import ChatRequestError, ErrorKind
from .transport import ChatModel

if TYPE_CHECKING:
    from ..tokens import TokenEstimator

__all__ = [
    "CONTEXT_MARGIN",
    "NO_RETRY",
    "PromptTooLongError",
    "RetryPolicy",
    "as_prompt_too_long",
    "check_context",
    "estimate_input_tokens",
    "fit_to_model",
    "is_overloaded",
    "retry_after_seconds",
]

CONTEXT_MARGIN = ESTIMATE_ERROR
"""How far the input estimate may be off (relative): a request is refused before sending only
when its estimate is over the model's limit by more than this (:mod:`lmbridge.context`)."""


class PromptTooLongError(LMBridgeError):
    """The request does not fit the model's context window: its estimate is certainly over the
    model's input limit, or VS Code's model refused it as too long (then ``detail`` holds what
    it said, and ``tokens`` / ``limit`` are 0 unless it named them)."""

    def __init__(self, tokens: int, limit: int, model: str, detail: str | None = None) -> None:
        if detail is None:
            text = (
                f"prompt is too long: {tokens} tokens > {limit} maximum (model {model}; "
                "estimated before sending)"
            )
        elif tokens and limit:
            text = f"prompt is too long: {tokens} tokens > {limit} maximum ({detail})"
        else:
            text = f"prompt is too long ({detail})"
        super().__init__(text)
        self.tokens = tokens
        """The input tokens (estimated, or as the refusal named them)."""
        self.limit = limit
        """The model's ``maxInputTokens`` (or the limit the refusal named)."""
        self.detail = detail
        """What VS Code's model said when it refused the request (``None``: refused here)."""


# --------------------------------------------------------------------------- images


def _is_image(part: DataPart) -> bool:
    return part.mime_type.lower().startswith("image/")


def _fit_parts(parts: Sequence[Part]) -> tuple[list[Part], bool]:
    out: list[Part] = []
    changed = False
    for part in parts:
        if isinstance(part, DataPart) and _is_image(part):
            out.append(TextPart(placeholder_for(part.data, part.mime_type)))
            changed = True
        elif isinstance(part, ToolResultPart):
            inner, inner_changed = _fit_parts(part.content)
            if inner_changed:
                content = [p for p in inner if isinstance(p, (TextPart, DataPart))]
                out.append(ToolResultPart(part.call_id, list(content)))
                changed = True
            else:
                out.append(part)
        else:
            out.append(part)
    return out, changed


def fit_to_model(messages: Sequence[ChatMessage], model: ChatModel) -> list[ChatMessage]:
    """``messages`` with every image as placeholder text when ``model`` takes no images."""
    if model.image_input:
        return list(messages)
    out = []
    for message in messages:
        parts, changed = _fit_parts(message.content)
        out.append(ChatMessage(message.role, parts, message.name) if changed else message)
    return out


# --------------------------------------------------------------------------- context


_ESTIMATORS: dict[tuple[str, str], TokenEstimator] = {}


def _estimator(model: ChatModel) -> TokenEstimator:
    key = (model.family, model.id)
    estimator = _ESTIMATORS.get(key)
    if estimator is None:
        if len(_ESTIMATORS) > 64:
            _ESTIMATORS.clear()
        estimator = tokens.TokenEstimator(model.family, model_id=model.id)
        _ESTIMATORS[key] = estimator
    return estimator


def estimate_input_tokens(
    model: ChatModel, messages: Sequence[ChatMessage], options: ChatRequestOptions | None = None
) -> int:
    """The request's input tokens as estimated for ``model`` (no margin)."""
    return _estimator(model).count_request(messages, options)


def check_context(
    model: ChatModel, messages: Sequence[ChatMessage], options: ChatRequestOptions | None = None
) -> int:
    """The estimated input tokens; :class:`PromptTooLongError` when certainly over the model's
    limit (:func:`lmbridge.context.certainly_over`).

    A model that states no limit (``maxInputTokens`` 0) is not checked.
    """
    tokens = estimate_input_tokens(model, messages, options)
    limit = model.max_input_tokens
    if certainly_over(tokens, limit):
        raise PromptTooLongError(tokens, limit, model.id)
    return tokens


def as_prompt_too_long(error: BaseException, model: str = "") -> PromptTooLongError | None:
    """``error`` as a :class:`PromptTooLongError` when it says the request is too long for the
    model (lmbridge's refusal on either side, or a provider's own words), else ``None``."""
    if isinstance(error, PromptTooLongError):
        return error
    if isinstance(error, ConversionError):  # the caller's request is malformed, not long
        return None
    if isinstance(error, ChatRequestError):
        if error.kind is not ErrorKind.INTERNAL:
            return None
        text = error.detail or str(error)
    elif isinstance(error, Exception):  # not a cancellation
        text = str(error)
    else:
        return None
    if not is_context_length_text(text):
        return None
    tokens, limit = numbers_in(text) or (0, 0)
    return PromptTooLongError(tokens, limit, model, detail=text)


# --------------------------------------------------------------------------- retry

# What VS Code's providers say when the service, not the request, failed.
_SERVER_TROUBLE = re.compile(
    r"\b5\d\d\b|overloaded|server error|service unavailable|bad gateway|gateway time-?out"
    r"|temporarily|try again later|ECONNRESET|ETIMEDOUT|socket hang up|timed? ?out",
    re.IGNORECASE,
)
_RETRY_AFTER = re.compile(
    r"retry[- ]after[\"':= ]*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|sec|seconds?)?"
    r"|(?:try again|retry) in (\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|sec|seconds?|m|min|minutes?)",
    re.IGNORECASE,
)


def retry_after_seconds(error: ChatRequestError) -> float | None:
    """The wait the error itself asks for (``retry-after: 20``, ``try again in 3s``), if any."""
    match = _RETRY_AFTER.search(error.detail or "")
    if match is None:
        return None
    number = match.group(1) or match.group(3)
    unit = (match.group(2) or match.group(4) or "s").lower()
    seconds = float(number)
    if unit.startswith("ms") or unit.startswith("milli"):
        seconds /= 1000
    elif unit.startswith("m"):
        seconds *= 60
    return seconds


def is_overloaded(error: ChatRequestError) -> bool:
    """Whether the model's service failed (a server error), rather than the request."""
    return error.kind is ErrorKind.INTERNAL and bool(_SERVER_TROUBLE.search(error.detail or ""))


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of a request that failed before its first part (as Cline does).

    Rate limits and server errors are retried ``retries`` times, waiting ``base_delay``
    doubled each time (at most ``max_delay``), or what the error asks for when that is not
    longer than ``max_delay``; anything else is not retried.
    """

    retries: int = 2
    """Further attempts after the first."""
    base_delay: float = 1.0
    """Seconds before the first retry."""
    max_delay: float = 20.0
    """The longest wait; an error asking for more is returned at once."""

    def delay(self, attempt: int, error: ChatRequestError) -> float | None:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 1), or
        ``None`` to give up and return the error."""
        if attempt > self.retries or error.raw_code == "PaceLimit":
            # the user's own pace (lmbridge.pace) already queued it as long as it allows
            return None
        if error.kind is not ErrorKind.RATE_LIMITED and not is_overloaded(error):
            return None
        asked = retry_after_seconds(error)
        if asked is not None:
            return asked if asked <= self.max_delay else None
        return float(min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1)))

    @staticmethod
    def retry_after_header(error: ChatRequestError) -> str | None:
        """The ``retry-after`` header value (whole seconds) to send with ``error``."""
        asked = retry_after_seconds(error)
        if asked is None:
            return "1" if error.kind is ErrorKind.RATE_LIMITED or is_overloaded(error) else None
        return str(max(1, math.ceil(asked)))


NO_RETRY = RetryPolicy(retries=0)
"""A policy that never retries."""
