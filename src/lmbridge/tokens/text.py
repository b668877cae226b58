"""Text token estimation from pairs of byte classes, with weights fitted against real tokenizers.

A BPE tokenizer's count for a text depends mostly on which script the text is written in and
on how letters, digits, punctuation and whitespace follow each other. The estimator therefore

1. maps the UTF-8 bytes of the text to 16 class codes (ASCII newline/lower/upper/digit/space/
   control, three kinds of punctuation, continuation bytes, lead bytes by Unicode range) and
   reads each byte with the class of the byte before it: a *pair code* ``prev << 4 | cur``,
   one of 256 (the text is read as if a newline stood before and after it),
2. picks a *regime* from the script of the text's non-ASCII characters (ASCII text is a
   lockfile, SQL, a shell script or JavaScript/TypeScript by a few keywords at its start,
   unless a Markdown fence shows prose around a snippet,
   a blob by hardly any whitespace, else code-like by its share of punctuation and digits in
   its first :data:`HEAD_BYTES`, else English or another Latin-script language by how often
   "th" occurs),
3. returns the sum over the pair codes of the regime's weight for each (a table of 256
   weights: the token cost of a byte given the byte before it), plus a few run features
   that tokenizers treat specially (long runs of one punctuation character or symbol,
   blank lines, indentation, astral characters other than emoji), and, in the regimes of
   :data:`WORD_REGIMES` (SQL), a few word features: where inside lower-case words the
   tokenizers tend to split (a fitted table of letter pairs, :data:`WORD_BREAKS`), how
   long the runs of lower-case letters are (catalog names such as ``relhasindex`` cost more
   tokens than their letters' pairs say) and how many upper-case words are keywords the
   tokenizers hold whole (:data:`SQL_KEYWORDS`).

The sum over the pair codes is computed without a Python loop: the class codes are written
as the hex digits 0-f, so that ``binascii.a2b_hex`` reads each two neighbouring classes as
one pair code (once from the first byte, once from the second: the pairs that start at
even places, then those at odd ones), the pair codes are mapped by ``bytes.translate`` to the weight's quantised level
(64 levels between the regime's smallest and largest pair weight; the fit tool refits base
and step to the rounded levels and moves single levels where that lowers the error), and the
levels are added up by ``zlib.adler32`` (whose first half is the sum of the bytes, exact
below its modulus). The weights are fitted offline by ``tools/fit_token_weights.py``
(least absolute relative error, per tokenizer and regime) and shipped quantised in
:mod:`lmbridge.tokens.weights`, so the fast sum and the plain dot product
(:func:`features` times :func:`pair_weights`) are the same model.

Texts longer than ``sample_bytes`` are counted on evenly spaced windows that add up to that
many bytes, and scaled; this bounds the cost of very long texts. Pure: no I/O.
"""

from __future__ import annotations

import re
from binascii import a2b_hex as _a2b_hex
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from typing import Final
from zlib import adler32 as _adler32

from .weights import WEIGHTS, WORD_BREAKS

__all__ = [
    "CLASS_NAMES",
    "EXTRA_NAMES",
    "FEATURE_NAMES",
    "HEAD_BYTES",
    "PARENT_REGIME",
    "REGIMES",
    "RUN_WIDTH",
    "SQL_KEYWORDS",
    "WORD_REGIMES",
    "TextEstimator",
    "Weights",
    "WordBreaks",
    "class_counts",
    "features",
    "pair_weights",
    "regime_of",
]

CLASS_NAMES: tuple[str, ...] = (
    "newline",  # \n \r; also the class before the first and after the last byte
    "lower",  # a-z
    "upper",  # A-Z
    "digit",
    "space",
    "control",  # tab and other C0 controls, DEL
    "stop",  # , ; : ! ?
    "bracket",  # ( ) [ ] { } < > " ' `
    "cont",  # UTF-8 continuation bytes 80-BF
    "punct",  # other printable ASCII: . - _ = + * / \ | & ^ % $ # @ ~
    "letter",  # lead C2-E1: U+0080-1FFF, Latin-1 and Latin extended, Greek, Cyrillic,
    # Hebrew, Arabic, Indic, Thai, Georgian, Hangul Jamo, Ethiopic ... (the regime tells which)
    "kana",  # lead E3: U+3000-3FFF, CJK punctuation, kana
    "symbol",  # lead E2, EE, EF: punctuation, symbols, box drawing; private use, fullwidth
    "cjk",  # lead E4-E9: U+4000-9FFF, CJK ideographs
    "hangul",  # lead EA-ED: U+A000-DFFF, Hangul syllables
    "astral",  # lead F0-F4 (emoji ...) and invalid bytes
)
"""The byte classes; a feature is a pair of them (the class before, the class of the byte)."""

EXTRA_NAMES: tuple[str, ...] = (
    "astral_other",
    "newline_run",
    "space_run",
    "punct_run",
    "symbol_run",
    "line_run",
    "heavy_run",
    "word_breaks",
    "lower_10",
    "keywords",
)
"""The run and word features after the 256 pair features:

- ``astral_other``: characters starting with F0 but not F0 9F (CJK extension ideographs,
  mathematical letters ...: the astral class's weights are those of emoji and pictographs,
  F0 9F, by far the most frequent);
- ``newline_run``: runs of at least 8 newlines (``\n``), counted as ``ceil(length / 16)``
  (o200k_base holds up to 16 newlines as one token, the others 32), their pairs taken out;
- ``space_run``: bytes in runs of spaces, counted in groups of 8: vocabularies hold long
  runs (indentation) as single tokens; their pairs stay counted too, the weight of this
  feature corrects them;
- ``punct_run``: runs of at least 8 of one ASCII punctuation character or tab, counted as
  the tokens they take: ``ceil(length / width)``, where the width (:data:`RUN_WIDTH`) is the
  longest run of that character the tokenizers hold as one token; the pairs inside such a
  run are taken out of the pair counts;
- ``symbol_run`` / ``line_run`` / ``heavy_run``: runs of at least 4 of one character
  U+2000-2FFF (box drawing, arrows, dashes), counted in groups of 8 characters (a started
  group counts), their pairs taken out; ``line_run`` holds the runs of ``─`` (U+2500),
  ``heavy_run`` those of ``━`` (U+2501), ``symbol_run`` the others (``═█`` ...): the
  tokenizers differ up to eight-fold on them;
- the word features, counted in the regimes of :data:`WORD_REGIMES` only (0 elsewhere):
  ``word_breaks``, the sum over each two neighbouring lower-case ASCII letters of the level
  (0-63) that :data:`WORD_BREAKS` gives their groups: how likely the tokenizers are to end
  a token between them; ``lower_10``: the sum over the runs of lower-case ASCII letters of
  ``length // 10`` (long lower-case words are split more often than their pairs say);
  ``keywords``: the runs of upper-case ASCII letters that are one of :data:`SQL_KEYWORDS`
  (one token each, where other upper-case words of their length take two or three).
"""

