"""End to end in a real VS Code: what lmbridge does better than VS Code's own BYOK providers.

One run of ``tests/e2e/run.js`` (code-server 1.139 + headless Chromium) with upstreams replayed
on 127.0.0.1 by :class:`ReplayServer`, asked through ``vscode.lm`` by the driver extension:

- **thinking effort**: a reasoning model (``oai/o3``) declares the Thinking Effort entry (its
  ``configurationSchema``); the choice stored in VS Code's own model configuration
  (``chatLanguageModels.json``, what the model picker writes) reaches the upstream request as
  ``reasoning_effort``;
- **prompt caching**: the chat session's id a consumer passes in ``modelOptions._conversationId``
  (as Copilot does) becomes the upstream's ``prompt_cache_key``; an Anthropic request from a
  consumer that sets no cache markers gets breakpoints on its system prompt and latest turns.

Skipped unless ``LMBRIDGE_E2E=1``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from lmbridge.gateway._client import session_cache_key
from support.replay_server import ReplayServer, Reply
from support.vscode_run import E2E_MARKS, REPO, fresh_run_dir, run_vscode

pytestmark = E2E_MARKS

RUN_DIR = REPO / "e2e-out" / "vscode-byok"
CHAT_FIXTURE = "openai-chat/openai-text.chunks.txt"
ANTHROPIC_FIXTURE = "anthropic/anthropic-clear-tool-uses.1.chunks.txt"
SESSION = "e2e-chat-session-7d41"


def _msg(role: int, text: str) -> dict[str, Any]:
    return {"role": role, "content": [{"kind": "text", "value": text}], "name": None}


def build_settings(upstream_url: str) -> dict[str, Any]:
    return {
        "lmbridge.pythonCommand": sys.executable,
        "lmbridge.logLevel": "info",
        "lmbridge.providers": [
            {
                "name": "oai",
                "format": "chat-completions",
                "baseUrl": f"{upstream_url}/oai/v1",
                "models": ["o3", "gpt-4o"],
            },
            {
                "name": "anth",
                "format": "anthropic",
                "baseUrl": f"{upstream_url}/anth/v1",
                "models": [{"id": "claude-sonnet-4-5", "maxInputTokens": 150000}],
            },
        ],
    }


# What VS Code's model picker writes when the user picks an effort for a model of a provider
# without a configuration of its own: a group of the vendor with the model's settings.
MODEL_CONFIGURATION = [
    {"name": "lmbridge", "vendor": "lmbridge", "settings": {"oai/o3": {"reasoningEffort": "low"}}}
]


def build_plan() -> dict[str, Any]:
    session = {"modelOptions": {"_conversationId": SESSION}}
    return {
        "selector": {"vendor": "lmbridge"},
        "waitForModels": ["oai/o3", "oai/gpt-4o", "anth/claude-sonnet-4-5"],
        "apiKeys": {"oai": "sk-e2e-oai", "anth": "sk-e2e-anth"},
        "cases": [
            {"name": "effort", "model": "oai/o3", "messages": [_msg(1, "think a little")],
             "options": session},
            {"name": "plain", "model": "oai/gpt-4o", "messages": [_msg(1, "no session")]},
            {"name": "anthropic", "model": "anth/claude-sonnet-4-5", "messages": [
                _msg(1, "first question"), _msg(2, "first answer"), _msg(1, "second question")]},
        ],
    }  # fmt: skip


@pytest.fixture(scope="module")
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        server.route("POST", "/oai/v1/chat/completions", Reply.fixture(CHAT_FIXTURE))
        server.route("POST", "/anth/v1/messages", Reply.fixture(ANTHROPIC_FIXTURE))
        yield server


@pytest.fixture(scope="module")
def run(upstream: ReplayServer) -> dict[str, Any]:
    fresh_run_dir(RUN_DIR)
    user = RUN_DIR / "data" / "User"
    user.mkdir(parents=True, exist_ok=True)
    (user / "chatLanguageModels.json").write_text(json.dumps(MODEL_CONFIGURATION), "utf-8")
    done = run_vscode(RUN_DIR, build_plan(), build_settings(upstream.url))
    assert done.record["errors"] == [], done.record["errors"]
    return {**done.report, "record": done.record}


def _case(run: dict[str, Any], name: str) -> dict[str, Any]:
    case: dict[str, Any] = run["record"]["cases"][name]
    assert case["ok"], case
    return case


def test_the_effort_chosen_in_vscodes_model_configuration_reaches_the_upstream(
    run: dict[str, Any], upstream: ReplayServer
) -> None:
    _case(run, "effort")
    _case(run, "plain")
    by_model = {r.json()["model"]: r.json() for r in upstream.requests_to("/oai/v1/chat/completions")}
    assert by_model["o3"]["reasoning_effort"] == "low", by_model["o3"]
    assert "reasoning_effort" not in by_model["gpt-4o"]  # no entry, no choice: nothing asked


def test_the_chat_session_becomes_the_prompt_cache_key(
    run: dict[str, Any], upstream: ReplayServer
) -> None:
    by_model = {r.json()["model"]: r.json() for r in upstream.requests_to("/oai/v1/chat/completions")}
    assert by_model["o3"]["prompt_cache_key"] == session_cache_key(SESSION)
    assert SESSION not in json.dumps(by_model["o3"])  # VS Code's own id stays here
    assert "prompt_cache_key" not in by_model["gpt-4o"]


def test_an_anthropic_request_without_markers_gets_cache_breakpoints(
    run: dict[str, Any], upstream: ReplayServer
) -> None:
    _case(run, "anthropic")
    [req] = upstream.requests_to("/anth/v1/messages")
    body = req.json()
    users = [m for m in body["messages"] if m["role"] == "user"]
    assert users[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert users[-2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
