"""The one description of provider configuration and its three readers.

The table in ``lmbridge.config_fields`` makes the settings schema in ``extension/package.json``,
the README's option table and the validation. These tests prove that the committed files are
what the table makes (drift), that every option the validator accepts is in the schema with a
description and an example, that every option the README lists exists in both, and that the
schema and the validator agree: both take each documented example and both refuse each wrong
type, enum value and limit.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from lmbridge import config_fields, formats
from lmbridge import entries as provider_entries
from lmbridge.config import load_providers, merge_workspace_entries, parse_entries
from lmbridge.config_fields import (
    MODEL_FIELDS,
    PROVIDER_FIELDS,
    PYTHON,
    RETRY_FIELDS,
    Field,
    providers_setting,
)
from lmbridge.gateway import RetryPolicy
from lmbridge.gateway._provider import DEFAULT_TIMEOUT
from lmbridge.gateway.catalog import DEFAULT_CATALOG_TTL, ModelDefaults
from lmbridge.upstream import AssemblerOptions

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "extension" / "package.json"
README = ROOT / "README.md"
ENV = {"OPENAI_API_KEY": "sk-test-0123456789"}


def committed_setting() -> dict[str, Any]:
    package = json.loads(PACKAGE.read_text("utf-8"))
    setting: dict[str, Any] = package["contributes"]["configuration"]["properties"][
        "lmbridge.providers"
    ]
    return setting


SETTING = committed_setting()
ITEM = SETTING["items"]
VALIDATOR = jsonschema.Draft7Validator(ITEM)


def schema_ok(entry: Any) -> bool:
    return VALIDATOR.is_valid(entry)


def upstream(fmt: str, **fields: Any) -> dict[str, Any]:
    return {"name": "t", "format": fmt, "baseUrl": "https://x.test/v1", "models": ["m"], **fields}


def load_error(entry: Any) -> str | None:
    """``None`` when the host loads the entry, else its error message."""
    (loaded,) = load_providers([entry], environ=ENV, entry_points=False)
    return None if loaded.ok else str(loaded.error)


def formats_of(f: Field) -> list[str]:
    return [a for a in f.applies if a != PYTHON]


# --------------------------------------------------------------------------- drift


def test_package_json_and_readme_are_what_the_table_makes() -> None:
    text = PACKAGE.read_text("utf-8")
    assert config_fields.render_package_json(text) == text, (
        "extension/package.json is stale: run python -m lmbridge.config_fields --write"
    )
    assert json.loads(json.dumps(providers_setting())) == SETTING
    readme = README.read_text("utf-8")
    assert config_fields.render_readme(readme) == readme, (
        "README.md's option table is stale: run python -m lmbridge.config_fields --write"
    )


def test_the_command_checks_and_rewrites_a_checkout(tmp_path: Path) -> None:
    (tmp_path / "extension").mkdir()
    shutil.copy(PACKAGE, tmp_path / "extension" / "package.json")
    shutil.copy(README, tmp_path / "README.md")
    cmd = [sys.executable, "-m", "lmbridge.config_fields", "--root", str(tmp_path)]
    assert subprocess.run([*cmd, "--check"], capture_output=True).returncode == 0
    # a hand edit inside the generated part is caught, and --write puts the table back
    readme = (tmp_path / "README.md").read_text("utf-8")
    (tmp_path / "README.md").write_text(readme.replace("| `timeout` |", "| `timeOut` |"), "utf-8")
    package = json.loads(PACKAGE.read_text("utf-8"))
    del package["contributes"]["configuration"]["properties"]["lmbridge.providers"]["items"][
        "properties"
    ]["thinking"]
    (tmp_path / "extension" / "package.json").write_text(json.dumps(package, indent=2), "utf-8")
    check = subprocess.run([*cmd, "--check"], capture_output=True, text=True)
    assert check.returncode == 1
    assert "README.md" in check.stderr and "extension/package.json" in check.stderr
    assert subprocess.run([*cmd, "--write"], capture_output=True).returncode == 0
    assert (tmp_path / "README.md").read_text("utf-8") == README.read_text("utf-8")
    assert (tmp_path / "extension" / "package.json").read_bytes() == PACKAGE.read_bytes()


def test_without_arguments_the_command_prints_the_schema() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lmbridge.config_fields"], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == SETTING


def test_importing_the_table_loads_no_other_layer() -> None:
    code = (
        "import sys, lmbridge.config_fields as c; c.PROVIDER_FIELDS; "
        "print(sorted(m for m in sys.modules if m.startswith(('lmbridge.gateway', "
        "'lmbridge.upstream', 'lmbridge.convert', 'lmbridge.host', 'httpx'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- schema = validator


def test_the_schema_is_valid_draft_7_and_formats_come_from_the_registry() -> None:
    jsonschema.Draft7Validator.check_schema(SETTING)
    assert ITEM["properties"]["format"]["enum"] == list(formats.names())


def known_options(fmt: str) -> set[str]:
    """What the validator itself says it knows, from the error for an unknown option."""
    error = load_error(upstream(fmt, noSuchOption=1))
    assert error is not None and "unknown option(s) noSuchOption" in error
    found = re.search(r"\(known: ([^)]*)\)", error)
    assert found is not None
    return set(found.group(1).split(", "))


@pytest.mark.parametrize("fmt", formats.names())
def test_every_option_the_validator_accepts_is_in_the_schema_with_a_description_and_example(
    fmt: str,
) -> None:
    accepted = known_options(fmt) | {"name", "format", "baseUrl", "apiKeyEnv", "headers",
                                     "models", "allowInsecureHttp"}
    properties = ITEM["properties"]
    for name in sorted(accepted):
        assert name in properties, name
        schema = properties[name]
        assert len(schema["markdownDescription"]) > 20, name
        assert schema["examples"], name
        # and the validator takes the example, as the schema does
        entry = upstream(fmt, **{name: schema["examples"][0]}) if name != "format" else upstream(fmt)
        assert load_error(entry) is None, (name, load_error(entry))
        assert schema_ok(entry), name


def test_a_format_clients_own_options_are_the_tables() -> None:
    for name in formats.names():
        own = formats.get(name).client_class().provider_options
        for option in own:
            assert name in config_fields.provider_field(option).applies


@pytest.mark.parametrize("f", PROVIDER_FIELDS, ids=lambda f: f.name)
def test_each_fields_example_is_taken_by_both_for_every_format_it_applies_to(f: Field) -> None:
    assert f.doc and f.example is not None
    for fmt in formats_of(f):
        entry = upstream(fmt, **{f.name: f.example}) if f.name != "format" else upstream(fmt)
        assert schema_ok(entry), (fmt, list(VALIDATOR.iter_errors(entry)))
        assert load_error(entry) is None, (fmt, load_error(entry))
    if PYTHON in f.applies:
        entry = {"name": "py", "provider": "pkg.mod:Cls", f.name: f.example}
        assert schema_ok(entry)
        (parsed,) = parse_entries([entry])
        assert not isinstance(parsed, Exception), parsed


def test_a_field_of_another_format_is_refused_by_both() -> None:
    for f in PROVIDER_FIELDS:
        for fmt in formats.names():
            if fmt in f.applies or f.name == "format":
                continue
            entry = upstream(fmt, **{f.name: f.example})
            assert not schema_ok(entry), (f.name, fmt)
            error = load_error(entry)
            assert error is not None and f.name in error, (f.name, fmt, error)


def wrong_values(f: Field) -> list[Any]:
    """Values of the wrong type, outside the enum, or beyond the limits."""
    by_type: dict[str, Any] = {
        "string": 42,
        "boolean": "yes",
        "integer": 1.5,
        "number": "1",
        "object": [1],
        "array": {"a": 1},
    }
    out = [v for t, v in by_type.items() if t in f.types and not any(
        config_fields._is_type(v, other) for other in f.types)]
    if "integer" in f.types and "number" not in f.types:
        out.append("1")
    if f.enum:
        out.append("no-such-value")
    if f.minimum is not None:
        out.append(f.minimum - 1)
    if f.exclusive_minimum is not None:
        out.append(f.exclusive_minimum)
    if f.values is not None:
        out.append({"X-Ok": 1})
    if f.fields:
        out.append({"noSuchKey": 1})
    return out


@pytest.mark.parametrize("f", PROVIDER_FIELDS, ids=lambda f: f.name)
def test_wrong_types_enums_and_limits_are_refused_by_both(f: Field) -> None:
    fmt = formats_of(f)[0] if formats_of(f) else None
    for value in wrong_values(f):
        if fmt is not None and f.name != "format":
            entry = upstream(fmt, **{f.name: value})
        elif f.name == "format":
            entry = {"name": "t", "format": value, "baseUrl": "https://x.test/v1"}
        else:
            entry = {"name": "t", f.name: value}
        assert not schema_ok(entry), (f.name, value)
        error = load_error(entry)
        assert error is not None and f.name in error, (f.name, value, error)


@pytest.mark.parametrize("f", RETRY_FIELDS, ids=lambda f: f.name)
def test_retry_fields_agree(f: Field) -> None:
    assert load_error(upstream("chat-completions", retry={f.name: f.example})) is None
    assert schema_ok(upstream("chat-completions", retry={f.name: f.example}))
    for value in wrong_values(f):
        entry = upstream("chat-completions", retry={f.name: value})
        assert not schema_ok(entry), (f.name, value)
        error = load_error(entry)
        assert error is not None and f"retry.{f.name}" in error, (value, error)


@pytest.mark.parametrize("f", MODEL_FIELDS, ids=lambda f: f.name)
def test_model_fields_agree(f: Field) -> None:
    model = {"id": "m", f.name: f.example}
    entry = upstream("chat-completions", models=[model])
    assert schema_ok(entry) and load_error(entry) is None, load_error(entry)
    for value in wrong_values(f):
        entry = upstream("chat-completions", models=[{"id": "m", f.name: value}])
        assert not schema_ok(entry), (f.name, value)
        error = load_error(entry)
        assert error is not None and f"models[0].{f.name}" in error, (value, error)
    bad = upstream("chat-completions", models=[{"id": "m", "maxTokens": 5}])
    assert not schema_ok(bad) and "unknown field" in (load_error(bad) or "")


def test_python_providers_take_their_own_options_and_model_shapes() -> None:
    entry = {"name": "py", "provider": "pkg.mod:Cls", "colour": "red",
             "models": [{"id": "a", "weights": "w.gguf"}]}
    assert schema_ok(entry)
    (parsed,) = parse_entries([entry])
    assert not isinstance(parsed, Exception)
    assert parsed.options == {"colour": "red"}
    # an upstream entry does not
    assert not schema_ok(upstream("chat-completions", colour="red"))
    assert not schema_ok(upstream("chat-completions", models=[{"id": "a", "weights": "w"}]))


@pytest.mark.parametrize(
    "name", ["a", "my provider", "ü-ok"], ids=str
)
def test_names_the_validator_takes_the_schema_takes(name: str) -> None:
    assert schema_ok({"name": name, "provider": "m:C"})
    assert not isinstance(parse_entries([{"name": name, "provider": "m:C"}])[0], Exception)


@pytest.mark.parametrize("name", ["", "  ", "a/b"], ids=repr)
def test_names_the_validator_refuses_the_schema_refuses(name: str) -> None:
    assert not schema_ok({"name": name, "provider": "m:C"})
    assert isinstance(parse_entries([{"name": name, "provider": "m:C"}])[0], Exception)


# --------------------------------------------------------------------------- defaults and trust


def test_documented_defaults_are_the_ones_the_code_uses() -> None:
    field = config_fields.provider_field
    assert field("timeout").default == DEFAULT_TIMEOUT
    assert field("catalogTtl").default == DEFAULT_CATALOG_TTL
    assert field("thinking").default == AssemblerOptions().thinking
    d = ModelDefaults()
    for name, value in (
        ("contextWindow", d.context_window),
        ("maxOutputTokens", d.max_output_tokens),
        ("outputReserve", d.output_reserve),
        ("toolCalling", d.tool_calling),
        ("imageInput", d.image_input),
    ):
        assert field(name).default == value, name
    policy = RetryPolicy()
    for f in RETRY_FIELDS:
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", f.name).lower()
        assert f.default == getattr(policy, snake), f.name
    for name in ("contextCheck", "contextManagement", "truncation"):
        assert field(name).default == {"truncation": "auto"}.get(name, True)


def test_trust_classes_are_the_security_policy() -> None:
    # SECURITY.md: "provider" drops a workspace's entry; these three are removed from it.
    assert config_fields.workspace_fields("entry-ignored") == ("provider",)
    assert config_fields.workspace_fields("removed") == ("apiKeyEnv", "allowInsecureHttp", "vertex")
    everything = {f.name: f.example for f in PROVIDER_FIELDS if f.name != "provider"}
    merged, ignored = merge_workspace_entries([], [{**everything, "name": "ws"}])
    assert set(everything) - set(merged[0]) == {"apiKeyEnv", "allowInsecureHttp", "vertex"}
    assert [(i.field, i.reason) for i in ignored] == [
        (f.name, f.workspace_reason) for f in PROVIDER_FIELDS if f.workspace == "removed"
    ]
    merged, ignored = merge_workspace_entries([], [{"name": "ws", "provider": "os:system"}])
    assert merged == [] and ignored[0].reason == config_fields.provider_field("provider").workspace_reason
    # the schema tells the user as well
    for f in PROVIDER_FIELDS:
        text = ITEM["properties"][f.name]["markdownDescription"]
        assert ("From user settings only" in text) == (f.workspace != "honoured"), f.name


def test_the_entrys_own_fields_are_the_tables_fields_for_python_providers() -> None:
    assert {f.name for f in PROVIDER_FIELDS if PYTHON in f.applies} | {"format"} == provider_entries._COMMON


# --------------------------------------------------------------------------- README


def readme_options() -> list[str]:
    text = README.read_text("utf-8")
    part = text[text.index(config_fields.README_BEGIN) : text.index(config_fields.README_END)]
    first_table = part.split("\n\n")[0]
    return re.findall(r"^\| `([A-Za-z]+)` \|", first_table, re.MULTILINE)


def test_every_readme_option_exists_in_the_schema_and_the_validator() -> None:
    options = readme_options()
    assert len(options) == len(PROVIDER_FIELDS) >= 26
    for name in options:
        schema = ITEM["properties"][name]
        f = config_fields.provider_field(name)
        if formats_of(f):
            fmt = formats_of(f)[0]
            entry = upstream(fmt, **{name: schema["examples"][0]}) if name != "format" else upstream(fmt)
            assert load_error(entry) is None, name
        else:
            (parsed,) = parse_entries([{"name": "py", name: schema["examples"][0]}])
            assert not isinstance(parsed, Exception)


def readme_provider_lists() -> list[list[Any]]:
    """The ``"lmbridge.providers": [...]`` examples of the README (JSONC without comments)."""
    out = []
    for block in re.findall(r"```jsonc\n(.*?)```", README.read_text("utf-8"), re.DOTALL):
        if '"lmbridge.providers"' not in block:
            continue
        text = re.sub(r"^\s*//.*$", "", block, flags=re.MULTILINE)
        out.append(json.loads("{" + text + "}")["lmbridge.providers"])
    return out


def test_the_readmes_examples_are_valid_for_the_schema_and_the_validator() -> None:
    lists = readme_provider_lists()
    assert len(lists) >= 2
    for entries in lists:
        for entry in entries:
            assert schema_ok(entry), (entry, list(VALIDATOR.iter_errors(entry)))
            (parsed,) = parse_entries([entry])
            assert not isinstance(parsed, Exception), parsed
            if "format" in entry:
                assert load_error(entry) is None or "LOCAL_KEY" in str(load_error(entry))
