"""The wire-format registry: every layer of every format resolves, and every reader agrees."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lmbridge import config, formats
from lmbridge.cli import build_parser
from lmbridge.upstream import StreamDecoder

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", formats.names())
def test_each_registration_names_layers_that_exist_and_agree_on_the_name(name: str) -> None:
    f = formats.get(name)
    assert f.name == name
    decoder = f.decoder_class()
    assert issubclass(decoder, StreamDecoder) and decoder.format == name
    assert f.client_class().format == name
    converter = f.converter_function()
    params = inspect.signature(converter).parameters
    assert all(arg in params for arg in f.converter_args), (name, f.converter_args)
    assert callable(f.catalog_parser())
    assert f.detector()({}, "") is False  # an empty object is nobody's event
    consumer = f.consumer_function()
    assert consumer is None or callable(consumer)


def test_unknown_names_are_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="chat-completions"):
        formats.get("openai")


def test_importing_the_registry_imports_no_layer() -> None:
    code = (
        "import sys, lmbridge.formats as f; f.FORMATS; "
        "print(any(m.startswith(('lmbridge.upstream', 'lmbridge.gateway', 'lmbridge.convert')) "
        "for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_configuration_cli_and_settings_schema_read_the_registry() -> None:
    assert formats.names() == config.KNOWN_FORMATS
    package = json.loads((ROOT / "extension" / "package.json").read_text("utf-8"))
    item = package["contributes"]["configuration"]["properties"]["lmbridge.providers"]["items"]
    assert item["properties"]["format"]["enum"] == list(formats.names())
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    replay = sub.choices["replay"]  # type: ignore[index]
    convert = sub.choices["convert"]  # type: ignore[index]
    choices = {a.dest: a.choices for a in replay._actions + convert._actions}
    assert list(next(a.choices for a in replay._actions if a.dest == "format")) == list(
        formats.names()
    )
    assert list(next(a.choices for a in convert._actions if a.dest == "to")) == [
        *formats.names(),
        "vscode",
    ]
    assert list(choices["source"]) == list(formats.consumer_formats())


@pytest.mark.parametrize("doc", ["README.md", "extension/README.md"])
def test_the_docs_list_every_format(doc: str) -> None:
    text = (ROOT / doc).read_text("utf-8")
    for name in formats.names():
        assert f"`{name}`" in text, name
