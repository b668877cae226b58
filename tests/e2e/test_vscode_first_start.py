"""First start in a real VS Code with the loopback endpoint enabled and no storage folder yet.

A separate, short code-server run (``tests/e2e/run.js`` with a plan of no cases): at the
extension's first activation its global storage folder does not exist, and the host, which runs
in that folder, must start by itself (the endpoint needs it) without a model request, and
without a false "Python not found". Skipped unless ``LMBRIDGE_E2E=1``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get("LMBRIDGE_E2E") != "1", reason="set LMBRIDGE_E2E=1 (after scripts/e2e-setup)"),
]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CACHE = Path(os.environ.get("LMBRIDGE_E2E_CACHE") or Path.home() / ".cache/lmbridge-e2e")
RUN_DIR = REPO / "e2e-out" / "first-start"


@pytest.fixture(scope="module")
def first_start() -> dict[str, Any]:
    node = json.loads((CACHE / "env.json").read_text())["node"]
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    RUN_DIR.mkdir(parents=True)
    plan, settings = RUN_DIR / "plan.json", RUN_DIR / "settings.in.json"
    plan.write_text(json.dumps({"selector": {"vendor": "lmbridge"}, "waitForHostMs": 20000, "waitForModels": ["echo/echo"], "cases": []}))
    settings.write_text(json.dumps({"lmbridge.pythonCommand": sys.executable, "lmbridge.endpoint.enabled": True}))
    proc = subprocess.run(
        [node, str(HERE / "run.js"), "--run-dir", str(RUN_DIR), "--plan", str(plan), "--settings", str(settings)],
        capture_output=True,
        text=True,
        timeout=200,
        check=False,
    )
    record_file = RUN_DIR / "record.json"
    record = json.loads(record_file.read_text()) if record_file.is_file() else None
    if record is None or not record.get("final"):
        pytest.fail(f"the run did not finish (exit {proc.returncode}); see {RUN_DIR}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    logs = list((RUN_DIR / "data" / "logs").rglob("lmbridge.log"))
    return {"record": record, "log": "\n".join(p.read_text(errors="replace") for p in logs)}


def test_the_host_starts_by_itself_in_a_new_storage_folder(first_start: dict[str, Any]) -> None:
    record, log = first_start["record"], first_start["log"]
    assert record["errors"] == [], record["errors"]
    assert record["hostPidBeforeModels"], f"the endpoint is on but no host started without a request:\n{log[-3000:]}"
    assert "loopback endpoint listening on http://127.0.0.1:" in log
    assert "lmbridge.lmbridge/endpoint.json" in log
    assert "[error]" not in log, log[-3000:]
    assert "not found" not in log
    assert log.count("starting the Python host") == 1, "the first start worked: no second one"
