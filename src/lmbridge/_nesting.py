"""How deep JSON nests: the one limit of the bridge protocol, and the checks against it.

Pure data and functions; the framing (:mod:`lmbridge.host.framing`) refuses a message nested
deeper than :data:`MAX_NESTING`, and the upstream decoders refuse tool-call arguments deeper
than :data:`MAX_VALUE_NESTING` when they parse them, so that an upstream's answer can never
carry a value the next request could not (a tool call goes back to the upstream inside the
following request, a few levels further down).
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Final

__all__ = ["MAX_NESTING", "MAX_VALUE_NESTING", "nested_deeper", "nesting_depth"]

MAX_NESTING: Final = 200
"""Deepest nesting of arrays and objects accepted in a message. Below both parsers' own limits
and orjson's encoder's (254), with room for the protocol's wrapping around a deep value: a tool
schema 100 levels deep passes."""

MAX_VALUE_NESTING: Final = 100
"""Deepest nesting of a value an upstream gives (tool-call arguments): the room
:data:`MAX_NESTING` leaves a value inside the protocol's wrapping."""

_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS: Final = bytes(sorted(set(range(256)) - set(b"[]{}")))


def nesting_depth(data: bytes) -> int:
    """How deep arrays and objects nest in the JSON text ``data`` (strings skipped)."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    steps = (1 if b in b"[{" else -1 for b in brackets)
    return max(itertools.accumulate(steps), default=0)


def nested_deeper(value: Any, limit: int) -> bool:
    """Whether the parsed JSON ``value`` (dicts and lists) nests more than ``limit`` levels, as
    :func:`nesting_depth` counts them (level by level, without recursion: the value may be
    deeper than Python's stack)."""
    level: list[Any] = [value] if isinstance(value, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            children = item.values() if isinstance(item, dict) else item
            below.extend(c for c in children if isinstance(c, (dict, list)))
        level = below
    return False
