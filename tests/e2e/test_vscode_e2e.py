"""End to end in a real VS Code: lmbridge's models used through ``vscode.lm`` by another extension.

One run of ``tests/e2e/run.js`` (code-server 4.139 + headless Chromium, installed by
``scripts/e2e-setup``) installs the packaged lmbridge extension and the driver extension in
``tests/e2e/test-extension``, which executes the plan built here and writes a record; each test
asserts on one part of that record. The Python host is the working tree's (``sys.executable -m
lmbridge host``); ``LMBRIDGE_E2E_HOST=standin`` swaps in ``standin_host.py`` to check the
extension and harness alone.

Skipped unless ``LMBRIDGE_E2E=1``. Adding a case: append it to :func:`build_plan` (a
provider entry in :func:`build_settings` if it needs one) and assert on ``record["cases"][name]``.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lmbridge.parts import parts_to_wire
from support.replay_server import ReplayServer, Reply
from support.streams import decode_body, fixture_body, join_text, join_thinking, tool_calls
from support.vscode_run import answer_case

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get("LMBRIDGE_E2E") != "1", reason="set LMBRIDGE_E2E=1 (after scripts/e2e-setup)"),
]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CACHE = Path(os.environ.get("LMBRIDGE_E2E_CACHE") or Path.home() / ".cache/lmbridge-e2e")
RUN_DIR = REPO / "e2e-out" / "vscode"
MODEL = "echo/echo"
API_KEY = "sk-e2e-" + secrets.token_hex(12)
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(32))
WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
LONG = " ".join(f"word{i}" for i in range(40))
# The consumer phase (Python uses VS Code's models): the app the host runs and its record, and
# the marker the endpoint checks below write for the driver when they are done.
CONSUMER_APP = HERE / "consumer_app_e2e.py"
CONSUMER_OUT = RUN_DIR / "consumer-record.json"
ENDPOINT_DONE = RUN_DIR / "endpoint-done.json"

# Upstream providers played by the replay server: (provider, format, path under its base URL, reply)
TOOL_FIXTURE = "deepseek/deepseek-tool-call.chunks.txt"
TEXT_FIXTURE = "mistral/mistral-text.chunks.txt"
ANTHROPIC_FIXTURE = "anthropic/anthropic-text.chunks.txt"
LONG_FIXTURE = "openai-compatible/xai-text.chunks.txt"
RESPONSES_FIXTURE = "open-responses/lmstudio-tool-call.1.chunks.txt"
IMAGE_FIXTURE = "openai-responses/openai-image-generation-tool.1.chunks.txt"
AI_SDK_UI_FIXTURE = "ai-sdk/ui-message-stream/multi-step-tool-then-text.sse"
AI_SDK_TOOLS_FIXTURE = "ai-sdk/provider-parts/openai-responses-reasoning-tool-calls.jsonl"
UPSTREAMS: dict[str, tuple[str, str, Reply]] = {
    "oai": ("chat-completions", "/chat/completions", Reply.fixture(TOOL_FIXTURE)),
    "mistral": ("chat-completions", "/chat/completions", Reply.fixture(TEXT_FIXTURE)),
    "anth": ("anthropic", "/messages", Reply.fixture(ANTHROPIC_FIXTURE)),
    "resp": ("responses", "/responses", Reply.fixture(RESPONSES_FIXTURE)),
    "respimg": ("responses", "/responses", Reply.fixture(IMAGE_FIXTURE)),
    "aisdk": ("ai-sdk", "/chat", Reply.fixture(AI_SDK_UI_FIXTURE)),
    "aisdktools": ("ai-sdk", "/chat", Reply.fixture(AI_SDK_TOOLS_FIXTURE)),
    "denied": ("chat-completions", "/chat/completions", Reply.error(401, {"error": {"message": "Incorrect API key provided"}})),
    "limited": ("chat-completions", "/chat/completions", Reply.error(429, retry_after=0)),
    "slow": ("chat-completions", "/chat/completions", Reply.fixture(LONG_FIXTURE, delay=0.1)),
}


def _text(value: str) -> dict[str, Any]:
    return {"kind": "text", "value": value}


def _user(*content: dict[str, Any] | str) -> dict[str, Any]:
    return {"role": 1, "content": [_text(c) if isinstance(c, str) else c for c in content], "name": None}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


SCRIPT = [
    {"kind": "thinking", "value": "step one", "id": "r1", "metadata": {"signature": "sig-1"}},
    _text("Answer"),
    {"kind": "data", "mimeType": "text/x-json", "data": _b64(b'{"k":1}')},
    {"kind": "data", "mimeType": "image/png", "data": _b64(PNG)},
    _text(" done"),
]


def build_settings(upstream_url: str) -> dict[str, Any]:
    """User settings for the run: the providers and how to start the host."""
    if os.environ.get("LMBRIDGE_E2E_HOST") == "standin":
        python = f"{sys.executable} {HERE / 'standin_host.py'}"
    else:
        python = sys.executable
    return {
        "lmbridge.pythonCommand": python,
        "lmbridge.logLevel": "debug",
        "lmbridge.providers": [
            {"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider"},
            *(
                {"name": name, "format": fmt, "baseUrl": f"{upstream_url}/{name}/v1", "models": ["m1"]}
                for name, (fmt, _, _) in UPSTREAMS.items()
            ),
        ],
    }


def build_plan() -> dict[str, Any]:
    """What the driver extension does, in order (see test-extension/extension.js)."""
    chat = {"model": MODEL}
    return {
        "selector": {"vendor": "lmbridge"},
        "waitForModels": [MODEL, *(f"{name}/m1" for name in UPSTREAMS)],
        "apiKeys": {"echo": API_KEY, **dict.fromkeys(UPSTREAMS, API_KEY)},
        # after the cases: lmbridge.consumer.model, lmbridge.endpoint.enabled, lmbridge.apps
        "consumer": {
            "model": "vscodelm/lmbridge-e2e/fam-a",
            "apps": [str(CONSUMER_APP)],
            "out": str(CONSUMER_OUT),
            "endpointDone": str(ENDPOINT_DONE),
        },
        "cases": [
            {**chat, "name": "plain", "messages": [_user("hello streaming world")]},
            {**chat, "name": "readText", "readText": True, "messages": [_user("just text")]},
            {
                **chat,
                "name": "history",
                "messages": [
                    _user("What is the weather in Paris?"),
                    {
                        "role": 2,
                        "content": [
                            _text("Let me check."),
                            {"kind": "toolCall", "callId": "c0", "name": "get_weather", "input": {"city": "Paris"}},
                        ],
                        "name": None,
                    },
                    _user({"kind": "toolResult", "callId": "c0", "content": [_text("sunny, 21 C")]}),
                ],
                "options": {"tools": [WEATHER]},
            },
            {
                **chat,
                "name": "toolCall",
                "messages": [_user("call get_weather for Paris")],
                "options": {"tools": [WEATHER], "toolMode": 2},
            },
            {**chat, "name": "script", "messages": [_user("scripted")], "options": {"modelOptions": {"script": SCRIPT, "delay": 0}}},
            {
                **chat,
                "name": "system",
                "messages": [{"role": 3, "content": [_text("Be terse.")], "name": None}, _user("hi")],
            },
            {**chat, "kind": "countTokens", "name": "countString", "text": "hello world, count me"},
            {**chat, "kind": "countTokens", "name": "countMessage", "text": _user("a message to count " * 10)},
            *(
                {**chat, "name": f"error{code}", "messages": [_user(f"/error {code} e2e {code} failure")]}
                for code in ("NoPermissions", "Blocked", "NotFound", "Unknown")
            ),
            {
                **chat,
                "name": "cancel",
                "messages": [_user(LONG)],
                "options": {"modelOptions": {"delay": 0.2}},
                "cancelAfterParts": 2,
            },
            {**chat, "name": "afterCancel", "messages": [_user("still there?")]},
            {
                **chat,
                "name": "kill",
                "messages": [_user(LONG)],
                "options": {"modelOptions": {"delay": 0.2}},
                "killHostAfterParts": 2,
                "listModels": True,
            },
            {**chat, "name": "afterKill", "messages": [_user("back again")], "listModels": True},
            # upstreams over real HTTP (the replay server)
            {
                "name": "upstreamToolCall",
                "model": "oai/m1",
                "messages": [
                    _user("What is the weather in Paris?"),
                    {
                        "role": 2,
                        "content": [{"kind": "toolCall", "callId": "c0", "name": "get_weather", "input": {"city": "Paris"}}],
                        "name": None,
                    },
                    _user({"kind": "toolResult", "callId": "c0", "content": [_text("sunny, 21 C")]}, "And Berlin?"),
                ],
                "options": {"tools": [WEATHER], "modelOptions": {"temperature": 0.5}},
            },
            {"name": "upstreamText", "model": "mistral/m1", "messages": [_user("hello")]},
            {"name": "upstreamAnthropic", "model": "anth/m1", "messages": [_user("hello")]},
            {
                "name": "upstreamResponses",
                "model": "resp/m1",
                "messages": [_user("What is the weather in San Francisco?")],
                "options": {"tools": [WEATHER]},
            },
            {"name": "upstreamResponsesImage", "model": "respimg/m1", "messages": [_user("draw a cat")]},
            {"name": "upstreamAiSdk", "model": "aisdk/m1", "messages": [_user("hello")]},
            {
                "name": "upstreamAiSdkTools",
                "model": "aisdktools/m1",
                "messages": [_user("compute (12 + 7) * 3 * 10")],
                "options": {"tools": [WEATHER]},
            },
            {"name": "upstream401", "model": "denied/m1", "messages": [_user("hello")]},
            {"name": "upstream429", "model": "limited/m1", "messages": [_user("hello")]},
            {"name": "upstreamCancel", "model": "slow/m1", "messages": [_user("hello")], "cancelAfterParts": 3},
        ],
    }


@pytest.fixture(scope="module")
def upstream() -> Iterator[ReplayServer]:
    """The upstream APIs, replayed on 127.0.0.1 for the whole run."""
    with ReplayServer() as server:
        for name, (_, path, reply) in UPSTREAMS.items():
            server.route("POST", f"/{name}/v1{path}", reply)
        yield server


@pytest.fixture(scope="module")
def e2e_run(upstream: ReplayServer) -> dict[str, Any]:
    """Runs VS Code once for the whole module; returns the report with the record inside."""
    env_file = CACHE / "env.json"
    if not env_file.is_file():
        pytest.fail(f"{env_file} is missing: run scripts/e2e-setup first")
    node = json.loads(env_file.read_text())["node"]
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    RUN_DIR.mkdir(parents=True)
    plan, settings = RUN_DIR / "plan.json", RUN_DIR / "settings.in.json"
    plan.write_text(json.dumps(build_plan(), indent=1))
    settings.write_text(json.dumps(build_settings(upstream.url), indent=1))
    endpoint: dict[str, Any] = {}
    endpoint_thread = threading.Thread(target=_drive_endpoint, args=(endpoint,), daemon=True)
    endpoint_thread.start()
    proc = subprocess.run(
        [node, str(HERE / "run.js"), "--run-dir", str(RUN_DIR), "--plan", str(plan), "--settings", str(settings)],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    endpoint_thread.join(10)
    report_file = RUN_DIR / "report.json"
    report = json.loads(report_file.read_text()) if report_file.is_file() else {}
    record_file = RUN_DIR / "record.json"
    record = json.loads(record_file.read_text()) if record_file.is_file() else None
    if record is None or not record.get("final"):
        pytest.fail(
            f"the e2e run did not finish (exit {proc.returncode}); see {RUN_DIR}\n"
            f"report: {report}\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
        )
    report["record"] = record
    report["consumer"] = json.loads(CONSUMER_OUT.read_text()) if CONSUMER_OUT.is_file() else {}
    report["endpoint"] = endpoint
    return report


@pytest.fixture(scope="module")
def record(e2e_run: dict[str, Any]) -> dict[str, Any]:
    rec: dict[str, Any] = e2e_run["record"]
    assert rec["errors"] == [], rec["errors"]
    return rec


def _case(record: dict[str, Any], name: str) -> dict[str, Any]:
    return answer_case(record, name)


def _kinds(case: dict[str, Any]) -> list[str]:
    return [p["kind"] for p in case["parts"]]


def test_models_are_listed_with_limits(record: dict[str, Any]) -> None:
    assert record["vscodeVersion"].startswith("1.139")
    models = {m["id"]: m for m in record["models"]}
    assert MODEL in models, record["models"]
    echo = models[MODEL]
    assert echo["vendor"] == "lmbridge"
    assert echo["family"] == "echo"
    assert echo["maxInputTokens"] > 0
    assert record["hostPid"] > 0
    for name in UPSTREAMS:
        assert f"{name}/m1" in models


def test_plain_request_streams_thinking_then_text(record: dict[str, Any]) -> None:
    case = _case(record, "plain")
    assert case["ok"], case
    assert case["text"] == "You said: hello streaming world"
    kinds = _kinds(case)
    assert kinds[0] == "thinking" and set(kinds[1:]) == {"text"}
    assert kinds.count("text") >= 3, "the answer arrives in several parts, not one"


def test_text_iterable(record: dict[str, Any]) -> None:
    case = _case(record, "readText")
    assert case["ok"], case
    assert case["text"] == "You said: just text"


def test_history_with_tool_call_and_result_reaches_the_model(record: dict[str, Any]) -> None:
    case = _case(record, "history")
    assert case["ok"], case
    assert case["text"] == "Tool result for c0: sunny, 21 C"


def test_tool_call_is_atomic_with_parsed_input(record: dict[str, Any]) -> None:
    case = _case(record, "toolCall")
    assert case["ok"], case
    calls = [p for p in case["parts"] if p["kind"] == "toolCall"]
    assert len(calls) == 1
    assert calls[0]["name"] == "get_weather"
    assert calls[0]["input"] == {"city": "Paris"}  # the echo model reads the name after "for"
    assert calls[0]["callId"]
    assert "text" not in _kinds(case)


def test_thinking_and_data_parts_arrive_in_order(record: dict[str, Any]) -> None:
    case = _case(record, "script")
    assert case["ok"], case
    assert record["apiSurface"]["LanguageModelThinkingPart"] == "function"
    assert case["parts"] == [
        {"kind": "thinking", "value": "step one", "id": "r1", "metadata": {"signature": "sig-1"}},
        {"kind": "text", "value": "Answer"},
        {"kind": "data", "mimeType": "text/x-json", "data": _b64(b'{"k":1}')},
        {"kind": "data", "mimeType": "image/png", "data": _b64(PNG)},
        {"kind": "text", "value": " done"},
    ]


def test_system_message_is_accepted(record: dict[str, Any]) -> None:
    case = _case(record, "system")
    assert case["ok"], case
    assert case["text"] == "You said: hi"


def test_count_tokens(record: dict[str, Any]) -> None:
    short, long = _case(record, "countString"), _case(record, "countMessage")
    assert short["ok"] and long["ok"], (short, long)
    assert 0 < short["tokens"] < long["tokens"]


@pytest.mark.parametrize("code", ["NoPermissions", "Blocked", "NotFound", "Unknown"])
def test_errors_surface_as_language_model_errors(record: dict[str, Any], code: str) -> None:
    case = _case(record, f"error{code}")
    assert not case["ok"]
    err = case["error"]
    assert err["isLanguageModelError"], err
    assert err["code"] == code
    assert f"e2e {code} failure" in err["message"]


def test_cancellation_mid_stream_stops_the_stream(record: dict[str, Any]) -> None:
    case = _case(record, "cancel")
    # A cancelled request ends the consumer's loop normally (VS Code's behaviour).
    assert case["ok"], case
    assert len(case["parts"]) <= 3, "parts kept coming after the cancellation"
    assert case["endedAfterCancelMs"] < 2000
    after = _case(record, "afterCancel")
    assert after["ok"] and after["text"] == "You said: still there?"
    assert after["hostPidAfter"] == case["hostPidBefore"], "cancellation must not restart the host"


def test_killed_host_fails_the_request_and_the_next_one_recovers(record: dict[str, Any]) -> None:
    case = _case(record, "kill")
    assert case["killedPid"] == case["hostPidBefore"] and case["killedPid"] > 0
    assert not case["ok"], case
    assert case["error"]["isLanguageModelError"], case["error"]
    assert "stopped" in case["error"]["message"]
    after = _case(record, "afterKill")
    assert after["ok"], after
    assert after["text"] == "You said: back again"
    assert after["hostPidAfter"] not in (None, case["killedPid"])
    # nothing half-registered: the new host's models are the old host's, each once
    before = case["modelsBefore"]
    assert before and "echo/echo" in " ".join(before), before
    assert sorted(after["modelsAfter"]) == sorted(before), (before, after["modelsAfter"])
    assert len(set(after["modelsAfter"])) == len(after["modelsAfter"])


def test_api_key_is_never_written(record: dict[str, Any]) -> None:
    # Everything the run wrote: logs, settings, the driver's record, the browser profile (VS
    # Code's secret store keeps the key encrypted there). Only the plan, which hands the key
    # to the driver as test input, is left out.
    leaked = []
    for path in RUN_DIR.rglob("*"):
        if not path.is_file() or path.name == "plan.json":
            continue
        if path.stat().st_size > 20_000_000:
            continue
        if API_KEY.encode() in path.read_bytes():
            leaked.append(str(path.relative_to(RUN_DIR)))
    assert leaked == []


def test_the_installed_extension_ships_the_lmbridge_wheel(record: dict[str, Any]) -> None:
    # what "lmbridge: Create Python Environment" installs on a machine without lmbridge
    wheels = list((RUN_DIR / "ext").glob("lmbridge.lmbridge-*/python/lmbridge-*-py3-none-any.whl"))
    assert len(wheels) == 1, wheels
    import zipfile

    with zipfile.ZipFile(wheels[0]) as whl:
        names = set(whl.namelist())
    assert {"lmbridge/__main__.py", "lmbridge/host/server.py"} <= names


def test_run_budget(e2e_run: dict[str, Any]) -> None:
    assert e2e_run["totalMs"] < 150_000
    # code-server + extension host + Python host + Chromium, shared pages shared out
    assert e2e_run["memoryMb"]["pss"] < 1800


# ------------------------------------------------------------------ upstreams over real HTTP


def _upstream_request(upstream: ReplayServer, name: str) -> Any:
    path = f"/{name}/v1{UPSTREAMS[name][1]}"
    reqs = upstream.requests_to(path, "POST")
    assert reqs, f"no request reached {path}"
    return reqs[0]


def test_upstream_stream_matches_the_decoder(record: dict[str, Any], upstream: ReplayServer) -> None:
    case = _case(record, "upstreamToolCall")
    assert case["ok"], case
    expected = decode_body("chat-completions", [fixture_body(TOOL_FIXTURE)]).parts
    thinking = "".join(
        p["value"] if isinstance(p["value"], str) else "".join(p["value"])
        for p in case["parts"]
        if p["kind"] == "thinking"
    )
    assert thinking == join_thinking(expected) and thinking
    calls = [(p["name"], p["input"]) for p in case["parts"] if p["kind"] == "toolCall"]
    assert calls == [(name, args) for _, name, args in tool_calls(expected)]
    assert case["text"] == join_text(expected)

    for name, fixture, fmt in (("upstreamText", TEXT_FIXTURE, "chat-completions"), ("upstreamAnthropic", ANTHROPIC_FIXTURE, "anthropic")):
        other = _case(record, name)
        assert other["ok"], other
        assert other["text"] == join_text(decode_body(fmt, [fixture_body(fixture)]).parts) != ""


@pytest.mark.parametrize(
    ("name", "fmt", "fixture", "kinds"),
    [
        ("upstreamResponses", "responses", RESPONSES_FIXTURE, {"thinking", "text", "toolCall"}),
        ("upstreamResponsesImage", "responses", IMAGE_FIXTURE, {"data"}),
        ("upstreamAiSdk", "ai-sdk", AI_SDK_UI_FIXTURE, {"thinking", "text"}),
        ("upstreamAiSdkTools", "ai-sdk", AI_SDK_TOOLS_FIXTURE, {"thinking", "toolCall", "text"}),
    ],
)
def test_responses_and_ai_sdk_parts_match_in_process_decoding(
    record: dict[str, Any], name: str, fmt: str, fixture: str, kinds: set[str]
) -> None:
    # Part for part, as the consumer in VS Code sees them: values, thinking ids and metadata,
    # tool call ids with parsed input, image bytes and MIME type.
    case = _case(record, name)
    assert case["ok"], case
    expected = parts_to_wire(decode_body(fmt, [fixture_body(fixture)]).parts)
    assert set(_kinds(case)) == kinds
    assert case["parts"] == expected


def test_responses_and_ai_sdk_requests(record: dict[str, Any], upstream: ReplayServer) -> None:
    assert _case(record, "upstreamResponses")["ok"]
    req = _upstream_request(upstream, "resp")
    assert req.headers["authorization"] == f"Bearer {API_KEY}"
    body = req.json()
    assert body["model"] == "m1" and body["stream"] is True
    assert [t["name"] for t in body["tools"]] == ["get_weather"]
    assert "What is the weather in San Francisco?" in json.dumps(body["input"])
    assert _case(record, "upstreamAiSdkTools")["ok"]
    req = _upstream_request(upstream, "aisdktools")
    assert req.headers["authorization"] == f"Bearer {API_KEY}"
    body = req.json()
    assert body["model"] == "m1"
    assert "compute (12 + 7) * 3 * 10" in json.dumps(body["messages"])
    assert "get_weather" in body["tools"]


def test_upstream_request_carries_history_options_and_the_stored_key(
    record: dict[str, Any], upstream: ReplayServer
) -> None:
    assert _case(record, "upstreamToolCall")["ok"]
    req = _upstream_request(upstream, "oai")
    assert req.headers["authorization"] == f"Bearer {API_KEY}"
    body = req.json()
    assert body["model"] == "m1" and body["stream"] is True
    assert body["temperature"] == 0.5
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"]
    calls = [c for m in body["messages"] for c in m.get("tool_calls") or []]
    assert calls[0]["id"] == "c0" and json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris"}
    results = [m for m in body["messages"] if m["role"] == "tool"]
    assert results[0]["tool_call_id"] == "c0" and "sunny, 21 C" in json.dumps(results[0]["content"])
    assert _upstream_request(upstream, "anth").headers["x-api-key"] == API_KEY


def test_upstream_401_is_no_permissions(record: dict[str, Any]) -> None:
    err = _case(record, "upstream401")["error"]
    assert err["isLanguageModelError"] and err["code"] == "NoPermissions", err
    assert "API key" in err["message"]
    assert API_KEY not in err["message"]


def test_upstream_429_is_blocked_after_retries(record: dict[str, Any], upstream: ReplayServer) -> None:
    err = _case(record, "upstream429")["error"]
    assert err["isLanguageModelError"] and err["code"] == "Blocked", err
    assert len(upstream.requests_to("/limited/v1/chat/completions")) >= 2, "429 is retried"


def test_upstream_sees_the_connection_close_on_cancel(record: dict[str, Any], upstream: ReplayServer) -> None:
    case = _case(record, "upstreamCancel")
    assert case["ok"], case
    assert case["endedAfterCancelMs"] < 2000
    req = _upstream_request(upstream, "slow")
    assert req.wait_done(10), "the upstream response is still open after the cancellation"
    assert req.closed_early
    assert req.chunks_sent < len(fixture_body(LONG_FIXTURE).split(b"\n\n")) - 1


# ------------------------------------------------------------------ consumer side: Python uses VS Code's models


def _drive_endpoint(out: dict[str, Any]) -> None:
    """Outside VS Code, as any other process: find the endpoint file the host wrote in the
    extension's storage folder and use VS Code's models with the official ``openai`` client.
    Runs in a thread during the VS Code run; writes ENDPOINT_DONE for the driver at the end."""
    import httpx
    import openai

    try:
        storage = RUN_DIR / "data" / "User" / "globalStorage"
        deadline = time.monotonic() + 150
        info: dict[str, Any] | None = None
        while info is None:
            if time.monotonic() > deadline:
                raise TimeoutError("no endpoint file appeared")
            for path in storage.glob("*/endpoint.json"):
                out["file"], out["mode"] = str(path.relative_to(RUN_DIR)), stat.S_IMODE(path.stat().st_mode)
                info = json.loads(path.read_text())
            time.sleep(0.2)
        url, token = info["url"], info["token"]
        out["url"], out["token"] = url, token  # kept in memory only: the log check needs it
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=token, max_retries=0, timeout=60)
        out["models"] = [m.id for m in client.models.list()]
        done = client.chat.completions.create(model="e2e-alpha", messages=[{"role": "user", "content": "plain"}])
        out["plain"] = {"content": done.choices[0].message.content, "model": done.model, "usage": done.usage.model_dump() if done.usage else None}
        chunks = list(
            client.chat.completions.create(
                model="echo/echo",
                messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "stream to openai"}],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        out["stream"] = {
            "content": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
            "contentChunks": sum(1 for c in chunks if c.choices and c.choices[0].delta.content),
            "finish": [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason],
            "usage": next((c.usage.model_dump() for c in chunks if c.usage), None),
        }
        tool_chunks = list(
            client.chat.completions.create(
                model="vscodelm/lmbridge-e2e/fam-b",
                messages=[{"role": "user", "content": "weather in Paris?"}],
                tools=[{"type": "function", "function": {"name": WEATHER["name"], "description": WEATHER["description"], "parameters": WEATHER["inputSchema"]}}],
                tool_choice="required",
                stream=True,
            )
        )
        calls = [tc for c in tool_chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
        out["tools"] = {
            "calls": [{"name": tc.function.name, "arguments": json.loads(tc.function.arguments or "{}"), "id": tc.id} for tc in calls],
            "model": tool_chunks[0].model if tool_chunks else None,
            "finish": [c.choices[0].finish_reason for c in tool_chunks if c.choices and c.choices[0].finish_reason],
        }
        try:
            client.chat.completions.create(model="e2e-alpha", messages=[{"role": "user", "content": "/throw Blocked"}], stream=True)
        except openai.APIStatusError as exc:
            out["blocked"] = {"status": exc.status_code, "body": exc.body}
        try:
            openai.OpenAI(base_url=f"{url}/v1", api_key="not-the-token", max_retries=0).models.list()
        except openai.AuthenticationError as exc:
            out["wrongToken"] = {"status": exc.status_code}
        bare = httpx.post(f"{url}/v1/chat/completions", json={"model": "e2e-alpha", "messages": [{"role": "user", "content": "x"}]}, trust_env=False)
        out["noToken"] = {"status": bare.status_code, "wwwAuthenticate": bare.headers.get("www-authenticate")}
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        ENDPOINT_DONE.write_text(json.dumps({"done": True}))


@pytest.fixture(scope="module")
def consumer(e2e_run: dict[str, Any]) -> dict[str, Any]:
    rec: dict[str, Any] = e2e_run["consumer"]
    assert rec.get("final"), f"the Python app did not finish: {rec} / driver: {e2e_run['record'].get('consumer')}"
    return rec


def _consumer_case(consumer: dict[str, Any], name: str) -> dict[str, Any]:
    case: dict[str, Any] = consumer["cases"][name]
    assert case["ok"], case
    return case


def test_consumer_app_runs_in_the_host_after_the_settings_change(consumer: dict[str, Any], record: dict[str, Any]) -> None:
    assert record["consumer"]["appFinal"] and record["consumer"]["endpointDone"], record["consumer"]
    ids = {(m["vendor"], m["id"]) for m in _consumer_case(consumer, "models")["models"]}
    assert {("lmbridge-e2e", "e2e-alpha"), ("lmbridge-e2e", "e2e-beta"), ("lmbridge", MODEL)} <= ids


def test_consumer_selects_by_each_selector_form(consumer: dict[str, Any]) -> None:
    case = _consumer_case(consumer, "selectors")
    chosen = {name: c["id"] for name, c in case["chosen"].items()}
    assert chosen == {
        "auto": case["first"],
        "empty": case["first"],
        "vscodelmVendorFamily": "e2e-alpha",
        "vscodelmFull": "e2e-beta",
        "cline": "e2e-beta",
        "slashId": MODEL,
    }
    assert case["chosen"]["cline"]["selector"] == "lmbridge-e2e/fam-b/2/e2e-beta"


def test_consumer_streams_text_from_another_extension_and_from_lmbridge(consumer: dict[str, Any]) -> None:
    alpha = _consumer_case(consumer, "streamAlpha")
    assert alpha["model"] == "e2e-alpha" and not alpha["degraded"]
    assert alpha["parts"] == [
        {"kind": "text", "value": v} for v in ("e2e-alpha", " says: ", "hello from python")
    ]
    # input counted by the provider's own countTokens (characters + 1000 per message)
    assert alpha["usage"]["input"] > 2000 and alpha["usage"]["output"] > 0
    echo = _consumer_case(consumer, "streamEcho")
    assert echo["model"] == MODEL
    assert echo["text"] == "You said: hello through two bridges"
    assert echo["parts"][0]["kind"] == "thinking" and len(echo["parts"]) >= 4


def test_consumer_tool_calls_come_back_as_parts(consumer: dict[str, Any]) -> None:
    alpha = _consumer_case(consumer, "toolAlpha")
    assert alpha["calls"] == [{"name": "get_weather", "input": {"city": "Paris"}, "callId": "call-e2e-1"}]
    assert alpha["outputTokens"] > 0
    echo = _consumer_case(consumer, "toolEcho")
    assert [(c["name"], c["input"]) for c in echo["calls"]] == [("get_weather", {"city": "Paris"})]


def test_consumer_cancellation_reaches_the_vscode_provider(consumer: dict[str, Any], record: dict[str, Any]) -> None:
    by_event, by_task = _consumer_case(consumer, "cancelEvent"), _consumer_case(consumer, "cancelTask")
    assert by_event["kind"] == "cancelled" and by_event["partsSeen"] == 2 and by_event["finished"]
    assert by_event["endedAfterCancelMs"] < 2000
    assert by_task["cancelled"] and by_task["partsSeen"] == 2 and by_task["endedAfterCancelMs"] < 2000
    events = {e.get("tag"): e for e in record["providerEvents"] if e.get("tag")}
    for tag in ("cancel-event", "cancel-task"):
        seen = events[tag]
        assert seen.get("cancelled"), f"the provider's token was not cancelled: {seen}"
        assert seen["partsSent"] < 30, seen
        assert seen["endedMs"] - seen["cancelledAtMs"] < 1000


def test_consumer_fallback_when_no_model_matches(consumer: dict[str, Any]) -> None:
    case = _consumer_case(consumer, "fallback")
    assert case["degraded"] and case["model"] == "lmbridge-fallback"
    assert "No language model in VS Code matches 'vscodelm/no-such-vendor/no-such-family'" in case["text"]
    assert "lmbridge-e2e/fam-a (e2e-alpha)" in case["text"], "the message lists what is available"


def test_consumer_errors_are_classified(consumer: dict[str, Any], record: dict[str, Any]) -> None:
    blocked = _consumer_case(consumer, "errorBlocked")
    assert (blocked["kind"], blocked["code"]) == ("rate-limited", "Blocked")
    assert "e2e provider refuses: Blocked" in blocked["detail"]
    denied = _consumer_case(consumer, "errorNoPermissions")
    assert (denied["kind"], denied["code"]) == ("no-permission", "NoPermissions")
    assert "Manage Language Model Access" in denied["userMessage"]
    assert {e.get("threw") for e in record["providerEvents"]} >= {"Blocked", "NoPermissions"}
    gone = _consumer_case(consumer, "errorEchoNotFound")
    assert (gone["kind"], gone["code"]) == ("model-not-found", "NotFound")
    assert "e2e gone" in gone["detail"]


def test_consumer_count_tokens_uses_the_model(consumer: dict[str, Any]) -> None:
    assert _consumer_case(consumer, "countTokens")["tokens"] == len("hello world") + 1000


def test_consumer_model_setting_switch_needs_no_reload(consumer: dict[str, Any], record: dict[str, Any]) -> None:
    case = _consumer_case(consumer, "modelSetting")
    assert case["settingBefore"] == "vscodelm/lmbridge-e2e/fam-a"
    assert case["before"] == "e2e-alpha says: which model?"
    assert case["settingAfter"] == "vscodelm/lmbridge-e2e/fam-b"
    assert case["after"] == "e2e-beta says: which model now?"
    assert case["selections"] == 2
    assert case["pidAfter"] == consumer["pid"]
    assert [u["value"] for u in record["consumer"]["settingUpdates"]] == ["vscodelm/lmbridge-e2e/fam-b"]
    assert case["arrivedMs"] < 5000


def test_endpoint_with_the_official_openai_client(e2e_run: dict[str, Any]) -> None:
    ep = e2e_run["endpoint"]
    assert "error" not in ep, ep
    assert ep["file"] == "data/User/globalStorage/lmbridge.lmbridge/endpoint.json"
    assert ep["mode"] == 0o600
    assert ep["url"].startswith("http://127.0.0.1:")
    assert {"e2e-alpha", "e2e-beta", MODEL} <= set(ep["models"])
    assert ep["plain"]["content"] == "e2e-alpha says: plain" and ep["plain"]["model"] == "e2e-alpha"
    # the context guard's estimate: no VS Code countTokens (which the test model inflates by 1000)
    assert 0 < ep["plain"]["usage"]["prompt_tokens"] < 1000
    assert ep["stream"]["content"] == "You said: stream to openai"
    assert ep["stream"]["contentChunks"] >= 3 and ep["stream"]["finish"] == ["stop"]
    assert ep["stream"]["usage"]["completion_tokens"] > 0
    assert ep["tools"]["model"] == "e2e-beta"
    assert [(c["name"], c["arguments"]) for c in ep["tools"]["calls"]] == [("get_weather", {"city": "Paris"})]
    assert ep["tools"]["finish"] == ["tool_calls"]
    assert ep["blocked"]["status"] == 429


def test_endpoint_refuses_requests_without_the_token(e2e_run: dict[str, Any]) -> None:
    ep = e2e_run["endpoint"]
    assert ep["wrongToken"] == {"status": 401}
    assert ep["noToken"] == {"status": 401, "wwwAuthenticate": "Bearer"}


def test_endpoint_path_is_shown_and_its_token_never_logged(e2e_run: dict[str, Any]) -> None:
    token = e2e_run["endpoint"]["token"]
    logs = list((RUN_DIR / "data" / "logs").rglob("lmbridge.log"))
    text = "\n".join(p.read_text(errors="replace") for p in logs)
    assert "loopback endpoint listening on http://127.0.0.1:" in text, [str(p) for p in logs]
    assert "lmbridge.lmbridge/endpoint.json" in text
    # the token was only in the endpoint file, which the host removed when it stopped (SIGTERM)
    assert not (RUN_DIR / e2e_run["endpoint"]["file"]).exists()
    leaked = [str(p.relative_to(RUN_DIR)) for p in RUN_DIR.rglob("*") if p.is_file() and p.stat().st_size < 20_000_000 and token.encode() in p.read_bytes()]
    assert leaked == []


def test_every_answer_ends_with_its_usage_for_copilots_context_ring(record: dict[str, Any]) -> None:
    for name in ("plain", "upstreamText", "upstreamAnthropic"):
        usage = _case(record, name).get("usagePart")
        assert usage is not None, name
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
