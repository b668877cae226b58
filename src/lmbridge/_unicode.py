"""Valid Unicode from text that may hold UTF-16 surrogates.

JSON allows escapes such as ``"\\ud83d"`` that decode to half a UTF-16 pair; JavaScript servers
produce them when they cut a string between the halves of a pair. No UTF-8 body or VS Code part
can carry a lone half, so every place that takes such text repairs it here.
"""

from __future__ import annotations

import re

__all__ = ["SURROGATE", "is_high_surrogate", "repair_surrogates"]

SURROGATE = re.compile("[\ud800-\udfff]")
"""Matches any UTF-16 surrogate code point."""


def is_high_surrogate(char: str) -> bool:
    """Whether ``char`` is the first half of a UTF-16 pair."""
    return "\ud800" <= char <= "\udbff"


def repair_surrogates(text: str) -> str:
    """``text`` with pairs written as two surrogates joined into one character and lone halves
    replaced by U+FFFD; ``text`` itself (the same object) when there is nothing to repair."""
    if text.isascii() or not SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