WORD_REGIMES: frozenset[str] = frozenset({"sql"})
"""The regimes whose texts' word features are counted: SQL, where catalog names and
abbreviated identifiers (``relhasindex``, ``stanumbers1``) and upper-case keywords make the
cost per letter vary more than the byte classes tell (with them, the error on the fitting
corpus's held-out SQL files fell from 5.2-5.5% to 3.8-4.1%, on projects never fitted from
5.5-5.8% to 4.3-4.4%: docs/benchmarks/tokens.md). Elsewhere the features are 0 and cost
nothing; in SQL they more than double the cost of an estimate (about a dozen more passes
over the bytes, and a set lookup per upper-case word)."""

SQL_KEYWORDS: frozenset[bytes] = frozenset(
    b"""
    ABS ACTION ALL ALTER AND ANY ARE ARRAY AS ASC AT AVG BEGIN BETWEEN BOOLEAN BOTH BY CALL
    CASE CAST CHAR CHARACTER CHECK CLOSE COLUMN COMMENT CONDITION CONNECT COST COUNT CREATE
    CROSS CURRENT DATABASE DATE DAY DEC DEFAULT DELETE DESC DISTINCT DO DOUBLE DROP EACH
    ELEMENT ELSE END ENGINE EXEC EXISTS EXIT FALSE FETCH FILTER FLOAT FOR FOREIGN FREE FROM
    FULL FUNCTION GET GLOBAL GROUP HOLD IF IN INDEX INNER INPUT INSERT INT INTEGER INTO IS
    JOIN KEY LANGUAGE LARGE LEFT LIKE LIMIT LOCAL LOCK LOOP LOWER MATCH MAX MEMBER METHOD
    MIN MODULE MONTH NATIONAL NEW NO NONE NOT NOTHING NULL OF OFFSET OLD ON ONLY OPEN OR
    ORDER OUT OUTPUT OVER OWNER PRIMARY PUBLIC RANGE REAL REF REFERENCES RELEASE RESULT
    RETURN RETURNS RIGHT ROLE ROW SAFE SEARCH SECOND SECURITY SELECT SERIAL SESSION SET
    SIGNAL SOME SQL START STATIC STRICT SUM SYSTEM TABLE TEMP TEXT THEN TIME TO TRUE TYPE
    UNION UNIQUE UNKNOWN UPDATE USER USING VALUE VALUES VARCHAR VIEW WHEN WHERE WINDOW WITH
    WITHOUT YEAR
    """.split()
)
"""The upper-case SQL keywords that o200k_base and cl100k_base each hold as one token after
a space: the SQL standard's reserved words and the common PostgreSQL, MySQL and SQLite
words of a schema, those of them both tokenizers hold whole (``CONSTRAINT`` and ``TIMESTAMP``
take two tokens in o200k_base, ``IMMUTABLE`` three in both: they are not here; a keyword
at a line's start may take two, ``DISTINCT``, and is counted all the same). An
application's schema is mostly these (about 1.04 tokens per upper-case word), a PostgreSQL
extension's functions much less (``PARALLEL SAFE IMMUTABLE``: 1.2-1.5): byte classes alone
charge both the same."""

WordBreaks = tuple[str, str]
"""The word breaks as shipped in :data:`WORD_BREAKS`: the group (hex digit 1-f) of each
letter a-z, 26 digits; and the 256 levels (0-63, two hex digits each) of the group pairs
``first << 4 | second`` (a pair with group 0, a byte that is not a lower-case letter, is 0)."""

PAIR_NAMES: tuple[str, ...] = tuple(
    f"{CLASS_NAMES[code >> 4]}_{CLASS_NAMES[code & 15]}" for code in range(256)
)
FEATURE_NAMES: tuple[str, ...] = (*PAIR_NAMES, *EXTRA_NAMES)
"""What the weights multiply: 256 pair counts (index = pair code), then :data:`EXTRA_NAMES`."""

Weights = tuple[float, float, str, tuple[float, ...]]
"""A regime's weights as shipped: ``(base, step, levels, extras)``. The weight of pair code
``p`` is ``base + step * level[p]``, where ``levels`` holds the 256 levels (0-63) as two
hex digits each; ``extras`` are the weights of :data:`EXTRA_NAMES`."""

_INDIC = (
    "devanagari", "bengali", "gurmukhi", "gujarati", "oriya",
    "tamil", "telugu", "kannada", "malayalam", "sinhala",
)  # fmt: skip


def _class_table() -> bytes:
    table = bytearray(256)
    spans = (
        (0x00, 0x7F, 9), (0x00, 0x1F, 5), (0x7F, 0x7F, 5), (0x20, 0x20, 4),
        (0x0A, 0x0A, 0), (0x0D, 0x0D, 0), (0x61, 0x7A, 1), (0x41, 0x5A, 2), (0x30, 0x39, 3),
        (0x80, 0xBF, 8), (0xC0, 0xC1, 15), (0xC2, 0xE1, 10), (0xE2, 0xE2, 12), (0xE3, 0xE3, 11),
        (0xE4, 0xE9, 13), (0xEA, 0xED, 14), (0xEE, 0xEF, 12), (0xF0, 0xFF, 15),
    )  # fmt: skip
    for lo, hi, cls in spans:  # later spans refine earlier ones
        table[lo : hi + 1] = bytes([cls]) * (hi - lo + 1)
    for ch in b",;:!?":
        table[ch] = 6
    for ch in b"()[]{}<>\"'`":
        table[ch] = 7
    return bytes(table)


_CLASS_TABLE: Final = _class_table()
# The class codes as the hex digits 0-f: ``a2b_hex`` of the class codes then reads two
# neighbouring bytes' classes as one pair code (see :func:`_pair_codes`); the searches for
# runs look for these digits.
_HEX_DIGITS: Final = b"0123456789abcdef"
_HEX_CLASS_TABLE: Final = bytes(_HEX_DIGITS[c] for c in _CLASS_TABLE)


def _code(cls: int) -> bytes:
    """The class code of ``cls`` as :data:`_HEX_CLASS_TABLE` writes it."""
    return _HEX_DIGITS[cls : cls + 1]


@lru_cache(maxsize=4)
def _word_tables(breaks: WordBreaks) -> tuple[bytes, bytes]:
    """The ``translate`` tables of :data:`WordBreaks`: byte -> its letter group as a hex
    digit, and group pair -> level (kept for the last few: the fit tool passes its own
    breaks with each text)."""
    groups, levels = breaks
    if len(groups) != 26 or any(g not in "123456789abcdef" for g in groups):
        raise ValueError("word breaks: expected 26 groups as the hex digits 1-f")
    to_group = bytearray(b"0" * 256)
    to_group[97:123] = groups.encode("ascii")
    table = _level_table(levels)
    if any(table[p] for p in range(256) if not p >> 4 or not p & 15):
        raise ValueError("word breaks: a pair with a byte that is no letter must be level 0")
    return bytes(to_group), table


_NCLASSES: Final = len(CLASS_NAMES)
_NPAIRS: Final = 256
_NFEATURES: Final = len(FEATURE_NAMES)

