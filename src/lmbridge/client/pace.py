"""A pace the user sets for requests to VS Code's models: concurrency and requests per minute.

Users of bridges like this one worry that bursts of automated traffic get their Copilot account
flagged. The user setting ``lmbridge.pace`` (user settings only; off by default) limits what the
host sends to ``vscode.lm`` on behalf of apps and of the loopback endpoint's clients alike::

    "lmbridge.pace": {
        "maxConcurrent": 4,    // requests in flight at once, over all models
        "perMinute": 30,       // requests started in any 60 seconds, over all models
        "perModel": {"maxConcurrent": 2, "perMinute": 10},   // the same, for each model
        "maxWait": 5           // seconds a request may queue for a slot (default 5)
    }

Every limit is optional. A request over a limit waits in line (first come, first served) for up
to ``maxWait`` seconds; one that would wait longer is refused at once with a
:class:`~.classify.ChatRequestError` of kind ``RATE_LIMITED`` whose ``retry-after`` says when a
slot frees (the endpoint answers it in each API's own 429 shape with a ``Retry-After`` header;
its retries before the first part do not retry it). A request holds its concurrency slot until
its stream ends (or is cancelled). Each time a limit bites, ``on_bite`` is told (the host shows
it in the status bar).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .classify import ChatRequestError, ErrorKind

__all__ = ["PACE_CODE", "Pace", "PaceLimits", "Pacer"]

PACE_CODE = "PaceLimit"
"""The :attr:`~.classify.ChatRequestError.raw_code` of a request the pace refused."""


@dataclass(frozen=True, slots=True)
class PaceLimits:
    """One scope's limits (``None``: no limit)."""

    max_concurrent: int | None = None
    per_minute: int | None = None

    def __bool__(self) -> bool:
        return self.max_concurrent is not None or self.per_minute is not None


@dataclass(frozen=True, slots=True)
class Pace:
    """``lmbridge.pace``: overall and per-model limits and the longest wait in line."""

    overall: PaceLimits = field(default_factory=PaceLimits)
    per_model: PaceLimits = field(default_factory=PaceLimits)
    max_wait: float = 5.0

    def __bool__(self) -> bool:
        return bool(self.overall) or bool(self.per_model)

    @classmethod
    def from_setting(cls, value: Any) -> tuple[Pace, list[str]]:
        """The pace of a setting value, and a problem for each unusable field (left out)."""
        if value is None:
            return cls(), []
        if not isinstance(value, Mapping):
            return cls(), [f"lmbridge.pace: expected an object, got {type(value).__name__}"]
        problems: list[str] = []

        def limits(obj: Mapping[str, Any], where: str) -> PaceLimits:
            out: dict[str, int | None] = {}
            for key, name in (("maxConcurrent", "max_concurrent"), ("perMinute", "per_minute")):
                raw = obj.get(key)
                if raw is None:
                    out[name] = None
                elif isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
                    problems.append(
                        f"{where}.{key}: expected a whole number of 1 or more, got {raw!r}"
                    )
                    out[name] = None
                else:
                    out[name] = raw
            return PaceLimits(**out)

        overall = limits(value, "lmbridge.pace")
        raw_model = value.get("perModel")
        per_model = PaceLimits()
        if isinstance(raw_model, Mapping):
            per_model = limits(raw_model, "lmbridge.pace.perModel")
        elif raw_model is not None:
            problems.append("lmbridge.pace.perModel: expected an object")
        wait = value.get("maxWait", 5.0)
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= 600:
            problems.append(f"lmbridge.pace.maxWait: expected seconds from 0 to 600, got {wait!r}")
            wait = 5.0
        unknown = sorted(set(value) - {"maxConcurrent", "perMinute", "perModel", "maxWait"})
        if unknown:
            problems.append(f"lmbridge.pace: unknown fields {', '.join(unknown)} ignored")
        return cls(overall, per_model, float(wait)), problems


class _Window:
    """One scope's state: requests in flight, start times of the last minute, the line."""

    def __init__(self) -> None:
        self.active = 0
        self.starts: collections.deque[float] = collections.deque()
        self.changed = asyncio.Event()
        self.line: collections.deque[object] = collections.deque()  # first come, first served

    def wait_for(self, limits: PaceLimits, now: float) -> float | None:
        """Seconds until a request may start here (0: now); None: only when one ends."""
        while self.starts and now - self.starts[0] >= 60.0:
            self.starts.popleft()
        if limits.max_concurrent is not None and self.active >= limits.max_concurrent:
            return None
        if limits.per_minute is not None and len(self.starts) >= limits.per_minute:
            return 60.0 - (now - self.starts[-limits.per_minute])
        return 0.0


