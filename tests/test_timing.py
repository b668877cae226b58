"""The timing log (lmbridge.timing) that benchmarks/load.py --hops reads: a JSON line per
event when LMBRIDGE_TIMING names a file, nothing at all otherwise, never a failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = (
    "from lmbridge import timing; "
    "print(timing.enabled()); timing.mark('host.chat'); timing.mark('host.chat_parts', n=3)"
)


def _run(env: dict[str, str]) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "LMBRIDGE_TIMING"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def test_events_are_logged_with_a_monotonic_time_when_asked(tmp_path: Path) -> None:
    log = tmp_path / "timing.jsonl"
    before = time.monotonic_ns() / 1e6
    assert _run({"LMBRIDGE_TIMING": str(log)}) == "True"
    after = time.monotonic_ns() / 1e6
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["at"] for line in lines] == ["host.chat", "host.chat_parts"]
    assert lines[1]["n"] == 3 and lines[0]["pid"] == lines[1]["pid"]
    # the same clock as this process's time.monotonic (the benchmark lines events up with it)
    assert before <= lines[0]["t"] <= lines[1]["t"] <= after


def test_nothing_is_written_without_the_variable_and_an_unwritable_log_is_no_failure(
    tmp_path: Path,
) -> None:
    assert _run({}) == "False"
    assert list(tmp_path.iterdir()) == []
    assert _run({"LMBRIDGE_TIMING": str(tmp_path / "missing" / "timing.jsonl")}) == "True"
