"""Providers added in VS Code's own Language Models editor, in a real VS Code, driven in the browser.

One code-server run (``tests/e2e/run.js``) with ``models_editor_browser.js`` as its browser
script: **Chat: Manage Language Models** opens VS Code's editor, **Add Models** picks the vendor
**lmbridge API**, and VS Code itself asks what lmbridge's ``configuration`` schema declares
(group name, API format, base URL, the API key in a password box). VS Code keeps the key in its
secret storage and the rest in ``chatLanguageModels.json``; lmbridge's host serves the group as
provider ``editor:<group>``. The driver extension then chats with a model of the group through
``vscode.lm``, edits the group's base URL in ``chatLanguageModels.json`` to point at another
server (as a mistaken or malicious edit would), and checks that the key does not follow it.
Skipped unless ``LMBRIDGE_E2E=1``.
"""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.replay_server import RecordedRequest, ReplayServer, Reply
from support.vscode_run import E2E_MARKS, REPO, answer_case, fresh_run_dir, run_vscode

pytestmark = E2E_MARKS

HERE = Path(__file__).resolve().parent
RUN_DIR = REPO / "e2e-out" / "models-editor"
GROUP = "Team LLM"
KEY = "sk-editor-e2e-" + secrets.token_hex(12)
MODELS = ["qwen3-coder-30b", "gpt-oss-120b"]
IDS = [f"*/{m}" for m in MODELS]  # the group's provider name is lmbridge's (editor:<host>-<digest>)
CATALOG = {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "team"} for m in MODELS]}
FIXTURE = "openai-chat/openai-text.chunks.txt"


def _needs_key(request: RecordedRequest) -> Reply | None:
    if request.headers.get("authorization") != f"Bearer {KEY}":
        return Reply.error(401, {"error": {"message": "Incorrect API key provided"}})
    return None


@pytest.fixture(scope="module")
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        server.route("GET", "/team/v1/models", Reply.json(CATALOG), check=_needs_key)
        server.route("POST", "/team/v1/chat/completions", Reply.fixture(FIXTURE), check=_needs_key)
        yield server


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[ReplayServer]:
    """Where the edited base URL points: it answers anything, and records what it got."""
    with ReplayServer() as server:
        server.route("GET", "/team/v1/models", Reply.json(CATALOG))
        server.route("POST", "/team/v1/chat/completions", Reply.fixture(FIXTURE))
        yield server


def _msg(text: str) -> dict[str, Any]:
    return {"role": 1, "content": [{"kind": "text", "value": text}], "name": None}


@pytest.fixture(scope="module")
def editor_run(upstream: ReplayServer, elsewhere: ReplayServer) -> dict[str, Any]:
    fresh_run_dir(RUN_DIR)
    models_file = RUN_DIR / "data" / "User" / "chatLanguageModels.json"
    plan = {
        "selector": {"vendor": "lmbridge-api"},
        "waitForModels": IDS,
        "modelWaitMs": 150000,
        "cases": [
            {"name": "chat", "model": IDS[0], "messages": [_msg("hello from the editor's group")]},
            # the user (or anything that writes the profile) points the group elsewhere
            {"name": "move", "kind": "replaceInFile", "file": str(models_file),
             "from": upstream.url, "to": elsewhere.url},
            {"name": "gone", "kind": "waitModels", "absent": IDS, "ms": 40000},
            {"name": "chat-after-move", "model": IDS[0], "messages": [_msg("where does this go?")]},
        ],
    }  # fmt: skip
    settings = {"lmbridge.pythonCommand": sys.executable, "lmbridge.logLevel": "debug", "git.openRepositoryInParentFolders": "never"}
    params = {"group": GROUP, "format": "chat-completions", "baseUrl": f"{upstream.url}/team/v1", "key": KEY, "expectModels": MODELS}
    (RUN_DIR / "editor-params.json").write_text(json.dumps(params))
    done = run_vscode(
        RUN_DIR,
        plan,
        settings,
        args=["--browser-script", str(HERE / "models_editor_browser.js")],
        env={"LMBRIDGE_E2E_TIMEOUT_MS": "260000"},
        timeout=400,
    )
    browser = done.report.get("browser") or {}
    if not browser.get("ok"):
        pytest.fail(f"the browser script failed; see {RUN_DIR}\nbrowser: {browser}")
    return {
        "record": done.record,
        "seen": browser["result"],
        "modelsFile": models_file.read_text() if models_file.is_file() else "",
        "userSettings": (RUN_DIR / "data" / "User" / "settings.json").read_text(),
        "log": done.log(),
    }


