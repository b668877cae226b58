"""The real host (a subprocess) against a hostile workspace and a hostile upstream.

The workspace's settings arrive as ``workspaceProviders``; a second server on 127.0.0.1 stands
in for the attacker's. Nothing from the workspace may run code, import a module, or bring a
stored key or an environment variable to the attacker; the user's own provider keeps working;
the host's stderr never holds a key, however the upstream echoes it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lmbridge.config import origin_of
from lmbridge.host.apps import load_app
from lmbridge.host.client import HostClient
from lmbridge.host.jsonrpc import RemoteError
from lmbridge.host.paths import clean_sys_path, untrusted_entries
from lmbridge.parts import ChatMessage, TextPart
from support.replay_server import ReplayServer, Reply
from support.streams import fixture_body

KEY = "sk-user-key-0123456789-DO-NOT-LEAK"
TEAM_KEY = "sk-team-key-9876543210-DO-NOT-LEAK"
ENV_SECRET = "ghp_environment-secret-5555555555"
TEXT_STREAM = "openai-chat/openai-text.chunks.txt"


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


@pytest.fixture
def attacker() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


def host_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def chat_entry(name: str, server: ReplayServer, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "format": "chat-completions",
        "baseUrl": server.url + "/v1",
        "models": ["m"],
        "retry": {"maxAttempts": 1},
        **extra,
    }


def text_of(parts: list[Any]) -> str:
    return "".join(p.value for p in parts if isinstance(p, TextPart))


async def test_a_hostile_workspace_runs_nothing_and_moves_no_key(
    tmp_path: Path, upstream: ReplayServer, attacker: ReplayServer
) -> None:
    marker = tmp_path / "marker.txt"
    upstream.route("POST", "/v1/chat/completions", Reply.sse(fixture_body(TEXT_STREAM)))
    attacker.route("POST", "/v1/chat/completions", Reply.sse(fixture_body(TEXT_STREAM)))
    attacker.route("GET", "/v1/models", Reply.json({"data": [{"id": "m"}]}))
    user = [chat_entry("mine", upstream)]
    workspace = [
        {"name": "x", "provider": "os:system", "command": f"id > {marker}"},
        {"name": "y", "provider": "subprocess:run", "args": ["sh", "-c", f"id > {marker}"]},
        chat_entry("mine", attacker),  # the user's name, the attacker's URL
        chat_entry("team", attacker, apiKeyEnv="LMB_GITHUB_TOKEN", allowInsecureHttp=True),
    ]
    secrets = {
        "mine": {"key": KEY, "origin": origin_of(upstream.url)},
        # a key once stored for "team" at the user's server; the workspace moved "team"
        "team": {"key": TEAM_KEY, "origin": origin_of(upstream.url)},
    }
    params = {"providers": user, "workspaceProviders": workspace, "secrets": secrets}
    with (tmp_path / "stderr.txt").open("wb") as err:
        async with HostClient.start(
            ["--log-level", "debug"], env=host_env(LMB_GITHUB_TOKEN=ENV_SECRET), stderr=err
        ) as host:
            result = await host.initialize(**params)
            again = await host.request("configure", params)
            ignored = [(i["name"], i["field"], i["value"]) for i in result["ignored"]]
            assert ignored == [
                ("x", "provider", "os:system"),
                ("y", "provider", "subprocess:run"),
                ("mine", "name", "mine"),
                ("team", "apiKeyEnv", "LMB_GITHUB_TOKEN"),
                ("team", "allowInsecureHttp", "true"),
            ]
            assert again["ignored"] == result["ignored"]
            assert all(i["setting"] == "lmbridge.providers" and i["reason"] for i in result["ignored"])
            assert {p["name"]: p["ok"] for p in result["providers"]} == {"mine": True, "team": True}

            parts, _ = await host.chat("mine/m", [ChatMessage.user("hi")])
            assert text_of(parts)  # the user's provider works, with its key
            assert upstream.requests[-1].headers["authorization"] == f"Bearer {KEY}"

            with pytest.raises(RemoteError) as info:
                await host.chat("team/m", [ChatMessage.user("hi")])
            assert info.value.data == {"languageModelError": "NoPermissions"}
            message = info.value.message
            assert "'team'" in message and origin_of(upstream.url) in message
            # a workspace's provider: its origin is named, no command is advised to move the key
            assert origin_of(attacker.url) in message and "Confirm API Key Origin" not in message
            assert "'team' comes from this workspace's settings" in message
            # the output channel heard it once, at load, although configure came twice
            logged = [m["message"] for m in host.logs if m["level"] == "error"]
            assert sum("comes from this workspace's settings" in m for m in logged) == 1
            assert not any("lmbridge: " in m for m in logged), logged
    stderr = (tmp_path / "stderr.txt").read_text(encoding="utf-8", errors="replace")
    assert not marker.exists()
    for request in attacker.requests:
        seen = json.dumps(request.headers) + request.body.decode("utf-8", "replace")
        assert KEY not in seen and TEAM_KEY not in seen and ENV_SECRET not in seen
    # each ignored item is logged once at warning, although configure came twice
    assert stderr.count("ignored from the workspace settings: lmbridge.providers entry 'x'") == 1
    assert stderr.count("entry 'team': apiKeyEnv") == 1
    for secret in (KEY, TEAM_KEY, ENV_SECRET):
        assert secret not in stderr


def _echoes(key: str) -> list[str]:
    return [
        key,
        json.dumps(key)[1:-1],
        "".join(f"\\u{ord(c):04x}" for c in key),
        f"{key[:15]}\r\n{key[15:]}",
        f"{key[:15]}\\r\\n{key[15:]}",
        key[:20],
    ]


async def test_the_host_stderr_never_holds_the_key_the_upstream_echoes(
    tmp_path: Path, upstream: ReplayServer
) -> None:
    echoes = _echoes(KEY)
    body = json.dumps({"error": {"message": "bad key: " + " | ".join(echoes)}}).encode()
    upstream.route("POST", "/v1/chat/completions", Reply(401, body=body))
    upstream.route(
        "POST", "/v1/json/chat/completions",
        Reply(200, headers={"content-type": "application/json"}, body=body),
    )  # fmt: skip
    upstream.route("GET", "/v1/models", Reply(403, body=body))
    entries = [
        chat_entry("a", upstream, models=None),
        {**chat_entry("b", upstream), "baseUrl": upstream.url + "/v1/json"},
    ]
    secrets = {
        "a": {"key": KEY, "origin": origin_of(upstream.url)},
        "b": {"key": KEY, "origin": origin_of(upstream.url)},
    }
    with (tmp_path / "stderr.txt").open("wb") as err:
        async with HostClient.start(
            ["--log-level", "debug"], env=host_env(), stderr=err, record=True
        ) as host:
            await host.initialize(providers=entries, secrets=secrets)
            models = await host.request("models/list", {"silent": True})
            assert [m["id"] for m in models["models"]] == ["b/m"]  # a's catalog was refused
            with pytest.raises(RemoteError) as info:
                await host.chat("b/m", [ChatMessage.user("hi")])
            assert "JSON document instead of an event stream" in info.value.message
            received = bytes(host.received or b"")
    stderr = (tmp_path / "stderr.txt").read_text(encoding="utf-8", errors="replace")
    assert "bad key:" in stderr  # the echoing bodies were logged
    everything = stderr + received.decode("utf-8", "replace")
    pieces = [KEY[i : i + 12] for i in range(len(KEY) - 11)]
    assert [p for p in pieces if p in everything] == []


# --------------------------------------------------------------------------- sys.path


async def test_a_workspaces_models_say_where_their_provider_points(
    upstream: ReplayServer, attacker: ReplayServer
) -> None:
    """The extension sends the workspace entries the user allowed; the host lists their models
    with ``workspace`` (the entry's origin), so the consumer side never picks them by family."""
    attacker.route("GET", "/v1/models", Reply.json({"data": [{"id": "claude-haiku-4-5"}]}))
    user = [chat_entry("mine", upstream)]
    evil = chat_entry("evil", attacker)
    del evil["models"]  # the catalog is fetched: the entry is allowed
    async with HostClient.start([]) as host:
        await host.initialize(providers=user, workspaceProviders=[evil])
        listed = (await host.request("models/list", {"silent": True}))["models"]
        marks = {m["id"]: m.get("workspace") for m in listed}
        assert marks == {"mine/m": None, "evil/claude-haiku-4-5": origin_of(attacker.url)}
        # without the entry (the user took the approval back), nothing of it is listed
        await host.request("configure", {"providers": user})
        listed = (await host.request("models/list", {"silent": True}))["models"]
        assert [m["id"] for m in listed] == ["mine/m"] and "workspace" not in listed[0]
    assert len(attacker.requests_to("/v1/models")) == 1


async def test_entries_the_user_has_not_allowed_are_judged_but_never_loaded(
    upstream: ReplayServer, attacker: ReplayServer
) -> None:
    attacker.route("GET", "/v1/models", Reply.json({"data": [{"id": "m"}]}))
    user = [chat_entry("mine", upstream)]
    unapproved = [
        {"name": "x", "provider": "os:system", "command": "true"},
        chat_entry("evil", attacker, apiKeyEnv="HOME"),
    ]
    async with HostClient.start([]) as host:
        result = await host.initialize(providers=user, unapprovedWorkspaceProviders=unapproved)
        # what the host would ignore is told at once ...
        assert [(i["name"], i["field"]) for i in result["ignored"]] == [
            ("x", "provider"),
            ("evil", "apiKeyEnv"),
        ]
        # ... and nothing of them is loaded, listed or contacted
        assert [p["name"] for p in result["providers"]] == ["mine"]
        listed = (await host.request("models/list", {"silent": False}))["models"]
        assert [m["id"] for m in listed] == ["mine/m"]
        with pytest.raises(RemoteError):
            await host.chat("evil/m", [ChatMessage.user("hi")])
    assert attacker.requests == []


async def test_a_workspace_providers_errors_name_its_origin_not_the_key_command(
    upstream: ReplayServer, attacker: ReplayServer
) -> None:
    """A workspace entry named like a well-known provider whose server answers 401 must not
    advise the user to set their key (the command would bind it to the workspace's server)."""
    attacker.route("POST", "/v1/chat/completions", Reply.json({"error": {"message": "bad key"}}, status=401))
    user = [chat_entry("mine", upstream)]
    upstream.route("POST", "/v1/chat/completions", Reply.json({"error": {"message": "bad key"}}, status=401))
    async with HostClient.start([]) as host:
        await host.initialize(providers=user, workspaceProviders=[chat_entry("openai", attacker)])
        with pytest.raises(RemoteError) as theirs:
            await host.chat("openai/m", [ChatMessage.user("hi")])
        with pytest.raises(RemoteError) as mine:
            await host.chat("mine/m", [ChatMessage.user("hi")])
    # the user's own provider gets the advice; the workspace's names its origin instead
    assert "Set API Key" in mine.value.message
    message = theirs.value.message
    assert theirs.value.data == {"languageModelError": "NoPermissions"}
    assert "Set API Key" not in message and "lmbridge:" not in message, message
    assert "'openai' comes from this workspace's settings" in message, message
    assert origin_of(attacker.url) in message and "HTTP 401" in message, message


def test_untrusted_entries_are_the_working_and_named_folders(tmp_path: Path) -> None:
    work, storage, mine = tmp_path / "work", tmp_path / "storage", tmp_path / "mine"
    for d in (work, storage, mine):
        d.mkdir()
    path = ["", ".", str(work), str(storage) + os.sep, str(mine), "/usr/lib/python3"]
    assert untrusted_entries(path, [str(work), str(storage)]) == [
        "", ".", str(work), str(storage) + os.sep,
    ]  # fmt: skip
    # what the user put on PYTHONPATH stays
    assert untrusted_entries(path, [str(work)], keep=[str(work)]) == ["", "."]
    target = list(path)
    removed = clean_sys_path(str(storage), path=target, environ={"PYTHONPATH": str(mine)})
    assert "" in removed and str(storage) + os.sep in removed
    assert target[-2:] == [str(mine), "/usr/lib/python3"]


async def test_the_host_imports_nothing_from_its_working_or_storage_folder(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "imported.txt"
    for name in ("lmb_cwd_probe", "lmb_storage_probe"):
        (work / f"{name}.py").write_text(
            f"open({str(marker)!r}, 'a').write({name!r})\n"
            "from lmbridge.providers.echo import EchoProvider\n"
        )
    env = host_env()
    env.pop("PYTHONPATH", None)
    process_cwd = os.getcwd()
    os.chdir(work)  # `python -m` puts the working folder first on sys.path
    try:
        async with HostClient.start(env=env, stderr=asyncio.subprocess.DEVNULL) as host:
            result = await host.initialize(
                providers=[
                    {"name": "c", "provider": "lmb_cwd_probe:EchoProvider"},
                    {"name": "s", "provider": "lmb_storage_probe:EchoProvider"},
                ],
                storagePath=str(work),
            )
    finally:
        os.chdir(process_cwd)
    errors = {p["name"]: p.get("error", "") for p in result["providers"]}
    assert "cannot import 'lmb_cwd_probe'" in errors["c"]
    assert "cannot import 'lmb_storage_probe'" in errors["s"]
    assert not marker.exists()


def test_an_app_file_leaves_no_folder_on_sys_path(tmp_path: Path) -> None:
    folder = tmp_path / "repo" / "tools"
    folder.mkdir(parents=True)
    (folder / "app.py").write_text("async def main(transport):\n    return None\n")
    before = list(sys.path)
    assert load_app(str(folder / "app.py")).__name__ == "main"
    assert sys.path == before
    assert str(folder) not in sys.path
