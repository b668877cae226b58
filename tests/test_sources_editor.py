"""Providers of VS Code's Language Models editor: the source of entries and the real host.

The extension hands the host each group VS Code asked about as ``editorProviders`` (an id made
from the group's configuration, the configuration without its key) and the key under
``secrets["editor:<id>"]`` with the origin it was given for. The host serves each group as
provider ``editor:<id>``, lists its models only when asked for that group, and withholds its key
from another origin, naming the command that lets it go there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lmbridge.config import origin_of
from lmbridge.config_fields import PROVIDER_FIELDS, editor_configuration
from lmbridge.entries import parse_entries
from lmbridge.errors import ConfigError
from lmbridge.formats import names as format_names
from lmbridge.host.client import HostClient
from lmbridge.host.jsonrpc import RemoteError
from lmbridge.parts import ChatMessage, TextPart
from lmbridge.sources.editor import EDITOR_LABEL, editor_groups, host_name
from support.replay_server import ReplayServer, Reply
from support.streams import fixture_body

KEY = "sk-editor-key-0123456789-DO-NOT-LEAK"
TEXT_STREAM = "openai-chat/openai-text.chunks.txt"
REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- the source


def test_each_group_becomes_an_entry_named_by_its_id_without_its_key() -> None:
    (group,) = editor_groups([
        {"id": "api.example.com-1a2b3c4d", "configuration": {
            "format": "responses", "baseUrl": "https://api.example.com/v1",
            "apiKey": "sk-should-not-stay", "headers": {"X-Team": "blue"}, "name": "ignored",
        }},
    ])  # fmt: skip
    assert group.name == "editor:api.example.com-1a2b3c4d" == host_name(group.id)
    assert group.entry == {
        "name": "editor:api.example.com-1a2b3c4d",
        "format": "responses",
        "baseUrl": "https://api.example.com/v1",
        "headers": {"X-Team": "blue"},
    }
    (parsed,) = parse_entries([group.entry], {0: EDITOR_LABEL})
    assert not isinstance(parsed, ConfigError) and parsed.where.startswith(EDITOR_LABEL)


def test_a_group_naming_a_python_provider_is_refused_without_quoting_it() -> None:
    (group,) = editor_groups([{"id": "x-1", "configuration": {"provider": "os:system"}}])
    assert isinstance(group.entry, ConfigError)
    assert "lmbridge.providers" in str(group.entry) and "os:system" not in str(group.entry)


@pytest.mark.parametrize(
    "raw",
    [{"id": "x"}, [{"id": ""}], [{"id": "a/b"}], [{"configuration": {}}], ["x"]],
)
def test_a_malformed_list_from_the_extension_is_an_error(raw: Any) -> None:
    with pytest.raises(ConfigError, match="editorProviders"):
        editor_groups(raw)


def test_an_id_given_twice_keeps_its_first_description() -> None:
    groups = editor_groups([
        {"id": "a", "configuration": {"format": "gemini", "baseUrl": "https://one.example"}},
        {"id": "a", "configuration": {"format": "gemini", "baseUrl": "https://two.example"}},
    ])  # fmt: skip
    assert [g.entry for g in groups] == [
        {"name": "editor:a", "format": "gemini", "baseUrl": "https://one.example"}
    ]


def test_the_editor_prefix_is_refused_in_lmbridge_providers() -> None:
    (error,) = parse_entries([{"name": "editor:mine", "format": "gemini", "baseUrl": "https://g.example"}])
    assert isinstance(error, ConfigError)
    assert "editor:" in str(error) and "Language Models editor" in str(error)
    # the settings schema says the same to VS Code's JSON validation
    (name,) = [f for f in PROVIDER_FIELDS if f.name == "name"]
    assert name.pattern is not None
    import re

    assert re.search(name.pattern, "editor:mine") is None and re.search(name.pattern, "mine")


def test_the_configuration_schema_asks_three_things_and_validates_the_rest() -> None:
    schema = editor_configuration()
    # VS Code prompts for each top-level property, in order; anything it cannot prompt for
    # would open the JSON file after Add Models: only these three are top-level
    assert list(schema["properties"]) == ["format", "baseUrl", "apiKey"]
    assert schema["properties"]["apiKey"]["secret"] is True
    assert schema["properties"]["format"]["enum"] == list(format_names())
    assert len(schema["properties"]["format"]["enumDescriptions"]) == len(format_names())
    assert "additionalProperties" not in schema  # it too would open the file
    others = schema["allOf"][0]["properties"]
    assert {"models", "headers", "contextWindow", "retry"} <= set(others)
    assert not {"name", "provider", "format", "baseUrl"} & set(others)
    # what package.json declares is what this makes
    package = json.loads((REPO / "extension" / "package.json").read_text("utf-8"))
    (vendor,) = [v for v in package["contributes"]["languageModelChatProviders"] if v["vendor"] == "lmbridge-api"]
    assert vendor["configuration"] == schema and "managementCommand" not in vendor


# --------------------------------------------------------------------------- the real host


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


@pytest.fixture
def elsewhere() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


def group(server: ReplayServer, **extra: Any) -> dict[str, Any]:
    return {"format": "chat-completions", "baseUrl": server.url + "/v1", "models": ["m"], **extra}


async def test_the_host_serves_a_group_under_its_own_name_with_its_key(
    tmp_path: Path, upstream: ReplayServer
) -> None:
    upstream.route("POST", "/v1/chat/completions", Reply.sse(fixture_body(TEXT_STREAM)))
    params = {
        "providers": [],
        "editorProviders": [{"id": "local-1", "configuration": group(upstream)}],
        "secrets": {"editor:local-1": {"key": KEY, "origin": origin_of(upstream.url)}},
    }
    with (tmp_path / "stderr.txt").open("wb") as err:
        async with HostClient.start(["--log-level", "debug"], env=dict(os.environ), stderr=err) as host:
            result = await host.initialize(**params)
            assert [(p["name"], p["ok"]) for p in result["providers"]] == [("editor:local-1", True)]
            # the vendor 'lmbridge' lists no editor group (and no echo: providers are configured)
            assert (await host.request("models/list", {}))["models"] == []
            listed = (await host.request("models/list", {"group": "local-1"}))["models"]
            assert [m["id"] for m in listed] == ["editor:local-1/m"]
            assert "detail" not in listed[0]  # VS Code shows the group's own name there
            parts, _ = await host.chat("editor:local-1/m", [ChatMessage.user("hi")])
            assert "".join(p.value for p in parts if isinstance(p, TextPart))
            assert upstream.requests[-1].headers["authorization"] == f"Bearer {KEY}"
            with pytest.raises(RemoteError, match="not configured in the host"):
                await host.request("models/list", {"group": "unknown"})
    assert KEY not in (tmp_path / "stderr.txt").read_text()


async def test_a_group_at_another_origin_than_its_keys_gets_no_key_and_says_what_to_run(
    tmp_path: Path, upstream: ReplayServer, elsewhere: ReplayServer
) -> None:
    elsewhere.route("GET", "/v1/models", Reply.json({"data": [{"id": "m"}]}))
    params = {
        "editorProviders": [
            {"id": "moved", "configuration": {"format": "chat-completions", "baseUrl": elsewhere.url + "/v1"}},
            {"id": "python", "configuration": {"provider": "os:system"}},
            {"id": "broken", "configuration": {"format": "chat-completions"}},
        ],
        "secrets": {"editor:moved": {"key": KEY, "origin": origin_of(upstream.url)}},
    }
    async with HostClient.start(env=dict(os.environ)) as host:
        await host.initialize(**params)
        with pytest.raises(RemoteError) as moved:
            await host.request("models/list", {"group": "moved"})
        message = str(moved.value)
        assert f"was stored for {origin_of(upstream.url)}" in message
        assert f"now points to {origin_of(elsewhere.url)}" in message
        assert "lmbridge: Confirm API Key Origin" in message
        assert not message.startswith("provider 'editor:moved'")  # the row is the group
        with pytest.raises(RemoteError, match=r"lmbridge\.providers"):
            await host.request("models/list", {"group": "python"})
        with pytest.raises(RemoteError, match="baseUrl"):
            await host.request("models/list", {"group": "broken"})
        # the provider loaded without the key: a chat fails the same way, before any request
        with pytest.raises(RemoteError, match="Confirm API Key Origin"):
            await host.chat("editor:moved/m", [ChatMessage.user("hi")])
    assert elsewhere.requests == []


@pytest.mark.parametrize("silent", [True, False])
async def test_a_refused_key_on_a_group_says_to_update_it_on_the_group(
    upstream: ReplayServer, silent: bool
) -> None:
    """The group's row shows the error: it leads with what happened, without the group's id
    in the host, and points at the editor's own action (lmbridge's Set API Key command does
    not reach a key VS Code keeps for the group)."""
    upstream.route("GET", "/v1/models", Reply.error(401))
    groups = [{"id": "g", "configuration": group(upstream, models=None)}]
    secrets = {"editor:g": {"key": KEY, "origin": origin_of(upstream.url)}}
    async with HostClient.start(env=dict(os.environ)) as host:
        await host.initialize(providers=[], editorProviders=groups, secrets=secrets)
        with pytest.raises(RemoteError) as refused:
            await host.request("models/list", {"group": "g", "silent": silent})
    message = refused.value.message
    assert message.startswith("the upstream rejected the API key (HTTP 401"), message
    assert "Update API Key" in message and "Language Models editor" in message
    assert "Set API Key'" not in message and "editor:g" not in message
    assert upstream.requests[-1].headers["authorization"] == f"Bearer {KEY}"


async def test_a_group_survives_a_configure_of_the_settings_and_goes_when_dropped(
    upstream: ReplayServer,
) -> None:
    groups = [{"id": "g", "configuration": group(upstream)}]
    async with HostClient.start(env=dict(os.environ)) as host:
        await host.initialize(providers=[], editorProviders=groups)
        user = [{"name": "mine", "format": "chat-completions", "baseUrl": upstream.url + "/v1", "models": ["u"]}]
        await host.request("configure", {"providers": user, "editorProviders": groups})
        assert [m["id"] for m in (await host.request("models/list", {}))["models"]] == ["mine/u"]
        assert [m["id"] for m in (await host.request("models/list", {"group": "g"}))["models"]] == ["editor:g/m"]
        await host.request("configure", {"providers": user, "editorProviders": []})
        with pytest.raises(RemoteError, match="not configured"):
            await host.request("models/list", {"group": "g"})
