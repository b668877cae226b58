"""One run of ``tests/e2e/run.js``: code-server, headless Chromium and the driver extension.

Every end-to-end module starts VS Code the same way: a fresh folder under ``e2e-out/``, a plan
(what the driver extension asks ``vscode.lm``) and user settings written into it, ``run.js``
started with the Node of ``scripts/e2e-setup``, then the driver's ``record.json`` and the
runner's ``report.json`` read back. A run whose driver did not finish fails the test with the
runner's exit code, report and output tails.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "CACHE",
    "E2E_MARKS",
    "REPO",
    "VSCodeRun",
    "answer_case",
    "fresh_run_dir",
    "node",
    "run_vscode",
    "wait_for_endpoint_file",
]

E2E_DIR = Path(__file__).resolve().parents[1] / "e2e"
REPO = E2E_DIR.parents[1]
CACHE = Path(os.environ.get("LMBRIDGE_E2E_CACHE") or Path.home() / ".cache/lmbridge-e2e")

E2E_MARKS = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get("LMBRIDGE_E2E") != "1", reason="set LMBRIDGE_E2E=1 (after scripts/e2e-setup)"),
]
"""A module's ``pytestmark``: end to end, and skipped unless asked for."""


@dataclass
class VSCodeRun:
    """What one run left behind."""

    dir: Path
    record: dict[str, Any]
    """The driver extension's record (``final`` is set: the run finished)."""
    report: dict[str, Any]
    """The runner's report (DOM readings, notifications, browser script); ``{}`` if none."""

    def log(self) -> str:
        """Every ``lmbridge.log`` the extension wrote (the output channel), joined."""
        logs = (self.dir / "data" / "logs").rglob("lmbridge.log")
        return "\n".join(p.read_text(errors="replace") for p in logs)


def answer_case(record: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The driver's case ``name``; an lmbridge answer's closing usage part (the ``usage`` data
    part for Copilot's context ring) is checked to come once and last, and is set apart as
    ``usagePart`` (its JSON), so that ``parts`` are the answer's own."""
    case: dict[str, Any] = dict(record["cases"][name])
    parts = case.get("parts") or []
    usage = [p for p in parts if p.get("kind") == "data" and p.get("mimeType") == "usage"]
    if usage:
        assert len(usage) == 1 and parts[-1] is usage[0], parts
        case["parts"] = parts[:-1]
        case["usagePart"] = json.loads(base64.b64decode(usage[0]["data"]))
    return case


def node() -> str:
    """The Node that ``scripts/e2e-setup`` installed."""
    env_file = CACHE / "env.json"
    if not env_file.is_file():
        pytest.fail(f"{env_file} is missing: run scripts/e2e-setup first")
    return str(json.loads(env_file.read_text())["node"])


def fresh_run_dir(run_dir: Path) -> Path:
    """``run_dir`` (a folder under ``e2e-out/``), emptied."""
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    return run_dir


def run_vscode(
    run_dir: Path,
    plan: Mapping[str, Any],
    settings: Mapping[str, Any],
    *,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 280,
) -> VSCodeRun:
    """Run VS Code once in ``run_dir`` (see :func:`fresh_run_dir`) with ``plan`` and user
    ``settings``; ``args`` go to ``run.js`` (``--browser-script``, ``--server-env`` ...), ``env``
    is added to this process's environment for it."""
    plan_file, settings_file = run_dir / "plan.json", run_dir / "settings.in.json"
    plan_file.write_text(json.dumps(plan, indent=1))
    settings_file.write_text(json.dumps(settings, indent=1))
    command = [node(), str(E2E_DIR / "run.js"), "--run-dir", str(run_dir), "--plan", str(plan_file)]
    command += ["--settings", str(settings_file), *args]
    proc = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **env} if env else None,
    )
    report_file, record_file = run_dir / "report.json", run_dir / "record.json"
    report: dict[str, Any] = json.loads(report_file.read_text()) if report_file.is_file() else {}
    record = json.loads(record_file.read_text()) if record_file.is_file() else None
    if record is None or not record.get("final"):
        pytest.fail(
            f"the e2e run did not finish (exit {proc.returncode}); see {run_dir}\n"
            f"report: {report}\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
        )
    return VSCodeRun(run_dir, record, report)


def wait_for_endpoint_file(run_dir: Path, timeout: float) -> tuple[Path, dict[str, Any]]:
    """The loopback endpoint file the run's extension writes in its global storage, and what
    it says (``url``, ``token``...), once it is there; :class:`TimeoutError` after ``timeout``
    seconds without one."""
    storage = run_dir / "data" / "User" / "globalStorage"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in storage.glob("*/endpoint.json"):
            return path, json.loads(path.read_text())
        time.sleep(0.2)
    raise TimeoutError(f"no endpoint file appeared under {storage} in {timeout:.0f} s")
