"""Providers added in VS Code's own Language Models editor, in a real VS Code, driven in the browser.

One code-server run (``tests/e2e/run.js``) with ``models_editor_browser.js`` as its browser
script: **Chat: Manage Language Models** opens VS Code's editor, **Add Models** picks the vendor
**lmbridge API**, and VS Code itself asks what lmbridge's ``configuration`` schema declares
(group name, API format, base URL, the API key in a password box). VS Code keeps the key in its
secret storage and the rest in ``chatLanguageModels.json``; lmbridge's host serves the group as
provider ``editor:<group>``. The driver extension then chats with a model of the group through
``vscode.lm``. The browser then adds a second group pointing at another server with the same
key, as a group whose base URL was changed in ``chatLanguageModels.json`` would hand it over:
lmbridge does not send the key there until the user confirms the new origin.
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
SECOND = "Elsewhere"
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
            # meanwhile the browser adds a second group, elsewhere, with the same key
            {"name": "second", "kind": "waitModels", "present": IDS, "ms": 60000},
        ],
    }  # fmt: skip
    settings = {"lmbridge.pythonCommand": sys.executable, "lmbridge.logLevel": "debug", "git.openRepositoryInParentFolders": "never"}
    params = {"group": GROUP, "format": "chat-completions", "baseUrl": f"{upstream.url}/team/v1", "key": KEY, "expectModels": MODELS,
              "second": {"group": SECOND, "baseUrl": f"{elsewhere.url}/team/v1"}}
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
    fmt = next(p for p in prompts if "API format" in (p["title"] or ""))
    for name in ("chat-completions", "responses", "anthropic", "ai-sdk", "gemini"):
        assert any(row.startswith(name) for row in fmt["rows"]), fmt["rows"]
    key = next(p for p in prompts if "API key" in (p["title"] or ""))
    assert key["inputType"] == "password", key
    # the group's models are shown in VS Code's editor
    for m in MODELS:
        assert m in editor_run["seen"]["editorText"], editor_run["seen"]["editorText"][-2000:]


def test_the_groups_models_reach_vscode_lm_and_answer(editor_run: dict[str, Any], upstream: ReplayServer) -> None:
    record = editor_run["record"]
    ids = sorted(m["id"] for m in record["models"])
    # one provider, editor:<the base URL's host>-<digest>, serves the group's models
    assert len(ids) == len(MODELS) and len({i.partition("/")[0] for i in ids}) == 1, ids
    assert ids[0].startswith(f"editor:127.0.0.1:{upstream.port}-"), ids
    assert sorted(i.partition("/")[2] for i in ids) == sorted(MODELS)
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
    (group,) = [g for g in groups if g.get("vendor") == "lmbridge-api" and g["name"] == GROUP]
    assert group["format"] == "chat-completions"
    assert KEY not in editor_run["modelsFile"]
    assert str(group["apiKey"]).startswith("${input:"), group["apiKey"]
    assert KEY not in editor_run["userSettings"]
    assert KEY not in editor_run["log"], "the key reached the log"


def test_the_same_key_at_another_origin_is_not_sent(editor_run: dict[str, Any], upstream: ReplayServer, elsewhere: ReplayServer) -> None:
    groups = json.loads(editor_run["modelsFile"])
    assert [g["name"] for g in groups if g.get("vendor") == "lmbridge-api"] == [GROUP, SECOND]
    # nothing reached the other origin: no key, no catalog request, no prompt
    assert elsewhere.requests == [], [(r.method, r.path) for r in elsewhere.requests]
    # the first group kept working
    assert editor_run["record"]["cases"]["second"]["ok"], editor_run["record"]["cases"]["second"]
    # the host says why, and what to run; the extension logs it for the group
    log = editor_run["log"]
    assert f"was stored for http://127.0.0.1:{upstream.port}" in log, log[-3000:]
    assert f"now points to http://127.0.0.1:{elsewhere.port}" in log
    assert "lmbridge: Confirm API Key Origin" in log
    assert f"chat-completions at {elsewhere.url}/team/v1" in log


# --------------------------------------------------------------------------- moving over

MOVE_DIR = REPO / "e2e-out" / "models-editor-move"
MOVED = "team"


@pytest.fixture(scope="module")
def move_run(upstream: ReplayServer) -> dict[str, Any]:
    """An existing ``lmbridge.providers`` user runs **lmbridge: Move Providers to the Language
    Models Editor**: the entry becomes a group of the editor, its key goes with it."""
    fresh_run_dir(MOVE_DIR)
    settings = {
        "lmbridge.pythonCommand": sys.executable,
        "lmbridge.logLevel": "debug",
        "lmbridge.providers": [{"name": MOVED, "format": "chat-completions", "baseUrl": f"{upstream.url}/team/v1", "models": ["m"]}],
    }
    plan = {
        "selector": {"vendor": "lmbridge"},
        "waitForModels": [f"{MOVED}/m"],
        "apiKeys": {MOVED: KEY},
        "cases": [{"name": "before", "model": f"{MOVED}/m", "messages": [_msg("before the move")]}],
        "commandsAfterModels": [{"name": "move", "command": "lmbridge.moveToLanguageModelsEditor", "args": [MOVED]}],
        "casesAfterCommands": [
            {"name": "moved", "kind": "waitModels", "selector": {"vendor": "lmbridge-api"}, "present": ["*/m"], "ms": 60000},
            {"name": "after", "model": "*/m", "selector": {"vendor": "lmbridge-api"}, "messages": [_msg("after the move")]},
        ],
    }  # fmt: skip
    done = run_vscode(MOVE_DIR, plan, settings, timeout=300)
    return {
        "record": done.record,
        "modelsFile": (MOVE_DIR / "data" / "User" / "chatLanguageModels.json").read_text(),
        "userSettings": (MOVE_DIR / "data" / "User" / "settings.json").read_text(),
        "log": done.log(),
    }


def test_moving_a_provider_keeps_it_working_with_its_key(move_run: dict[str, Any], upstream: ReplayServer) -> None:
    record = move_run["record"]
    assert answer_case(record, "before")["ok"], record["cases"]["before"]
    assert record["commands"]["move"] == {"ok": True, "result": [MOVED]}, record["commands"]
    # the entry left lmbridge.providers and its key left lmbridge's own storage
    assert MOVED not in json.dumps(json.loads(move_run["userSettings"]).get("lmbridge.providers", []))
    # it is a group of the editor, the key in VS Code's secret storage
    (group,) = json.loads(move_run["modelsFile"])
    assert group["vendor"] == "lmbridge-api" and group["name"] == MOVED and group["models"] == ["m"]
    assert str(group["apiKey"]).startswith("${input:") and KEY not in move_run["modelsFile"]
    # and it answers, with the key, at the origin the key was stored for
    assert record["cases"]["moved"]["ok"], record["cases"]["moved"]
    after = answer_case(record, "after")
    assert after["ok"] and after["text"].strip(), after
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in upstream.requests_to("/team/v1/chat/completions"))
    assert KEY not in move_run["log"]
