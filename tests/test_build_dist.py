"""scripts/build-dist's interpreter list (PYTHONS): what it refuses, before it touches dist/.

The builds themselves take minutes; tests/test_dist.py checks the files they make, and
scripts/verify-wheels runs each compiled wheel on its own Python.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a bash script")


def build_dist(pythons: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-dist")],
        env={**os.environ, "PYTHONS": pythons},
        capture_output=True, text=True, timeout=300, check=False,
    )


def test_an_interpreter_that_does_not_run_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "python3.99"
    done = build_dist(f"{sys.executable} {missing}")
    assert done.returncode == 1
    assert f"the interpreter {missing} does not run" in done.stderr


def test_two_interpreters_of_one_python_version_are_refused() -> None:
    # their compiled wheels would have the same file name, the second replacing the first
    done = build_dist(f"{sys.executable} {sys.executable}")
    assert done.returncode == 1
    xy = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert f"two interpreters of Python {xy} in PYTHONS" in done.stderr


def test_an_empty_list_is_refused() -> None:
    done = build_dist("  ")
    assert done.returncode == 1
    assert "PYTHONS is empty" in done.stderr