REGIMES: tuple[str, ...] = (
    "code",
    "code_dense",
    "minified",
    "script",
    "lockfile",
    "shell",
    "sql",
    "c",
    "c_comments",
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
    "russian_prose",
    "bulgarian",
    "cyrillic_ext",
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
    "chinese",
    "chinese_trad",
    "hangul",
    "symbols",
)
"""Regimes that may have their own weights (``symbols``: text whose non-ASCII characters are
mostly emoji and other astral characters; ``blob``: base64, hex and the like; ``minified``:
dense code or data with braces, brackets or quotes and without a line break in its first
:data:`HEAD_BYTES`; ``russian``:
Cyrillic text with the letters only Russian uses often, see :data:`_RUSSIAN_SHARE`;
``russian_prose``: Russian text with hardly any Latin text, see :data:`_RUSSIAN_PROSE`;
``bulgarian``: Cyrillic text with "ъ" and without them; ``cyrillic_ext``: Cyrillic text with
the letters of U+0480-04FF (Kazakh, Mongolian, Kyrgyz, Tajik, Tatar ...);
``cjk``: Japanese (text with kana) and other CJK text; ``chinese`` / ``chinese_trad``: CJK text
without kana in simplified or traditional characters, see :data:`_TRADITIONAL`;
``script`` (JavaScript, TypeScript), ``lockfile``, ``shell``, ``sql``, ``c`` (C and C++ with
preprocessor lines) and ``c_comments`` (other code with C comments): ASCII text that
:func:`_content_type` recognises by a few keywords at its start)."""

