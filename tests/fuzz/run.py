"""Run one fuzz target under atheris (coverage-guided, libFuzzer underneath).

    python tests/fuzz/run.py TARGET [libFuzzer arguments ...] [CORPUS_DIR ...]

lmbridge's modules are instrumented for coverage as they are imported; the target's
invariants are in :mod:`targets`. libFuzzer's own arguments pass through
(``-max_total_time=N``, ``-runs=N``, ``-timeout=S``, ``-rss_limit_mb=M``, ``-dict=FILE``,
``-artifact_prefix=DIR/``); a failing input is written as ``crash-<sha1>`` (or
``timeout-...`` / ``oom-...``) under the artifact prefix and the exit status is non-zero.
``scripts/fuzz`` is the usual way in; ``tests/test_fuzz.py`` runs each target for a few
seconds.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> None:
    import atheris

    if len(argv) < 2 or argv[1].startswith("-"):
        sys.exit(f"usage: {argv[0]} TARGET [libFuzzer arguments] [CORPUS_DIR ...]")
    name = argv[1]
    sys.path.insert(0, str(HERE))
    with atheris.instrument_imports(include=["lmbridge"]):
        import lmbridge.client.endpoint
        import lmbridge.config
        import lmbridge.convert
        import lmbridge.gateway.catalog
        import lmbridge.gateway.gemini
        import lmbridge.host.framing
        import lmbridge.host.jsonrpc
        import lmbridge.sse
        import lmbridge.upstream  # noqa: F401
        from lmbridge import formats

        for fmt in formats.FORMATS.values():
            fmt.decoder_class()
            fmt.converter_function()
    from targets import TARGETS

    if name not in TARGETS:
        sys.exit(f"unknown target {name!r} (known: {', '.join(TARGETS)})")
    test = TARGETS[name]
    atheris.Setup([argv[0], *argv[2:]], test)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
