"""extension/scripts/add_native.py: what the platform-specific .vsix adds to python/lib, and
what it refuses. Wheels are made here (zip files with the right names); orjson's are put in
the download cache first, so nothing is fetched. The real package is built and run in VS Code
by tests/e2e/test_vscode_zero_setup.py."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "extension" / "scripts" / "add_native.py"
PLATFORM = "manylinux_2_17_x86_64.manylinux2014_x86_64"
SOURCES = {"lmbridge/__init__.py": b"__version__ = '9.9.9'\n", "lmbridge/sse.py": b"def f(): pass\n"}


def wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def setup(tmp_path: Path, compiled: dict[str, dict[str, bytes]]) -> tuple[Path, Path, Path]:
    out, dist = tmp_path / "python", tmp_path / "dist"
    (out / "lib").mkdir(parents=True)
    dist.mkdir()
    (out / "lib" / ".stamp").write_text("pure")
    wheel(out / "lmbridge-9.9.9-py3-none-any.whl", SOURCES)
    for name, members in compiled.items():
        wheel(dist / name, members)
    cache = out / "native-deps"
    cache.mkdir()
    for minor in range(10, 15):
        tag = f"cp3{minor}"
        wheel(cache / f"orjson-3.13.0-{tag}-{tag}-{PLATFORM}.whl", {
            "orjson/__init__.py": b"from .orjson import *\n",
            f"orjson/orjson.cpython-3{minor}-x86_64-linux-gnu.so": b"\x7fELF",
            "orjson-3.13.0.dist-info/METADATA": b"Name: orjson\n",
            "orjson-3.13.0.dist-info/RECORD": b"",
        })
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("httpx==0.28.1\norjson==3.13.0\n")
    return out, dist, constraints


def run(out: Path, dist: Path, constraints: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(out), str(dist), str(constraints)],
                          capture_output=True, text=True, timeout=60, check=False)


def compiled_wheel(sources: dict[str, bytes] = SOURCES) -> dict[str, bytes]:
    return {**sources, "lmbridge/sse.cpython-311-x86_64-linux-gnu.so": b"\x7fELF",
            "abc__mypyc.cpython-311-x86_64-linux-gnu.so": b"\x7fELF"}


def test_adds_the_compiled_extensions_and_orjson_for_every_python(tmp_path: Path) -> None:
    out, dist, constraints = setup(tmp_path, {f"lmbridge-9.9.9-cp311-cp311-{PLATFORM}.whl": compiled_wheel()})
    done = run(out, dist, constraints)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "linux-x64"
    lib = out / "lib"
    assert (lib / "lmbridge" / "sse.cpython-311-x86_64-linux-gnu.so").is_file()
    assert (lib / "abc__mypyc.cpython-311-x86_64-linux-gnu.so").is_file()
    # only the extensions: the sources stay the bundled wheel's (unpacked by unpack_lib.py)
    assert not (lib / "lmbridge" / "sse.py").exists()
    assert sorted(p.name for p in (lib / "orjson").glob("*.so")) == [
        f"orjson.cpython-3{m}-x86_64-linux-gnu.so" for m in range(10, 15)]
    assert (lib / "orjson-3.13.0.dist-info" / "METADATA").is_file()
    assert not (lib / "orjson-3.13.0.dist-info" / "RECORD").exists()
    native = (lib / "NATIVE.txt").read_text()
    assert native.startswith("target linux-x64\n") and "sha256:" in native
    # the next universal build unpacks a clean lib again
    assert (lib / ".stamp").read_text() != "pure"


def test_refuses_a_compiled_wheel_built_from_other_sources(tmp_path: Path) -> None:
    other = {**SOURCES, "lmbridge/sse.py": b"def f(): return 1\n"}
    out, dist, constraints = setup(tmp_path, {f"lmbridge-9.9.9-cp311-cp311-{PLATFORM}.whl": compiled_wheel(other)})
    done = run(out, dist, constraints)
    assert done.returncode == 1
    assert "was not built from the bundled lmbridge-9.9.9-py3-none-any.whl: lmbridge/sse.py differ" in done.stderr
    assert not list((out / "lib").rglob("*.so"))


def test_refuses_wheels_for_two_platforms_or_none(tmp_path: Path) -> None:
    out, dist, constraints = setup(tmp_path, {
        f"lmbridge-9.9.9-cp311-cp311-{PLATFORM}.whl": compiled_wheel(),
        "lmbridge-9.9.9-cp311-cp311-win_amd64.whl": compiled_wheel(),
    })
    done = run(out, dist, constraints)
    assert done.returncode == 1 and "must all be for one platform" in done.stderr
    for w in dist.iterdir():
        w.unlink()
    done = run(out, dist, constraints)
    assert done.returncode == 1 and "no compiled lmbridge 9.9.9 wheel" in done.stderr and "scripts/build-dist" in done.stderr


def test_refuses_a_member_that_would_land_outside_lib(tmp_path: Path) -> None:
    evil = {**compiled_wheel(), "../../escape.so": b"x"}
    out, dist, constraints = setup(tmp_path, {f"lmbridge-9.9.9-cp311-cp311-{PLATFORM}.whl": evil})
    done = run(out, dist, constraints)
    assert done.returncode == 1 and "would land outside python/lib" in done.stderr
    assert not (tmp_path / "escape.so").exists()
