"""Text token estimation from character classes, with weights fitted against real tokenizers.

A BPE tokenizer's count for a text depends mostly on which script the text is written in and
on its mix of letters, digits, punctuation and whitespace. The estimator therefore

1. picks a *regime* from the script of the text's non-ASCII characters (ASCII text is split
   into code-like and prose-like by its share of punctuation),
2. maps the UTF-8 bytes of the text to class codes in C (one ``bytes.translate``: ASCII
   lower/upper/digit/space/newline/control/punct, continuation bytes, lead bytes by
   Unicode range) and counts, with one ``bytes.count`` each, the classes and a few class
   pairs (word starts, case changes, punctuation next to letters, indentation),
3. returns the dot product of those counts with the regime's weights for the token family.

Only the features with a non-zero weight in the regime are counted.

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
    "FEATURE_NAMES",
    "PARENT_REGIME",
    "REGIMES",
    "TextEstimator",
    "class_counts",
    "features",
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
"""The byte classes, the first features of the model."""

FEATURE_NAMES: tuple[str, ...] = (
    *CLASS_NAMES,
    "space_lower",
    "space_upper",
    "lower_upper",
    "punct_lower",
    "lower_punct",
    "newline_space",
    "space_script",
)
"""What the weights multiply: byte classes, class pairs, and word starts in the regime's script."""


_INDIC = (
    "devanagari", "bengali", "gurmukhi", "gujarati", "oriya",
    "tamil", "telugu", "kannada", "malayalam", "sinhala",
)  # fmt: skip


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

# Class pairs counted as features: word starts (space then lower or upper case), case
# changes inside identifiers, punctuation next to letters, indentation starts.
_BIGRAMS: tuple[bytes, ...] = (
    b"\x03\x00",  # space, lower
    b"\x03\x01",  # space, upper
    b"\x00\x01",  # lower, upper (camelCase)
    b"\x06\x00",  # punct, lower
    b"\x00\x06",  # lower, punct
    b"\x04\x03",  # newline, space
)
# Word starts in scripts with spaces: space followed by the script's lead byte class.
_SCRIPT_LEAD: dict[str, bytes] = {
    "cyrillic": b"\x03\x0b",
    "greek": b"\x03\x0a",
    "hebrew": b"\x03\x0c",
    "arabic": b"\x03\x0d",
    "indic": b"\x03\x0e",
    **dict.fromkeys(_INDIC, b"\x03\x0e"),
    "thai": b"\x03\x0e",
    "georgian": b"\x03\x0f",
    "other": b"\x03\x0f",
    "myanmar": b"\x03\x0f",
    "ethiopic": b"\x03\x0f",
    "khmer": b"\x03\x0f",
    "hangul": b"\x03\x13",
}
_NCLASSES = len(CLASS_NAMES)
_CLASS_BYTES = [bytes([i]) for i in range(_NCLASSES)]

REGIMES: tuple[str, ...] = (
    "code",
    "prose",
    "latin",
    "latin_de",
    "latin_fr",
    "latin_ibero",
    "latin_nordic",
    "latin_ext",
    "vietnamese",
    "greek",
    "cyrillic",
    "hebrew",
    "arabic",
    "indic",
    *_INDIC,
    "thai",
    "georgian",
    "other",
    "myanmar",
    "ethiopic",
    "khmer",
    "cjk",
    "hangul",
)
"""Regimes that may have their own weights."""

PARENT_REGIME: dict[str, str] = {
    **dict.fromkeys(("latin_de", "latin_fr", "latin_ibero", "latin_nordic"), "latin"),
    **dict.fromkeys(_INDIC, "indic"),
    "myanmar": "other",
    "ethiopic": "other",
    "khmer": "other",
}
"""Where a script without weights of its own takes them from (then ``default``)."""

# (first code point, last code point, regime) for the script of non-ASCII characters.
_SCRIPT_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0080, 0x00FF, "latin"),
    (0x0100, 0x024F, "latin_ext"),
    (0x0370, 0x03FF, "greek"),
    (0x0400, 0x052F, "cyrillic"),
    (0x0530, 0x05FF, "hebrew"),
    (0x0600, 0x08FF, "arabic"),
    *((0x0900 + 0x80 * i, 0x097F + 0x80 * i, name) for i, name in enumerate(_INDIC)),
    (0x0E00, 0x0EFF, "thai"),
    (0x1000, 0x109F, "myanmar"),
    (0x10A0, 0x10FF, "georgian"),
    (0x1100, 0x11FF, "hangul"),
    (0x1200, 0x139F, "ethiopic"),
    (0x1780, 0x17FF, "khmer"),
    (0x0F00, 0x1DFF, "other"),
    (0x1E00, 0x1EFF, "vietnamese"),
    (0x1F00, 0x1FFF, "greek"),
    (0x3000, 0x9FFF, "cjk"),
    (0xAC00, 0xD7AF, "hangul"),
    (0xF900, 0xFAFF, "cjk"),
    (0xFF00, 0xFFEF, "cjk"),
)
_WINDOWS = 8
_NON_ASCII = re.compile("[^\x00-\x7f]")
_PROBES = 7
# Below this share of extra UTF-8 bytes a text counts as ASCII (a few curly quotes or an
# accented name in English stay English).
_ASCII_SHARE = 0.01
# ASCII text whose share of punctuation and digits reaches this is treated as code/data.
_CODE_SHARE = 0.16


