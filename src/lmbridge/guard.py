"""The contract guard: the stream contract (:mod:`lmbridge.contract`) enforced on a provider.

:class:`ContractGuard` is the progress every provider reports to (:func:`lmbridge.provider.respond`
hands it over); a part that breaks the contract raises :class:`ContractViolationError` in the
provider, so the response fails with a message naming the rule instead of VS Code receiving
a bad part. The provider API (:mod:`lmbridge.provider`) re-exports both.
"""

from __future__ import annotations

from collections.abc import Callable

from .contract import ContractChecker
from .errors import LMBridgeError
from .parts import FinishReason, ResponsePart, TextPart, ThinkingPart, ToolCallPart, Usage
from .primitives import CancellationToken, ChatResult

__all__ = ["ContractGuard", "ContractViolationError"]


class ContractViolationError(LMBridgeError):
    """A provider broke the stream contract (the provider's fault, not the upstream's)."""


class ContractGuard:
    """The progress handed to a provider: enforces the stream contract, then forwards.

    Each reported part goes through :class:`lmbridge.contract.ContractChecker` (no tool results
    in a response, tool input is a ``dict``, call ids non-empty and unique, valid MIME types,
    only response parts); a violation raises :class:`ContractViolationError` in the provider,
    so the response fails with a message naming the rule instead of VS Code receiving a bad
    part. Two cases are repaired rather than refused:

    - empty text (and empty thinking without metadata) is dropped: VS Code shows nothing for
      it and some consumers mistake it for the end;
    - after the token is cancelled, parts are dropped silently (the provider may be mid-step).

    After :meth:`close`, reporting is a violation.
    """

    def __init__(
        self,
        sink: Callable[[ResponsePart], None],
        token: CancellationToken = CancellationToken.NONE,
        *,
        allow_thinking: bool = True,
    ) -> None:
        self._sink = sink
        self._token = token
        self._checker = ContractChecker(allow_thinking=allow_thinking)
        self._tool_calls = 0
        self.usage = Usage()
        """Usage reported so far."""
        self.finish_reason: FinishReason | None = None
        """The finish reason reported, if any."""
        self.parts_reported = 0
        """Parts forwarded to the sink."""
        self.dropped = 0
        """Parts dropped (empty, or after cancellation)."""

    def report(self, value: ResponsePart | str) -> None:
        """Check one part and forward it (or drop it, or raise). A ``str`` is a text part, as a
        returned one is."""
        if isinstance(value, str):
            value = TextPart(value)
        if self._token.is_cancellation_requested:
            self._checker.cancel()
            self.dropped += 1
            return
        if (isinstance(value, TextPart) and value.value == "") or (
            isinstance(value, ThinkingPart) and not value.text and not value.metadata
        ):
            self.dropped += 1
            return
        violations = self._checker.observe(value)
        if violations:
            raise ContractViolationError("; ".join(f"{v.rule}: {v.message}" for v in violations))
        if isinstance(value, ToolCallPart):
            self._tool_calls += 1
        self.parts_reported += 1
        self._sink(value)

    def report_usage(self, usage: Usage) -> None:
        """Merge reported usage (later values win field by field)."""
        self.usage = self.usage.merged(usage)

    def finish(self, reason: FinishReason) -> None:
        """Record the finish reason."""
        self.finish_reason = FinishReason(reason)

    def accept(self, item: object) -> None:
        """Take one item a generator-style provider yielded."""
        if isinstance(item, Usage):
            self.report_usage(item)
        elif isinstance(item, FinishReason):
            self.finish(item)
        elif isinstance(item, ChatResult):
            self.report_usage(item.usage)
            if item.finish_reason is not None:
                self.finish(item.finish_reason)
        else:
            self.report(item)  # type: ignore[arg-type]  # report() rejects non-parts clearly

    def close(self) -> ChatResult:
        """End the response; later reports are violations. Returns usage and finish reason."""
        self._checker.end()
        reason = self.finish_reason
        if self._token.is_cancellation_requested:
            reason = FinishReason.CANCELLED
        elif reason is None:
            reason = FinishReason.TOOL_CALLS if self._tool_calls else FinishReason.STOP
        return ChatResult(self.usage, reason)
