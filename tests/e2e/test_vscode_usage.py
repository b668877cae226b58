"""End to end in a real VS Code: usage and limits visible, long conversations.

One run of ``tests/e2e/run.js`` (code-server + headless Chromium) with three upstreams replayed
on 127.0.0.1 by :class:`ReplayServer`, asked through ``vscode.lm`` by the driver extension:

- a Chat Completions answer cut by the output limit (a llama-server recording, finish reason
  ``length``), then an Anthropic answer (a recording with usage): the status bar item shows the
  last answer's tokens against the model's input limit, its tooltip the totals per model and the
  cut answer; the runner reads both from the workbench's DOM and keeps screenshots in
  ``tests/e2e/artifacts/`` (git-ignored);
- a conversation clearly longer than a model's window: the clear error, and no request
  upstream; one at 99 % of a model's input limit is sent;
- the Anthropic request carries context management and its beta header;
- VS Code's ``http.proxy``: a provider whose host only the test proxy can reach
  (``upstream.test``) answers through it; the loopback upstreams are reached directly.

Skipped unless ``LMBRIDGE_E2E=1``.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.proxy import TestProxy
from support.replay_server import ReplayServer, Reply
from support.vscode_run import E2E_MARKS, REPO, fresh_run_dir, run_vscode

pytestmark = E2E_MARKS

HERE = Path(__file__).resolve().parent
RUN_DIR = REPO / "e2e-out" / "vscode-usage"
ARTIFACTS = HERE / "artifacts"
SCREENSHOT = ARTIFACTS / "status-item.png"
TOOLTIP_SHOT = ARTIFACTS / "status-item-tooltip.png"
API_KEY = "sk-e2e-" + secrets.token_hex(12)
# A word of the conversation: it must reach no log.
SECRET_WORD = "zebracadabra" + secrets.token_hex(4)

# (format, path under the base URL, reply, models)
CUT_FIXTURE = "llama-cpp/chat-completions-text.chunks.txt"  # usage 39 in, 24 out, finish length
ANTHROPIC_FIXTURE = "anthropic/anthropic-clear-tool-uses.1.chunks.txt"  # usage 859 in, 122 out
CLAUDE = {
    "id": "claude-haiku-4-5",
    "name": "Claude Haiku 4.5",
    "maxInputTokens": 200000,
    "maxOutputTokens": 8192,
}
UPSTREAMS: dict[str, tuple[str, str, Reply, list[Any]]] = {
    "llama": (
        "chat-completions",
        "/chat/completions",
        Reply.fixture(CUT_FIXTURE),
        [{"id": "smollm2", "maxInputTokens": 8192, "maxOutputTokens": 24}],
    ),
    "small": (
        "chat-completions",
        "/chat/completions",
        Reply.fixture(CUT_FIXTURE),
        [{"id": "m1", "maxInputTokens": 1000, "maxOutputTokens": 100}],
    ),
    "edge": (
        "chat-completions",
        "/chat/completions",
        Reply.fixture(CUT_FIXTURE),
        [{"id": "near", "maxInputTokens": 1000, "maxOutputTokens": 100}],
    ),
    "anth": ("anthropic", "/messages", Reply.fixture(ANTHROPIC_FIXTURE), [CLAUDE]),
    "viaproxy": (
        "chat-completions",
        "/chat/completions",
        Reply.fixture(CUT_FIXTURE),
        [{"id": "m1", "name": "Proxied"}],
    ),
}
# A name that resolves nowhere: only the proxy (which sends everything to the replay server) reaches it.
PROXIED_HOST = "upstream.test"


def _user(text: str) -> dict[str, Any]:
    return {"role": 1, "content": [{"kind": "text", "value": text}], "name": None}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": 2, "content": [{"kind": "text", "value": text}], "name": None}


# About 30 turns of 150 words: several thousand tokens against the 1,000 of small/m1.
LONG_CONVERSATION = [
    (_user if i % 2 == 0 else _assistant)(
        " ".join(f"turn{i} word{j} {SECRET_WORD}" for j in range(50))
    )
    for i in range(30)
] + [_user("and now?")]
# About 99 % of the 1,000-token input limit of edge/near by lmbridge's estimate (9.75 tokens a
# sentence): sent, since it may fit.
NEAR_LIMIT = [_user("the quick brown fox jumps over the lazy dog " * 100)]


def _base_url(name: str, upstream_url: str) -> str:
    return f"http://{PROXIED_HOST}/{name}/v1" if name == "viaproxy" else f"{upstream_url}/{name}/v1"


def build_settings(upstream_url: str, proxy_url: str) -> dict[str, Any]:
    return {
        "lmbridge.pythonCommand": sys.executable,
        "lmbridge.logLevel": "info",
        "lmbridge.providers": [
            {
                "name": name,
                "format": fmt,
                "baseUrl": _base_url(name, upstream_url),
                "models": models,
                **({"allowInsecureHttp": True} if name == "viaproxy" else {}),
            }
            for name, (fmt, _, _, models) in UPSTREAMS.items()
        ],
        # VS Code's own settings (application scope): the host's HTTP client follows them
        "http.proxy": proxy_url,
        "http.noProxy": ["example.invalid"],
    }


def build_plan() -> dict[str, Any]:
    return {
        "selector": {"vendor": "lmbridge"},
        "waitForModels": [
            "llama/smollm2",
            "small/m1",
            "edge/near",
            "anth/claude-haiku-4-5",
            "viaproxy/m1",
        ],
        "apiKeys": dict.fromkeys(UPSTREAMS, API_KEY),
        "cases": [
            {
                "name": "cut",
                "model": "llama/smollm2",
                "messages": [_user(f"tell me a story {SECRET_WORD}")],
            },
            {"name": "tooLong", "model": "small/m1", "messages": LONG_CONVERSATION},
            {"name": "nearLimit", "model": "edge/near", "messages": NEAR_LIMIT},
            {"name": "proxied", "model": "viaproxy/m1", "messages": [_user("through the proxy")]},
            {
                "name": "anthropic",
                "model": "anth/claude-haiku-4-5",
                "messages": [_user(f"hello {SECRET_WORD}")],
            },
        ],
        "statusItem": {
            "contains": "lmbridge",
            "screenshot": str(SCREENSHOT),
            "hoverScreenshot": str(TOOLTIP_SHOT),
        },
    }


@pytest.fixture(scope="module")
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        for name, (_, path, reply, _) in UPSTREAMS.items():
            server.route("POST", f"/{name}/v1{path}", reply)
        yield server


@pytest.fixture(scope="module")
def proxy(upstream: ReplayServer) -> Iterator[TestProxy]:
    with TestProxy(upstream.port) as p:
        yield p


@pytest.fixture(scope="module")
def run(upstream: ReplayServer, proxy: TestProxy) -> dict[str, Any]:
    fresh_run_dir(RUN_DIR)
    for shot in (SCREENSHOT, TOOLTIP_SHOT):
        shot.unlink(missing_ok=True)
    done = run_vscode(RUN_DIR, build_plan(), build_settings(upstream.url, proxy.url))
    assert done.record["errors"] == [], done.record["errors"]
    return {**done.report, "record": done.record}


def _case(run: dict[str, Any], name: str) -> dict[str, Any]:
    case: dict[str, Any] = run["record"]["cases"][name]
    return case


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_answers_arrive(run: dict[str, Any]) -> None:
    cut, anth = _case(run, "cut"), _case(run, "anthropic")
    assert cut["ok"] and cut["text"], cut
    assert anth["ok"] and anth["text"], anth


def test_the_status_item_shows_the_last_answers_token_use(run: dict[str, Any]) -> None:
    item = run.get("statusItem") or {}
    assert item.get("found"), f"no lmbridge status bar item in the workbench: {item}"
    # the Anthropic answer came last: 859 input + 122 output tokens of Claude's 200,000
    assert item["text"] == "lmbridge 981/200k", item
    assert not item["hasWarningIcon"], "the last answer was neither cut nor near the limit"
    assert "981 tokens of 200000" in (item["ariaLabel"] or ""), item
    width, height = _png_size(SCREENSHOT)
    assert (width, height) == (1280, 720), "the whole workbench, as the user saw it"
    assert SCREENSHOT.stat().st_size > 10_000, "an empty page is smaller"


def test_the_tooltip_lists_the_totals_and_the_cut_answer(run: dict[str, Any]) -> None:
    tip = (run.get("statusItem") or {}).get("tooltip")
    assert tip, run.get("statusItem")
    assert (
        "981 tokens (input 859 + output 122) of the model's 200,000-token input limit (0.5 %)"
        in tip
    ), tip
    assert "Since VS Code started" in tip
    # one row per model: answers, input, output, cached, reasoning (the table as rendered text)
    rows = {
        line.split("\t")[0].strip(): [c.strip() for c in line.split("\t")[1:]]
        for line in tip.splitlines()
        if "\t" in line
    }
    claude = next(v for k, v in rows.items() if k.startswith("Claude Haiku 4.5"))
    assert claude[:3] == ["1", "859", "122"], rows
    smollm = next((k, v) for k, v in rows.items() if k.startswith("smollm2"))
    assert "1 cut by the output limit" in smollm[0], rows
    assert smollm[1][:3] == ["1", "39", "24"], rows
    assert "small/m1" not in tip and not any(k.startswith("m1") for k in rows), (
        "a refused request is no answer"
    )
    w, h = _png_size(TOOLTIP_SHOT)
    assert w > 200 and h > 100, (w, h)


def test_a_conversation_beyond_the_limit_fails_clearly_without_an_upstream_request(
    run: dict[str, Any], upstream: ReplayServer
) -> None:
    case = _case(run, "tooLong")
    assert not case["ok"], case
    err = case["error"]
    assert err["isLanguageModelError"], err
    message = err["message"]
    assert "too long for small/m1" in message, message
    assert re.search(
        r"about [\d,]+ tokens .* input limit of 1,000, [\d,]+ tokens over, and over its whole "
        r"1,100-token context window even if the estimate were 10% high; nothing was sent",
        message,
    ), message
    assert "new chat" in message and '"contextCheck": false' in message
    assert upstream.requests_to("/small/v1/chat/completions") == []
    # the upstreams that answered were asked once each
    assert len(upstream.requests_to("/llama/v1/chat/completions")) == 1
    assert len(upstream.requests_to("/anth/v1/messages")) == 1


def test_the_anthropic_request_carries_context_management(
    run: dict[str, Any], upstream: ReplayServer
) -> None:
    [req] = upstream.requests_to("/anth/v1/messages")
    body = req.json()
    assert body["model"] == "claude-haiku-4-5"
    assert body["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}
    betas = [b.strip() for b in req.headers.get("anthropic-beta", "").split(",")]
    assert "context-management-2025-06-27" in betas, req.headers
    assert req.headers.get("x-api-key") == API_KEY


def test_each_answer_has_one_usage_line_in_the_output_without_content(run: dict[str, Any]) -> None:
    logs = list((RUN_DIR / "data" / "logs").rglob("lmbridge.log"))
    assert logs, "the lmbridge output channel wrote no log file"
    text = "\n".join(p.read_text(errors="replace") for p in logs)
    usage = [
        line
        for line in text.splitlines()
        if "answer from " in line and "viaproxy" not in line and "edge/" not in line
    ]
    assert len(usage) == 2, usage
    assert (
        "answer from llama/smollm2: input 39 tokens" in usage[0] and "finish length" in usage[0]
    ), usage
    assert "cut by the output limit" in usage[0]
    assert (
        "answer from anth/claude-haiku-4-5: input 859 tokens" in usage[1]
        and "output 122" in usage[1]
    ), usage
    assert all(re.search(r"\[info\]", line) for line in usage), usage
    assert SECRET_WORD not in text, "conversation content reached the log"


def test_vscode_http_proxy_carries_the_host_requests(
    run: dict[str, Any], upstream: ReplayServer, proxy: TestProxy
) -> None:
    case = _case(run, "proxied")
    assert case["ok"] and case["text"], case
    targets = [(seen.method, seen.target) for seen in proxy.seen]
    assert targets == [("POST", f"http://{PROXIED_HOST}/viaproxy/v1/chat/completions")], targets
    assert len(upstream.requests_to("/viaproxy/v1/chat/completions")) == 1
    # loopback upstreams never go through the proxy
    assert not any("127.0.0.1" in target or "localhost" in target for _, target in targets)


def test_a_request_at_99_percent_of_the_input_limit_is_sent(
    run: dict[str, Any], upstream: ReplayServer
) -> None:
    case = _case(run, "nearLimit")
    assert case["ok"], case
    [req] = upstream.requests_to("/edge/v1/chat/completions")
    assert "quick brown fox" in str(req.json()["messages"])


def test_the_usage_part_reaches_the_consumer_with_the_upstreams_numbers(run: dict[str, Any]) -> None:
    # what Copilot's context ring reads: a DataPart of MIME type "usage" at the end of the answer
    parts = _case(run, "anthropic")["parts"]
    last = parts[-1]
    assert last["kind"] == "data" and last["mimeType"] == "usage", parts
    usage = json.loads(base64.b64decode(last["data"]))
    # the recording's own usage: 859 in, 122 out
    assert usage["prompt_tokens"] == 859 and usage["completion_tokens"] == 122, usage
    assert usage["total_tokens"] == 981
    assert [p for p in parts if p["kind"] == "data" and p["mimeType"] == "usage"] == [last]
    cut = _case(run, "cut")["parts"][-1]
    assert cut["mimeType"] == "usage", cut
    assert json.loads(base64.b64decode(cut["data"]))["completion_tokens"] == 24