class Pacer:
    """Applies a :class:`Pace` (module docstring); ``pace`` may be replaced at any time."""

    def __init__(
        self,
        pace: Pace | None = None,
        *,
        on_bite: Callable[[dict[str, Any]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pace = pace or Pace()
        self.on_bite = on_bite
        """Called with ``{"model", "scope", "limit", "refused", "waitMs"}`` when a limit bites."""
        self._clock = clock
        self._overall = _Window()
        self._models: dict[str, _Window] = {}

    @contextlib.asynccontextmanager
    async def slot(self, model: str) -> AsyncIterator[None]:
        """Hold a slot for one request to ``model`` while the block runs (nothing when off)."""
        pace = self.pace
        if not pace:
            yield
            return
        window = self._models.setdefault(model, _Window())
        await self._acquire(pace, model, window)
        try:
            yield
        finally:
            for w in (self._overall, window):
                w.active -= 1
                w.changed.set()

    async def _acquire(self, pace: Pace, model: str, window: _Window) -> None:
        start = self._clock()
        deadline = start + pace.max_wait
        ticket = object()
        window.line.append(ticket)  # requests to one model start in the order they came
        bit: str | None = None
        try:
            while True:
                now = self._clock()
                waits = []
                for scope, w, limits in (
                    ("overall", self._overall, pace.overall),
                    ("model", window, pace.per_model),
                ):
                    wait = w.wait_for(limits, now)
                    if wait != 0.0:
                        waits.append((scope, w, limits, wait))
                first = window.line[0] is ticket
                if not waits and first:
                    break
                if waits:
                    scope, w, limits, wait = waits[0]
                    bit = bit or f"{scope}:{self._limit_name(w, limits, now)}"
                    timed = [x[3] for x in waits if x[3] is not None]
                    longest = max(timed) if timed else None
                    if longest is not None and now + longest > deadline:
                        self._refuse(model, scope, bit, longest, start)
                    if longest is None and now >= deadline:
                        self._refuse(model, scope, bit, 1.0, start)
                    timeout = deadline - now if longest is None else min(longest, deadline - now)
                else:
                    timeout = deadline - now  # someone is ahead in line
                    if timeout <= 0:
                        self._refuse(model, "overall", bit or "overall:line", 1.0, start)
                for w in (self._overall, window):
                    w.changed.clear()
                await _wait_any((self._overall.changed, window.changed), max(0.0, timeout))
        finally:
            window.line.remove(ticket)
            if window.line:
                window.changed.set()  # the next in line looks again
        now = self._clock()
        for w in (self._overall, window):
            w.active += 1
            w.starts.append(now)
        if bit is not None:
            self._report(model, bit, refused=False, waited=now - start)

    @staticmethod
    def _limit_name(window: _Window, limits: PaceLimits, now: float) -> str:
        if limits.max_concurrent is not None and window.active >= limits.max_concurrent:
            return f"maxConcurrent={limits.max_concurrent}"
        return f"perMinute={limits.per_minute}"

    def _refuse(self, model: str, scope: str, bit: str, retry: float, start: float) -> None:
        self._report(model, bit, refused=True, waited=self._clock() - start)
        seconds = max(1, math.ceil(retry))
        raise ChatRequestError(
            ErrorKind.RATE_LIMITED,
            f"the pace set in lmbridge.pace ({bit.replace(':', ' ')}) is reached for {model}; "
            f"retry after {seconds} s",
            code=PACE_CODE,
            user_message=(
                "lmbridge's pace limit (the lmbridge.pace setting) is reached: wait a moment, "
                "or raise the limit."
            ),
        )

    def _report(self, model: str, bit: str, *, refused: bool, waited: float) -> None:
        if self.on_bite is None:
            return
        scope, _, limit = bit.partition(":")
        with contextlib.suppress(Exception):  # a failing listener must not fail the request
            self.on_bite(
                {
                    "model": model,
                    "scope": scope,
                    "limit": limit,
                    "refused": refused,
                    "waitMs": round(waited * 1000),
                }
            )


async def _wait_any(events: tuple[asyncio.Event, ...], timeout: float) -> None:
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
