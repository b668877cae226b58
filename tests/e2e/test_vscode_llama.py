"""A model served by a real llama.cpp ``llama-server``, used from a real VS Code.

A separate, short code-server run (``tests/e2e/run.js``): the user settings hold the README's
llama-server provider (``chat-completions`` at the server's ``/v1``, no key); VS Code lists the
server's model through ``vscode.lm`` and a chat with it streams the server's own greedy answer.
Skipped unless ``LMBRIDGE_E2E=1`` and ``scripts/llama-setup`` has built the server.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
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
from support.vscode_run import E2E_MARKS, REPO, answer_case, fresh_run_dir, run_vscode

ENV = llama_env()
pytestmark = [
    *E2E_MARKS,
    pytest.mark.skipif(ENV is None, reason="llama-server is not built: run scripts/llama-setup"),
]

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
    fresh_run_dir(RUN_DIR)
    options = {"modelOptions": {"temperature": 0, "seed": SEED, "max_tokens": MAX_TOKENS}}
    message = {"role": 1, "content": [{"kind": "text", "value": PROMPT}], "name": None}
    plan = {
        "selector": {"vendor": "lmbridge"},
        "waitForHostMs": 20000,
        "waitForModels": [MODEL],
        "cases": [{"name": "chat", "model": MODEL, "messages": [message], "options": options}],
    }
    provider = provider_entries(llama.url)[0]  # the README recipe's chat-completions entry
    assert provider["name"] == "llama"
    settings = {"lmbridge.pythonCommand": sys.executable, "lmbridge.providers": [provider]}
    record = run_vscode(RUN_DIR, plan, settings, timeout=240).record
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
    case = answer_case(run["record"], "chat")
    assert case["ok"], case.get("error")
    assert run["want"].strip()
    assert case["text"] == run["want"]
    assert {p["kind"] for p in case["parts"]} == {"text"}
