"""Text token estimation from character classes, with weights fitted against real tokenizers.

A BPE tokenizer's count for a text depends mostly on which script the text is written in and
on its mix of letters, digits, punctuation and whitespace. The estimator therefore

1. maps the UTF-8 bytes of the text to class codes (ASCII lower/upper/digit/space/newline/
   control/punct, continuation bytes, lead bytes by Unicode range) and counts the classes
   and a few class pairs (word starts, case changes, punctuation next to letters,
   indentation, word starts in the text's script),
2. picks a *regime* from the script of the text's non-ASCII characters (ASCII text is a
   lockfile, SQL, a shell script or JavaScript/TypeScript by a few keywords at its start,
   else code-like by its share of punctuation and digits, else English or another
   Latin-script language by how often "th" occurs),
3. returns the dot product of those counts with the regime's weights for the token family.

All counting is done by a few C-level passes (``encode``, ``translate``, ``count``,
``decode``), never a Python loop over the text; see the cost notes above :func:`_measure`.
Only the class pairs with a non-zero weight in the regime are counted.

The weights are fitted offline by ``tools/fit_token_weights.py`` (non-negative least squares
on relative error, per tokenizer and regime) and shipped in :mod:`lmbridge.tokens.weights`.

Texts longer than ``sample_bytes`` are counted on evenly spaced windows that add up to that
many bytes, and scaled; this bounds the cost of very long texts. Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from codecs import utf_16_le_decode as _utf16
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter, mul
from zlib import adler32 as _adler32

from .weights import WEIGHTS

__all__ = [
    "CLASS_NAMES",
    "FEATURE_NAMES",
    "PARENT_REGIME",
    "REGIMES",
    "RUN_WIDTH",
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
    "punct_punct",
    "space_punct",
    "punct_space",
    "upper_lower",
    "upper_upper",
    "lower_digit",
    "digit_lower",
    "punct_upper",
    "space_script",
    "digit_run",
    "digit3",
    "emoji",
    "newline_run",
    "space_run",
    "punct_run",
    "symbol_run",
    "line_run",
    "heavy_run",
)
"""What the weights multiply: byte classes, class pairs, word starts in the regime's script,
and the run features that tokenizers treat specially:

- ``digit_run``: runs of ASCII digits, ``digit3``: whole groups of three digits in them
  (o200k, cl100k and Llama 3 split numbers into groups of at most three digits, so a number
  costs about one token per group, not per digit);
- ``emoji``: characters starting with F0 9F (emoji and pictographs, mostly one or two tokens
  each), taken out of ``astral`` (the other astral characters: rarer, several tokens each);
- ``newline_run`` / ``space_run``: bytes in runs of newlines (counted in groups of 4) and
  spaces (groups of 8), taken out of ``newline`` / ``space``: vocabularies hold long runs
  (blank lines, indentation) as single tokens, so such bytes cost a small fraction of a token;
