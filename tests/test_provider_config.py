"""Provider configuration: entries, files, loading, isolation of bad entries, API keys."""

from __future__ import annotations

import json
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

from lmbridge.config import (
    DEFAULT_PROVIDERS,
    LoadedProvider,
    ProviderContext,
    ProviderEntry,
    load_config_file,
    load_providers,
    parse_entries,
)
from lmbridge.errors import ConfigError, LanguageModelError
from lmbridge.provider import LanguageModelChatProvider, chat_model, model_info, provider_factory
from lmbridge.providers.echo import EchoProvider


class Configurable(LanguageModelChatProvider):
    """A provider taking options and the context."""

    def __init__(self, greeting: str = "hi", *, context: ProviderContext) -> None:
        super().__init__()
        self.greeting = greeting
        self.context = context
        self.models = (model_info("c"),)


@chat_model("inst")
def instance(messages: Any, options: Any, token: Any) -> str:
    return "instance"


@pytest.fixture
def fake_module(monkeypatch: pytest.MonkeyPatch) -> str:
    mod = types.ModuleType("lmb_test_providers")
    mod.Configurable = Configurable  # type: ignore[attr-defined]
    mod.instance = instance  # type: ignore[attr-defined]
    mod.not_a_provider = 42  # type: ignore[attr-defined]
    mod.make_nothing = provider_factory(lambda: object())  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lmb_test_providers", mod)
    return "lmb_test_providers"


def load(raw: Any, **kw: Any) -> dict[str, LoadedProvider]:
    kw.setdefault("entry_points", False)
    kw.setdefault("environ", {})
    return {p.name: p for p in load_providers(raw, **kw)}


def test_empty_configuration_serves_the_builtin_echo_model() -> None:
    loaded = load([])
    assert list(loaded) == [DEFAULT_PROVIDERS[0]["name"]]
    assert isinstance(loaded["echo"].provider, EchoProvider)


def test_python_provider_gets_its_options_and_context(fake_module: str) -> None:
    loaded = load(
        [{"name": "mine", "provider": f"{fake_module}:Configurable", "greeting": "hello"}],
        secrets={"mine": "sk-from-secret-storage"},
        storage_path="/tmp/x",
    )
    p = loaded["mine"].provider
    assert isinstance(p, Configurable)
    assert p.greeting == "hello"
    assert p.context.name == "mine" and p.context.storage_path == "/tmp/x"
    assert p.context.api_key == "sk-from-secret-storage"
    assert "sk-from" not in repr(p.context)  # the key stays out of reprs (and so of logs)


def test_provider_instances_and_their_options(fake_module: str) -> None:
    loaded = load(
        [
            {"name": "a", "provider": f"{fake_module}:instance"},
            {"name": "b", "provider": f"{fake_module}:instance", "extra": 1},
        ]
    )
    assert loaded["a"].provider is instance
    assert loaded["b"].error is not None and "takes no options" in str(loaded["b"].error)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_such_module_xyz:Thing", "cannot import 'no_such_module_xyz'"),
        ("lmb_test_providers:Missing", "has no attribute 'Missing'"),
        ("lmb_test_providers:not_a_provider", "is not a provider (it is a int)"),
        ("lmb_test_providers:make_nothing", "made a object, not a provider"),
        ("no-colon-and-no-entry-point", "entry point"),
    ],
)
def test_bad_python_targets_are_isolated_with_clear_errors(
    fake_module: str, target: str, message: str
) -> None:
    loaded = load(
        [
            {"name": "bad", "provider": target},
            {"name": "good", "provider": f"{fake_module}:instance"},
        ]
    )
    assert loaded["good"].ok
    assert not loaded["bad"].ok
    assert message in str(loaded["bad"].error)
    assert "providers[0] ('bad')" in str(loaded["bad"].error)


def test_options_that_do_not_fit_the_class_name_the_problem(fake_module: str) -> None:
    loaded = load([{"name": "x", "provider": f"{fake_module}:Configurable", "colour": "red"}])
    assert "options do not fit" in str(loaded["x"].error)
    assert "colour" in str(loaded["x"].error)


