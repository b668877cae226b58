"""End to end in a real VS Code: what the chat view shows when a model fails before its first
part.

A provider's upstream refuses the request (HTTP 401) before anything was streamed. lmbridge
raises a ``LanguageModelError`` then (it does not answer with the error as text, which the chat
would keep as the model's words and agents would take for an answer). The driver extension's
chat participant asks that model from the chat view and, as Copilot Chat does with a failed
request, ends the turn with ``errorDetails``; the browser reads the view: VS Code draws the
message in its error block, whole (what failed, why, and what to do), and nothing else is
shown as the answer. Skipped unless ``LMBRIDGE_E2E=1``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.replay_server import ReplayServer, Reply
from support.vscode_run import E2E_MARKS, REPO, fresh_run_dir, run_vscode

pytestmark = E2E_MARKS

HERE = Path(__file__).resolve().parent
RUN_DIR = REPO / "e2e-out" / "vscode-chat-view"
ARTIFACTS = HERE / "artifacts"

REFUSAL = (
    b'{"error":{"message":"Incorrect API key provided","type":"invalid_request_error",'
    b'"code":"invalid_api_key"}}'
)


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


def test_a_failure_before_the_first_part_shows_as_the_chat_views_error(
    upstream: ReplayServer,
) -> None:
    upstream.route(
        "POST",
        "/v1/chat/completions",
        Reply(status=401, headers={"content-type": "application/json"}, body=REFUSAL),
    )
    run_dir = fresh_run_dir(RUN_DIR)
    settings = {
        "lmbridge.providers": [
            {
                "name": "refusing",
                "format": "chat-completions",
                "baseUrl": upstream.url + "/v1",
                "models": ["m1"],
                "retry": {"maxAttempts": 1},
            }
        ]
    }
    plan = {
        "selector": {"vendor": "lmbridge"},
        "waitForModels": ["refusing/m1"],
        "chatModel": "refusing/m1",
        "cases": [],
    }
    run = run_vscode(
        run_dir, plan, settings, args=["--browser-script", str(HERE / "chat_view_browser.js")]
    )
    shot = run_dir / "chat-view.png"
    if shot.exists():
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(shot, ARTIFACTS / "chat-view-error.png")
    seen = run.report["browser"]["result"]
    # the consumer got lmbridge's error, with VS Code's code
    (error,) = run.record["chatErrors"]
    assert error["isLanguageModelError"] and error["code"] == "NoPermissions"
    # the view shows it as a failed request: the error block with lmbridge's whole message
    assert seen["errorIcon"] == 1
    text = seen["errorText"]
    assert "refusing" in text and "HTTP 401" in text and "Incorrect API key provided" in text
    assert "lmbridge: Set API Key" in text
    # and nothing as the model's answer
    assert seen["answerText"] == ""
    assert len(upstream.requests) == 1
