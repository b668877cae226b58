"""``diagnose`` (the host) and ``lmbridge doctor``: a report to paste into a bug report, which
holds each provider's state and errors, the network settings and what a workspace tried to
set, and never a key, a token or a message's content. Real host, real upstream on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lmbridge.config import origin_of
from lmbridge.host.client import HostClient
from lmbridge.host.jsonrpc import RemoteError
from lmbridge.parts import ChatMessage
from support.replay_server import ReplayServer, Reply

STORED_KEY = "sk-stored-DIAG-9f8e7d6c5b4a"
ENV_KEY = "sk-env-DIAG-1a2b3c4d5e6f"
PROXY_PASSWORD = "proxy-pw-DIAG-77"
SECRET_WORDS = "aubergine-quartz-5150"


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        # an upstream that echoes the key it got in its error (the gateway redacts it)
        server.route("POST", "/v1/chat/completions", Reply.error(
            500, {"error": {"message": f"boom for key {STORED_KEY}", "type": "server_error"}}))
        yield server  # fmt: skip


async def test_the_hosts_diagnosis_has_states_and_errors_and_no_key_or_content(
    upstream: ReplayServer,
) -> None:
    base = upstream.url + "/v1"
    env = {**os.environ, "LMB_DIAG_KEY": ENV_KEY}
    async with HostClient.start(env=env) as host:
        await host.initialize(
            providers=[
                {"name": "up", "format": "chat-completions", "baseUrl": base, "models": ["m"],
                 "retry": {"maxAttempts": 1}},
                {"name": "envkey", "format": "anthropic", "baseUrl": base, "apiKeyEnv": "LMB_DIAG_KEY",
                 "models": ["claude-sonnet-4-5"]},
                {"name": "broken", "provider": "no_such_module_xyz:P"},
            ],
            workspaceProviders=[{"name": "ws", "provider": "evil:Run"}],
            secrets={"up": {"key": STORED_KEY, "origin": origin_of(base)}},
            network={"proxy": f"http://me:{PROXY_PASSWORD}@proxy.test:8080", "noProxy": ["corp.test"]},
        )  # fmt: skip
        await host.request("models/list", {})
        with pytest.raises(RemoteError):
            await host.chat("up/m", [ChatMessage.user(f"tell me about {SECRET_WORDS}")])
        result = await host.request("diagnose", {})
    text, report = result["text"], result["report"]
    everything = text + json.dumps(report)
    for secret in (STORED_KEY, ENV_KEY, PROXY_PASSWORD, SECRET_WORDS):
        assert secret not in everything, secret
    providers = {p["name"]: p for p in report["providers"]}
    assert providers["up"]["ok"] and providers["up"]["origin"] == origin_of(base)
    assert "unavailable" in providers["up"]["lastError"] or "500" in providers["up"]["lastError"]
    assert providers["envkey"]["ok"] and providers["envkey"]["format"] == "anthropic"
    assert not providers["broken"]["ok"] and "no_such_module_xyz" in providers["broken"]["error"]
    assert report["network"]["proxy"] == "http://***@proxy.test:8080"
    assert report["network"]["noProxy"] == ["corp.test"]
    assert [i["name"] for i in report["ignored"]] == ["ws"]  # what a workspace tried
    assert report["versions"]["executable"] and report["versions"]["build"]
    assert any("chat.byokUtilityModelDefault" in t for t in report["traps"])
    assert "## Providers" in text and "- broken: not loaded" in text


def test_doctor_prints_the_diagnosis_without_the_key(tmp_path: Path) -> None:
    config = tmp_path / "providers.json"
    config.write_text(json.dumps([
        {"name": "up", "format": "chat-completions", "baseUrl": "https://api.example.test/v1",
         "apiKeyEnv": "LMB_DIAG_KEY", "models": ["o3"]},
    ]))  # fmt: skip
    env = {**os.environ, "LMB_DIAG_KEY": ENV_KEY, "HTTPS_PROXY": f"http://u:{PROXY_PASSWORD}@p.test:1"}
    out = subprocess.run(
        [sys.executable, "-m", "lmbridge", "doctor", "--config", str(config)],
        capture_output=True, text=True, env=env, timeout=120, check=True,
    )  # fmt: skip
    assert ENV_KEY not in out.stdout + out.stderr
    assert PROXY_PASSWORD not in out.stdout + out.stderr
    assert "- up: loaded" in out.stdout and "origin: https://api.example.test:443" in out.stdout
    assert "environment HTTPS_PROXY: http://***@p.test:1" in out.stdout
    assert "## Known traps" in out.stdout