def test_vscode_asks_what_lmbridges_schema_declares(editor_run: dict[str, Any]) -> None:
    prompts = editor_run["seen"]["prompts"]
    titles = [p["title"] or p["placeholder"] for p in prompts]
    assert any("API format" in t for t in titles) and any("Base URL" in t for t in titles), titles
    (fmt,) = [p for p in prompts if "API format" in (p["title"] or "")]
    for name in ("chat-completions", "responses", "anthropic", "ai-sdk", "gemini"):
        assert any(row.startswith(name) for row in fmt["rows"]), fmt["rows"]
    (key,) = [p for p in prompts if "API key" in (p["title"] or "")]
    assert key["inputType"] == "password", key
    # the group's models are shown in VS Code's editor
    for m in MODELS:
        assert m in editor_run["seen"]["editorText"], editor_run["seen"]["editorText"][-2000:]


def test_the_groups_models_reach_vscode_lm_and_answer(editor_run: dict[str, Any], upstream: ReplayServer) -> None:
    record = editor_run["record"]
    assert {m["id"] for m in record["models"]} >= set(IDS), record["models"]
    assert all(m["vendor"] == "lmbridge-api" for m in record["models"])
    chat = answer_case(record, "chat")
    assert chat["ok"], chat
    assert chat["text"].strip(), chat
    # the key from VS Code's secret storage reached the upstream it was given for
    sent = upstream.requests_to("/team/v1/chat/completions")
    assert sent and all(r.headers.get("authorization") == f"Bearer {KEY}" for r in sent)
    assert sent[0].json()["model"] == MODELS[0]


def test_the_key_is_in_vscodes_secret_storage_only(editor_run: dict[str, Any], upstream: ReplayServer) -> None:
    groups = json.loads(editor_run["modelsFile"])
    (group,) = [g for g in groups if g.get("vendor") == "lmbridge-api"]
    assert group["name"] == GROUP
    assert group["format"] == "chat-completions"
    assert KEY not in editor_run["modelsFile"]
    assert str(group["apiKey"]).startswith("${input:"), group["apiKey"]
    assert KEY not in editor_run["userSettings"]
    assert KEY not in editor_run["log"], "the key reached the log"


def test_a_moved_base_url_gets_no_key(editor_run: dict[str, Any], upstream: ReplayServer, elsewhere: ReplayServer) -> None:
    record = editor_run["record"]
    assert record["cases"]["move"]["ok"], record["cases"]["move"]
    assert record["cases"]["gone"]["ok"], record["cases"]["gone"]
    after = record["cases"]["chat-after-move"]
    assert not after["ok"], after
    # nothing with the key reached the new origin
    got = elsewhere.requests
    assert all(KEY not in json.dumps(dict(r.headers)) for r in got), [dict(r.headers) for r in got]
    assert not elsewhere.requests_to("/team/v1/chat/completions"), "a prompt went to the new origin"
    # the host says why, and what to run
    log = editor_run["log"]
    assert f"was stored for http://127.0.0.1:{upstream.port}" in log, log[-3000:]
    assert f"now points to http://127.0.0.1:{elsewhere.port}" in log
    assert "lmbridge: Confirm API Key Origin" in log
