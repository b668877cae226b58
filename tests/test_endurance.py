"""The endurance benchmark's short pass (``benchmarks/endurance.py``; the hour's run is
documented in docs/benchmarks/endurance.md): mixed traffic with every fault the benchmark
makes, for a minute and a half, and then every figure back to its baseline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    os.environ.get("LMBRIDGE_EXPECT_COMPILED") == "1",
    reason="the host and its HTTP client are pure Python in both builds: run once",
)


def test_a_short_endurance_run_comes_back_to_its_baseline(tmp_path: Path) -> None:
    result = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "endurance.py"), "--minutes", "1.5",
         "--result", str(result)],
        capture_output=True, text=True, timeout=600, check=False, cwd=REPO,
    )  # fmt: skip
    assert result.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(result.read_text())
    assert out["leaks"] == [], proc.stdout[-3000:]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    counts: dict[str, int] = out["counts"]
    # every request on the endpoint was answered, and the faults really happened
    assert not [k for k in counts if k.startswith("endpoint") and k != "endpoint ok"], counts
    assert counts["endpoint ok"] > 100, counts
    for kind in (
        "provider ok",
        "provider error -32800 the request was cancelled",
        "stopped sending",  # the stall
        "cannot read",  # garbage
        "ended before the answer did",  # cut before [DONE]
    ):
        assert any(kind in k and n > 0 for k, n in counts.items()), (kind, counts)
    assert out["after"]["pool_connections_not_idle"] == 0
    assert out["after"]["pool_requests"] == 0
    assert out["after"]["tasks"] == out["before"]["tasks"]
