"""What a configuration may make the host do: provider references, workspace entries, keys.

Attacks come from a repository's ``.vscode/settings.json`` (sent as ``workspaceProviders``) or
from a provider entry whose ``baseUrl`` moved; each test proves that nothing runs and no key
moves, and that the user's own configuration keeps working.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import lmbridge
from lmbridge import config
from lmbridge.config import (
    IgnoredSetting,
    LoadedProvider,
    ProviderContext,
    StoredKey,
    entry_origin,
    is_loopback_host,
    load_providers,
    merge_workspace_entries,
    origin_of,
    parse_entries,
    parse_secrets,
    url_credential_problem,
)
from lmbridge.errors import ConfigError
from lmbridge.provider import LanguageModelChatProvider, chat_model, model_info

KEY = "sk-trust-0123456789abcdef"


class KeyedProvider(LanguageModelChatProvider):
    """Keeps its context, so a test can see which key it got."""

    def __init__(self, *, context: ProviderContext, **options: Any) -> None:
        super().__init__()
        self.context = context
        self.options = options
        self.models = (model_info("m"),)


@chat_model("fn")
def function_model(messages: Any, options: Any, token: Any) -> str:
    return "fn"


def _unmarked_factory(**options: Any) -> LanguageModelChatProvider:
    raise AssertionError("an unmarked factory must never be called")


@lmbridge.provider_factory
def marked_factory(*, context: ProviderContext, **options: Any) -> LanguageModelChatProvider:
    return KeyedProvider(context=context, **options)


@pytest.fixture
def module(monkeypatch: pytest.MonkeyPatch) -> str:
    mod = types.ModuleType("lmb_trust_providers")
    mod.KeyedProvider = KeyedProvider  # type: ignore[attr-defined]
    mod.function_model = function_model  # type: ignore[attr-defined]
    mod.unmarked = _unmarked_factory  # type: ignore[attr-defined]
    mod.marked = marked_factory  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lmb_trust_providers", mod)
    return "lmb_trust_providers"


def load(raw: Any, **kw: Any) -> dict[str, LoadedProvider]:
    kw.setdefault("entry_points", False)
    kw.setdefault("environ", {})
    return {p.name: p for p in load_providers(raw, **kw)}


# --------------------------------------------------------------------------- references


@pytest.mark.parametrize(
    ("reference", "kind"),
    [
        ("os:system", "builtin_function_or_method"),
        ("builtins:exec", "builtin_function_or_method"),
        ("subprocess:run", "function"),
        ("subprocess:Popen", "class Popen"),
        ("lmb_trust_providers:unmarked", "function"),
    ],
)
def test_a_reference_that_is_not_a_provider_is_refused_and_never_called(
    module: str, tmp_path: Path, reference: str, kind: str
) -> None:
    marker = tmp_path / "marker.txt"
    command = f"echo pwned > {marker}"
    loaded = load(
        [
            {"name": "x", "provider": reference, "command": command, "args": [command]},
            {"name": "ok", "provider": f"{module}:KeyedProvider"},
        ]
    )
    error = str(loaded["x"].error)
    assert not loaded["x"].ok and loaded["ok"].ok
    assert f"providers[0] ('x').provider: {reference!r} is not a provider (it is a {kind})" in error
    assert "@lmbridge.provider_factory" in error and "nothing was called" in error
    assert not marker.exists()


def test_provider_classes_instances_and_marked_factories_are_accepted(module: str) -> None:
    loaded = load(
        [
            {"name": "cls", "provider": f"{module}:KeyedProvider", "colour": "red"},
            {"name": "fn", "provider": f"{module}:function_model"},
            {"name": "fac", "provider": f"{module}:marked", "colour": "blue"},
        ],
        secrets={"fac": StoredKey(KEY, f"python:{module}:marked")},
    )
    assert isinstance(loaded["cls"].provider, KeyedProvider)
    assert loaded["cls"].provider.options == {"colour": "red"}
    assert loaded["fn"].provider is function_model
    fac = loaded["fac"].provider
    assert isinstance(fac, KeyedProvider) and fac.options == {"colour": "blue"}
    assert fac.context.api_key == KEY


def test_the_examples_load_as_configured() -> None:
    examples = str(Path(__file__).parents[1] / "examples")
    sys.path.insert(0, examples)
    try:
        loaded = load(
            [
                {"name": "echo", "provider": "echo_provider:EchoProvider"},
                {"name": "calc", "provider": "function_tool_provider:calculator"},
            ]
        )
    finally:
        sys.path.remove(examples)
    assert loaded["echo"].ok, loaded["echo"].error
    assert loaded["calc"].ok, loaded["calc"].error


def test_entry_points_pass_the_same_check(
    monkeypatch: pytest.MonkeyPatch, module: str, tmp_path: Path
) -> None:
    eps = [
        importlib.metadata.EntryPoint("evil", "os:system", config.ENTRY_POINT_GROUP),
        importlib.metadata.EntryPoint("good", f"{module}:KeyedProvider", config.ENTRY_POINT_GROUP),
    ]
    monkeypatch.setattr(config, "_entry_points", lambda: eps)
    loaded = {p.name: p for p in load_providers([{"name": "a", "provider": "evil"}], environ={})}
    assert "entry point 'evil' (os:system) is not a provider" in str(loaded["a"].error)
    assert "entry point 'evil' (os:system) is not a provider" in str(loaded["evil"].error)
    assert loaded["good"].ok


# --------------------------------------------------------------------------- workspace entries


def test_a_workspace_python_provider_is_ignored_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    workspace = [{"name": "x", "provider": "os:system", "command": f"id > {marker}"}]
    raw, ignored = merge_workspace_entries([], workspace)
    assert raw == []
    assert [i.to_wire() for i in ignored] == [
        {
            "setting": "lmbridge.providers",
            "name": "x",
            "field": "provider",
            "value": "os:system",
            "reason": ignored[0].reason,
        }
    ]
    loaded = load(raw)  # nothing left: the built-in echo provider
    assert list(loaded) == ["echo"]
    assert not marker.exists()


def test_workspace_entries_cannot_take_a_user_name_or_choose_a_variable() -> None:
    user = [{"name": "openai", "format": "responses", "baseUrl": "https://api.openai.com/v1"}]
    workspace = [
        {"name": "openai", "format": "responses", "baseUrl": "http://127.0.0.1:9/v1"},
        {
            "name": "team",
            "format": "chat-completions",
            "baseUrl": "https://llm.example.com/v1",
            "apiKeyEnv": "GITHUB_TOKEN",
            "allowInsecureHttp": True,
            "headers": {"X-Team": "t"},
            "models": ["m"],
        },
        {"name": "team", "format": "responses", "baseUrl": "http://127.0.0.1:9/v1"},
    ]
    raw, ignored = merge_workspace_entries(user, workspace)
    assert raw == [
        user[0],
        {
            "name": "team",
            "format": "chat-completions",
            "baseUrl": "https://llm.example.com/v1",
            "headers": {"X-Team": "t"},
            "models": ["m"],
        },
    ]
    assert [(i.name, i.field, i.value) for i in ignored] == [
        ("openai", "name", "openai"),
        ("team", "apiKeyEnv", "GITHUB_TOKEN"),
        ("team", "allowInsecureHttp", "true"),
        ("team", "name", "team"),
    ]
    assert all(isinstance(i, IgnoredSetting) and i.reason for i in ignored)
    assert workspace[1]["apiKeyEnv"] == "GITHUB_TOKEN"  # pure: the input is left alone


def test_a_workspace_list_of_the_wrong_type_is_reported() -> None:
    raw, ignored = merge_workspace_entries(None, {"name": "x"})
    assert raw == [] and ignored[0].reason == "expected a list of providers"
    # malformed entries go on to be reported as configuration errors, not crash the merge
    raw, ignored = merge_workspace_entries(
        [{"name": {}}], [{"name": ["x"], "format": "responses"}, "y"]
    )
    assert raw == [{"name": {}}, {"name": ["x"], "format": "responses"}, "y"] and ignored == []
    assert all(isinstance(e, ConfigError) for e in parse_entries(raw))


# --------------------------------------------------------------------------- origins


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://api.openai.com/v1", "https://api.openai.com:443"),
        ("HTTPS://API.OpenAI.COM:443/v1/", "https://api.openai.com:443"),
        ("http://Example.com", "http://example.com:80"),
        ("http://example.com:8080/x?y=1", "http://example.com:8080"),
        ("https://example.com:80", "https://example.com:80"),
        ("http://127.0.0.1:1234/v1", "http://127.0.0.1:1234"),
        ("http://[::1]:8080/v1", "http://[::1]:8080"),
        ("https://[2001:DB8::1]/", "https://[2001:db8::1]:443"),
        ("http://[0:0:0:0:0:0:0:1]/", "http://[::1]:80"),
        ("https://bücher.example/", "https://xn--bcher-kva.example:443"),
    ],
)
def test_origin_of(url: str, origin: str) -> None:
    assert origin_of(url) == origin


@pytest.mark.parametrize("url", ["ftp://x", "https://", "x", "http://h:99999/"])
def test_origin_of_refuses_what_is_not_http(url: str) -> None:
    with pytest.raises(ValueError):
        origin_of(url)


def test_entry_origin_of_python_and_upstream_entries() -> None:
    a, b = parse_entries(
        [
            {"name": "p", "provider": "pkg.mod:Thing"},
            {"name": "u", "format": "responses", "baseUrl": "https://H.example/v1"},
        ]
    )
    assert not isinstance(a, ConfigError) and not isinstance(b, ConfigError)
    assert entry_origin(a) == "python:pkg.mod:Thing"
    assert entry_origin(b) == "https://h.example:443"


def test_loopback_hosts() -> None:
    assert all(map(is_loopback_host, ["localhost", "LOCALHOST.", "127.0.0.1", "127.8.9.1", "[::1]"]))
    assert not any(map(is_loopback_host, ["example.com", "10.0.0.1", "localhost.example.com"]))


def test_a_name_under_localhost_is_not_taken_for_this_machine() -> None:
    # RFC 6761 asks resolvers to keep *.localhost local, but not every one does (glibc without
    # nss-myhostname asks the DNS server): such a name may be another machine.
    assert not any(map(is_loopback_host, ["a.localhost", "evil.localhost.", "x.y.localhost"]))
    # so a key goes there over plain http only as to any other host: if the user allows it
    raw = [{"name": "n", "format": "chat-completions", "baseUrl": "http://api.localhost:8080/v1"}]
    key = {"n": StoredKey("sk-local-0123456789", "http://api.localhost:8080")}
    refused = load(raw, secrets=key)["n"]
    assert refused.key_error is not None and "allowInsecureHttp" in str(refused.key_error)
    allowed = load([{**raw[0], "allowInsecureHttp": True}], secrets=key)["n"]
    assert allowed.key_error is None and allowed.ok


# --------------------------------------------------------------------------- keys


def _keyed(module: str, base_url: str | None = None, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": "k", "provider": f"{module}:KeyedProvider", **extra}
    if base_url is not None:
        entry["baseUrl"] = base_url
    return entry


def test_a_key_is_given_only_to_the_origin_it_was_stored_for(module: str) -> None:
    entry = _keyed(module, "https://api.example.com/v1")
    good = load([entry], secrets={"k": {"key": KEY, "origin": "https://api.example.com:443"}})
    provider = good["k"].provider
    assert isinstance(provider, KeyedProvider) and provider.context.api_key == KEY
    assert good["k"].key_error is None

    moved = load(
        [_keyed(module, "https://evil.example:8443/v1")],
        secrets={"k": {"key": KEY, "origin": "https://api.example.com:443"}},
    )["k"]
    assert isinstance(moved.provider, KeyedProvider) and moved.provider.context.api_key is None
    assert moved.key_error is not None and moved.key_error.code == "NoPermissions"
    message = str(moved.key_error)
    for words in ("'k'", "https://api.example.com:443", "https://evil.example:8443",
                  "lmbridge: Confirm API Key Origin"):  # fmt: skip
        assert words in message
    assert KEY not in message


def test_a_key_without_a_recorded_origin_is_not_used(module: str) -> None:
    loaded = load([_keyed(module)], secrets={"k": {"key": KEY, "origin": None}})["k"]
    assert loaded.ok and loaded.provider.context.api_key is None  # type: ignore[union-attr]
    assert "has no recorded origin" in str(loaded.key_error)
    assert "Confirm API Key Origin" in str(loaded.key_error)


def test_a_plain_string_from_python_callers_is_not_bound(module: str) -> None:
    loaded = load([_keyed(module, "https://api.example.com")], secrets={"k": KEY})["k"]
    assert loaded.provider.context.api_key == KEY  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "bad", [f"{KEY}\r\nX-Injected: 1", f"{KEY}\nmore", f"sk-\x00{KEY}", "   ", f"{KEY}\x85x"]
)
def test_keys_with_control_characters_are_refused_without_echoing_them(
    module: str, bad: str
) -> None:
    origin = f"python:{module}:KeyedProvider"
    secrets = {"k": {"key": bad, "origin": origin}}
    loaded = load([_keyed(module)], secrets=secrets)["k"]
    assert loaded.provider.context.api_key is None  # type: ignore[union-attr]
    message = str(loaded.key_error)
    assert "provider 'k'" in message and "lmbridge: Set API Key" in message
    assert KEY not in message and "sk-" not in message


def test_keys_are_trimmed(module: str) -> None:
    origin = f"python:{module}:KeyedProvider"
    loaded = load([_keyed(module)], secrets={"k": {"key": f"  {KEY}\r\n", "origin": origin}})["k"]
    assert loaded.provider.context.api_key == KEY  # type: ignore[union-attr]
    env = load([_keyed(module, apiKeyEnv="LMB_K")], environ={"LMB_K": f"{KEY} "})["k"]
    assert env.provider.context.api_key == KEY  # type: ignore[union-attr]


def test_no_key_over_plain_http_to_another_machine_unless_the_user_allows_it(
    module: str,
) -> None:
    far = "http://llm.example.com/v1"
    origin = "http://llm.example.com:80"
    secrets = {"k": {"key": KEY, "origin": origin}}
    refused = load([_keyed(module, far)], secrets=secrets)["k"]
    assert refused.provider.context.api_key is None  # type: ignore[union-attr]
    assert refused.key_error is not None and refused.key_error.code == "NoPermissions"
    assert "plain http" in str(refused.key_error) and "allowInsecureHttp" in str(refused.key_error)
    allowed = load([_keyed(module, far, allowInsecureHttp=True)], secrets=secrets)["k"]
    assert allowed.provider.context.api_key == KEY  # type: ignore[union-attr]
    local = load(
        [_keyed(module, "http://127.0.0.1:8000")],
        secrets={"k": {"key": KEY, "origin": "http://127.0.0.1:8000"}},
    )["k"]
    assert local.provider.context.api_key == KEY  # type: ignore[union-attr]
    # the option is a user's: a workspace entry loses it
    raw, _ = merge_workspace_entries(
        [], [{"name": "k", "format": "chat-completions", "baseUrl": far, "allowInsecureHttp": True}]
    )
    (item,) = parse_entries(raw)
    assert not isinstance(item, ConfigError) and not item.allow_insecure_http


def test_malformed_secrets_are_named_without_the_key() -> None:
    with pytest.raises(ConfigError, match=r"secrets\['k'\]") as info:
        parse_secrets({"k": {"key": KEY, "origin": 3}})
    assert KEY not in str(info.value)
    assert parse_secrets({"a": "", "b": {"key": "", "origin": None}}) == {}


@pytest.mark.parametrize(
    ("url", "what"),
    [
        ("https://user:s3cr3t-pass@api.example.com/v1", "before the host"),
        ("https://s3cr3t-pass@api.example.com/v1", "before the host"),
        ("https://generativelanguage.example.com/v1?key=s3cr3t-pass", "'key'"),
        ("https://x.example.com/v1?api_key=s3cr3t-pass", "'api_key'"),
        ("https://x.example.com/v1?apikey=s3cr3t-pass", "'apikey'"),
        ("https://x.example.com/v1?token=s3cr3t-pass", "'token'"),
        ("https://x.example.com/v1?access_token=s3cr3t-pass", "'access_token'"),
        ("https://x.example.com/v1?a=1&secret=s3cr3t-pass", "'secret'"),
        ("https://x.example.com/v1?password=s3cr3t-pass", "'password'"),
        ("https://x.blob.example.com/c?sv=1&sig=s3cr3t-pass", "'sig'"),
        # brackets around no IPv6 address: urlsplit refuses the URL, the check still reads it
        ("https://user:s3cr3t-pass@[api.example.com/v1", "before the host"),
        ("https://[x.example.com]/v1?key=s3cr3t-pass", "'key'"),
    ],
)
def test_credentials_in_base_url_are_refused_without_echoing_them(url: str, what: str) -> None:
    (loaded,) = load_providers(
        [{"name": "o", "format": "chat-completions", "baseUrl": url}], entry_points=False
    )
    error = str(loaded.error)
    assert not loaded.ok
    assert what in error
    assert "lmbridge: Set API Key" in error and "apiKeyHeader" in error
    assert "s3cr3t" not in error


def test_a_base_url_urlsplit_refuses_is_the_entry_s_config_error() -> None:
    # found by fuzzing: the ValueError of urlsplit escaped parse_entries, failing every entry
    entries = parse_entries(
        [
            {"name": "bad", "format": "chat-completions", "baseUrl": "http://127.0.0.1:8]080/v1"},
            {"name": "good", "format": "chat-completions", "baseUrl": "http://127.0.0.1:8080/v1"},
        ]
    )
    assert isinstance(entries[0], ConfigError)
    assert "baseUrl: 'http://127.0.0.1:8]080/v1' is not an http(s) URL" in str(entries[0])
    assert not isinstance(entries[1], ConfigError)


def test_ordinary_query_parameters_are_kept() -> None:
    url = "https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21"
    assert url_credential_problem(url) is None
    (loaded,) = load_providers(
        [{"name": "az", "format": "chat-completions", "baseUrl": url, "models": ["m"]}],
        entry_points=False,
    )
    assert loaded.ok, loaded.error


def test_a_workspace_entry_cannot_raise_the_timeout_past_the_default() -> None:
    user = [{"name": "slow-local", "format": "chat-completions", "baseUrl": "http://127.0.0.1:1/v1",
             "timeout": 3600}]
    workspace = [
        {"name": "hangs", "format": "chat-completions", "baseUrl": "https://a.example/v1", "timeout": 1e9},
        {"name": "quick", "format": "chat-completions", "baseUrl": "https://b.example/v1", "timeout": 30},
        {"name": "odd", "format": "chat-completions", "baseUrl": "https://c.example/v1", "timeout": "x"},
    ]
    raw, ignored = merge_workspace_entries(user, workspace)
    assert [e.get("timeout") for e in raw] == [3600, 300, 30, "x"]  # the user's own: as set
    assert [(i.name, i.field, i.value) for i in ignored] == [("hangs", "timeout", "1000000000.0")]
    assert "lowered to 300" in ignored[0].reason
    assert workspace[0]["timeout"] == 1e9  # pure: the input is left alone
    loaded = load(raw)
    assert loaded["hangs"].provider.client.http.timeout.read == 300.0  # type: ignore[union-attr]


def test_manage_models_has_the_hosts_credential_rule() -> None:
    """The extension's Manage Models refuses the URLs the host refuses: its rule is made from
    the host's (extension/scripts/credential_rule.py), and the table both tests read holds."""
    import importlib.util

    script = Path(__file__).resolve().parents[1] / "extension" / "scripts" / "credential_rule.py"
    spec = importlib.util.spec_from_file_location("credential_rule", script)
    assert spec is not None and spec.loader is not None
    rule = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rule)
    assert rule.TARGET.read_text(encoding="utf-8") == rule.render(), "run credential_rule.py --write"
    table = json.loads((Path(__file__).parent / "data" / "credential_urls.json").read_text())
    for url, refused in table["urls"]:
        assert (url_credential_problem(url) is not None) is refused, url
