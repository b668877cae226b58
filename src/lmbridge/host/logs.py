"""The host's log level: ``--log-level``, ``$LMBRIDGE_LOG_LEVEL`` and the ``logLevel`` setting.

Which one decides, strongest first:

1. ``lmbridge host --log-level LEVEL``: fixed for the life of the process (someone running the
   host by hand asked for it); the setting is then ignored.
2. The ``logLevel`` setting (``lmbridge.logLevel``) sent in ``initialize`` / ``configure``:
   applied when it arrives, so changing it in VS Code takes effect without a restart.
3. ``$LMBRIDGE_LOG_LEVEL`` (the extension sets it from the same setting): the level from
   start-up until ``initialize``, so the first lines already follow the setting.
4. ``info``.

Whatever the level, API keys are never logged (message bodies at ``debug`` at most).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any, TextIO

__all__ = ["ENV_VAR", "LEVELS", "LogLevels", "parse_level", "setup_logging"]

ENV_VAR = "LMBRIDGE_LOG_LEVEL"
"""The environment variable giving the start-up level."""

LEVELS = ("debug", "info", "warning", "error")
"""The level names the host accepts (those of the ``lmbridge.logLevel`` setting)."""

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def parse_level(value: Any) -> int | None:
    """The :mod:`logging` level for a level name (case and spaces ignored), else ``None``."""
    if not isinstance(value, str):
        return None
    name = value.strip().lower()
    if name == "warn":
        name = "warning"
    return getattr(logging, name.upper()) if name in LEVELS else None


class LogLevels:
    """Applies log level settings to ``logger`` (default: the root logger).

    ``pinned``: the command line fixed the level; :meth:`apply` then changes nothing.
    """

    def __init__(self, logger: logging.Logger | None = None, *, pinned: bool = False) -> None:
        self.logger = logger or logging.getLogger()
        """The logger whose level is set."""
        self.pinned = pinned
        """Whether ``--log-level`` fixed the level."""
        self._say = logging.getLogger("lmbridge.host")

    def apply(self, value: Any) -> str | None:
        """Apply the ``logLevel`` setting; return a problem to report (a bad value), else ``None``.

        ``None`` (the setting not sent) leaves the level as it is.
        """
        if value is None or self.pinned:
            return None
        level = parse_level(value)
        if level is None:
            return (
                f"lmbridge.logLevel: {value!r} is not a log level; use one of "
                f"{', '.join(LEVELS)} (keeping {self.level_name})"
            )
        if level != self.logger.getEffectiveLevel():
            # Said at info under whichever of the two levels shows it (the lower one).
            lowering = level < self.logger.getEffectiveLevel()
            if lowering:
                self.logger.setLevel(level)
            self._say.info("log level: %s (lmbridge.logLevel)", logging.getLevelName(level).lower())
            if not lowering:
                self.logger.setLevel(level)
        return None

    @property
    def level_name(self) -> str:
        """The level in effect, as a name (``"info"``)."""
        return logging.getLevelName(self.logger.getEffectiveLevel()).lower()


def setup_logging(
    cli_level: str | None,
    environ: Mapping[str, str] | None = None,
    stream: TextIO | None = None,
) -> LogLevels:
    """Log to ``stream`` (stderr) at the level of ``--log-level`` or ``$LMBRIDGE_LOG_LEVEL``.

    Returns the :class:`LogLevels` the host applies the ``logLevel`` setting with.
    """
    import os

    environ = os.environ if environ is None else environ
    problem = None
    level = parse_level(cli_level) if cli_level is not None else None
    pinned = level is not None
    if level is None:
        from_env = environ.get(ENV_VAR)
        level = parse_level(from_env) if from_env else None
        if from_env and level is None:
            problem = f"{ENV_VAR}={from_env!r} is not a log level; use one of {', '.join(LEVELS)}"
    logging.basicConfig(stream=stream or sys.stderr, level=level or logging.INFO, format=_FORMAT)
    root = logging.getLogger()
    root.setLevel(level or logging.INFO)
    if problem:
        logging.getLogger("lmbridge.host").warning("%s; logging at info", problem)
    return LogLevels(root, pinned=pinned)