PARENT_REGIME: dict[str, str] = {
    "code_dense": "code",
    "minified": "code_dense",
    **dict.fromkeys(("script", "lockfile", "shell", "sql", "c", "c_comments"), "code"),
    "prose_mixed": "prose",
    **dict.fromkeys(
        ("latin_ascii", "latin_de", "latin_fr", "latin_ibero", "latin_nordic"), "latin"
    ),
    **dict.fromkeys(_INDIC, "indic"),
    "russian": "cyrillic",
    "russian_prose": "russian",
    "bulgarian": "cyrillic",
    "cyrillic_ext": "cyrillic",
    "chinese": "cjk",
    "chinese_trad": "cjk",
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
_WINDOWS: Final = 16
_NON_ASCII: Final = re.compile("[^\x00-\x7f]")
# Below this share of extra UTF-8 bytes a text counts as ASCII (a few curly quotes or an
# accented name in English stay English).
_ASCII_SHARE: Final = 0.01
# ASCII text below this share of punctuation and digits is not searched for the keywords of
# the content types (lockfiles, SQL, shell scripts, JavaScript: all have more).
_TYPED_SHARE: Final = 0.05
# ASCII text whose share of punctuation and digits reaches this is treated as code/data.
_CODE_SHARE: Final = 0.16
# ... and from this share on as dense code/data (lockfiles, tables; minified without a line
# break in the head: JSON, JavaScript, CSS on one line): the cost of a
# byte changes with the share, so each band of it gets weights of its own
_DENSE_SHARE: Final = 0.27
# ASCII prose from this share of punctuation and digits on is mixed prose (docs with code,
# changelogs, Markdown)
_MIXED_SHARE: Final = 0.08
# ASCII prose with fewer "th" per character than this is taken for another Latin language;
# in text where letters make less than _LETTER_SHARE of the bytes (English between long
# runs of whitespace or rules, tables), per letter: _TH_SHARE / _LETTER_SHARE.
_TH_SHARE: Final = 0.0015
_LETTER_SHARE: Final = 0.75
_LETTERS: Final = bytes(range(65, 91)) + bytes(range(97, 123))
# Text of at least _BLOB_MIN characters with at most this share of whitespace and at most
# _BLOB_PUNCT of punctuation is a blob (base64, hex, hashes): a regime of its own, since
# random letters and digits cost several times more tokens than words do.
_BLOB_MIN: Final = 64
_BLOB_BLANK: Final = 0.03
_BLOB_PUNCT: Final = 0.08
# Cyrillic text in which "ы" and "э" make at least this share of the characters is Russian
# (about 2% in Russian prose; Ukrainian, Bulgarian, Serbian and Macedonian have neither):
# the tokenizers' vocabularies hold far more Russian than other Cyrillic languages, so
# Russian takes fewer tokens per letter and gets weights of its own; so does Bulgarian (where
# "ъ" makes this share, without "ы" and "э": cl100k_base was 9% high on it with the weights of
# the other Cyrillic languages), and Cyrillic text with the letters of U+0480-04FF (Kazakh,
# Mongolian, Kyrgyz, Tajik: 14-20% low with them). Belarusian, Mongolian,
# Kazakh, Kyrgyz and Tatar have "ы" and "э" too, but also letters Russian lacks: "і" and "ў"
# (UTF-8 D1 96, D1 9E) or those of U+0480-04FF (lead bytes D2, D3); from _OTHER_CYRILLIC of
# the Cyrillic letters on, a text is not Russian (on the corpus: none in Russian texts but a
# stray quote, 0.2-20% in the others, which cost up to 40% more tokens than Russian weights say).
_RUSSIAN_SHARE: Final = 0.008
_OTHER_CYRILLIC: Final = 0.002
# Russian text whose Cyrillic letters (one continuation byte each) make at least this share
# of its characters is prose with hardly any Latin text, digits or markup (news, letters,
# translations: about 0.8; man pages and forum posts with code or Latin names 0.3-0.75):
# ``russian_prose``, with weights of its own rather than a compromise with the Latin
# letters, options and numbers of technical Russian text.
_RUSSIAN_PROSE: Final = 0.78
# CJK text without kana (hiragana and katakana, U+3040-30FF: UTF-8 E3 81-83) is Chinese; in traditional
# characters when more of its first _CJK_HEAD characters are among these frequent
# traditional-only characters than among their simplified forms. The tokenizers hold far
# more simplified than traditional Chinese: measured on the corpus (cl100k_base), one set of
# weights for all CJK text was 7% high on simplified and 11% low on traditional Chinese.
_TRADITIONAL: Final = re.compile("[為個們這時無會說對與過請數設開關錯誤選項該檔據輸顯載將從當進還發後來應於]")
_SIMPLIFIED: Final = re.compile("[为个们这时无会说对与过请数设开关错误选项该档据输显载将从当进还发后来应于]")
_CJK_HEAD: Final = 400


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


_SCRIPT_TABLE: Final = _script_table()
_SCRIPT_INDEX: Final = _SCRIPT_TABLE[0]
_SCRIPT_NAMES: Final = _SCRIPT_TABLE[1]


# the script index of an astral character (after :data:`_SCRIPT_NAMES`' own): CJK extension
# ideographs (planes 2-3), else emoji and other symbols
_VOTE_NAMES: Final = (*_SCRIPT_NAMES, "symbols")
_ASTRAL_CJK: Final = _SCRIPT_NAMES.index("cjk")
_ASTRAL_SYMBOLS: Final = len(_SCRIPT_NAMES)


def _vote(text: str) -> str | None:
    """The script most of a few evenly spaced non-ASCII characters belong to."""
    n = len(text)
    search = _NON_ASCII.search
    index = _SCRIPT_INDEX
    found = -1  # where the last search found a character: probes up to there find it again
    cp = 0
    ids: list[int] = []  # each probe's script as an index of _VOTE_NAMES (0: none)
    # seven probes, at n * i // 7 for i in 0..6, written out
    for pos in (0, n // 7, 2 * n // 7, 3 * n // 7, 4 * n // 7, 5 * n // 7, 6 * n // 7):
        if pos > found:
            cp = ord(text[pos])
            if cp < 0x80:  # look further only when the probe itself is ASCII
                m = search(text, pos)
                if m is None:
                    break  # no non-ASCII character left for this or any later probe
                found = m.start()
                cp = ord(text[found])
        ids.append(
            index[cp]
            if cp < 0x10000
            else _ASTRAL_CJK
            if 0x20000 <= cp < 0x40000
            else _ASTRAL_SYMBOLS
        )
    if not ids:
        return None
    names = _VOTE_NAMES
    if ids.count(ids[0]) == len(ids):  # most texts: every probe voted for the same script
        return names[ids[0]]
    votes: dict[str, int] = {}
    for i in ids:
        script = names[i]
        if script is not None:
            votes[script] = votes.get(script, 0) + 1
    return max(votes, key=votes.__getitem__) if votes else None


def regime_of(text: str) -> str:
    """The regime of a text: its main non-ASCII script, else ``blob``, a content type,
    ``code`` or ``prose`` (see the module docstring).

    The script is voted from a few non-ASCII characters found at evenly spaced places and
    the shares of ASCII text are taken from its first :data:`HEAD_BYTES`, so the cost does
    not grow with the text.
    """
    data = text.encode("utf-8", "surrogatepass")
    return _regime(text, data, len(data) - len(text), _even_pairs(data.translate(_HEX_CLASS_TABLE)))


HEAD_BYTES: Final = 1000
"""The shares of digits, punctuation and whitespace that tell code, prose and blobs apart
are taken from this many bytes at the start of a text (a translate and a sum over them),
not from the whole text."""


# The head mapped to 1 for a digit or punctuation (whitespace, punctuation) and 0 else:
# the sum of the mapped bytes (``adler32``'s first half, exact below 65521 bytes) counts them.
_DENSE_01: Final = bytes(1 if _CLASS_TABLE[b] in b"\x03\x06\x07\x09" else 0 for b in range(256))
_BLANK_01: Final = bytes(1 if _CLASS_TABLE[b] in b"\x00\x04\x05" else 0 for b in range(256))
_PUNCT_01: Final = bytes(1 if _CLASS_TABLE[b] in b"\x06\x07\x09" else 0 for b in range(256))
# a pair code mapped to how many of its two classes are digits or punctuation (whitespace,
# punctuation): the head's shares are summed over its pair codes, half as many as its bytes
_DENSE_PAIRS: Final = bytes((p >> 4 in (3, 6, 7, 9)) + (p & 15 in (3, 6, 7, 9)) for p in range(256))
_BLANK_PAIRS: Final = bytes((p >> 4 in (0, 4, 5)) + (p & 15 in (0, 4, 5)) for p in range(256))
_PUNCT_PAIRS: Final = bytes((p >> 4 in (6, 7, 9)) + (p & 15 in (6, 7, 9)) for p in range(256))


def _even_pairs(classes: bytes) -> bytes:
    """The pair codes of the bytes at even places with the byte after them (``a2b_hex`` of
    the class codes, without a last odd one)."""
    return _a2b_hex(classes if not len(classes) & 1 else classes[:-1])


def _regime(text: str, data: bytes, cont: int, pairs: bytes) -> str:
    """The regime of ``text`` (UTF-8 ``data``, ``cont`` continuation bytes in all, ``pairs``
    the pair codes of its class codes at even places: see :func:`_even_pairs`)."""
    n = len(text)
    if cont and cont >= _ASCII_SHARE * n:
        script = _vote(text)
        if script == "cyrillic":
            return _cyrillic(text, data, cont)
        if script == "cjk":
            return _cjk(text, data)
        if script is not None:
            return script
    size = len(data)
    if size > HEAD_BYTES:
        size = HEAD_BYTES
    # the shares of the head are summed over its pair codes (two bytes each) and a last odd
    # byte
    head = pairs[: HEAD_BYTES // 2]
    last = data[size - 1] if size & 1 else -1
    if n >= _BLOB_MIN and data.count(b" ", 0, 256) <= 8:
        punct = (_adler32(head.translate(_PUNCT_PAIRS)) & 0xFFFF) - 1
        if last >= 0:
            punct += _PUNCT_01[last]
        if punct <= _BLOB_PUNCT * size:
            blank = (_adler32(head.translate(_BLANK_PAIRS)) & 0xFFFF) - 1
            if last >= 0:
                blank += _BLANK_01[last]
            if blank <= _BLOB_BLANK * size:
                # hardly any whitespace or punctuation: base64, hex, hashes (minified JSON
                # and URL lists have too much punctuation to be taken for one); a quick look
                # at the spaces of the first 256 bytes spares prose and code the passes
                return "blob"
    # the digits and punctuation of the head
    dense = (_adler32(head.translate(_DENSE_PAIRS)) & 0xFFFF) - 1
    if last >= 0:
        dense += _DENSE_01[last]
    # the content types are all code: text with hardly any punctuation is none of them
    if dense >= _TYPED_SHARE * size:
        kind = _content_type(text[:_HEAD])
        if kind is not None:
            return kind
    if dense >= _CODE_SHARE * size:
        if dense < _DENSE_SHARE * size:
            return "code"
        # minified: no line break in the head, and braces, brackets or quotes (JSON,
        # JavaScript, CSS on one line; not a line of numbers)
        if data.find(b"\n", 0, HEAD_BYTES) >= 0 or (
            data.find(b'"', 0, HEAD_BYTES) < 0
            and data.find(b"{", 0, HEAD_BYTES) < 0
            and data.find(b"[", 0, HEAD_BYTES) < 0
        ):
            return "code_dense"
        return "minified"
    # English is the one Latin-script language where "th" is frequent: ASCII prose without
    # it is most likely another language written without accents (Dutch, Italian,
    # Indonesian ...), which tokenizers split into more tokens than English.
    # "th" is counted up to the threshold only (``text.count`` below it: in English prose
    # the few needed are found in the first lines, not by a whole pass), without overlap as
    # ``count`` takes them
    limit = _TH_SHARE * n
    if limit > 8:
        found = text.count("th")
    else:
        found = pos = 0
        while found < limit:
            pos = text.find("th", pos)
            if pos < 0:
                break
            pos += 2
            found += 1
    if found < limit:
        # the letters' share of the bytes (of the sample, if the text was sampled): a
        # pass only for text that has too few "th" per character
        letters = len(data) - len(data.translate(None, _LETTERS))
        if found < limit * letters / (_LETTER_SHARE * len(data)):
            return "latin_ascii"
    return "prose_mixed" if dense >= _MIXED_SHARE * size else "prose"


def _cyrillic(text: str, data: bytes, cont: int) -> str:
    """The regime of a text voted Cyrillic: ``cyrillic_ext``, ``russian``, ``bulgarian`` or
    ``cyrillic`` (one continuation byte per Cyrillic letter: ``cont`` stands for their
    number). The rarer letters are searched before they are counted (most texts have none):
    bytes with ``in`` (``memchr``), letters of the whole text as characters, which is faster
    than a search for their two UTF-8 bytes (``data`` is the whole text's bytes unless the
    text was sampled)."""
    n = len(text)
    rare = _OTHER_CYRILLIC * cont
    extended = (data.count(b"\xd2") if 0xD2 in data else 0) + (
        data.count(b"\xd3") if 0xD3 in data else 0
    )
    if extended >= rare:
        return "cyrillic_ext"
    if text.count("ы") + text.count("э") >= _RUSSIAN_SHARE * cont:
        if len(data) == n + cont:  # і and ў: UTF-8 D1 96, D1 9E
            if "і" in text or "ў" in text:
                extended += text.count("і") + text.count("ў")
        elif data.find(b"\xd1\x96") >= 0 or data.find(b"\xd1\x9e") >= 0:
            extended += data.count(b"\xd1\x96") + data.count(b"\xd1\x9e")
        if extended >= rare:
            return "cyrillic"
        return "russian_prose" if cont >= _RUSSIAN_PROSE * n else "russian"
    if "ъ" in text and text.count("ъ") >= _RUSSIAN_SHARE * cont:
        return "bulgarian"
    return "cyrillic"


# kana (hiragana and katakana, U+3040-30FF): UTF-8 E3 81-83 and a third byte
_KANA: Final = re.compile(b"\xe3[\x81-\x83]")


def _cjk(text: str, data: bytes) -> str:
    """The regime of a text voted CJK: ``cjk`` with kana, else ``chinese`` or
    ``chinese_trad``."""
    if _KANA.search(data) is not None:
        return "cjk"
    traditional = len(_TRADITIONAL.findall(text, 0, _CJK_HEAD))
    if traditional and traditional > len(_SIMPLIFIED.findall(text, 0, _CJK_HEAD)):
        return "chinese_trad"
    return "chinese"


# Content types whose tokens per byte class differ from other code by more than the class
# counts tell (lockfiles: hashes and registry URLs cost far more than their letters suggest;
# JavaScript/TypeScript: long identifiers made of common words cost less), recognised by
# keywords in the first _HEAD characters. Measured on the fitting corpus and on the
# held-out packages (docs/benchmarks/tokens.md): with these regimes the lockfile error fell
# from 8-11% to 2-3%. Each test is a C-level substring search over the head only.
_HEAD: Final = 400


_SQL_DEFINITIONS: Final = ("CREATE TABLE ", "CREATE FUNCTION ", "CREATE OR REPLACE FUNCTION ")
_PSQL_COMMANDS: Final = ("\\echo ", "\\quit")


def _content_type(head: str) -> str | None:
    """``lockfile``, ``sql``, ``shell``, ``script`` (JavaScript/TypeScript), ``c`` (C
    preprocessor lines), ``c_comments`` (C comments) or ``None``."""
    # chained ``in`` tests: a generator over a tuple of marks costs more than the searches.
    # A mark with rarer characters is only searched where those characters are (a search
    # for one character, ``memchr``, costs a tenth of one for a word; most heads are none
    # of the types, so every mark not ruled out that way is searched)
    if "`" in head and "```" in head:
        return None  # Markdown with a fenced block: prose around code
    if (
        ("y" in head and "integrity" in head)
        or ("v" in head and "resolved" in head)
        or ("k" in head and "checksum" in head)
        or ("[" in head and "k" in head and "[[package]]" in head)
        or ('"' in head and '"hashes"' in head)
        or ("5" in head and "-" in head and "sha512-" in head)
    ):
        return "lockfile"
    semicolon = ";" in head
    # a statement's end, or else a view's or query's middle (columns renamed with AS,
    # CASE ... WHEN ... THEN, privileges); all but the AS marks have an upper-case E
    if (
        "E" in head
        and (
            (
                semicolon
                and (
                    "CREATE " in head
                    or "SELECT " in head
                    or "INSERT " in head
                    or "ALTER " in head
                    or "COMMENT ON" in head
                    or "REVOKE " in head
                )
            )
            or ("H" in head and " THEN " in head and "WHEN " in head)
        )
    ) or (
        "S" in head
        and "A" in head
        and " AS " in head
        and ("SELECT" in head or "FROM " in head or "CAST(" in head)
        # not a Dockerfile's stages (``FROM golang:1.22 AS build``, then its instructions)
        and not (
            "\nRUN " in head
            or "\nCOPY " in head
            or "\nWORKDIR " in head
            or "\nCMD " in head
            or "\nENTRYPOINT " in head
        )
    ):
        return "sql"
    # a table's or a function's definition at a line's start, whose end can lie beyond the
    # head (a table of many columns; not the SQL a call in another language holds, which is
    # indented), and psql's meta-commands at a line's start (an extension script's guard:
    # ``\echo Use "CREATE EXTENSION x" to load this file. \quit``; not a shell script's
    # ``psql -c "\echo ..."``), before the shell's ``echo``; SQL Server's batches, which end
    # in a line ``GO`` rather than in ``;`` (with a statement that a script of them holds),
    # and columns' definitions in a table's middle (``NOT NULL`` with a key, a default or a
    # reference; wherever they stand: a whole schema in another language's string is
    # estimated as SQL, as most of that text is)
    if (
        (
            "CREATE " in head
            and (
                head.startswith(_SQL_DEFINITIONS)
                or "\nCREATE TABLE " in head
                or "\nCREATE FUNCTION " in head
                or "\nCREATE OR REPLACE FUNCTION " in head
            )
        )
        or (
            "\\" in head
            and (head.startswith(_PSQL_COMMANDS) or "\n\\echo " in head or "\n\\quit" in head)
        )
        or (
            "\nGO" in head
            and ("\nGO\n" in head or "\nGO\r\n" in head)
            and ("CREATE " in head or "ALTER " in head or "INSERT " in head or "EXEC" in head)
        )
        or (
            " NOT NULL" in head
            and ("PRIMARY KEY" in head or "DEFAULT " in head or "REFERENCES " in head)
        )
    ):
        return "sql"
    hash_sign = "#" in head
    if (
        (hash_sign and "!" in head and "#!/" in head)
        or "echo " in head
        or (semicolon and ("; then\n" in head or "; do\n" in head))
        or "esac" in head
    ):
        return "shell"
    if (
        semicolon
        and (
            (">" in head and "=>" in head)
            or "function" in head
            or "const " in head
            or ("x" in head and "export " in head)
            or ("." in head and "this." in head)
        )
        and not (
            (hash_sign and ("#include" in head or "#define" in head))
            or ("-" in head and ">" in head and "->" in head)
            or "def " in head
        )
    ):
        return "script"
    # C and C++ by preprocessor lines; other code with C comments (C without them, CSS,
    # JavaScript) apart: comment blocks cost more than the prose they look like, and one
    # regime for both left the held-out C files 5% off (o200k, cl100k), about 4% apart
    if hash_sign and ("#include" in head or "#define" in head):
        return "c"
    if "*" in head and ("/*" in head or "\n * " in head):
        return "c_comments"
    return None


# ----------------------------------------------------------------------------- counting
#
# Cost model (CPython 3.11, 2,000-character chunks): a C-level pass over the bytes costs
# 0.2-1 ns per byte, a Python-level step per byte 10-50 ns. Per text:
#
# - one ``encode`` and one ``translate`` to class codes (hex digits);
# - the pair codes: two ``a2b_hex`` of the class codes (from the first and from the second
#   byte), each half as long as the text (this replaced ``int.from_bytes`` of the class
#   codes, ``x | x << 12`` and ``to_bytes``: 1.5 us less per 2,000-character chunk);
# - the weighted sum: a ``translate`` of each half to the levels and one ``adler32`` each
#   (halves of up to 1,039 bytes; one per 1,039 bytes in longer texts);
# - the regime: keyword searches over the first characters, the shares of digits,
#   punctuation and whitespace of the first HEAD_BYTES summed over their pair codes (two
#   bytes each), "th" found up to the threshold, the script voted from a few characters.
#   A search for a word costs about as much as one over the whole 400-character head
#   (0.15-0.35 us, whatever the word), one for a single character (``memchr``) a tenth of
#   that: a mark is searched only where its rarer characters are, and letters and bytes
#   that most texts lack are searched for before they are counted;
# - runs: a run of 8 codes of one class holds the pair of the class with itself at even
#   and at odd places, so one ``memchr`` in each half of the pair codes (``0x99 in pairs``:
#   a few hundredths of a microsecond) rules a run class out; only where both halves hold
#   the pair is the text searched for 8 codes (``find``, 0.5-1.2 us per 2,000 bytes, the
#   largest cost left before the gates: 2/3 of the texts lack spaces, newlines or
#   punctuation three in a row). A run found is counted; the search goes on from there,
#   not again from the start.
#
# Measured slower or no faster: a memoryview for the odd pair codes (its creation costs
# more than copying 2,000 bytes), ``bytes in bytes`` for a single byte (``int in bytes``
# goes straight to ``memchr``; with a bytes operand the int conversion fails first), all
# same-character runs in one pass (the bytes as an integer XORed with itself shifted by a
# byte: 4 us per text, more than the per-run searches cost on all but the texts with many
# runs), a per-character regex for the runs of one character (0.1 us less per run, most
# texts have none).
#
# ``tools/check_token_identity.py`` checks that a change meant to be faster gives the same
# estimates, bit for bit, as before on the corpus chunks and their prefixes.

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

# Newlines: o200k_base holds up to 16 in one token, the others 32.
_NEWLINE_WIDTH: Final = 16
_RUN_WIDTH_OF_BYTE: Final = {ord(c): w for c, w in RUN_WIDTH.items()} | {10: _NEWLINE_WIDTH}
_NEWLINE: Final = 0
_SPACE: Final = 4
_CONTROL: Final = 5
_CONT: Final = 8
_SYMBOL: Final = 12
_ASTRAL_OTHER: Final = 0
_NEWLINE_RUN: Final = 1
_SPACE_RUN: Final = 2
_PUNCT_RUN: Final = 3
_SYMBOL_RUN: Final = 4
_LINE_RUN: Final = 5
_HEAVY_RUN: Final = 6
_WORD_BREAKS: Final = 7
# the word features' runs: ``bytes.count`` of 10 lower-case class codes counts len // 10 per
# run; the upper-case letters kept and every other byte a space, ``split`` gives the runs of
# upper-case letters
_LOWER10: Final = _code(1) * 10
_UPPER_ONLY: Final = bytes(c if 0x41 <= c <= 0x5A else 0x20 for c in range(256))
_IS_KEYWORD: Final = SQL_KEYWORDS.__contains__
# Runs of spaces are counted in groups: a non-overlapping ``bytes.count`` of a group of class
# codes finds len // 8 groups in each run (indentation, where the tokenizers start merging
# spaces into few tokens).
_SPACE8: Final = _code(_SPACE) * 8
# Same-character runs of 8+ newlines, punctuation characters (of the class "punct") or tabs:
# searched only inside runs of 8+ class codes of the class, which one ``find`` locates.
_RUN_CLASSES: Final = tuple(
    (cls, _code(cls) * 8, re.compile(_code(cls) + b"+"), pattern)
    for cls, pattern in (
        (_NEWLINE, re.compile(rb"(\n)\1{7,}")),
        (9, re.compile(rb"([!-/:-@\[-`{-~])\1{7,}")),
        (_CONTROL, re.compile(rb"(\t)\1{7,}")),
    )
)
# Runs of at least 4 of one three-byte character with lead byte E2, matched where the class
# codes show four symbol characters in a row.
_SYMBOL_FOUR: Final = (_code(_SYMBOL) + _code(_CONT) * 2) * 4
_SYMBOL_RUN_RE: Final = re.compile(rb"(\xe2[\x80-\xbf][\x80-\xbf])\1{3,}")
_LINE_FEATURE: Final = {b"\xe2\x94\x80": _LINE_RUN, b"\xe2\x94\x81": _HEAVY_RUN}
_EMOJI_LEAD: Final = b"\xf0\x9f"
_PUNCT8: Final = _code(9) * 8
_NEWLINE8: Final = _code(_NEWLINE) * 8
_CONTROL8: Final = _code(_CONTROL) * 8
# pair codes inside a run of one symbol character: (symbol, cont), (cont, cont), (cont, symbol)
_SYMBOL_CONT: Final = _SYMBOL << 4 | _CONT
_CONT_CONT: Final = _CONT << 4 | _CONT
_CONT_SYMBOL: Final = _CONT << 4 | _SYMBOL
# Levels of a weight: 6 bits; a sum of at most _PIECE bytes of at most 63 stays below the
# Adler-32 modulus (65521, the sum starting at 1).
_LEVELS: Final = 64
_PIECE: Final = 1039


def _sample(text: str, sample_bytes: int | None) -> tuple[bytes, int, float]:
    """The UTF-8 bytes to count (maybe evenly spaced windows), the continuation bytes of the
    whole text, and the scale to the whole text."""
    data = text.encode("utf-8", "surrogatepass")
    total = len(data)
    cont = total - len(text)  # each character has exactly one non-continuation byte
    if sample_bytes is None or total <= sample_bytes:
        return data, cont, 1.0
    width = max(1, sample_bytes // _WINDOWS)
    step = total // _WINDOWS
    data = b"".join([data[i * step : i * step + width] for i in range(_WINDOWS)])
    return data, cont, total / len(data)


def _pair_codes(classes: bytes) -> bytes:
    """The pair code ``prev << 4 | cur`` of each byte of the class codes ``classes`` (as
    :data:`_HEX_CLASS_TABLE` writes them), with a newline class before the first and after
    the last byte: ``len(classes) + 1`` codes, those at even places first, then the others
    (``a2b_hex`` reads two hex digits as one byte: from the first digit and from the second)."""
    padded = b"0" + classes + b"0"
    size = len(padded)
    return _a2b_hex(padded[: size & ~1]) + _a2b_hex(padded[1 : 1 + ((size - 1) & ~1)])


def _same_char_runs(
    data: bytes,
    classes: bytes,
    pos: int,
    group: bytes,
    span: re.Pattern[bytes],
    same: re.Pattern[bytes],
) -> tuple[int, int]:
    """Pairs inside and tokens of the runs of 8+ of one character of a class, from ``pos``
    (where ``group``, 8 codes of the class, was found first): runs of class codes (mixed
    punctuation maybe), then same-character runs in them."""
    inside = tokens = 0
    find = classes.find
    width = _RUN_WIDTH_OF_BYTE.get
    while pos >= 0:
        end = span.match(classes, pos).end()  # type: ignore[union-attr]
        w = width(data[pos], 0)
        if w and data.count(data[pos : pos + 1], pos, end) == end - pos:
            # the common case: the run of class codes is one character repeated
            inside += end - pos - 1
            tokens += -(-(end - pos) // w)
        else:
            for m in same.finditer(data, pos, end):
                start, stop = m.span()
                inside += stop - start - 1
                tokens += -(-(stop - start) // _RUN_WIDTH_OF_BYTE[data[start]])
        pos = find(group, end)
    return inside, tokens


def _runs(data: bytes, classes: bytes, ascii_only: bool) -> tuple[list[float], dict[int, int]]:
    """The run features (:data:`EXTRA_NAMES`) and the pair counts to take out of the pairs
    (pair code -> count) for the runs of one punctuation character, tab, newline or symbol."""
    extras = [0.0] * len(EXTRA_NAMES)
    taken: dict[int, int] = {}
    extras[_SPACE_RUN] = 8 * classes.count(_SPACE8)
    for cls, group, span, same in _RUN_CLASSES:
        if cls == _CONTROL and 9 not in data:
            continue
        pos = classes.find(group)
        if pos >= 0:
            inside, tokens = _same_char_runs(data, classes, pos, group, span, same)
            if inside:
                taken[cls << 4 | cls] = inside
                extras[_NEWLINE_RUN if cls == _NEWLINE else _PUNCT_RUN] += tokens
    if not ascii_only:
        taken |= _non_ascii_runs(data, classes, extras)
    return extras, taken


def _non_ascii_runs(data: bytes, classes: bytes, extras: list[float]) -> dict[int, int]:
    """Add ``astral_other`` and the runs of 4+ of one U+2000-2FFF character to ``extras``;
    the pairs inside those runs (pair code -> count)."""
    if 0xF0 in data:
        extras[_ASTRAL_OTHER] = data.count(b"\xf0") - data.count(_EMOJI_LEAD)
    pos = classes.find(_SYMBOL_FOUR) if 0xE2 in data else -1
    chars = runs = 0
    while pos >= 0:
        run = _SYMBOL_RUN_RE.match(data, pos)
        if run is None:  # not one character repeated: look again one character on
            pos = classes.find(_SYMBOL_FOUR, pos + 3)
            continue
        stop = run.end()
        k = (stop - pos) // 3
        chars += k
        runs += 1
        extras[_LINE_FEATURE.get(run.group(1), _SYMBOL_RUN)] += -(-k // 8)
        pos = classes.find(_SYMBOL_FOUR, stop)
    if not chars:
        return {}
    return {_SYMBOL_CONT: chars, _CONT_CONT: chars, _CONT_SYMBOL: chars - runs}


def _words(data: bytes, classes: bytes, tables: tuple[bytes, bytes]) -> list[int]:
    """The word features (:data:`EXTRA_NAMES` from ``word_breaks`` on) of ``data``, whose
    class codes are ``classes``: the break levels of the letter pairs (the letter groups read
    as pair codes the way :func:`_pair_codes` reads classes, at even and at odd places; a pair
    at the text's ends has a byte that is no letter, level 0), the long lower-case runs and
    the keywords."""
    to_group, levels = tables
    groups = data.translate(to_group)
    n = len(groups)
    even = _a2b_hex(groups if not n & 1 else groups[:-1]).translate(levels)
    odd = _a2b_hex(groups[1 : 1 + ((n - 1) & ~1)]).translate(levels)
    keywords = sum(map(_IS_KEYWORD, data.translate(_UPPER_ONLY).split()))
    return [_level_sum(even) + _level_sum(odd), classes.count(_LOWER10), keywords]


def _measure(
    text: str, sample_bytes: int | None, tables: tuple[bytes, bytes]
) -> tuple[str, bytes, list[float], dict[int, int], float]:
    """The regime, pair codes, run and word features, pairs taken out by runs and scale of
    ``text``."""
    data, cont, scale = _sample(text, sample_bytes)
    classes = data.translate(_HEX_CLASS_TABLE)
    regime = _regime(text, data, cont, _even_pairs(classes))
    extras, taken = _runs(data, classes, not cont)
    if regime in WORD_REGIMES:
        extras[_WORD_BREAKS:] = _words(data, classes, tables)
    return regime, _pair_codes(classes), extras, taken, scale


def class_counts(text: str, sample_bytes: int | None = None) -> list[float]:
    """Bytes of each class in ``text`` (UTF-8), in :data:`CLASS_NAMES` order.

    With ``sample_bytes``, a longer text is counted on evenly spaced windows of that many
    bytes in all, and the counts are scaled to the whole text.
    """
    data, _, scale = _sample(text, sample_bytes)
    classes = data.translate(_CLASS_TABLE)
    return [classes.count(c) * scale for c in range(_NCLASSES)]


def features(
    text: str, sample_bytes: int | None = None, *, word_breaks: WordBreaks | None = None
) -> tuple[str, list[float]]:
    """The text's regime and its :data:`FEATURE_NAMES` values: the model's input
    (``word_breaks``: the letter pairs' levels, else :data:`WORD_BREAKS`)."""
    if not text:
        return regime_of(text), [0.0] * _NFEATURES
    tables = _WORD_TABLES if word_breaks is None else _word_tables(word_breaks)
    regime, pairs, extras, taken, scale = _measure(text, sample_bytes, tables)
    counts = Counter(pairs)
    values = [float(counts.get(p, 0) - taken.get(p, 0)) for p in range(_NPAIRS)]
    values += [float(v) for v in extras]
    if scale != 1.0:
        values = [v * scale for v in values]
    return regime, values


def pair_weights(weights: Weights) -> list[float]:
    """The 256 pair weights of a regime's shipped :data:`Weights`."""
    base, step, levels, _ = weights
    return [base + step * level for level in bytes.fromhex(levels)]


def _level_table(levels: str) -> bytes:
    """The ``translate`` table from a pair code to its level."""
    try:
        table = bytes.fromhex(levels)
    except ValueError:
        table = b""
    if len(table) != _NPAIRS or max(table) >= _LEVELS:
        raise ValueError(f"levels: expected {_NPAIRS} levels below {_LEVELS} as hex digits")
    return table


def _level_sum(levels: bytes) -> int:
    """The sum of the bytes of ``levels`` (each below 64)."""
    if len(levels) <= _PIECE:
        return (_adler32(levels) & 0xFFFF) - 1
    if len(levels) <= 2 * _PIECE:  # two slices cost less than a view and a list
        return (_adler32(levels[:_PIECE]) & 0xFFFF) + (_adler32(levels[_PIECE:]) & 0xFFFF) - 2
    view = memoryview(levels)
    return sum([(_adler32(view[i : i + _PIECE]) & 0xFFFF) - 1 for i in range(0, len(view), _PIECE)])


_WORD_TABLES: Final = _word_tables(WORD_BREAKS)

# a regime's weights as the estimator uses them: level table, base, step, the pair weights
# (for the pairs taken out by runs) and the run features' weights
_Plan = tuple[bytes, float, float, list[float], tuple[float, ...]]


class TextEstimator:
    """Estimates the tokens of texts for one weight set (see :data:`weights.WEIGHTS`).

    ``weight_set`` is a key of :data:`~lmbridge.tokens.weights.WEIGHTS`
    (``o200k``, ``cl100k``, ``anthropic`` ...); ``sample_bytes`` bounds the bytes counted per
    text (``None``: count every byte); ``weights`` and ``word_breaks`` replace the shipped
    :data:`~lmbridge.tokens.weights.WEIGHTS` and :data:`WORD_BREAKS`.
    """

    __slots__ = ("_breaks", "_plans", "sample_bytes", "weight_set")

    def __init__(
        self,
        weight_set: str,
        *,
        sample_bytes: int | None = None,
        weights: Mapping[str, Mapping[str, Weights]] | None = None,
        word_breaks: WordBreaks | None = None,
    ) -> None:
        table = WEIGHTS if weights is None else weights
        self._breaks = _WORD_TABLES if word_breaks is None else _word_tables(word_breaks)
        if weight_set not in table:
            raise ValueError(
                f"unknown weight set {weight_set!r}; known: {', '.join(sorted(table))}"
            )
        if sample_bytes is not None and sample_bytes < _WINDOWS:
            raise ValueError(f"sample_bytes must be at least {_WINDOWS}, got {sample_bytes!r}")
        self.weight_set = weight_set
        self.sample_bytes = sample_bytes
        sets = table[weight_set]
        if "default" not in sets:
            raise ValueError(f"weights {weight_set}: no 'default' regime")
        plans: dict[str, _Plan] = {}
        for regime, ws in sets.items():
            if len(ws) != 4 or len(ws[3]) != len(EXTRA_NAMES):
                raise ValueError(f"weights {weight_set}/{regime}: not (base, step, levels, extras)")
            try:
                level_table = _level_table(ws[2])
            except ValueError as exc:
                raise ValueError(f"weights {weight_set}/{regime}: {exc}") from None
            plans[regime] = (level_table, float(ws[0]), float(ws[1]), pair_weights(ws), ws[3])
        # every regime resolved once: its own weights, its parent's, or the default ones
        self._plans: dict[str, _Plan] = {
            regime: plans.get(regime) or plans.get(PARENT_REGIME.get(regime, ""), plans["default"])
            for regime in (*REGIMES, "default")
        }

    def estimate(self, text: str) -> float:
        """The estimated token count of ``text`` (a float; callers round once at the end)."""
        if not text:
            return 0.0
        if self.sample_bytes is None:
            data = text.encode("utf-8", "surrogatepass")
            cont = len(data) - len(text)
            scale = 1.0
        else:
            data, cont, scale = _sample(text, self.sample_bytes)
        classes = data.translate(_HEX_CLASS_TABLE)
        # the pair codes as :func:`_pair_codes` makes them, without the copy: the pairs that
        # start at an even place (the regime reads its head's shares from them), those that
        # start at an odd one, and the two at the ends (a newline class before the first
        # byte and after the last)
        n = len(classes)
        pairs = _a2b_hex(classes if not n & 1 else classes[:-1])
        regime = _regime(text, data, cont, pairs)
        table, base, step, weights, extra_weights = self._plans[regime]
        even = pairs.translate(table)
        odd_pairs = _a2b_hex(classes[1 : 1 + ((n - 1) & ~1)])
        odd = odd_pairs.translate(table)
        ends = table[_CLASS_TABLE[data[0]]] + table[_CLASS_TABLE[data[-1]] << 4]
        if n <= 2 * _PIECE:
            level = (_adler32(even) & 0xFFFF) + (_adler32(odd) & 0xFFFF) - 2 + ends
        else:
            level = _level_sum(even) + _level_sum(odd) + ends
        total = base * (n + 1) + step * level
        if regime in WORD_REGIMES:
            # the word features as :func:`_words` counts them, inline (they more than double
            # the cost of an SQL text's estimate)
            to_group, break_levels = self._breaks
            groups = data.translate(to_group)
            even = _a2b_hex(groups if not n & 1 else groups[:-1]).translate(break_levels)
            odd = _a2b_hex(groups[1 : 1 + ((n - 1) & ~1)]).translate(break_levels)
            if n <= 2 * _PIECE:
                breaks = (_adler32(even) & 0xFFFF) + (_adler32(odd) & 0xFFFF) - 2
            else:
                breaks = _level_sum(even) + _level_sum(odd)
            keywords = sum(map(_IS_KEYWORD, data.translate(_UPPER_ONLY).split()))
            total += (
                breaks * extra_weights[_WORD_BREAKS]
                + classes.count(_LOWER10) * extra_weights[_WORD_BREAKS + 1]
                + keywords * extra_weights[_WORD_BREAKS + 2]
            )
        # runs (the same values as :func:`_runs` gives): indentation, then the rarer runs
        # where a search finds one, each searched once. A run of 8 codes of a class holds
        # the pair code of the class with itself at even and at odd places: a class whose
        # pair either half lacks (one ``memchr`` each, far cheaper than the search for 8
        # codes) has no run to search for (most texts have no run of spaces, newlines or
        # punctuation)
        if 0x44 in pairs and 0x44 in odd_pairs:
            total += 8 * classes.count(_SPACE8) * extra_weights[_SPACE_RUN]
        find = classes.find
        newline = find(_NEWLINE8) if 0 in pairs and 0 in odd_pairs else -1
        punct = find(_PUNCT8) if 0x99 in pairs and 0x99 in odd_pairs else -1
        # tabs only searched where there is one
        tabs = find(_CONTROL8) if 9 in data and 0x55 in pairs and 0x55 in odd_pairs else -1
        if newline >= 0 or punct >= 0 or tabs >= 0:
            firsts = (newline, punct, tabs)  # each class's first run
            for (cls, group, span, same), pos in zip(_RUN_CLASSES, firsts, strict=True):
                if pos >= 0:
                    inside, tokens = _same_char_runs(data, classes, pos, group, span, same)
                    if inside:
                        total -= inside * weights[cls << 4 | cls]
                        feature = _NEWLINE_RUN if cls == _NEWLINE else _PUNCT_RUN
                        total += tokens * extra_weights[feature]
        if not cont:
            return total * scale
        # four symbols in a row hold the pair (cont, symbol) at even and at odd places
        if 0xE2 not in data or 0x8C not in odd_pairs or 0x8C not in pairs or find(_SYMBOL_FOUR) < 0:
            # no run of symbols: astral characters other than emoji at most
            if 0xF0 in data:
                astral = data.count(b"\xf0") - data.count(_EMOJI_LEAD)
                if astral:
                    total += astral * extra_weights[_ASTRAL_OTHER]
        else:
            extras = [0.0] * len(EXTRA_NAMES)
            for p, n in _non_ascii_runs(data, classes, extras).items():
                total -= n * weights[p]
            for i in (_ASTRAL_OTHER, _SYMBOL_RUN, _LINE_RUN, _HEAVY_RUN):
                if extras[i]:
                    total += extras[i] * extra_weights[i]
        return total * scale
