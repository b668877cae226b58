"""docs/diagram.svg, the README's picture of both directions, is what tools/make_diagram.py
draws from the code (the upstream formats and the endpoint's APIs), and a well-formed SVG."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from lmbridge import formats
from lmbridge.client.endpoint.apis import APIS

ROOT = Path(__file__).parents[1]
TOOL = ROOT / "tools" / "make_diagram.py"


def tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("make_diagram", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_diagram_is_what_the_command_draws() -> None:
    committed = (ROOT / "docs" / "diagram.svg").read_text("utf-8")
    assert committed == tool().render(), "docs/diagram.svg is stale: python tools/make_diagram.py"
    done = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr


def test_it_names_every_format_and_endpoint_api_and_parses() -> None:
    text = tool().render()
    root = ET.fromstring(text)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    shown = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    module = tool()
    for name in formats.names():
        assert module.FORMAT_LABELS.get(name, name) in shown, name
    for registration in APIS[1:]:
        assert module.API_LABELS.get(registration.api.name, registration.api.name) in shown
    assert "Provider side" in shown and "Consumer side" in shown


def test_the_check_fails_on_a_stale_file(tmp_path: Path) -> None:
    module = tool()
    module.OUT = tmp_path / "diagram.svg"
    module.ROOT = tmp_path
    module.OUT.write_text("<svg/>")
    assert module.main(["--check"]) == 1
    assert module.main([]) == 0 and module.main(["--check"]) == 0
