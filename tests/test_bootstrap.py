"""scripts/bootstrap and scripts/demo's set-up: the demo installs lmbridge's runtime only, the
check the development tools; each says what it installs while it does, and does nothing when
the pins are unchanged. pip is played by a stand-in .venv/bin/python that records its arguments
and prints pip's own kinds of lines (nothing is installed, nothing is fetched)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a bash script")

FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/../pip-calls.txt"
if [ -n "${FAKE_PIP_FAIL:-}" ]; then echo "ERROR: No matching distribution found for httpx"; exit 1; fi
echo "Obtaining file:///repo"
echo "  Installing build dependencies: started"
echo "Collecting httpx<1,>=0.27 (from lmbridge==0.1.0)"
echo "  Downloading httpx-0.28.1-py3-none-any.whl (73 kB)"
echo "Installing collected packages: httpx, lmbridge"
echo "Successfully installed httpx-0.28.1 lmbridge-0.1.0"
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The script with the files it reads, and a .venv whose python is the stand-in."""
    (tmp_path / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "bootstrap", tmp_path / "scripts" / "bootstrap")
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copy2(ROOT / name, tmp_path / name)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return tmp_path


def bootstrap(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(repo / "scripts" / "bootstrap"), *args],
        capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **env},
    )


def calls(repo: Path) -> list[str]:
    path = repo / ".venv" / "pip-calls.txt"
    return path.read_text().splitlines() if path.is_file() else []


def test_the_runtime_install_asks_for_lmbridge_alone_and_says_so(repo: Path) -> None:
    done = bootstrap(repo, "--runtime")
    assert done.returncode == 0, done.stderr
    (call,) = calls(repo)
    assert call.endswith("-c constraints.txt -e .") and "[dev]" not in call
    assert "runtime dependencies into .venv" in done.stderr
    # pip's lines, one per step and package, as they come
    for line in ("fetching the build backend", "  httpx<1,>=0.27", "Downloading httpx-0.28.1",
                 "installing 2 packages", "done"):
        assert line in done.stderr, line
    assert done.stdout == ""  # stdout stays free for what runs after it

    # unchanged pins: nothing to do, nothing said
    again = bootstrap(repo, "--runtime")
    assert again.returncode == 0 and again.stderr == "" and len(calls(repo)) == 1


def test_the_check_installs_the_development_tools_which_serve_the_demo_too(repo: Path) -> None:
    assert bootstrap(repo, "--runtime").returncode == 0
    done = bootstrap(repo)
    assert done.returncode == 0, done.stderr
    assert calls(repo)[-1].endswith('-e .[dev]')
    assert "with the development tools" in done.stderr
    assert bootstrap(repo, "--runtime").stderr == "" and len(calls(repo)) == 2

    # a changed pin installs again
    with (repo / "constraints.txt").open("a") as f:
        f.write("# changed\n")
    assert bootstrap(repo, "--runtime").returncode == 0 and len(calls(repo)) == 3


def test_a_failed_install_shows_pips_log_and_fails(repo: Path) -> None:
    done = bootstrap(repo, "--runtime", FAKE_PIP_FAIL="1")
    assert done.returncode == 1
    assert "installing the dependencies failed; the log follows" in done.stderr
    assert "No matching distribution found for httpx" in done.stderr
    assert not (repo / ".venv" / ".lmbridge-runtime").exists()  # tried again next time


def test_a_wrong_argument_is_a_usage_error(repo: Path) -> None:
    done = bootstrap(repo, "--fast")
    assert done.returncode == 2 and "usage: scripts/bootstrap [--runtime]" in done.stderr


def test_scripts_demo_sets_up_the_runtime_only() -> None:
    demo = (ROOT / "scripts" / "demo").read_text()
    assert "scripts/bootstrap --runtime" in demo and "lmbridge demo" in demo
