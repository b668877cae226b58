"""Gemini models in a real VS Code, served from recorded Gemini streams over HTTP.

A separate code-server run (``tests/e2e/run.js``) with three ``"format": "gemini"`` providers
pointed at the replay server on 127.0.0.1: a text answer with thinking, a tool round whose
second request must carry the first answer's thought signature (the replay server refuses the
request otherwise, as Gemini 3 does: the signature goes out through VS Code's thinking parts
and comes back in the history), and a 429 with Google's ``RetryInfo``. Skipped unless
``LMBRIDGE_E2E=1``.
"""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from lmbridge.parts import parts_to_wire
from support.replay_server import RecordedRequest, ReplayServer, Reply
from support.streams import FIXTURES, decode_body, fixture_body, fixture_lines, join_text
from support.vscode_run import E2E_MARKS, REPO, answer_case, fresh_run_dir, run_vscode

pytestmark = E2E_MARKS

RUN_DIR = REPO / "e2e-out" / "gemini"
API_KEY = "AIza-e2e-" + secrets.token_hex(12)
TEXT_FIXTURE = "google/google-reasoning.chunks.txt"
TOOL_FIXTURE = "google/google-tool-call-gemini3.chunks.txt"
SIGNATURE = json.loads(fixture_lines(TOOL_FIXTURE)[0])["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
RATE_LIMITED = json.loads((FIXTURES / "google" / "google-429-retry-info.json").read_text("utf-8"))
WEATHER = {
    "name": "weather",
    "description": "Current weather for a city",
    "inputSchema": {
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "required": ["location"],
        "additionalProperties": False,
    },
}
STREAM = "/v1beta/models/m1:streamGenerateContent"
PROVIDERS = {"gemtext": TEXT_FIXTURE, "gemtool": TOOL_FIXTURE, "gemround": TEXT_FIXTURE, "gemlimited": None}


def _user(*content: dict[str, Any] | str) -> dict[str, Any]:
    parts = [{"kind": "text", "value": c} if isinstance(c, str) else c for c in content]
    return {"role": 1, "content": parts, "name": None}


def _signature_check(request: RecordedRequest) -> Reply | None:
    """Gemini 3's rule: the function call in the history carries the signature it came with."""
    contents = request.json()["contents"]
    calls = [p for c in contents if c["role"] == "model" for p in c["parts"] if "functionCall" in p]
    if not calls or calls[0].get("thoughtSignature") != SIGNATURE:
        message = "Function call is missing a thought_signature in functionCall parts."
        return Reply.json({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}, status=400)
    return None


def build_plan() -> dict[str, Any]:
    """The cases the driver extension runs (see test-extension/extension.js)."""
    first_answer = parts_to_wire(decode_body("gemini", [fixture_body(TOOL_FIXTURE)]).parts)
    call = next(p for p in first_answer if p["kind"] == "toolCall")
    question = _user("What is the weather in San Francisco?")
    return {
        "selector": {"vendor": "lmbridge"},
        "waitForModels": [f"{name}/m1" for name in PROVIDERS],
        "apiKeys": dict.fromkeys(PROVIDERS, API_KEY),
        "cases": [
            {"name": "geminiText", "model": "gemtext/m1", "messages": [_user("How many r in strawberry?")]},
            {"name": "geminiTool", "model": "gemtool/m1", "messages": [question], "options": {"tools": [WEATHER]}},
            {
                # the history VS Code holds after the first round: the answer's parts, as they
                # came (the thinking part carries the signature), then the tool's result
                "name": "geminiToolRound",
                "model": "gemround/m1",
                "messages": [
                    question,
                    {"role": 2, "content": first_answer, "name": None},
                    _user({"kind": "toolResult", "callId": call["callId"], "content": [{"kind": "text", "value": "foggy, 14 C"}]}),
                ],
                "options": {"tools": [WEATHER]},
            },
            {"name": "geminiRateLimited", "model": "gemlimited/m1", "messages": [_user("hello")]},
        ],
    }


def build_settings() -> dict[str, Any]:
    """User settings: the Gemini providers on the replay server."""
    return {
        "lmbridge.pythonCommand": sys.executable,
        "lmbridge.logLevel": "debug",
        "lmbridge.providers": [
            {
                "name": name,
                "format": "gemini",
                "baseUrl": f"{{url}}/{name}/v1beta",
                "models": ["m1"],
                "retry": {"maxAttempts": 1},
            }
            for name in PROVIDERS
        ],
    }


@pytest.fixture(scope="module")
def upstream() -> Iterator[ReplayServer]:
    """The Gemini API, replayed on 127.0.0.1 for the whole run."""
    with ReplayServer() as server:
        for name, fixture in PROVIDERS.items():
            reply = Reply.json(RATE_LIMITED, status=429) if fixture is None else Reply.fixture(fixture)
            check = _signature_check if name == "gemround" else None
            server.route("POST", f"/{name}{STREAM}", reply, check=check)
        yield server


@pytest.fixture(scope="module")
def record(upstream: ReplayServer) -> dict[str, Any]:
    settings = json.loads(json.dumps(build_settings()).replace("{url}", upstream.url))
    rec = run_vscode(fresh_run_dir(RUN_DIR), build_plan(), settings, timeout=240).record
    assert rec["errors"] == [], rec["errors"]
    return rec


def _case(record: dict[str, Any], name: str) -> dict[str, Any]:
    return answer_case(record, name)


def test_text_with_thinking_signature_arrives_as_decoded(record: dict[str, Any], upstream: ReplayServer) -> None:
    case = _case(record, "geminiText")
    assert case["ok"], case
    assert case["parts"] == parts_to_wire(decode_body("gemini", [fixture_body(TEXT_FIXTURE)]).parts)
    assert "strawberry" in case["text"]
    (request,) = upstream.requests_to(f"/gemtext{STREAM}")
    assert request.query == {"alt": ["sse"]} and request.headers["x-goog-api-key"] == API_KEY


def test_a_tool_round_replays_the_thought_signature(record: dict[str, Any], upstream: ReplayServer) -> None:
    first = _case(record, "geminiTool")
    assert first["ok"], first
    calls = [(p["name"], p["input"]) for p in first["parts"] if p["kind"] == "toolCall"]
    assert calls == [("weather", {"location": "San Francisco"})]
    signed = [p for p in first["parts"] if p["kind"] == "thinking" and p.get("metadata")]
    assert signed and signed[0]["metadata"]["thoughtSignature"] == SIGNATURE

    second = _case(record, "geminiToolRound")
    assert second["ok"], second  # the replay server accepted the signature
    assert second["text"] == join_text(decode_body("gemini", [fixture_body(TEXT_FIXTURE)]).parts)
    (request,) = upstream.requests_to(f"/gemround{STREAM}")
    assert request.status == 200
    contents = request.json()["contents"]
    assert contents[1]["parts"][0]["thoughtSignature"] == SIGNATURE
    assert contents[2]["parts"][0]["functionResponse"]["response"] == {"output": "foggy, 14 C"}


def test_a_rate_limit_is_blocked_with_the_retry_delay(record: dict[str, Any]) -> None:
    err = _case(record, "geminiRateLimited")["error"]
    assert err["isLanguageModelError"] and err["code"] == "Blocked", err
    assert "retry in 34 s" in err["message"] and API_KEY not in err["message"]
