"""Text token estimation from character classes, with weights fitted against real tokenizers.

A BPE tokenizer's count for a text depends mostly on which script the text is written in and
on its mix of letters, digits, punctuation and whitespace. The estimator therefore

1. picks a *regime* from the script of the text's non-ASCII characters (ASCII text is split
   into code-like and prose-like by its share of punctuation),
2. counts the UTF-8 bytes of the text by class in C (one ``bytes.translate`` to class codes
   and one ``bytes.count`` per class: ASCII lower/upper/digit/space/newline/control/punct,
   continuation bytes, and lead bytes by Unicode range),
3. returns the dot product of those counts with the regime's weights for the token family.

The weights are fitted offline by ``tools/fit_token_weights.py`` (non-negative least squares
on relative error, per tokenizer and regime) and shipped in :mod:`lmbridge.tokens.weights`.

Texts longer than ``sample_bytes`` are counted on evenly spaced windows that add up to that
many bytes, and scaled; this bounds the cost of very long texts. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from .weights import WEIGHTS

__all__ = [
    "CLASS_NAMES",
    "REGIMES",
    "TextEstimator",
    "class_counts",
    "regime_of",
]

CLASS_NAMES: tuple[str, ...] = (
    "lower",  # a-z
    "upper",  # A-Z
    "digit",
    "space",
    "newline",  # \n \r
    "control",  # tab and other C0 controls, DEL
    "punct",  # other printable ASCII
    "cont",  # UTF-8 continuation bytes 80-BF
    "latin1",  # lead C2-C3: U+0080-00FF
    "latin_ext",  # lead C4-CA: U+0100-02BF
    "greek",  # lead CB-CF: modifiers, combining marks, Greek
    "cyrillic",  # lead D0-D4
    "hebrew",  # lead D5-D7: Armenian, Hebrew
    "arabic",  # lead D8-DF: Arabic, Syriac, Thaana, NKo
    "e0",  # lead E0: U+0800-0FFF, Indic scripts, Thai, Lao, Tibetan
    "e1",  # lead E1: U+1000-1FFF, Myanmar, Georgian, Jamo, Ethiopic, Khmer, Latin ext.
    "e2",  # lead E2: U+2000-2FFF, punctuation, symbols, arrows, box drawing
    "e3",  # lead E3: U+3000-3FFF, CJK punctuation, kana
    "cjk",  # lead E4-E9: U+4000-9FFF, CJK ideographs
    "hangul",  # lead EA-ED: U+A000-DFFF, Hangul syllables
    "ef",  # lead EE-EF: private use, fullwidth forms
    "astral",  # lead F0-F4 (emoji ...) and invalid bytes
)
"""The byte classes, in the order of the weights."""


def _class_table() -> bytes:
    table = bytearray(256)
    spans = (
        (0x00, 0x1F, 5), (0x20, 0x20, 3), (0x21, 0x7E, 6), (0x7F, 0x7F, 5),
        (0x30, 0x39, 2), (0x41, 0x5A, 1), (0x61, 0x7A, 0), (0x0A, 0x0A, 4), (0x0D, 0x0D, 4),
        (0x80, 0xBF, 7), (0xC0, 0xC1, 21), (0xC2, 0xC3, 8), (0xC4, 0xCA, 9), (0xCB, 0xCF, 10),
        (0xD0, 0xD4, 11), (0xD5, 0xD7, 12), (0xD8, 0xDF, 13), (0xE0, 0xE0, 14),
        (0xE1, 0xE1, 15), (0xE2, 0xE2, 16), (0xE3, 0xE3, 17), (0xE4, 0xE9, 18),
        (0xEA, 0xED, 19), (0xEE, 0xEF, 20), (0xF0, 0xFF, 21),
    )  # fmt: skip
    for lo, hi, cls in spans:  # later spans refine earlier ones
        for i in range(lo, hi + 1):
            table[i] = cls
    return bytes(table)


_CLASS_TABLE = _class_table()
_NCLASSES = len(CLASS_NAMES)
_CLASS_BYTES = [bytes([i]) for i in range(_NCLASSES)]

REGIMES: tuple[str, ...] = (
    "code",
    "prose",
    "latin",
    "greek",
    "cyrillic",
    "hebrew",
    "arabic",
    "indic",
    "thai",
    "georgian",
    "other",
    "cjk",
    "hangul",
)
"""Regimes with their own weights. A family without weights for one uses ``default``."""

# (first code point, last code point, regime) for the script of non-ASCII characters.
_SCRIPT_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0080, 0x024F, "latin"),
    (0x0370, 0x03FF, "greek"),
    (0x0400, 0x052F, "cyrillic"),
    (0x0530, 0x05FF, "hebrew"),
    (0x0600, 0x08FF, "arabic"),
    (0x0900, 0x0DFF, "indic"),
    (0x0E00, 0x0EFF, "thai"),
    (0x10A0, 0x10FF, "georgian"),
    (0x1100, 0x11FF, "hangul"),
    (0x0F00, 0x1DFF, "other"),
    (0x1E00, 0x1EFF, "latin"),
    (0x1F00, 0x1FFF, "greek"),
    (0x3000, 0x9FFF, "cjk"),
    (0xAC00, 0xD7AF, "hangul"),
    (0xF900, 0xFAFF, "cjk"),
    (0xFF00, 0xFFEF, "cjk"),
)
_WINDOWS = 8
_NON_ASCII = re.compile("[^\x00-\x7f]")
_PROBES = 5
# Below this share of extra UTF-8 bytes a text counts as ASCII (a few curly quotes or an
# accented name in English stay English).
_ASCII_SHARE = 0.01
# ASCII text whose share of punctuation and digits reaches this is treated as code/data.
_CODE_SHARE = 0.16


def _script(cp: int) -> str | None:
    for lo, hi, regime in _SCRIPT_RANGES:
        if lo <= cp <= hi:
            return regime
    return None


def _vote(text: str) -> str | None:
    """The script most of a few evenly spaced non-ASCII characters belong to."""
    n = len(text)
    votes: dict[str, int] = {}
    for i in range(_PROBES):
        m = _NON_ASCII.search(text, n * i // _PROBES)
        if m is None:
            continue
        script = _script(ord(m.group()))
        if script is not None:
            votes[script] = votes.get(script, 0) + 1
    return max(votes, key=votes.__getitem__) if votes else None


def regime_of(text: str, counts: Sequence[float] | None = None) -> str:
    """The regime of a text: its main non-ASCII script, else ``code`` or ``prose``.

    The script is voted from a few non-ASCII characters found at evenly spaced places, so
    the cost does not grow with the text. ``counts`` are the text's :func:`class_counts`.
    """
    n = len(text)
    if counts is None:
        counts = class_counts(text)
    if not text.isascii() and counts[7] >= _ASCII_SHARE * n:
        script = _vote(text)
        if script is not None:
            return script
    return "code" if (counts[2] + counts[6]) >= _CODE_SHARE * n else "prose"


def class_counts(text: str, sample_bytes: int | None = None) -> list[float]:
    """Bytes of each class in ``text`` (UTF-8), in :data:`CLASS_NAMES` order.

    With ``sample_bytes``, a longer text is counted on evenly spaced windows of that many
    bytes in all, and the counts are scaled to the whole text.
    """
    data = text.encode("utf-8", "surrogatepass")
    scale = 1.0
    total = len(data)
    if sample_bytes is not None and total > sample_bytes:
        width = max(1, sample_bytes // _WINDOWS)
        step = total // _WINDOWS
        data = b"".join(data[i * step : i * step + width] for i in range(_WINDOWS))
        scale = total / len(data)
    classes = data.translate(_CLASS_TABLE)
    count = classes.count
    if scale == 1.0:
        return [float(count(c)) for c in _CLASS_BYTES]
    return [count(c) * scale for c in _CLASS_BYTES]


class TextEstimator:
    """Estimates the tokens of texts for one weight set (see :data:`weights.WEIGHTS`).

    ``weight_set`` is a key of :data:`~lmbridge.tokens.weights.WEIGHTS`
    (``o200k``, ``cl100k``, ``anthropic`` ...); ``sample_bytes`` bounds the bytes counted per
    text (``None``: count every byte).
    """

    __slots__ = (
        "_ascii",
        "_ascii_default",
        "_by_regime",
        "_default",
        "sample_bytes",
        "weight_set",
    )

    def __init__(
        self,
        weight_set: str,
        *,
        sample_bytes: int | None = None,
        weights: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
    ) -> None:
        table = WEIGHTS if weights is None else weights
        if weight_set not in table:
            raise ValueError(
                f"unknown weight set {weight_set!r}; known: {', '.join(sorted(table))}"
            )
        self.weight_set = weight_set
        self.sample_bytes = sample_bytes
        regimes = table[weight_set]
        # Only the classes with a non-zero weight are counted at run time.
        self._by_regime = {
            regime: tuple((i, float(w)) for i, w in enumerate(ws) if w)
            for regime, ws in regimes.items()
        }
        self._default = self._by_regime["default"]
        self._ascii = {regime: tuple(float(w) for w in ws[:7]) for regime, ws in regimes.items()}
        self._ascii_default = self._ascii["default"]

    def estimate(self, text: str) -> float:
        """The estimated token count of ``text`` (a float; callers round once at the end)."""
        if not text:
            return 0.0
        if self.sample_bytes is not None:
            counts = class_counts(text, self.sample_bytes)
            weights = self._by_regime.get(regime_of(text, counts), self._default)
            return sum(counts[i] * w for i, w in weights)
        if not text.isascii():
            # Count only what the regime choice and the regime's non-zero weights need.
            classes = text.encode("utf-8", "surrogatepass").translate(_CLASS_TABLE)
            count = classes.count
            n = len(text)
            cont = count(b"\x07")
            regime = _vote(text) if cont >= _ASCII_SHARE * n else None
            if regime is None:
                digit_punct = count(b"\x02") + count(b"\x06")
                regime = "code" if digit_punct >= _CODE_SHARE * n else "prose"
            weights = self._by_regime.get(regime, self._default)
            return sum((cont if i == 7 else count(_CLASS_BYTES[i])) * w for i, w in weights)
        # ASCII fast path: only the ASCII classes can be non-zero, and "lower" (the most
        # frequent) is what the others leave.
        classes = text.encode("ascii").translate(_CLASS_TABLE)
        count = classes.count
        n = len(text)
        upper, digit, space, newline, control, punct = (
            count(b"\x01"), count(b"\x02"), count(b"\x03"),
            count(b"\x04"), count(b"\x05"), count(b"\x06"),
        )  # fmt: skip
        lower = n - upper - digit - space - newline - control - punct
        regime = "code" if digit + punct >= _CODE_SHARE * n else "prose"
        w = self._ascii.get(regime, self._ascii_default)
        return (
            lower * w[0] + upper * w[1] + digit * w[2] + space * w[3]
            + newline * w[4] + control * w[5] + punct * w[6]
        )  # fmt: skip