# Latin-1 letters that tell language groups apart (tokenizers differ most between them).
_LATIN_GROUP: dict[int, str] = {
    **{ord(c): "latin_de" for c in "äöüßÄÖÜ"},
    **{ord(c): "latin_fr" for c in "éèêëàâçîïôûùœÉÈÊÀÇ"},
    **{ord(c): "latin_ibero" for c in "áíóúñãõìòÁÍÓÚÑ"},
    **{ord(c): "latin_nordic" for c in "åæøÅÆØ"},
}


def _script(cp: int) -> str | None:
    if cp <= 0xFF:
        return _LATIN_GROUP.get(cp, "latin") if cp >= 0xC0 else None
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
    return _regime(text, n, counts[7], counts[2] + counts[6])


def _regime(text: str, n: int, cont: float, digit_punct: float) -> str:
    if cont >= _ASCII_SHARE * n and not text.isascii():
        script = _vote(text)
        if script is not None:
            return script
    return "code" if digit_punct >= _CODE_SHARE * n else "prose"


def _classes(text: str, sample_bytes: int | None) -> tuple[bytes, float]:
    """The text's bytes mapped to class codes (maybe sampled), and the scale to the whole."""
    data = text.encode("utf-8", "surrogatepass")
    total = len(data)
    if sample_bytes is not None and total > sample_bytes:
        width = max(1, sample_bytes // _WINDOWS)
        step = total // _WINDOWS
        data = b"".join(data[i * step : i * step + width] for i in range(_WINDOWS))
        return data.translate(_CLASS_TABLE), total / len(data)
    return data.translate(_CLASS_TABLE), 1.0


def class_counts(text: str, sample_bytes: int | None = None) -> list[float]:
    """Bytes of each class in ``text`` (UTF-8), in :data:`CLASS_NAMES` order.

    With ``sample_bytes``, a longer text is counted on evenly spaced windows of that many
    bytes in all, and the counts are scaled to the whole text.
    """
    classes, scale = _classes(text, sample_bytes)
    count = classes.count
    return [count(c) * scale for c in _CLASS_BYTES]


def features(text: str, sample_bytes: int | None = None) -> tuple[str, list[float]]:
    """The text's regime and its :data:`FEATURE_NAMES` values: the model's input."""
    classes, scale = _classes(text, sample_bytes)
    count = classes.count
    values = [count(c) * scale for c in _CLASS_BYTES]
    regime = _regime(text, len(text), values[7], values[2] + values[6])
    for pattern in _BIGRAMS:
        values.append(count(pattern) * scale)
    lead = _SCRIPT_LEAD.get(regime)
    values.append(count(lead) * scale if lead else 0.0)
    return regime, values


class TextEstimator:
    """Estimates the tokens of texts for one weight set (see :data:`weights.WEIGHTS`).

    ``weight_set`` is a key of :data:`~lmbridge.tokens.weights.WEIGHTS`
    (``o200k``, ``cl100k``, ``anthropic`` ...); ``sample_bytes`` bounds the bytes counted per
    text (``None``: count every byte).
    """

    __slots__ = ("_by_regime", "_default", "sample_bytes", "weight_set")

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
        # Per regime, the (pattern, weight) pairs with a non-zero weight: only those are
        # counted at run time.
        self._by_regime: dict[str, tuple[tuple[bytes, float], ...]] = {}
        for regime, ws in table[weight_set].items():
            if len(ws) != len(FEATURE_NAMES):
                raise ValueError(
                    f"weights {weight_set}/{regime}: {len(ws)} values, "
                    f"expected {len(FEATURE_NAMES)}"
                )
            patterns = [*_CLASS_BYTES, *_BIGRAMS, _SCRIPT_LEAD.get(regime, b"")]
            self._by_regime[regime] = tuple(
                (p, float(w)) for p, w in zip(patterns, ws, strict=True) if w and p
            )
        self._default = self._by_regime["default"]

    def estimate(self, text: str) -> float:
        """The estimated token count of ``text`` (a float; callers round once at the end)."""
        if not text:
            return 0.0
        classes, scale = _classes(text, self.sample_bytes)
        count = classes.count
        n = len(text)
        # the counts the regime choice needs are reused by the weighted sum
        known = {b"\x02": count(b"\x02"), b"\x06": count(b"\x06")}
        known[b"\x07"] = 0 if text.isascii() else count(b"\x07")
        regime = _regime(text, n, known[b"\x07"] * scale, (known[b"\x02"] + known[b"\x06"]) * scale)
        weights = self._by_regime.get(regime)
        if weights is None:
            weights = self._by_regime.get(PARENT_REGIME.get(regime, ""), self._default)
        get = known.get
        total = 0.0
        for pattern, w in weights:
            c = get(pattern)
            total += (count(pattern) if c is None else c) * w
        return scale * total
