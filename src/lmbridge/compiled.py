"""Which build of lmbridge runs: the compiled one or pure Python.

The compiled build (``HATCH_BUILD_HOOK_ENABLE_MYPYC=1 pip install .``, or
``scripts/build-compiled``) compiles the modules below to C extensions with mypyc; they behave
the same (the test suite runs against both builds) and stream faster (docs/benchmarks/decoders.md).
Every other module, and every module of a plain install, is Python.

``python -m lmbridge.compiled`` prints the build and each module's file;
``--require`` exits with status 1 unless all of them are compiled.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

__all__ = ["COMPILED_MODULES", "build", "compiled_modules", "json_library"]

COMPILED_MODULES: tuple[str, ...] = (
    "lmbridge.sse",
    "lmbridge.upstream._assembler",
    "lmbridge.upstream._base",
    "lmbridge.upstream.ai_sdk",
    "lmbridge.upstream.anthropic",
    "lmbridge.upstream.chat_completions",
    "lmbridge.upstream.gemini",
    "lmbridge.upstream.responses",
    "lmbridge.tokens.text",
)
"""The modules the compiled build compiles (the same list as the ``include`` of the mypyc
hook in pyproject.toml; a test keeps the two equal)."""


def compiled_modules() -> dict[str, bool]:
    """Each of :data:`COMPILED_MODULES` and whether it is (or, not imported yet, will be)
    loaded from a C extension."""
    return {name: _compiled(name) for name in COMPILED_MODULES}


def _compiled(name: str) -> bool:
    module = sys.modules.get(name)
    if module is not None:
        return (getattr(module, "__file__", None) or "").endswith(tuple(EXTENSION_SUFFIXES))
    # Not imported yet: read from the files what the import would load (the file finder tries
    # extension modules before sources), so that the host's ``initialize``, which reports the
    # build, does not import the decoders and the token weights for it.
    *folders, last = name.split(".")[1:]
    folder = Path(__file__).parent.joinpath(*folders)
    return any((folder / f"{last}{suffix}").is_file() for suffix in EXTENSION_SUFFIXES)


def build(found: Mapping[str, bool] | None = None) -> str:
    """``"compiled"`` when all of :data:`COMPILED_MODULES` are C extensions, ``"pure Python"``
    when none is, else ``"mixed"`` (an install that lost some of its extensions). ``found``:
    what :func:`compiled_modules` gave, if already asked."""
    compiled = (compiled_modules() if found is None else found).values()
    return "compiled" if all(compiled) else "pure Python" if not any(compiled) else "mixed"


def json_library() -> str:
    """``"orjson"`` when the stream decoders and the host's framing parse with orjson (the
    ``fast`` extra; an orjson built for another Python does not count), else ``"json"`` (the
    standard library's parser)."""
    try:
        import orjson  # noqa: F401
    except ImportError:
        return "json"
    return "orjson"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    found = compiled_modules()
    kind = build(found)
    print(f"lmbridge build: {kind}; JSON: {json_library()}")
    for name, compiled in found.items():
        module = importlib.import_module(name)
        print(f"  {name}: {'compiled' if compiled else 'Python'} ({module.__file__})")
    return 1 if "--require" in args and kind != "compiled" else 0


if __name__ == "__main__":
    sys.exit(main())
