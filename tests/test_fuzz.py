"""The fuzz targets (tests/fuzz/targets.py): every kept input replayed, and a short
coverage-guided pass of each under atheris.

The replay runs every file of ``tests/fuzz/corpus/<target>/``: the seeds and each input the
fuzzer once found failing (``crash-*``, named after what broke), so a fixed bug stays fixed.
The short pass runs each target for ``LMBRIDGE_FUZZ_SECONDS`` (default 2) in a subprocess
from a copy of its corpus; ``scripts/fuzz --minutes N`` is the longer run.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parent / "fuzz"
sys.path.insert(0, str(FUZZ))

from targets import TARGETS, shutdown  # noqa: E402

CORPUS = FUZZ / "corpus"


@pytest.fixture(scope="module", autouse=True)
def _close_targets() -> Iterator[None]:
    yield
    shutdown()


def test_every_target_has_a_corpus() -> None:
    assert sorted(p.name for p in CORPUS.iterdir() if p.is_dir()) == sorted(TARGETS)
    for name in TARGETS:
        assert any((CORPUS / name).glob("seed-*")), name


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_the_corpus_replays(name: str) -> None:
    failures = []
    files = sorted((CORPUS / name).iterdir())
    for path in files:
        try:
            TARGETS[name](path.read_bytes())
        except Exception as exc:
            failures.append(f"{path.name}: {type(exc).__name__}: {str(exc)[:300]}")
    assert not failures, "\n".join(failures)


_ATHERIS = importlib.util.find_spec("atheris") is not None


@pytest.mark.skipif(not _ATHERIS, reason="atheris is not installed (Linux x86-64, CPython 3.11-3.13)")
@pytest.mark.skipif(
    os.environ.get("LMBRIDGE_EXPECT_COMPILED") == "1",
    reason="coverage guidance needs the Python source (the compiled run replays the corpus)",
)
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_short_fuzzing_pass_finds_nothing(name: str, tmp_path: Path) -> None:
    seconds = int(os.environ.get("LMBRIDGE_FUZZ_SECONDS", "2"))
    work = tmp_path / "corpus"
    shutil.copytree(CORPUS / name, work)
    crashes = tmp_path / "crashes"
    crashes.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            str(FUZZ / "run.py"),
            name,
            f"-max_total_time={seconds}",
            "-timeout=10",
            "-rss_limit_mb=2048",
            f"-dict={FUZZ / 'json.dict'}",
            f"-artifact_prefix={crashes}/",
            str(work),
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 120,
    )
    found = sorted(p.name for p in crashes.iterdir())
    report = proc.stderr
    start = report.find("=== Uncaught Python exception")
    assert proc.returncode == 0 and not found, (
        f"atheris found a failing input for {name} ({found}); keep it in "
        f"tests/fuzz/corpus/{name}/ once fixed:\n"
        f"{report[start:][:4000] if start >= 0 else report[-4000:]}"
    )
