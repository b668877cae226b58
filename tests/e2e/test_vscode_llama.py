"""A model served by a real llama.cpp ``llama-server``, used from a real VS Code.

A separate, short code-server run (``tests/e2e/run.js``): the user settings hold the README's
llama-server provider (``chat-completions`` at the server's ``/v1``, no key); VS Code lists the
server's model through ``vscode.lm`` and a chat with it streams the server's own greedy answer.
Skipped unless ``LMBRIDGE_E2E=1`` and ``scripts/llama-setup`` has built the server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.llama_server import (
    MODEL_ALIAS,
    SEED,
    LlamaServer,
    llama_env,
    provider_entries,
    run_llama_server,
)

ENV = llama_env()
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        os.environ.get("LMBRIDGE_E2E") != "1", reason="set LMBRIDGE_E2E=1 (after scripts/e2e-setup)"
    ),
    pytest.mark.skipif(ENV is None, reason="llama-server is not built: run scripts/llama-setup"),
]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CACHE = Path(os.environ.get("LMBRIDGE_E2E_CACHE") or Path.home() / ".cache/lmbridge-e2e")
RUN_DIR = REPO / "e2e-out" / "llama"
MODEL = f"llama/{MODEL_ALIAS}"
PROMPT = "Name one color of the sky."
MAX_TOKENS = 16


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    assert ENV is not None
    with run_llama_server(ENV, tmp_path_factory.mktemp("llama")) as server:
        yield server


@pytest.fixture(scope="module")
def run(llama: LlamaServer) -> dict[str, Any]:
    node = json.loads((CACHE / "env.json").read_text())["node"]
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    RUN_DIR.mkdir(parents=True)
    plan, settings = RUN_DIR / "plan.json", RUN_DIR / "settings.in.json"
    options = {"modelOptions": {"temperature": 0, "seed": SEED, "max_tokens": MAX_TOKENS}}
    message = {"role": 1, "content": [{"kind": "text", "value": PROMPT}], "name": None}
    plan.write_text(
        json.dumps(
            {
                "selector": {"vendor": "lmbridge"},
                "waitForHostMs": 20000,
                "waitForModels": [MODEL],
                "cases": [
                    {"name": "chat", "model": MODEL, "messages": [message], "options": options}
                ],
            }
        )
    )
    provider = provider_entries(llama.url)[0]  # the README recipe's chat-completions entry
    assert provider["name"] == "llama"
    settings.write_text(
        json.dumps({"lmbridge.pythonCommand": sys.executable, "lmbridge.providers": [provider]})
    )
    proc = subprocess.run(
        [
            node,
            str(HERE / "run.js"),
            "--run-dir",
            str(RUN_DIR),
            "--plan",
            str(plan),
            "--settings",
            str(settings),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    record_file = RUN_DIR / "record.json"
    record = json.loads(record_file.read_text()) if record_file.is_file() else None
    if record is None or not record.get("final"):
        pytest.fail(
            f"the run did not finish (exit {proc.returncode}); see {RUN_DIR}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    answer = llama.post(
        "/v1/chat/completions",
        {
            "model": MODEL_ALIAS,
            "messages": [{"role": "user", "content": PROMPT}],
            "temperature": 0,
            "seed": SEED,
            "max_tokens": MAX_TOKENS,
        },
    )
    return {"record": record, "want": answer["choices"][0]["message"]["content"]}


def test_vscode_lists_the_llama_server_model(run: dict[str, Any]) -> None:
    record = run["record"]
    assert record["errors"] == [], record["errors"]
    models = {m["id"]: m for m in record["models"]}
    assert MODEL in models, record["models"]
    assert models[MODEL]["vendor"] == "lmbridge"
    assert models[MODEL]["maxInputTokens"] > 0


def test_vscode_chats_with_the_llama_server_model(run: dict[str, Any]) -> None:
    case = run["record"]["cases"]["chat"]
    assert case["ok"], case.get("error")
    assert run["want"].strip()
    assert case["text"] == run["want"]
    assert {p["kind"] for p in case["parts"]} == {"text"}
