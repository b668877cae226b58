"""The extension's own unit tests (``extension/test``, node's test runner with a fake ``vscode``
module), run with the Node of ``scripts/e2e-setup``: the Host against real processes (restart
after a crash, failed starts told apart), the output routing and the Python decisions.

Skipped unless ``LMBRIDGE_E2E=1`` (it needs the extension's node_modules from the setup).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get("LMBRIDGE_E2E") != "1", reason="set LMBRIDGE_E2E=1 (after scripts/e2e-setup)"),
]

EXT = Path(__file__).resolve().parents[2] / "extension"
CACHE = Path(os.environ.get("LMBRIDGE_E2E_CACHE") or Path.home() / ".cache/lmbridge-e2e")


def test_extension_unit_tests_pass() -> None:
    node = json.loads((CACHE / "env.json").read_text())["node"]
    subprocess.run([node, "esbuild.mjs", "--tests"], cwd=EXT, check=True, timeout=120, capture_output=True)
    files = sorted(str(p.relative_to(EXT)) for p in (EXT / "out-test").glob("*.test.js"))
    assert len(files) >= 5, files
    proc = subprocess.run(
        [node, "--test", "--test-reporter=spec", *files],
        cwd=EXT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "host.test.js" in " ".join(files) and "fail 0" in proc.stdout, proc.stdout[-2000:]
