"""Makes ``tests/support`` importable from the e2e tests (as it is for the tests beside it)."""

from __future__ import annotations

import sys
from pathlib import Path

__all__: list[str] = []

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
