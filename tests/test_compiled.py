"""The compiled build: which modules it compiles, and that a run meant for it really uses it.

``scripts/check`` runs the whole suite a second time in ``.venv-compiled`` (made by
``scripts/build-compiled``) with ``LMBRIDGE_EXPECT_COMPILED=1``: there every module of
:data:`lmbridge.compiled.COMPILED_MODULES` must be a C extension, else that run would test
pure Python twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmbridge.compiled import COMPILED_MODULES, build, compiled_modules, json_library

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
EXPECT_COMPILED = os.environ.get("LMBRIDGE_EXPECT_COMPILED") == "1"


def test_the_build_hook_compiles_exactly_the_listed_modules() -> None:
    hook = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"][
        "targets"
    ]["wheel"]["hooks"]["mypyc"]
    files = [Path(f) for f in hook["include"]]
    named = [".".join(f.relative_to("src").with_suffix("").parts) for f in files]
    assert named == list(COMPILED_MODULES)
    assert all((ROOT / f).is_file() for f in files)
    assert hook["enable-by-default"] is False  # a plain install needs no compiler


@pytest.mark.skipif(not EXPECT_COMPILED, reason="runs in the compiled build's test run")
def test_the_compiled_run_uses_the_compiled_modules() -> None:
    assert compiled_modules() == dict.fromkeys(COMPILED_MODULES, True)
    assert build() == "compiled"


@pytest.mark.skipif(EXPECT_COMPILED, reason="runs in the pure-Python test run")
def test_the_development_install_is_pure_python() -> None:
    # (an editable install with leftover .so files beside the sources would shadow them)
    assert build() == "pure Python", compiled_modules()


def test_python_m_lmbridge_compiled_says_which_build_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lmbridge.compiled", "--require"],
        capture_output=True,
        text=True,
        check=False,
    )
    want = "compiled" if EXPECT_COMPILED else "pure Python"
    assert out.stdout.startswith(f"lmbridge build: {want}; JSON: orjson\n"), out.stdout
    assert all(name in out.stdout for name in COMPILED_MODULES)
    assert out.returncode == (0 if EXPECT_COMPILED else 1)


def test_json_library_names_the_parser_that_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    assert json_library() == "orjson"  # the dev install has the fast extra
    # an orjson that cannot be imported (absent, or built for another Python) is not used
    monkeypatch.setitem(sys.modules, "orjson", None)
    assert json_library() == "json"


def test_the_build_is_told_without_importing_the_compiled_modules() -> None:
    """The host reports the build in its ``initialize`` answer: asking must not import the
    decoders and the token weights (start-up), and must say what importing them then loads."""
    script = (
        "import sys\n"
        "from lmbridge.compiled import COMPILED_MODULES, compiled_modules\n"
        "before = compiled_modules()\n"
        "assert not [m for m in COMPILED_MODULES if m in sys.modules], sys.modules.keys()\n"
        "import importlib\n"
        "for name in COMPILED_MODULES:\n"
        "    importlib.import_module(name)\n"
        "assert compiled_modules() == before, (compiled_modules(), before)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
