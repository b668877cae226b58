"""First start in a real VS Code with the loopback endpoint enabled and no storage folder yet.

A separate, short code-server run (``tests/e2e/run.js`` with a plan of no cases): at the
extension's first activation its global storage folder does not exist, and the host, which runs
in that folder, must start by itself (the endpoint needs it) without a model request, and
without a false "Python not found". Skipped unless ``LMBRIDGE_E2E=1``.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from support.vscode_run import E2E_MARKS, REPO, fresh_run_dir, run_vscode

pytestmark = E2E_MARKS

RUN_DIR = REPO / "e2e-out" / "first-start"


@pytest.fixture(scope="module")
def first_start() -> dict[str, Any]:
    done = run_vscode(
        fresh_run_dir(RUN_DIR),
        {"selector": {"vendor": "lmbridge"}, "waitForHostMs": 20000, "waitForModels": ["echo/echo"], "cases": []},
        {"lmbridge.pythonCommand": sys.executable, "lmbridge.endpoint.enabled": True},
        timeout=200,
    )
    return {"record": done.record, "log": done.log()}


def test_the_host_starts_by_itself_in_a_new_storage_folder(first_start: dict[str, Any]) -> None:
    record, log = first_start["record"], first_start["log"]
    assert record["errors"] == [], record["errors"]
    assert record["hostPidBeforeModels"], f"the endpoint is on but no host started without a request:\n{log[-3000:]}"
    assert "loopback endpoint listening on http://127.0.0.1:" in log
    assert "lmbridge.lmbridge/endpoint.json" in log
    assert "[error]" not in log, log[-3000:]
    assert "not found" not in log
    assert log.count("starting the Python host") == 1, "the first start worked: no second one"
