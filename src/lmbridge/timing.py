"""A timing log of the hops one request takes, for measuring where its time goes.

Off unless the ``LMBRIDGE_TIMING`` environment variable names a file when the process starts
(``benchmarks/load.py --hops`` sets it for the VS Code it starts, whose extension host and
lmbridge host inherit it). Then :func:`mark` appends one JSON line per event::

    {"t": 123456.789, "pid": 4242, "at": "host.chat", ...fields}

``t`` is milliseconds on the system's monotonic clock (``CLOCK_MONOTONIC`` on Linux, which the
extension's ``process.hrtime`` reads too), so the lines of the host, the extension host and the
benchmark line up. The events carry no content (no prompt, no key): names, ids and counts.
Disabled, :func:`mark` costs one comparison.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import IO, Any

__all__ = ["ENV", "enabled", "mark"]

ENV = "LMBRIDGE_TIMING"
"""The environment variable naming the timing log."""

_PATH = os.environ.get(ENV) or None
_lock = threading.Lock()
_file: IO[str] | None = None


def enabled() -> bool:
    """Whether this process writes a timing log."""
    return _PATH is not None


def mark(at: str, **fields: Any) -> None:
    """Log that ``at`` happened now (nothing when the log is off). A log that cannot be
    written is turned off: timing must never fail a request."""
    global _PATH, _file
    if _PATH is None:
        return
    line = json.dumps({"t": time.monotonic_ns() / 1e6, "pid": os.getpid(), "at": at, **fields})
    with _lock:
        try:
            if _file is None:
                _file = open(_PATH, "a", encoding="utf-8")  # noqa: SIM115 (kept open)
            _file.write(line + "\n")
            _file.flush()
        except OSError:
            _PATH = None
