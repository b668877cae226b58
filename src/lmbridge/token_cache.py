"""Token estimates for providers that bring no counter of their own: one shared
:class:`~lmbridge.tokens.TokenEstimator` per model, kept in the storage folder the host gives.

:func:`estimate_tokens` counts with that estimator (or one given), falling back to characters
/ 4 when none can be made; :func:`observe_usage` lets it learn from the input tokens an
upstream reported; :func:`use_token_storage` says where what it learns is kept. The estimator
package is imported only when a first estimate is asked for. The provider API
(:mod:`lmbridge.provider`) re-exports these.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from .parts import (
    ChatMessage,
    ChatRequestOptions,
    ModelInfo,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["estimate_request", "estimate_tokens", "observe_usage", "use_token_storage"]

_log = logging.getLogger("lmbridge.provider")

_estimators: dict[tuple[str, str], Any] = {}


_storage_path: str | None = None


def use_token_storage(storage_path: str | None) -> None:
    """Keep what the default estimators learn in ``storage_path`` (the extension's global
    storage folder, sent by the host): per-message counts and calibration survive restarts."""
    global _storage_path
    if storage_path != _storage_path:
        _storage_path = storage_path
        _estimators.clear()


def _estimator(model: ModelInfo) -> Any:
    key = (model.family, model.id)
    if key not in _estimators:
        try:
            from .tokens import TokenEstimator, shared_store

            _estimators[key] = TokenEstimator(
                model.family, model_id=model.id, store=shared_store(_storage_path)
            )
        except Exception:  # a family it refuses, or a partial installation: chars / 4
            _log.debug("no token estimator for %s; using chars/4", model.id, exc_info=True)
            _estimators[key] = None
    return _estimators[key]


def estimate_tokens(
    model: ModelInfo, text: str | ChatMessage, estimator: Any | None = None
) -> int:
    """Token estimate for ``text``: ``estimator`` (default: the shared
    :class:`lmbridge.tokens.TokenEstimator` for ``model``), else chars / 4."""
    if estimator is None:
        estimator = _estimator(model)
    if estimator is not None:
        try:
            if isinstance(text, str):
                return int(estimator.count_text(text))
            return int(estimator.count_message(text))
        except Exception:
            _log.debug("token estimator failed; using chars/4", exc_info=True)
    return _chars_over_four(text)


def estimate_request(
    model: ModelInfo,
    messages: Sequence[ChatMessage],
    options: ChatRequestOptions | None = None,
    estimator: Any | None = None,
) -> int:
    """Input tokens of a whole request: every message, the tool definitions (when the request
    carries tools) and the per-request overhead, by ``estimator`` (default: the shared one for
    ``model``), else chars / 4. No safety margin beyond the estimator's own."""
    if estimator is None:
        estimator = _estimator(model)
    if estimator is not None:
        try:
            return int(estimator.count_request(messages, options))
        except Exception:
            _log.debug("token estimator failed; using chars/4", exc_info=True)
    total = sum(_chars_over_four(m) for m in messages)
    for tool in options.tools if options is not None else ():
        schema = repr(tool.input_schema) if tool.input_schema else ""
        total += 8 + (len(tool.name) + len(tool.description) + len(schema) + 3) // 4
    return total


def observe_usage(
    model: ModelInfo,
    messages: Sequence[ChatMessage],
    options: ChatRequestOptions,
    input_tokens: int,
) -> None:
    """Let the default estimator learn from the input tokens an upstream reported."""
    estimator = _estimator(model)
    if estimator is not None and input_tokens > 0:
        try:
            estimator.observe(messages, options, input_tokens)
        except Exception:
            _log.debug("token calibration failed", exc_info=True)


def _chars_over_four(text: str | ChatMessage) -> int:
    if isinstance(text, str):
        return (len(text) + 3) // 4
    total = 4  # role and framing overhead per message
    for part in text.content:
        total += _part_chars(part)
    return total


def _part_chars(part: Part) -> int:
    if isinstance(part, TextPart):
        return (len(part.value) + 3) // 4
    if isinstance(part, ThinkingPart):
        return (len(part.text) + 3) // 4
    if isinstance(part, ToolCallPart):
        return (len(part.name) + len(repr(part.input)) + 3) // 4
    if isinstance(part, ToolResultPart):
        return sum(_part_chars(p) for p in part.content) + 4
    # images and other data: a flat cost, as VS Code's own estimators do
    return 85 if part.mime_type.startswith("image/") else (len(part.data) + 3) // 4