- ``punct_run``: runs of at least 8 of one ASCII punctuation character or tab, taken out of
  ``punct`` / ``control``, counted as the tokens they take: ``ceil(length / width)``, where
  the width (:data:`RUN_WIDTH`) is the longest run of that character the tokenizers hold as
  one token (64 for ``-=*#_./``, 4 for ``|``, 2 for brackets: measured, see there);
- ``symbol_run`` / ``line_run`` / ``heavy_run``: runs of at least 4 of one character
  U+2000-2FFF (box drawing, arrows, dashes), taken out of ``e2`` / ``cont``, counted in groups
  of 8 characters (a started group counts); ``line_run`` holds the runs of ``─`` (U+2500, the
  common horizontal line), ``heavy_run`` those of ``━`` (U+2501, progress bars),
  ``symbol_run`` the others (``═█`` ...): the tokenizers differ up to eight-fold on them
  (``═`` x 8 is one o200k token and four cl100k ones; ``━`` x 16 is one Llama 3 token and
  eight cl100k ones), the weights say by how much.

As model inputs ``newline``, ``space``, ``punct``, ``control``, ``e2``, ``cont`` and
``astral`` therefore count the bytes outside those runs and emoji; :func:`class_counts`
returns the plain class counts.
"""


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
    b"\x06\x06",  # punct, punct (operators, closing brackets: often one token)
    b"\x03\x06",  # space, punct (" =", " {", " (": tokens of their own)
    b"\x06\x03",  # punct, space
    b"\x01\x00",  # upper, lower (capitalised words; base64)
    b"\x01\x01",  # upper, upper (acronyms, constants; base64)
    b"\x00\x02",  # lower, digit (identifiers, hashes)
    b"\x02\x00",  # digit, lower
    b"\x06\x01",  # punct, upper
)
# Word starts in scripts with spaces: space followed by the script's lead byte class.
_SCRIPT_LEAD: dict[str, bytes] = {
    "cyrillic": b"\x03\x0b",
    "russian": b"\x03\x0b",
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

REGIMES: tuple[str, ...] = (
    "code",
    "code_dense",
    "script",
    "lockfile",
    "shell",
    "sql",
    "blob",
    "prose",
    "prose_mixed",
    "latin",
    "latin_ascii",
    "latin_de",
    "latin_fr",
    "latin_ibero",
    "latin_nordic",
    "latin_ext",
    "vietnamese",
    "greek",
    "cyrillic",
    "russian",
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
    "symbols",
)
"""Regimes that may have their own weights (``symbols``: text whose non-ASCII characters are
mostly emoji and other astral characters; ``blob``: base64, hex and the like; ``russian``:
Cyrillic text with the letters only Russian uses often, see :data:`_RUSSIAN_SHARE`;
``script`` (JavaScript, TypeScript), ``lockfile``, ``shell`` and ``sql``: ASCII text that
:func:`_content_type` recognises by a few keywords at its start)."""

PARENT_REGIME: dict[str, str] = {
    "code_dense": "code",
    **dict.fromkeys(("script", "lockfile", "shell", "sql"), "code"),
    "prose_mixed": "prose",
    **dict.fromkeys(
        ("latin_ascii", "latin_de", "latin_fr", "latin_ibero", "latin_nordic"), "latin"
    ),
    **dict.fromkeys(_INDIC, "indic"),
    "russian": "cyrillic",
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
_WINDOWS = 16
_NON_ASCII = re.compile("[^\x00-\x7f]")
_PROBES = 7
# Below this share of extra UTF-8 bytes a text counts as ASCII (a few curly quotes or an
# accented name in English stay English).
_ASCII_SHARE = 0.01
# ASCII text whose share of punctuation and digits reaches this is treated as code/data.
_CODE_SHARE = 0.16
# ... and from this share on as dense code/data (minified, lockfiles, tables): the cost of a
# byte changes with the share, so each band of it gets weights of its own
_DENSE_SHARE = 0.27
# ASCII prose from this share of punctuation and digits on is mixed prose (docs with code,
# changelogs, Markdown)
_MIXED_SHARE = 0.08
# ASCII prose with fewer "th" per character than this is taken for another Latin language.
_TH_SHARE = 0.0015
# Text of at least _BLOB_MIN characters with at most this share of whitespace and at most
# _BLOB_PUNCT of punctuation is a blob (base64, hex, hashes): a regime of its own, since
# random letters and digits cost several times more tokens than words do.
_BLOB_MIN = 64
_BLOB_BLANK = 0.03
_BLOB_PUNCT = 0.08
# Cyrillic text in which "ы" and "э" make at least this share of the characters is Russian
# (about 2% in Russian prose; Ukrainian, Bulgarian, Serbian and Macedonian have neither):
# the tokenizers' vocabularies hold far more Russian than other Cyrillic languages, so
# Russian takes fewer tokens per letter and gets weights of its own.
_RUSSIAN_SHARE = 0.008


# Latin-1 letters that tell language groups apart (tokenizers differ most between them).
_LATIN_GROUP: dict[int, str] = {
    **{ord(c): "latin_de" for c in "äöüßÄÖÜ"},
    **{ord(c): "latin_fr" for c in "éèêëàâçîïôûùœÉÈÊÀÇ"},
    **{ord(c): "latin_ibero" for c in "áíóúñãõìòÁÍÓÚÑ"},
    **{ord(c): "latin_nordic" for c in "åæøÅÆØ"},
}


def _script_table() -> tuple[bytes, tuple[str | None, ...]]:
    """Index of each BMP code point's script in the returned names (0: none)."""
    names: list[str | None] = [None]
    table = bytearray(0x10000)
    # in reverse, so that the first range that holds a code point wins
    groups = ((cp, cp, group) for cp, group in _LATIN_GROUP.items() if cp <= 0xFF)
    for lo, hi, regime in (*reversed(_SCRIPT_RANGES), *groups):
        if regime not in names:
            names.append(regime)
        table[lo : hi + 1] = bytes([names.index(regime)]) * (hi - lo + 1)
    table[0x80:0xC0] = bytes(0x40)  # Latin-1 controls and symbols say nothing of the language
    return bytes(table), tuple(names)


_SCRIPT_INDEX, _SCRIPT_NAMES = _script_table()


def _vote(text: str) -> str | None:
    """The script most of a few evenly spaced non-ASCII characters belong to."""
    n = len(text)
    votes: dict[str, int] = {}
    search = _NON_ASCII.search
    found = -1  # where the last search found a character: probes up to there find it again
    for i in range(_PROBES):
        pos = n * i // _PROBES
        if pos > found:
            cp = ord(text[pos])
            if cp < 0x80:  # look further only when the probe itself is ASCII
                m = search(text, pos)
                if m is None:
                    break  # no non-ASCII character left for this or any later probe
                found = m.start()
                cp = ord(m.group())
        if cp < 0x10000:
            script = _SCRIPT_NAMES[_SCRIPT_INDEX[cp]]
        else:  # astral: CJK extension ideographs (planes 2-3), else emoji and other symbols
            script = "cjk" if 0x20000 <= cp < 0x40000 else "symbols"
        if script is not None:
            votes[script] = votes.get(script, 0) + 1
    return max(votes, key=votes.__getitem__) if votes else None


def regime_of(text: str, counts: Sequence[float] | None = None) -> str:
    """The regime of a text: its main non-ASCII script, else ``blob``, ``code`` or ``prose``.

    The script is voted from a few non-ASCII characters found at evenly spaced places, so
    the cost does not grow with the text. ``counts`` are the text's :func:`class_counts`.
    """
    n = len(text)
    if counts is None:
        counts = class_counts(text)
    return _regime(text, n, counts[7], counts[2], counts[6], counts[3] + counts[4] + counts[5])


def _fewer(text: str, sub: str, limit: float) -> bool:
    """``text.count(sub) < limit``, stopping at the occurrence that reaches the limit (in
    English prose the few "th" needed are found in the first lines, not by a whole pass)."""
    need = math.ceil(limit)  # an int count is below ``limit`` exactly when below its ceiling
    if need > 8:
        return text.count(sub) < limit
    find = text.find
    pos = 0
    step = len(sub)  # occurrences as ``count`` takes them: without overlap
    for _ in range(need):
        pos = find(sub, pos)
        if pos < 0:
            return True
        pos += step
    return False


def _regime(text: str, n: float, cont: float, digit: float, punct: float, blank: float) -> str:
    if cont >= _ASCII_SHARE * n and not text.isascii():
        script = _vote(text)
        if script == "cyrillic" and text.count("ы") + text.count("э") >= _RUSSIAN_SHARE * cont:
            # one continuation byte per Cyrillic letter: ``cont`` stands for their number
            return "russian"
        if script is not None:
            return script
    elif n >= _BLOB_MIN and blank <= _BLOB_BLANK * n and punct <= _BLOB_PUNCT * n:
        # hardly any whitespace or punctuation: base64, hex, hashes (minified JSON and URL
        # lists have too much punctuation to be taken for one)
        return "blob"
    kind = _content_type(text[:_HEAD])
    if kind is not None:
        return kind
    if digit + punct >= _CODE_SHARE * n:
        return "code_dense" if digit + punct >= _DENSE_SHARE * n else "code"
    # English is the one Latin-script language where "th" is frequent: ASCII prose without
    # it is most likely another language written without accents (Dutch, Italian,
    # Indonesian ...), which tokenizers split into more tokens than English.
    if _fewer(text, "th", _TH_SHARE * n):
        return "latin_ascii"
    return "prose_mixed" if digit + punct >= _MIXED_SHARE * n else "prose"


# Content types whose tokens per byte class differ from other code by more than the class
# counts tell (lockfiles: hashes and registry URLs cost far more than their letters suggest;
# JavaScript/TypeScript: long identifiers made of common words cost less), recognised by
# keywords in the first _HEAD characters. Measured on the fitting corpus and on the
# held-out packages (docs/benchmarks/tokens.md): with these regimes the lockfile error fell
# from 8-11% to 2-3%. Each test is a C-level substring search over the head only.
_HEAD = 600


def _content_type(head: str) -> str | None:
    """``lockfile``, ``sql``, ``shell``, ``script`` (JavaScript/TypeScript) or ``None``."""
    # chained ``in`` tests: a generator over a tuple of marks costs more than the searches.
    # A mark with a rarer character is only searched where that character is (a search for
    # one character costs a twentieth of one for a word)
    if (
        ("y" in head and "integrity" in head)
        or ("v" in head and "resolved" in head)
        or ("k" in head and "checksum" in head)
        or ("[" in head and "[[package]]" in head)
        or ('"' in head and '"hashes"' in head)
        or ("5" in head and "sha512-" in head)
    ):
        return "lockfile"
    semicolon = ";" in head
    # every SQL mark has an upper-case E
    if (
        semicolon
        and "E" in head
        and (
            "CREATE " in head
            or "SELECT " in head
            or "INSERT " in head
            or "ALTER " in head
            or "COMMENT ON" in head
        )
    ):
        return "sql"
    hash_sign = "#" in head
    if (
        (hash_sign and "#!/" in head)
        or "echo " in head
        or (semicolon and ("; then\n" in head or "; do\n" in head))
        or "esac" in head
    ):
        return "shell"
    if (
        semicolon
        and (
            ("=>" in head)
            or "function" in head
            or "const " in head
            or ("x" in head and "export " in head)
            or ("." in head and "this." in head)
        )
        and not (
            (hash_sign and ("#include" in head or "#define" in head))
            or ("-" in head and "->" in head)
            or "def " in head
        )
    ):
        return "script"
    return None


# ----------------------------------------------------------------------------- counting
#
# Cost model (CPython 3.11, measured on 2,000-character chunks of many kinds): a C-level
# pass over the bytes costs 0.3-1.5 ns per byte, while a Python-level step per byte costs
# 10-50 ns. The counting is therefore a handful of C passes. Passes whose loop branches on
# the data (``count`` of a frequent class, ``translate`` with deletion) cost the most on
# varied text, since the branches cannot be predicted; ``translate``, ``decode``, slicing
# and ``zlib.adler32`` do not branch, and ``in`` of one character is a ``memchr``:
#
# - one ``encode`` (a copy for ASCII text) and one ``translate`` to class codes;
# - ASCII text: one ``count`` each for upper case, digits, newlines, controls and
#   punctuation; space and lower case (the two densest classes) from the sum of all class
#   codes (``adler32``'s first half, exact below its modulus) and the length;
# - other text: one ``translate(None, delete)`` keeps the ASCII class codes but lower case
#   (a much shorter string), on which the five are counted and space is what is left; lower
#   case is what is left of the ASCII bytes;
# - continuation bytes need no pass: ``len(utf8) - len(text)`` (each character has exactly
#   one non-continuation byte);
# - non-ASCII lead bytes: one ``translate(None, delete)`` keeps only their class codes (one
#   per non-ASCII character, a much shorter string), counted class by class in the order the
#   regime makes likely, stopping as soon as every lead byte is accounted for (usually after
#   one to three classes);
# - class pairs: ``bytes.count`` of a two-byte pattern is 2-3x slower than of one byte, so
#   the class codes are read as UTF-16 code units instead, at even and at odd offsets (one
#   ``decode`` of both, shared by all pairs); a pair (a, b) is then the single code unit
#   ``a | b << 8``, one ``str.count`` per pair;
# - runs: a multi-byte ``count`` / ``find`` per run feature, skipped where a cheaper count
#   already shows there is none (groups of three digits need two digit pairs, symbol runs
#   four E2 lead bytes in a row);
# - regime: keyword searches over the first characters only, a mark with a rare character
#   searched only where that character is; "th" found up to the threshold, not counted.
#
# Only the pairs whose weight is not zero in the regime are counted, and the dot product
# takes only the features that have a weight and can be non-zero.

_LOWER, _UPPER, _DIGIT, _SPACE, _NEWLINE, _CONTROL, _PUNCT, _CONT = range(8)
_NOT_LEAD = bytes(range(_CONT + 1))  # deleting these class codes leaves the lead bytes
_NOT_ASCII_OR_LOWER = bytes((_LOWER, *range(_CONT, _NCLASSES)))  # deleting these leaves
# the ASCII classes but lower case
# ASCII class codes are at most 6 (punctuation): below this many bytes their sum stays
# under the Adler-32 modulus (65521, the sum starting at 1)
_ADLER_MAX = 10_000
_ASTRAL = _NCLASSES - 1
_NFEATURES = len(FEATURE_NAMES)
_FIRST_PAIR = _NCLASSES  # index of the first class-pair feature
_SCRIPT_PAIR = FEATURE_NAMES.index("space_script")
(
    _DIGIT_RUN,
    _DIGIT3,
    _EMOJI,
    _NEWLINE_RUN,
    _SPACE_RUN,
    _PUNCT_RUN,
    _SYMBOL_RUN,
    _LINE_RUN,
    _HEAVY_RUN,
) = range(_SCRIPT_PAIR + 1, _NFEATURES)
# the run features of the box-drawing lines that get their own: U+2500 and U+2501
_LINE_FEATURE = {b"\xe2\x94\x80": _LINE_RUN, b"\xe2\x94\x81": _HEAVY_RUN}
# Runs of newlines and spaces are counted in groups: a non-overlapping ``bytes.count`` of a
# group of class codes finds len // size groups in each run; the sizes (4 newlines, 8
# spaces) are where the tokenizers start merging such bytes into few tokens.
_NEWLINE4 = bytes([_NEWLINE]) * 4
_SPACE8 = bytes([_SPACE]) * 8
_E2 = CLASS_NAMES.index("e2")

RUN_WIDTH: dict[str, int] = {
    **dict.fromkeys("#%*-./=_", 64),
    **dict.fromkeys("+~", 32),
    **dict.fromkeys(";\t", 16),
    **dict.fromkeys("!,:<>", 8),
    **dict.fromkeys("$()?@\\^|", 4),
    **dict.fromkeys("\"&'[]`{}", 2),
}
"""The longest run of each ASCII punctuation character (and tab) that o200k_base,
cl100k_base, Llama 3 and Qwen hold as one token: a run of n such characters costs
``ceil(n / width)`` tokens. Measured as ``600 / (tokens(c * 1200) - tokens(c * 600))``
and rounded to a power of two; where the tokenizers differ (``!`` 16 in o200k, 8 in the
others; ``%`` 32 and 64; ``?`` 8, 4 and 16) the value most of them share is taken."""

_RUN_WIDTH_OF_BYTE = {ord(c): w for c, w in RUN_WIDTH.items()}
# Same-character runs of at least 8, searched only inside runs of 8+ punctuation (or control)
# class codes, which one ``find`` locates: regexes never scan ordinary text.
_PUNCT8 = bytes([_PUNCT]) * 8
_CONTROL8 = bytes([_CONTROL]) * 8
_CLASS_RUN = {_PUNCT: re.compile(b"\x06+"), _CONTROL: re.compile(b"\x05+")}
_SAME_RUN = {
    _PUNCT: re.compile(rb"([!-/:-@\[-`{-~])\1{7,}"),
    _CONTROL: re.compile(rb"\t{8,}"),
}
# Runs of at least 4 of one three-byte character with lead byte E2, matched where the class
# codes show four E2 characters in a row.
_E2_FOUR = b"\x10\x07\x07" * 4
_E2_LEADS = bytes([_E2]) * 4
_SYMBOL_RUN_RE = re.compile(rb"(\xe2[\x80-\xbf][\x80-\xbf])\1{3,}")
_DIGIT_PAIR = chr(_DIGIT | _DIGIT << 8)
_DIGIT_GROUP = bytes([_DIGIT]) * 3
_EMOJI_LEAD = b"\xf0\x9f"

# Lead classes in the order they are tried: the regime's own script first, then the classes
# any text may hold (symbols and punctuation, Latin-1, CJK punctuation, emoji ...).
_COMMON_LEADS = (16, 8, 17, 20, 21, 9, 10, 11, 18, 12, 13, 14, 15, 19)
_REGIME_LEADS: dict[str, tuple[int, ...]] = {
    "latin_ext": (9, 8),
    "vietnamese": (15, 8, 10, 9),
    "greek": (10, 15),
    "cyrillic": (11,),
    "russian": (11,),
    "hebrew": (12,),
    "arabic": (13,),
    "indic": (14,),
    **dict.fromkeys(_INDIC, (14,)),
    "thai": (14,),
    "georgian": (15,),
    "other": (15, 14),
    "myanmar": (15,),
    "ethiopic": (15,),
    "khmer": (15,),
    "cjk": (18, 17, 20),
    "hangul": (19, 17, 18),
    "symbols": (21, 16, 20),
}


def _lead_order(regime: str) -> tuple[int, ...]:
    first = _REGIME_LEADS.get(regime, ())
    return first + tuple(c for c in _COMMON_LEADS if c not in first)


_LEAD_ORDER = {regime: _lead_order(regime) for regime in (*REGIMES, "default")}
_LEAD_ORDER_DEFAULT = _lead_order("")
_PAIR_CODES: tuple[str, ...] = tuple(chr(p[0] | p[1] << 8) for p in _BIGRAMS)
_SCRIPT_PAIR_CODE = {regime: chr(p[0] | p[1] << 8) for regime, p in _SCRIPT_LEAD.items()}


# The pair features a regime counts: (indexes, code units) for texts without non-ASCII
# characters (the script pair is always zero there), and for the others; and whether the
# regime counts groups of three digits (``digit3`` has no weight in most regimes).
_Pairs = tuple[tuple[int, ...], tuple[str, ...]]
_PairPlan = tuple[_Pairs, _Pairs, bool]
_NO_PLAN: _PairPlan = (((), ()), ((), ()), False)


def _pair_plan(regime: str, weights: Sequence[float] | None = None) -> _PairPlan:
    """Which pair features to count in ``regime``: those with a weight (all without weights)."""
    wanted = [
        (i, code)
        for i, code in enumerate((*_PAIR_CODES, _SCRIPT_PAIR_CODE.get(regime)), start=_FIRST_PAIR)
        if code is not None and (weights is None or weights[i])
    ]
    ascii_only = [(i, code) for i, code in wanted if i != _SCRIPT_PAIR]
    return (
        (tuple(i for i, _ in ascii_only), tuple(c for _, c in ascii_only)),
        (tuple(i for i, _ in wanted), tuple(c for _, c in wanted)),
        weights is None or bool(weights[_DIGIT3]),
    )


def _sample(text: str, sample_bytes: int | None) -> tuple[bytes, float, bool]:
    """The UTF-8 bytes to count (maybe evenly spaced windows), the scale to the whole text,
    and whether the bytes are the whole text."""
    data = text.encode("utf-8", "surrogatepass")
    total = len(data)
    if sample_bytes is None or total <= sample_bytes:
        return data, 1.0, True
    width = max(1, sample_bytes // _WINDOWS)
    step = total // _WINDOWS
    data = b"".join([data[i * step : i * step + width] for i in range(_WINDOWS)])
    return data, total / len(data), False


def _same_char_runs(
    data: bytes, classes: bytes, values: list[float], punct_at: int, control_at: int
) -> None:
    """Take runs of 8+ of one punctuation character or tab out of ``punct`` / ``control``
    into ``punct_run``, as the tokens they cost (see :data:`RUN_WIDTH`). ``punct_at`` /
    ``control_at``: where the first 8 class codes of each in a row are (-1: nowhere)."""
    tokens = 0
    find = classes.find
    for cls, group, pos in ((_PUNCT, _PUNCT8, punct_at), (_CONTROL, _CONTROL8, control_at)):
        taken = 0
        span = _CLASS_RUN[cls].match
        same = _SAME_RUN[cls].finditer
        while pos >= 0:
            # the run of class codes (mixed punctuation maybe), then same-character runs in it
            match = span(classes, pos)
            end = match.end() if match else pos + 8
            for m in same(data, pos, end):
                start, stop = m.span()
                taken += stop - start
                tokens += -(-(stop - start) // _RUN_WIDTH_OF_BYTE[data[start]])
            pos = find(group, end)
        values[cls] -= taken
    values[_PUNCT_RUN] = tokens


def _symbol_runs(data: bytes, classes: bytes, values: list[float]) -> None:
    """Take runs of 4+ of one U+2000-2FFF character out of ``e2`` / ``cont`` into
    ``symbol_run`` / ``line_run`` / ``heavy_run``, as groups of 8 characters (a started
    group counts)."""
    chars = 0
    find = classes.find
    match = _SYMBOL_RUN_RE.match
    # four such characters in a row (any of them) are found by one ``find`` over the class
    # codes; the regex only checks the places found
    pos = find(_E2_FOUR)
    while pos >= 0:
        m = match(data, pos)
        if m is None:  # not one character repeated: look again one character on
            pos = find(_E2_FOUR, pos + 3)
            continue
        stop = m.end()
        n = (stop - pos) // 3
        chars += n
        values[_LINE_FEATURE.get(m.group(1), _SYMBOL_RUN)] += -(-n // 8)
        pos = find(_E2_FOUR, stop)
    values[_E2] -= chars
    values[_CONT] -= 2 * chars


def _measure(
    text: str,
    sample_bytes: int | None,
    pairs: Mapping[str, _PairPlan] | None,
    runs: bool = True,
) -> tuple[str, list[float], bool]:
    """The regime of ``text``, its :data:`FEATURE_NAMES` values (scaled to the whole text)
    and whether it has non-ASCII characters (lead bytes: else their features are all zero).

    ``pairs`` maps a regime to the pair features to count (see :func:`_pair_plan`; the
    others stay zero); ``None`` counts them all. ``runs=False`` leaves same-character runs
    of punctuation, tabs and symbols in their classes.
    """
    values = [0.0] * _NFEATURES
    n = len(text)
    if text.isascii():  # O(1): ASCII text skips all non-ASCII work, sampled or not
        if sample_bytes is None or n <= sample_bytes:
            data = text.encode("ascii")
            scale = 1.0
        else:
            data, scale, _ = _sample(text, sample_bytes)
        classes = data.translate(_CLASS_TABLE)
        cont = 0
        leads = b""
        size = len(classes)
        count = classes.count
        upper = count(_UPPER)
        digits = count(_DIGIT)
        newlines = count(_NEWLINE)
        controls = count(_CONTROL)
        punct = count(_PUNCT)
        if size <= _ADLER_MAX:
            # the sum of the class codes (the first half of an Adler-32 checksum: one pass
            # without branches, exact below 65521) weighs space by 3, lower case by 0:
            # space and lower case, the two densest classes, need no pass of their own
            spaces = (
                (_adler32(classes) & 0xFFFF)
                - 1
                - upper
                - 2 * digits
                - 4 * newlines
                - 5 * controls
                - 6 * punct
            ) // 3
        else:
            spaces = count(_SPACE)
        lower = size - upper - digits - newlines - controls - punct - spaces
    else:
        data, scale, whole = _sample(text, sample_bytes)
        classes = data.translate(_CLASS_TABLE)
        # each character has exactly one non-continuation byte (a sample may cut characters)
        cont = len(data) - n if whole else classes.count(_CONT)
        values[_CONT] = cont
        leads = classes.translate(None, _NOT_LEAD)
        # the ASCII class codes but lower case (the most frequent class, the slowest to
        # count): the other classes are counted on this shorter string
        rest = classes.translate(None, _NOT_ASCII_OR_LOWER)
        count = rest.count
        upper = count(_UPPER)
        digits = count(_DIGIT)
        newlines = count(_NEWLINE)
        controls = count(_CONTROL)
        punct = count(_PUNCT)
        # space is what is left of the rest, lower case what is left of the ASCII bytes
        spaces = len(rest) - upper - digits - newlines - controls - punct
        lower = len(classes) - cont - len(leads) - len(rest)
    values[:_CONT] = (lower, upper, digits, spaces, newlines, controls, punct)
    regime = _regime(
        text,
        n,
        cont * scale,
        digits * scale,
        punct * scale,
        (spaces + newlines + controls) * scale,
    )
    if leads:
        left = len(leads)
        lead_count = leads.count
        for c in _LEAD_ORDER.get(regime, _LEAD_ORDER_DEFAULT):
            v = lead_count(c)
            values[c] = v
            left -= v
            if not left:  # every non-ASCII character accounted for
                break
        if values[_ASTRAL]:  # emoji (F0 9F ...) out of the astral class
            values[_EMOJI] = emoji = data.count(_EMOJI_LEAD)
            values[_ASTRAL] -= emoji
    plan = _pair_plan(regime) if pairs is None else pairs.get(regime, _NO_PLAN)
    indexes, codes = plan[1] if leads else plan[0]
    if codes or digits:
        # class codes read as UTF-16 code units at even and at odd offsets, one string
        # of both: the pair of codes (a, b) becomes the one code unit a | b << 8 (codes <
        # 32: never a surrogate), each pair feature one ``str.count``
        size = len(classes)
        units = _utf16(classes[: size & ~1] + classes[1 : 1 + ((size - 1) & ~1)])[0]
        for i, v in zip(indexes, map(units.count, codes), strict=False):
            values[i] = v
        if digits:
            # a digit not preceded by a digit starts a run; whole groups of three digits
            # (non-overlapping, so len // 3 per run) say how many tokens long numbers take
            values[_DIGIT_RUN] = digit_runs = digits - units.count(_DIGIT_PAIR)
            # three digits in a row make two digit pairs: without them, no group
            if digits - digit_runs >= 2 and plan[2]:
                values[_DIGIT3] = classes.count(_DIGIT_GROUP)
    if newlines >= 4:
        values[_NEWLINE_RUN] = grouped = 4 * classes.count(_NEWLINE4)
        values[_NEWLINE] -= grouped
    if spaces >= 8:
        values[_SPACE_RUN] = grouped = 8 * classes.count(_SPACE8)
        values[_SPACE] -= grouped
    if runs:
        # the common case (no run) costs one ``find`` per class that could hold one
        punct_at = classes.find(_PUNCT8) if punct >= 8 else -1
        control_at = classes.find(_CONTROL8) if controls >= 8 else -1
        if punct_at >= 0 or control_at >= 0:
            _same_char_runs(data, classes, values, punct_at, control_at)
        # four such characters in a row are four E2 lead bytes in a row in the (shorter)
        # string of lead bytes
        if values[_E2] >= 4 and _E2_LEADS in leads:
            _symbol_runs(data, classes, values)
    if scale != 1.0:
        values = [v * scale for v in values]
    return regime, values, bool(leads)


def class_counts(text: str, sample_bytes: int | None = None) -> list[float]:
    """Bytes of each class in ``text`` (UTF-8), in :data:`CLASS_NAMES` order.

    With ``sample_bytes``, a longer text is counted on evenly spaced windows of that many
    bytes in all, and the counts are scaled to the whole text.
    """
    values = _measure(text, sample_bytes, {}, runs=False)[1]
    # the model's inputs hold runs and emoji apart: add them back to their classes
    values[_NEWLINE] += values[_NEWLINE_RUN]
    values[_SPACE] += values[_SPACE_RUN]
    values[_ASTRAL] += values[_EMOJI]
    return values[:_NCLASSES]


def features(text: str, sample_bytes: int | None = None) -> tuple[str, list[float]]:
    """The text's regime and its :data:`FEATURE_NAMES` values: the model's input."""
    regime, values, _ = _measure(text, sample_bytes, None)
    return regime, values


# Features that are zero in a text without lead bytes (no non-ASCII character in it).
_NON_ASCII_FEATURES = frozenset(
    (*range(_CONT + 1, _NCLASSES), _SCRIPT_PAIR, _EMOJI, _SYMBOL_RUN, _LINE_RUN, _HEAVY_RUN)
)
_DotPlan = tuple[Callable[[list[float]], Sequence[float]], tuple[float, ...]]


def _dot_plan(weights: Sequence[float], non_ascii: bool) -> _DotPlan:
    """Which values the dot product takes (those that may be non-zero and have a weight, in
    feature order) and their weights."""
    indexes = [
        i for i, w in enumerate(weights) if w and (non_ascii or i not in _NON_ASCII_FEATURES)
    ]
    if len(indexes) >= 2:
        take: Callable[[list[float]], Sequence[float]] = itemgetter(*indexes)
    else:  # ``itemgetter`` of one index gives the value, not a tuple
        take = lambda values: [values[i] for i in indexes]  # noqa: E731
    return take, tuple(weights[i] for i in indexes)


class TextEstimator:
    """Estimates the tokens of texts for one weight set (see :data:`weights.WEIGHTS`).

    ``weight_set`` is a key of :data:`~lmbridge.tokens.weights.WEIGHTS`
    (``o200k``, ``cl100k``, ``anthropic`` ...); ``sample_bytes`` bounds the bytes counted per
    text (``None``: count every byte).
    """

    __slots__ = ("_dot", "_pairs", "_weights", "sample_bytes", "weight_set")

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
        if sample_bytes is not None and sample_bytes < _WINDOWS:
            raise ValueError(f"sample_bytes must be at least {_WINDOWS}, got {sample_bytes!r}")
        self.weight_set = weight_set
        self.sample_bytes = sample_bytes
        sets = table[weight_set]
        for regime, ws in sets.items():
            if len(ws) != _NFEATURES:
                raise ValueError(
                    f"weights {weight_set}/{regime}: {len(ws)} values, expected {_NFEATURES}"
                )
        if "default" not in sets:
            raise ValueError(f"weights {weight_set}: no 'default' regime")
        # every regime resolved once: its own weights, its parent's, or the default ones
        self._weights: dict[str, tuple[float, ...]] = {}
        for regime in (*REGIMES, "default"):
            ws = sets.get(regime) or sets.get(PARENT_REGIME.get(regime, ""), sets["default"])
            self._weights[regime] = tuple(float(w) for w in ws)
        # only the pair features with a weight are counted (each costs a pass)
        self._pairs = {regime: _pair_plan(regime, ws) for regime, ws in self._weights.items()}
        # the dot product runs over the features with a weight, in feature order (the same
        # sum as over all of them: the terms left out are zero), for texts without non-ASCII
        # characters over fewer still (their non-ASCII features are zero)
        self._dot = {
            regime: (_dot_plan(ws, False), _dot_plan(ws, True))
            for regime, ws in self._weights.items()
        }

    def estimate(self, text: str) -> float:
        """The estimated token count of ``text`` (a float; callers round once at the end)."""
        if not text:
            return 0.0
        regime, values, non_ascii = _measure(text, self.sample_bytes, self._pairs)
        take, weights = self._dot[regime][non_ascii]
        total: float = sum(map(mul, take(values), weights))
        return total
