"""**lmbridge: Manage Models** in a real VS Code, driven in the browser as a user would.

One code-server run (``tests/e2e/run.js``) with ``manage_browser.js`` as its browser script: the
Command Palette runs Manage Models, which adds an OpenAI-compatible provider pointing at the
test upstream (a replay server on 127.0.0.1 that answers ``GET /models`` only with the right
key), takes its key, and lists its models through the host's ``providers/test``. The driver
extension waits for those models in ``vscode.lm``; the test then checks the user settings file
(the entry, no key) and what the upstream was sent (the key, from SecretStorage). Screenshots
of the flow and of the model picker are kept in ``e2e-out/manage/shots`` and copied to
``extension/media`` for the README. Skipped unless ``LMBRIDGE_E2E=1``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.replay_server import RecordedRequest, ReplayServer, Reply
from support.vscode_run import E2E_MARKS, REPO, fresh_run_dir, run_vscode

pytestmark = E2E_MARKS

HERE = Path(__file__).resolve().parent
RUN_DIR = REPO / "e2e-out" / "manage"
MEDIA = REPO / "extension" / "media"
NAME = "team-llm"
KEY = "sk-manage-e2e-" + secrets.token_hex(12)
MODELS = ["qwen3-coder-30b", "gpt-oss-120b"]
CATALOG = {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "team"} for m in MODELS]}
# Screenshots the README shows: run name -> file in extension/media
README_SHOTS = {"manage-menu": "manage-models.png", "manage-presets": "manage-presets.png",
                "manage-test": "manage-test.png", "picker": "model-picker.png"}  # fmt: skip


def _needs_key(request: RecordedRequest) -> Reply | None:
    if request.headers.get("authorization") != f"Bearer {KEY}":
        return Reply.error(401, {"error": {"message": "Incorrect API key provided"}})
    return None


@pytest.fixture(scope="module")
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        server.route("GET", "/team/v1/models", Reply.json(CATALOG), check=_needs_key)
        yield server


@pytest.fixture(scope="module")
def manage_run(upstream: ReplayServer) -> dict[str, Any]:
    fresh_run_dir(RUN_DIR)
    base_url = f"{upstream.url}/team/v1"
    plan = {
        "selector": {"vendor": "lmbridge"},
        "waitForModels": [f"{NAME}/{m}" for m in MODELS],
        "modelWaitMs": 90000,
        "cases": [],
    }
    settings = {"lmbridge.pythonCommand": sys.executable, "lmbridge.logLevel": "debug", "git.openRepositoryInParentFolders": "never"}
    (RUN_DIR / "manage-params.json").write_text(json.dumps({"name": NAME, "baseUrl": base_url, "key": KEY, "expectModels": MODELS}))
    done = run_vscode(
        RUN_DIR,
        plan,
        settings,
        args=["--browser-script", str(HERE / "manage_browser.js")],
        env={"LMBRIDGE_E2E_TIMEOUT_MS": "200000"},
        timeout=330,
    )
    browser = done.report.get("browser") or {}
    if not browser.get("ok"):
        pytest.fail(f"the browser script failed; see {RUN_DIR}\nbrowser: {browser}")
    return {
        **done.report,
        "record": done.record,
        "seen": browser["result"],
        "userSettings": (RUN_DIR / "data" / "User" / "settings.json").read_text(),
        "log": done.log(),
    }


def test_the_flow_adds_the_provider_and_lists_its_models(manage_run: dict[str, Any]) -> None:
    seen = manage_run["seen"]
    # the presets the flow offers
    for label in ("OpenAI", "Anthropic", "OpenRouter", "Ollama", "LM Studio", "vLLM", "Azure OpenAI"):
        assert any(row.startswith(label) for row in seen["presets"]), (label, seen["presets"])
    assert any(row.startswith("AI SDK route") for row in seen["presetsFiltered"]), seen["presetsFiltered"]
    # the key is typed in a password box and the prompt says where it goes
    assert seen["keyInputType"] == "password"
    # Test: the upstream's models, as the host lists them
    assert f"'{NAME}' works: 2 models" in seen["testTitle"]
    for m in MODELS:
        assert any(f"{NAME}/{m}" in row for row in seen["testedModels"]), seen["testedModels"]
    # the main menu lists the new provider afterwards
    assert any(NAME in row for row in seen["mainMenuAfter"]), seen["mainMenuAfter"]


def test_the_models_reach_vscode_lm(manage_run: dict[str, Any]) -> None:
    record = manage_run["record"]
    assert record["errors"] == [], record["errors"]
    ids = {m["id"] for m in record["models"]}
    assert {f"{NAME}/{m}" for m in MODELS} <= ids, ids
    assert all(m["vendor"] == "lmbridge" for m in record["models"])


def test_the_key_is_in_secret_storage_not_in_settings(manage_run: dict[str, Any], upstream: ReplayServer) -> None:
    settings = json.loads(manage_run["userSettings"])
    (entry,) = [e for e in settings["lmbridge.providers"] if e["name"] == NAME]
    assert entry == {"name": NAME, "baseUrl": f"{upstream.url}/team/v1", "format": "chat-completions"}
    assert KEY not in manage_run["userSettings"]
    assert KEY not in manage_run["log"], "the key reached the log"
    # the host had the key (from SecretStorage, bound to the upstream's origin) and sent it
    catalog = upstream.requests_to("/team/v1/models")
    assert catalog, "the upstream was never asked for its models"
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in catalog), [
        r.headers.get("authorization", "")[:12] for r in catalog
    ]
    assert f"API key for '{NAME}' stored, bound to http://127.0.0.1:{upstream.port}" in manage_run["log"]


def test_the_models_are_in_the_chat_model_picker(manage_run: dict[str, Any]) -> None:
    picker = manage_run["seen"].get("picker")
    assert picker, manage_run["seen"].get("pickerError")
    listed = " | ".join(picker["options"])
    for m in MODELS:
        assert m in listed, picker


def test_screenshots_for_the_readme(manage_run: dict[str, Any]) -> None:
    shots = manage_run["seen"]["shots"]
    for run_name, media_name in README_SHOTS.items():
        assert run_name in shots, (run_name, shots, manage_run["seen"].get("pickerError"))
        png = Path(shots[run_name]).read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 5000, run_name
        if os.environ.get("LMBRIDGE_E2E_UPDATE_MEDIA") == "1":
            shutil.copyfile(shots[run_name], MEDIA / media_name)
