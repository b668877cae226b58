"""JSON from outside, read one way: the host's messages from VS Code and the loopback
endpoint's request bodies.

:func:`loads` takes only what JSON is (RFC 8259): no ``NaN`` or ``Infinity``, and no number
too large for a double (``1e999``). orjson refuses those; the standard library would read them
as floats that no request body can carry (``json.dumps`` writes them as ``Infinity``, which no
upstream and no JavaScript ``JSON.parse`` reads). Nesting is limited to
:data:`~lmbridge._nesting.MAX_NESTING` levels whichever parser runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from ._nesting import MAX_NESTING, nesting_depth

__all__ = ["loads"]


def _orjson_loads() -> Callable[[bytes | str], Any] | None:
    try:  # orjson is the optional "fast" extra
        import orjson
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    parse: Callable[[bytes | str], Any] = orjson.loads
    return parse


_fast: Callable[[bytes | str], Any] | None = _orjson_loads()
"""orjson's parser when it is installed (it refuses what :func:`loads` refuses)."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for JSON")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(data: bytes | str) -> Any:
    """Parse JSON nested at most :data:`MAX_NESTING` deep, its numbers finite (raises
    ``ValueError`` for any failure, with either parser)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    # Counting brackets is quick and bounds the depth; the exact scan runs only past it.
    if raw.count(b"[") + raw.count(b"{") > MAX_NESTING and nesting_depth(raw) > MAX_NESTING:
        raise ValueError(f"nested more than {MAX_NESTING} levels deep")
    try:
        if _fast is not None:
            return _fast(data)
        return json.loads(data, parse_float=_finite, parse_constant=_no_constant)
    except RecursionError:  # not reached within the limit; kept as a last guard
        raise ValueError(f"nested too deep (limit {MAX_NESTING})") from None
