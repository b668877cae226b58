"""A per-model correction factor learned from the input tokens upstreams report.

The seeds keep an exponential moving average of ``actual / estimated`` over whole requests
(``factor = 0.7 * factor + 0.3 * ratio``). Two changes make it learn faster and steadier here:

- The ratio is taken over the part of a request that was *estimated* (messages not in the
  cache), not the whole request: cached messages already carry real counts, and including
  them would pull the factor towards 1 whatever the estimator's bias.
- Each observation's step is scaled by how much estimated text it covers (a 20-token
  "thanks" moves the factor far less than a 2,000-token file), and outliers are clipped, so
  one odd request cannot throw the factor off.

Pure: the factor is persisted by the caller (see :class:`~lmbridge.tokens.store.TokenStore`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Calibration"]

_ALPHA = 0.3  # the seeds' EMA weight for a full-size observation
_FULL_WEIGHT_TOKENS = 400.0  # an observation covering this many estimated tokens counts fully
_MIN_RATIO, _MAX_RATIO = 0.5, 2.0  # clip single observations
_MIN_FACTOR, _MAX_FACTOR = 0.5, 2.0  # the factor never leaves this band


@dataclass(slots=True)
class Calibration:
    """The correction factor for one model, with the number of observations behind it."""

    factor: float = 1.0
    """Multiply raw estimates by this."""
    observations: int = 0
    """How many usages were observed."""
    weight: float = 0.0
    """The evidence behind the factor (full-size observations, capped at 1 / alpha)."""

    def observe(self, estimated: float, actual: float) -> None:
        """Learn from one request: ``estimated`` raw tokens turned out to be ``actual``."""
        if estimated <= 0 or actual <= 0:
            return
        ratio = min(_MAX_RATIO, max(_MIN_RATIO, actual / estimated))
        weight = min(1.0, estimated / _FULL_WEIGHT_TOKENS)
        # Until about 1/alpha full observations are in, the factor is their weighted mean
        # (a new model converges in a few turns); from then on an EMA with weight alpha.
        alpha = weight / min(self.weight + weight, 1.0 / _ALPHA)
        self.weight = min(1.0 / _ALPHA, self.weight + weight)
        factor = self.factor + alpha * (ratio - self.factor)
        self.factor = min(_MAX_FACTOR, max(_MIN_FACTOR, factor))
        self.observations += 1
