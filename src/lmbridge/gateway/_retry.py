"""When and how long to wait before trying an upstream request again.

Only failures before the first body byte are retried (a retry after streaming began would
show the user the start of the answer twice): HTTP 408, 429 and 5xx, and connection errors.
The wait grows exponentially, with a little jitter so that many clients do not retry in step,
and honours the upstream's ``Retry-After``. A ``Retry-After`` longer than
:attr:`RetryPolicy.max_retry_after` is not waited for: the request fails at once with a
message saying when to retry, rather than leaving VS Code's chat spinning for minutes.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..config_fields import RETRY_FIELDS, check, provider_field
from ..errors import ConfigError

__all__ = ["RetryPolicy", "is_retryable_status"]


def is_retryable_status(status: int) -> bool:
    """HTTP 408 (timeout), 429 (rate limit) and every 5xx (529 is Anthropic's overload)."""
    return status in (408, 429) or 500 <= status <= 599


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a request that failed before its body began."""

    max_attempts: int = 4
    """Attempts in all, the first included (1: never retry)."""
    initial_delay: float = 1.0
    """The first backoff wait, in seconds."""
    multiplier: float = 2.0
    """Each further wait is this many times the previous one."""
    max_delay: float = 16.0
    """No single backoff wait is longer than this."""
    max_retry_after: float = 60.0
    """The longest ``Retry-After`` honoured; a longer one fails the request at once."""
    jitter: float = 0.1
    """Backoff waits are lengthened by up to this fraction, at random."""
    random: Callable[[], float] = field(default=random.random, compare=False, repr=False)
    """Source of the jitter (tests pin it)."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigError(f"retry.maxAttempts must be at least 1, got {self.max_attempts}")
        for name in ("initial_delay", "max_delay", "max_retry_after", "jitter"):
            if getattr(self, name) < 0:
                raise ConfigError(f"retry.{name}: must not be negative")
        if self.multiplier < 1:
            raise ConfigError(f"retry.multiplier must be at least 1, got {self.multiplier}")

    def delay(self, attempt: int, retry_after: float | None) -> float | None:
        """Seconds to wait after failed attempt number ``attempt`` (1-based), or ``None``: give up."""
        if attempt >= self.max_attempts:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        backoff = min(self.max_delay, self.initial_delay * self.multiplier ** (attempt - 1))
        return backoff * (1.0 + self.jitter * self.random())

    @classmethod
    def from_config(cls, raw: Any, where: str) -> RetryPolicy:
        """From a ``"retry"`` configuration object (camelCase keys), or defaults when ``None``."""
        if raw is None:
            return cls()
        # names, types and limits from the table of lmbridge.config_fields
        check(provider_field("retry"), raw, where)
        values: dict[str, Any] = {}
        for f in RETRY_FIELDS:
            if raw.get(f.name) is not None:
                value = raw[f.name]
                values[_snake(f.name)] = int(value) if f.types == ("integer",) else float(value)
        try:
            return cls(**values)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
