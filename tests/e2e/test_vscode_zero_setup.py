"""Zero setup in a real VS Code: the installed .vsix runs its host with a Python that has nothing.

Two short code-server runs (``tests/e2e/run.js``) whose server, extension host and Python host
get a PATH chosen here, and proxies and a package index pointing at a closed port:

- PATH holds a ``python3`` that is the system's Python without lmbridge, httpx or h11 (checked
  first), no ``lmbridge.pythonCommand`` is set and no command is run: the models are listed and
  the echo model answers, from the lmbridge and dependencies unpacked inside the extension.
- PATH holds no Python at all: one notification says so, naming what was tried, with
  python.org's download page; the log says it once and the picker has no lmbridge model.
- The platform-specific .vsix (``npm run package:native``, with the compiled wheel of
  scripts/build-dist) and the same bare ``python3``: the bundled library runs compiled, with
  orjson.

Skipped unless ``LMBRIDGE_E2E=1``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from support.vscode_run import E2E_MARKS, REPO, fresh_run_dir, node, run_vscode

pytestmark = E2E_MARKS

CLOSED = "http://127.0.0.1:9"
DOWNLOAD = "https://www.python.org/downloads/"


def _user(text: str) -> dict[str, Any]:
    return {"role": 1, "content": [{"kind": "text", "value": text}], "name": None}


def _bare_python() -> str | None:
    """A Python >= 3.10 that imports neither lmbridge nor its dependencies (the system's)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if not Path(candidate).is_file():
            continue
        code = (
            "import sys, importlib.util as u; "
            "ok = sys.version_info >= (3, 10) and not any(u.find_spec(m) for m in ('lmbridge', 'httpx', 'h11', 'anyio')); "
            "sys.exit(0 if ok else 1)"
        )
        if subprocess.run([candidate, "-I", "-c", code], check=False, timeout=30).returncode == 0:
            return candidate
    return None


def _run(name: str, path_dirs: list[Path], cases: list[dict[str, Any]], run_env: dict[str, str] | None = None) -> dict[str, Any]:
    run_dir = fresh_run_dir(REPO / "e2e-out" / name)
    env = run_dir / "server-env.json"
    # node's own folder stays on PATH (it is not a Python); nothing else of this machine's PATH
    server_path = os.pathsep.join([*map(str, path_dirs), str(Path(node()).parent)])
    env.write_text(json.dumps({
        "PATH": server_path,
        # VS Code's server otherwise adds the login shell's environment (its PATH) to the
        # extension host's; a VS Code started from a terminal (VSCODE_CLI) does not
        "VSCODE_CLI": "1",
        "PYTHONPATH": "",
        "VIRTUAL_ENV": "",
        "PIP_INDEX_URL": CLOSED,
        "HTTP_PROXY": CLOSED, "HTTPS_PROXY": CLOSED, "http_proxy": CLOSED, "https_proxy": CLOSED,
    }))
    done = run_vscode(
        run_dir,
        {"selector": {"vendor": "lmbridge"}, "waitForModels": ["echo/echo"], "modelWaitMs": 20000, "cases": cases},
        {},  # nothing: no pythonCommand, no providers
        args=["--server-env", str(env)],
        env={"LMBRIDGE_E2E_LINGER_MS": "3000", **(run_env or {})},
        timeout=240,
    )
    return {"record": done.record, "report": done.report, "log": done.log(), "dir": run_dir}


@pytest.fixture(scope="module")
def compiled() -> dict[str, Any]:
    python = REPO / ".venv-compiled" / "bin" / "python"
    if not python.is_file():
        pytest.fail(f"{python} is missing: scripts/check makes it with scripts/build-compiled")
    run_dir = fresh_run_dir(REPO / "e2e-out" / "compiled-build")
    done = run_vscode(
        run_dir,
        {"selector": {"vendor": "lmbridge"}, "waitForModels": ["echo/echo"], "modelWaitMs": 20000,
         "cases": [{"name": "hello", "model": "echo/echo", "messages": [_user("compiled")]}]},
        {"lmbridge.pythonCommand": str(python)},
        env={"LMBRIDGE_E2E_LINGER_MS": "3000"},
        timeout=240,
    )
    return {"record": done.record, "log": done.log()}


def _ours(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The notifications lmbridge showed (VS Code's Git offers to open the repository around the run)."""
    return [t for t in report["notifications"] if "lmbridge" in t["message"] or "lmbridge" in t["source"]]


def _bare_bin(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder whose only program is ``python3``: the system's Python without lmbridge."""
    python = _bare_python()
    if python is None:
        pytest.skip("no system Python >= 3.10 without lmbridge and httpx on this machine")
    bin_dir = tmp_path_factory.mktemp(name)
    (bin_dir / "python3").symlink_to(python)
    return bin_dir


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    bin_dir = _bare_bin(tmp_path_factory, "bare-bin")
    return _run("zero-setup", [bin_dir], [{"name": "hello", "model": "echo/echo", "messages": [_user("zero setup works")]}])


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    dist = Path(os.environ.get("LMBRIDGE_DIST") or REPO / "dist").resolve()
    if not list(dist.glob("lmbridge-*-cp*-cp*-*.whl")):
        pytest.fail(f"no compiled wheel in {dist}: scripts/check makes it with scripts/build-dist")
    bin_dir = _bare_bin(tmp_path_factory, "native-bin")
    return _run("native-vsix", [bin_dir], [{"name": "hello", "model": "echo/echo", "messages": [_user("native")]}],
                run_env={"LMBRIDGE_E2E_NATIVE": "1", "LMBRIDGE_DIST": str(dist)})


@pytest.fixture(scope="module")
def no_python(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    empty = tmp_path_factory.mktemp("no-python-bin")
    return _run("no-python", [empty], [{"name": "hello", "model": "echo/echo", "messages": [_user("anyone?")]}])


def test_the_vsix_ships_lmbridge_and_its_dependencies_unpacked(bare: dict[str, Any]) -> None:
    with zipfile.ZipFile(bare["dir"] / "vsix" / "lmbridge.vsix") as z:
        names = set(z.namelist())
    for module in ("lmbridge/host/server.py", "httpx/__init__.py", "h11/__init__.py", "httpcore/__init__.py", "anyio/__init__.py", "certifi/cacert.pem", "tomli/__init__.py", "truststore/__init__.py"):
        assert f"extension/python/lib/{module}" in names, module
    # pure Python only: nothing compiled in the bundle, no wheel or pin of the platform package
    assert not [n for n in names if n.endswith((".so", ".pyd", ".dylib")) or "/python/native/" in n]


def test_a_python_without_lmbridge_serves_the_echo_model_with_nothing_installed(bare: dict[str, Any]) -> None:
    record, log = bare["record"], bare["log"]
    assert record["errors"] == [], record["errors"]
    assert "echo/echo" in [m["id"] for m in record["models"]], record["models"]
    case = record["cases"]["hello"]
    assert case["ok"], case
    assert case["text"] == "You said: zero setup works"
    # the Python on PATH, by its own path, with the extension's library folder
    assert re.search(r"Python: \S+python3 \(3\.\d+\), on PATH", log), log[-3000:]
    assert "/python/lib" in log
    assert "[error]" not in log, log[-3000:]
    assert _ours(bare["report"]) == [], bare["report"]["notifications"]
    # nothing was installed: no environment was made in the storage folder
    assert not list((bare["dir"] / "data").rglob("lmbridge.lmbridge/venv"))


def test_no_python_is_one_message_with_the_download_page(no_python: dict[str, Any]) -> None:
    record, log, report = no_python["record"], no_python["log"], no_python["report"]
    toasts = _ours(report)
    assert len(toasts) == 1, toasts
    toast = toasts[0]
    assert "No Python 3.10 or newer was found" in toast["message"], toast
    assert "python3 (not found)" in toast["message"] and DOWNLOAD in toast["message"], toast
    assert toast["buttons"][:2] == ["Install Python", "Open Settings"], toast
    # no model to pick, and no second message about it
    case = record["cases"]["hello"]
    assert not case["ok"]
    assert record["models"] == []
    assert log.count("the Python host cannot start: No Python 3.10 or newer was found") == 1, log[-3000:]


def _answered(run: dict[str, Any], said: str, build: str) -> str:
    """The run's echo case answered, from a host that said it runs ``build``; the log."""
    record, log = run["record"], run["log"]
    assert record["errors"] == [], record["errors"]
    case = record["cases"]["hello"]
    assert case["ok"], case
    assert case["text"] == f"You said: {said}"
    assert re.search(rf"Python host \S+ \({build}\) ready", log), log[-3000:]
    return str(log)


def test_an_interpreter_with_the_compiled_build_of_this_version_runs_it(compiled: dict[str, Any]) -> None:
    """pythonCommand names an interpreter where the compiled lmbridge of the extension's version
    is installed (.venv-compiled): the host runs that build, the bundled one goes last."""
    _answered(compiled, "compiled", "compiled, orjson")


def test_the_bundled_library_is_pure_python_and_says_so(bare: dict[str, Any]) -> None:
    assert re.search(r"Python host \S+ \(pure Python, json\) ready", bare["log"]), bare["log"][-3000:]


def test_the_platform_vsix_runs_its_bundled_library_compiled_with_orjson(native: dict[str, Any]) -> None:
    """The same bare Python as the zero-setup run, the platform-specific .vsix: no install, and
    the host answers from the bundled library, compiled for this Python, parsing with orjson."""
    log = _answered(native, "native", "compiled, orjson")
    assert "/python/lib" in log and "[error]" not in log, log[-3000:]
    with zipfile.ZipFile(native["dir"] / "vsix" / "lmbridge.vsix") as z:
        names = set(z.namelist())
        manifest = z.read("extension.vsixmanifest").decode()
    assert re.search(r'TargetPlatform="linux-(x64|arm64)"', manifest), manifest
    lib = "extension/python/lib/"
    # the compiled modules beside their sources, orjson for every Python the package supports
    assert f"{lib}lmbridge/sse.py" in names
    assert any(re.fullmatch(rf"{lib}lmbridge/sse\.cpython-3\d+-.+\.so", n) for n in names)
    for minor in range(10, 15):
        assert any(n.startswith(f"{lib}orjson/orjson.cpython-3{minor}-") for n in names), minor
    # and the same as wheels for "Create Python Environment", each pinned with its hash: the
    # compiled lmbridge on the lmbridge pin, orjson in a file of its own (installed optionally)
    with zipfile.ZipFile(native["dir"] / "vsix" / "lmbridge.vsix") as z:
        wheels = {n.rsplit("/", 1)[1]: hashlib.sha256(z.read(n)).hexdigest()
                  for n in names if n.startswith("extension/python/native/") and n.endswith(".whl")}
        pins = z.read("extension/python/requirements.txt").decode()
        orjson_pins = z.read("extension/python/native/orjson-requirements.txt").decode()
    assert any(re.fullmatch(r"lmbridge-.+-cp3\d+-cp3\d+-.+\.whl", w) for w in wheels), wheels
    assert len([w for w in wheels if w.startswith("orjson-")]) == 5, wheels
    assert "orjson" not in pins, pins
    for wheel, digest in wheels.items():
        assert f"--hash=sha256:{digest}" in (orjson_pins if wheel.startswith("orjson-") else pins), wheel