def test_api_key_in_the_configuration_is_refused_without_echoing_it() -> None:
    loaded = load(
        [{"name": "o", "format": "chat-completions", "baseUrl": "https://x", "apiKey": "sk-LEAK"}]
    )
    error = str(loaded["o"].error)
    assert "apiKeyEnv" in error and "lmbridge: Set API Key" in error
    assert "sk-LEAK" not in error


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "u", "format": "grpc", "baseUrl": "https://x"}, "unknown format 'grpc'"),
        ({"name": "u", "format": "responses", "baseUrl": "ftp://x"}, "not an http(s) URL"),
        ({"name": "u", "format": "responses"}, "baseUrl: required"),
        ({"name": "u/v", "provider": "m:C"}, "must not contain '/'"),
        ({"name": "u"}, "needs 'provider'"),
        ({"name": "u", "provider": "m:C", "format": "responses"}, "not both"),
        ({"name": "u", "provider": "m:C", "headers": {"a": 1}}, "headers"),
        ("just a string", "expected an object"),
    ],
)
def test_invalid_entries_name_the_field(entry: Any, message: str) -> None:
    (loaded,) = load_providers([entry], entry_points=False, environ={})
    assert not loaded.ok
    assert message in str(loaded.error)


def test_duplicate_names_are_an_error_for_the_second_naming_both_positions() -> None:
    items = parse_entries(
        [
            {"name": "a", "provider": "m:C"},
            {"name": "b", "provider": "m:C"},
            {"name": "a", "provider": "m:D"},
        ]
    )
    assert isinstance(items[0], ProviderEntry)
    assert isinstance(items[2], ConfigError)
    assert str(items[2]).startswith(
        "providers[2] ('a'): the name 'a' is already used by providers[0];"
    )


def test_a_repeat_of_a_broken_entry_is_still_a_duplicate(fake_module: str) -> None:
    # The first entry of a name fails; the repeat must not take the name over silently.
    loaded = load_providers(
        [
            {"name": "a", "format": "grpc", "baseUrl": "https://x"},
            {"name": "a", "provider": f"{fake_module}:instance"},
        ],
        entry_points=False,
        environ={},
    )
    assert [p.name for p in loaded] == ["a", "a"]
    assert "unknown format 'grpc'" in str(loaded[0].error)
    assert "already used by providers[0]" in str(loaded[1].error)
    assert not loaded[1].ok


@pytest.mark.parametrize(
    "header", ["Authorization", "x-api-key", "api-key", "X-Goog-Api-Key", "Proxy-Authorization"]
)
def test_a_credential_header_is_refused_without_echoing_it(header: str) -> None:
    (loaded,) = load_providers(
        [
            {
                "name": "o",
                "format": "chat-completions",
                "baseUrl": "https://x",
                "headers": {"X-Team": "t", header: "Bearer sk-LEAK-123"},
            }
        ],
        entry_points=False,
        environ={},
    )
    error = str(loaded.error)
    assert not loaded.ok
    assert f"providers[0] ('o').headers: {header!r} carries a credential" in error
    assert "apiKeyEnv" in error and "lmbridge: Set API Key" in error
    assert "sk-LEAK" not in error


def test_plain_headers_are_kept(fake_module: str) -> None:
    (item,) = parse_entries(
        [{"name": "o", "provider": "m:C", "headers": {"X-Team": "t", "anthropic-beta": "b"}}]
    )
    assert isinstance(item, ProviderEntry) and item.headers == {
        "X-Team": "t",
        "anthropic-beta": "b",
    }


def test_reload_keeps_unchanged_providers_and_rebuilds_changed_ones(fake_module: str) -> None:
    raw = [
        {"name": "a", "provider": f"{fake_module}:Configurable", "apiKeyEnv": "LMB_K"},
        {"name": "b", "provider": f"{fake_module}:Configurable", "greeting": "yo"},
    ]
    env = {"LMB_K": "key-1"}
    first = load_providers(raw, entry_points=False, environ=env, settings={"logLevel": "info"})
    assert all(p.ok and p.fingerprint for p in first)
    assert "key-1" not in repr(first) and "key-1" not in "".join(p.fingerprint or "" for p in first)

    def again(raw: Any, **kw: Any) -> dict[str, LoadedProvider]:
        kw.setdefault("environ", env)
        loaded = load_providers(raw, entry_points=False, previous=first, **kw)
        return {p.name: p for p in loaded}

    # the host's own settings and a move in the list change nothing
    same = again(list(reversed(raw)), settings={"logLevel": "debug", "apps": ["x"]})
    assert same["a"].provider is first[0].provider and same["b"].provider is first[1].provider
    # a new key (secret or environment), options, or provider settings rebuild
    assert again(raw, secrets={"a": "key-2"})["a"].provider is not first[0].provider
    assert again(raw, environ={"LMB_K": "key-2"})["a"].provider is not first[0].provider
    changed = again([raw[0], {**raw[1], "greeting": "hey"}])
    assert changed["a"].provider is first[0].provider
    assert changed["b"].provider is not first[1].provider
    assert again(raw, settings={"custom": 1})["b"].provider is not first[1].provider
    assert again(raw, storage_path="/tmp/x")["b"].provider is not first[1].provider


