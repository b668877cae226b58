"""When a request is too long for a model's context window, and how lmbridge says so.

One rule for both sides (the host before it calls an upstream, the consumer side before it
asks VS Code): **never refuse what fits**. A request is refused before sending only when it is
certainly over the model's real window, that is when even an estimate :data:`ESTIMATE_ERROR`
too high would still be over it::

    refuse  <=>  estimated > window * (1 + ESTIMATE_ERROR)

Anything else is sent, and the upstream (or VS Code's model) decides; a context-length error
it answers with comes back as the same message (:func:`too_long_message`): how far over, what
to do, and which option turns lmbridge's own check off. The window is ``maxInputTokens +
maxOutputTokens`` (what Copilot takes as the context window); a model without limits is never
checked.

The error is measured in ``docs/benchmarks/tokens.md``: the estimator's mean error per content
type is at most 5 % (6.7 % for the worst tokenizer, not calibrated) and, once calibrated on
a conversation's usage, at most 4 % for a whole request; 10 % covers both with room. Text a
consumer gets back from a refusal, lmbridge's or any provider's, is recognised by
:func:`is_context_length_text` and its numbers read by :func:`numbers_in`. Pure: no I/O.
"""

from __future__ import annotations

import re

__all__ = [
    "ESTIMATE_ERROR",
    "certainly_over",
    "is_context_length_text",
    "numbers_in",
    "too_long_message",
]

ESTIMATE_ERROR = 0.10
"""How far a token estimate may be off (relative), from the measurements of the estimator."""

WHAT_TO_DO = (
    "Start a new chat, compact this one (/compact), or pick a model with a larger context window"
)

_CONTEXT_TEXT = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|prompt is too long"
    r"|context limit|too many (input )?tokens|input is too long|request_too_large"
    r"|reduce the length|conversation is too long|exceeds the limit of|token count of",
    re.IGNORECASE,
)

_NUM = r"(\d[\d,_]*)"
# (pattern, group of the tokens, group of the limit): the wordings of lmbridge and the big APIs
_NUMBERS = [
    (re.compile(_NUM + r" tokens? > " + _NUM, re.IGNORECASE), 1, 2),  # Anthropic, lmbridge
    (
        re.compile(
            r"maximum context length is " + _NUM + r" tokens.*?(?:resulted in|requested|have) "
            + _NUM,
            re.IGNORECASE | re.DOTALL,
        ),
        2,
        1,
    ),  # OpenAI
    (re.compile(r"count of " + _NUM + r" exceeds the limit of " + _NUM, re.IGNORECASE), 1, 2),
    (re.compile(r"input token count \(" + _NUM + r"\) exceeds the maximum.*?\(" + _NUM + r"\)",
                re.IGNORECASE), 1, 2),  # Gemini
    (re.compile(r"about " + _NUM + r" tokens.*?input limit of " + _NUM, re.IGNORECASE), 1, 2),
]  # fmt: skip


def certainly_over(estimated: int, window: int) -> bool:
    """Whether a request estimated at ``estimated`` tokens is over ``window`` even if the
    estimate were :data:`ESTIMATE_ERROR` too high (``window`` <= 0: no limit, never)."""
    return window > 0 and estimated > window * (1.0 + ESTIMATE_ERROR)


def is_context_length_text(text: str) -> bool:
    """Whether an error's text says the request does not fit the model's context."""
    return bool(_CONTEXT_TEXT.search(text))


def numbers_in(text: str) -> tuple[int, int] | None:
    """``(tokens, limit)`` as a context-length error states them, or ``None``."""
    for pattern, tokens, limit in _NUMBERS:
        match = pattern.search(text)
        if match is not None:
            return _int(match.group(tokens)), _int(match.group(limit))
    return None


def _int(text: str) -> int:
    return int(text.replace(",", "").replace("_", ""))


def too_long_message(
    model: str,
    *,
    estimated: int | None,
    limit: int,
    window: int,
    turn_off: str,
    upstream: str | None = None,
) -> str:
    """The one message of a request too long for ``model``.

    ``upstream`` is what the upstream said when it refused the request (then it was sent);
    ``None`` means lmbridge refused it before sending. ``turn_off`` names the option that turns
    lmbridge's check off.
    """
    if upstream is not None:
        head = f"the conversation is too long for {model}: the model's service refused it ({upstream})"
        if estimated is not None and limit > 0:
            over = estimated - limit
            where = f"{over:,} tokens over" if over > 0 else "within it by lmbridge's estimate"
            head += f"; about {estimated:,} tokens against its input limit of {limit:,}, {where}"
        return f"{head}. {WHAT_TO_DO}."
    assert estimated is not None
    return (
        f"the conversation is too long for {model}: about {estimated:,} tokens (estimated for the "
        f"messages, tools and system prompt) against its input limit of {limit:,}, "
        f"{estimated - limit:,} tokens over, and over its whole {window:,}-token context window "
        f"even if the estimate were {ESTIMATE_ERROR:.0%} high; nothing was sent. {WHAT_TO_DO}. "
        f"To send such requests anyway and let the model's service decide, {turn_off}"
    )