def test_upstream_entry_is_built_by_the_gateway_with_its_entry_and_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = {
        "name": "up",
        "format": "ai-sdk",
        "baseUrl": "http://127.0.0.1:1/v1",
        "apiKeyEnv": "LMB_TEST_KEY",
        "headers": {"X-Team": "t"},
        "models": ["m1"],
        "region": "eu",
    }
    built: list[tuple[ProviderEntry, ProviderContext]] = []
    instance = EchoProvider()

    def factory(e: ProviderEntry, ctx: ProviderContext) -> LanguageModelChatProvider:
        built.append((e, ctx))
        return instance

    import lmbridge.gateway

    # Upstream entries go to the gateway's factory (the loader reads it from the package).
    monkeypatch.setattr(lmbridge.gateway, "build_provider", factory)
    after = load([entry], environ={"LMB_TEST_KEY": "sk-env"})
    assert after["up"].provider is instance
    e, ctx = built[0]
    assert (e.base_url, e.headers, e.models, e.options) == (
        "http://127.0.0.1:1/v1",
        {"X-Team": "t"},
        ["m1"],
        {"region": "eu"},
    )
    assert ctx.api_key == "sk-env"


def test_importing_the_entries_and_their_sources_registers_nothing_and_loads_no_http_stack() -> (
    None
):
    import subprocess

    code = (
        "import sys, lmbridge.entries as c, lmbridge.sources.settings; "
        "print(c.KNOWN_FORMATS, 'lmbridge.gateway' in sys.modules, 'httpx' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    from lmbridge import formats

    assert out == f"{formats.names()} False False"


def test_an_unknown_format_names_the_known_ones() -> None:
    loaded = load([{"name": "x", "format": "openai", "baseUrl": "http://127.0.0.1:1/v1"}])
    message = str(loaded["x"].error)
    assert "unknown format 'openai'" in message and "chat-completions" in message


def test_missing_key_from_api_key_env_is_a_no_permissions_error(fake_module: str) -> None:
    loaded = load(
        [{"name": "k", "provider": f"{fake_module}:Configurable", "apiKeyEnv": "LMB_NOPE"}]
    )
    error = loaded["k"].error
    assert isinstance(error, LanguageModelError) and error.code == "NoPermissions"
    assert "LMB_NOPE" in str(error) and "lmbridge: Set API Key" in str(error)


def test_secret_storage_wins_over_the_environment(fake_module: str) -> None:
    loaded = load(
        [{"name": "k", "provider": f"{fake_module}:Configurable", "apiKeyEnv": "LMB_K"}],
        secrets={"k": "from-secret"},
        environ={"LMB_K": "from-env"},
    )
    p = loaded["k"].provider
    assert isinstance(p, Configurable) and p.context.api_key == "from-secret"


def test_config_files_in_json_and_toml(tmp_path: Path) -> None:
    j = tmp_path / "p.json"
    j.write_text(json.dumps({"providers": [{"name": "echo", "provider": "x:Y"}]}))
    t = tmp_path / "p.toml"
    t.write_text(
        textwrap.dedent(
            """
            [[providers]]
            name = "echo"
            provider = "x:Y"
            delay = 0.5
            """
        )
    )
    assert load_config_file(j)["providers"] == [{"name": "echo", "provider": "x:Y"}]
    assert load_config_file(t)["providers"] == [{"name": "echo", "provider": "x:Y", "delay": 0.5}]
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config_file(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config_file(tmp_path / "missing.toml")
    bare = tmp_path / "bare.json"  # the settings list itself
    bare.write_text(json.dumps([{"name": "echo", "provider": "x:Y"}]))
    assert load_config_file(bare) == {"providers": [{"name": "echo", "provider": "x:Y"}]}
    sniffed = tmp_path / "providers"  # no suffix: a leading [ is JSON
    sniffed.write_text(' [{"name": "echo", "provider": "x:Y"}]')
    assert load_config_file(sniffed)["providers"] == [{"name": "echo", "provider": "x:Y"}]
    (tmp_path / "number.json").write_text("3")
    with pytest.raises(ConfigError, match="expected the providers list"):
        load_config_file(tmp_path / "number.json")
    (tmp_path / "list.json").write_text('{"providers": 3}')
    with pytest.raises(ConfigError, match="must be a list"):
        load_config_file(tmp_path / "list.json")


def test_config_files_that_are_not_text_or_nest_too_deep_are_config_errors(tmp_path: Path) -> None:
    for name in ("c.json", "c.toml", "c"):
        (tmp_path / name).write_bytes(b'{"providers": [{"name": "\x84\xdd"}]}')
        with pytest.raises(ConfigError, match=r"not UTF-8 text \(invalid start byte\)"):
            load_config_file(tmp_path / name)
    (tmp_path / "deep.json").write_text("[" * 5000)
    with pytest.raises(ConfigError, match="nested too deeply to read"):
        load_config_file(tmp_path / "deep.json")
    (tmp_path / "deep.toml").write_text("a = " + "[" * 5000)
    with pytest.raises(ConfigError, match="nested too deeply to read"):
        load_config_file(tmp_path / "deep.toml")


def test_config_files_of_other_types_say_which_types_are_read(tmp_path: Path) -> None:
    for name in ("c.yaml", "c.yml", "c.ini"):
        (tmp_path / name).write_text("providers:\n - name: x\n")
        with pytest.raises(ConfigError, match=r"files are not read; use a \.json or \.toml file"):
            load_config_file(tmp_path / name)
    plain = tmp_path / "providers"
    plain.write_text('{"providers": [{"name": "echo", "provider": "x:Y"}]}')
    assert load_config_file(plain)["providers"] == [{"name": "echo", "provider": "x:Y"}]
    plain.write_text("providers:\n - name: x\n")
    with pytest.raises(ConfigError, match="not valid TOML \\(a file without a suffix"):
        load_config_file(plain)


# --------------------------------------------------------------------------- entry points


def install(site: Path, name: str, entry_points: str) -> None:
    """A distribution ``name`` in the folder ``site``, as pip installs one."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


def test_an_installed_entry_point_is_served_under_its_name(
    fake_module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(tmp_path, "other", "[console_scripts]\nother = other:main\n")
    install(tmp_path, "plug", f"[lmbridge.providers]\nplugged = {fake_module}:instance\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    loaded = load([], entry_points=True)
    assert "plugged" in loaded and loaded["plugged"].ok
    assert loaded["plugged"].provider is instance
    # named by an entry of the configuration, too
    loaded = load([{"name": "mine", "provider": "plugged"}], entry_points=True)
    assert loaded["mine"].provider is instance


def test_the_entry_points_are_read_only_when_a_distribution_may_declare_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading them imports importlib.metadata and every distribution's metadata at each
    initialize and configure; a look at the entry_points.txt files says when to."""
    from lmbridge import config

    site = tmp_path / "site"
    install(site, "other", "[console_scripts]\nother = other:main\n")
    install(site, "bare", "")
    (site / "loose.egg-info").write_text("Metadata-Version: 1.0\nName: loose\n")
    monkeypatch.setattr(sys, "path", [str(site), str(tmp_path / "missing")])
    assert not config._may_declare_entry_points()
    assert config._entry_points() == []

    install(site, "plug", "[lmbridge.providers]\nplugged = lmb_test_providers:instance\n")
    assert config._may_declare_entry_points()
    assert [ep.name for ep in config._entry_points()] == ["plugged"]

    # what importlib.metadata reads beyond folders of dist-info: say yes, let it look
    archive = tmp_path / "packed.zip"
    archive.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    for path in ([str(archive)], [str(tmp_path / "old.egg")]):
        monkeypatch.setattr(sys, "path", path)
        assert config._may_declare_entry_points(), path

    class Finder:  # a finder of distributions other than the path's
        def find_distributions(self, *args: Any, **kwargs: Any) -> list[Any]:
            return []

    monkeypatch.setattr(sys, "path", [str(site)])
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder()])
    site_plug = site / "plug-1.0.dist-info"
    (site_plug / "entry_points.txt").unlink()
    assert config._may_declare_entry_points()
