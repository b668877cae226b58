"""The release files of scripts/build-dist: what each holds, and which one pip installs.

They take a minute to build, so these tests read them from $LMBRIDGE_DIST (set by the full
`scripts/check`, after scripts/build-compiled has built them) and are skipped without it; with
it set, missing files are a failure.
"""

from __future__ import annotations

import email.parser
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from lmbridge import __version__
from lmbridge.compiled import COMPILED_MODULES

ROOT = Path(__file__).parents[1]
DIST = os.environ.get("LMBRIDGE_DIST")

pytestmark = pytest.mark.skipif(not DIST, reason="LMBRIDGE_DIST is not set (scripts/check sets it)")


def dist() -> Path:
    assert DIST
    return Path(DIST) if Path(DIST).is_absolute() else ROOT / DIST


def one(pattern: str) -> Path:
    found = sorted(dist().glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {dist()}, found {[p.name for p in found]}"
    return found[0]


def sdist() -> Path:
    return one(f"lmbridge-{__version__}.tar.gz")


def pure_wheel() -> Path:
    return one(f"lmbridge-{__version__}-py3-none-any.whl")


def compiled_wheels() -> list[Path]:
    """The compiled wheels: one per Python version scripts/build-dist was given (PYTHONS)."""
    found = sorted(dist().glob(f"lmbridge-{__version__}-cp*-cp*-*.whl"))
    assert found, f"no compiled wheel in {dist()}"
    tags = [python_tag(w) for w in found]
    assert len(set(tags)) == len(tags), [w.name for w in found]  # one per Python version
    return found


def python_tag(wheel: Path) -> str:
    """``cp311`` of ``lmbridge-0.1.0-cp311-cp311-<platform>.whl``."""
    return wheel.name.split("-")[2]


THIS_PYTHON = f"cp{sys.version_info.major}{sys.version_info.minor}"


def sources() -> set[str]:
    """The package's Python files, relative to src/."""
    src = ROOT / "src"
    return {p.relative_to(src).as_posix() for p in (src / "lmbridge").rglob("*.py")}


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(z.read(name).decode())


def test_the_sdist_holds_the_package_its_tests_and_pins_and_nothing_built() -> None:
    with tarfile.open(sdist()) as t:
        members = t.getnames()
    assert all(n.split("/", 1)[0] == f"lmbridge-{__version__}" for n in members)
    names = {n.split("/", 1)[1] for n in members if "/" in n}
    assert {f"src/{s}" for s in sources()} <= names
    for needed in ("pyproject.toml", "README.md", "LICENSE", "constraints.txt", "PKG-INFO",
                   "locks/build.txt", "locks/bundle.txt",
                   "tests/test_sse.py", "docs/compiled.md"):
        assert needed in names, needed
    assert any(n.startswith("tests/fixtures/") for n in names)
    unwanted = [n for n in names if re.search(
        r"(^|/)(\.venv[^/]*|node_modules|__pycache__|extension|e2e-out|dist)(/|$)|\.(so|pyd|pyc|whl|vsix)$", n)]
    assert unwanted == []


def test_the_pure_wheel_is_python_only_with_every_module() -> None:
    with zipfile.ZipFile(pure_wheel()) as z:
        names = set(z.namelist())
    assert sources() <= names
    assert [n for n in names if n.endswith((".so", ".pyd", ".c"))] == []


def test_each_compiled_wheel_has_an_extension_beside_every_compiled_module() -> None:
    for wheel in compiled_wheels():
        tag = python_tag(wheel)
        with zipfile.ZipFile(wheel) as z:
            names = set(z.namelist())
        # the .py files stay: everything not compiled imports from them, and tracebacks show them
        assert sources() <= names, wheel.name
        # this interpreter's suffix with the wheel's Python version: .cpython-312-x86_64-linux-gnu.so
        suffix = re.sub(r"(?<=cpython-)\d+|(?<=\.cp)\d+", tag[2:], sysconfig.get_config_var("EXT_SUFFIX"))
        for module in COMPILED_MODULES:
            assert module.replace(".", "/") + suffix in names, (wheel.name, module)
        extensions = [n for n in names if n.endswith((".so", ".pyd"))]
        # the compiled modules and mypyc's shared runtime library, nothing else, all for this
        # wheel's Python
        assert len(extensions) == len(COMPILED_MODULES) + 1, (wheel.name, extensions)
        assert all(n.endswith(suffix) for n in extensions), (wheel.name, extensions)
        assert wheel.name.startswith(f"lmbridge-{__version__}-{tag}-{tag}-")
        if sys.platform == "linux":
            # PyPI takes only manylinux/musllinux wheels for Linux: auditwheel's tag
            assert re.search(r"[-.]manylinux_2_\d+_\w+\.whl$", wheel.name), wheel.name


@pytest.mark.skipif(sys.platform != "linux", reason="ELF extensions: Linux")
def test_the_compiled_extensions_need_only_libc_and_name_no_folder_of_the_build_machine(
    tmp_path: Path,
) -> None:
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf (binutils) is not installed")
    for wheel in compiled_wheels():
        with zipfile.ZipFile(wheel) as z:
            extensions = [n for n in z.namelist() if n.endswith(".so")]
            z.extractall(tmp_path / wheel.name, extensions)
        for name in extensions:
            dynamic = subprocess.run(
                [readelf, "-d", str(tmp_path / wheel.name / name)],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            needed = re.findall(r"\(NEEDED\).*\[(.+)\]", dynamic)
            assert set(needed) <= {"libc.so.6", "libpthread.so.0"}, (wheel.name, name, needed)
            # no RPATH/RUNPATH: a user's machine must not search a folder of the build machine
            assert "RPATH" not in dynamic and "RUNPATH" not in dynamic, (wheel.name, name, dynamic)


def test_all_wheels_declare_the_same_dependencies_and_extras() -> None:
    pure = wheel_metadata(pure_wheel())
    for wheel in compiled_wheels():
        compiled = wheel_metadata(wheel)
        assert sorted(pure.get_all("Requires-Dist") or []) == sorted(compiled.get_all("Requires-Dist") or []), wheel.name
        assert sorted(pure.get_all("Provides-Extra") or []) == sorted(compiled.get_all("Provides-Extra") or []), wheel.name
    assert any(r.startswith("orjson") and "extra == 'fast'" in r for r in pure.get_all("Requires-Dist") or [])


def picked(tmp_path: Path, *target: str) -> str:
    """The file pip takes from dist/ for `lmbridge`, for this interpreter or for `target`."""
    dest = tmp_path / "picked"
    options = ["--only-binary=:all:", *target] if target else []
    out = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-index",
         "--find-links", str(dist()), "--dest", str(dest), *options, f"lmbridge=={__version__}"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    (name,) = [p.name for p in dest.iterdir()]
    return name


def test_pip_installs_the_compiled_wheel_where_it_matches(tmp_path: Path) -> None:
    # this interpreter: its own compiled wheel (the pure one if the release has none for it)
    mine = [w.name for w in compiled_wheels() if python_tag(w) == THIS_PYTHON]
    assert picked(tmp_path / THIS_PYTHON) == (mine[0] if mine else pure_wheel().name)
    # each other Python version, on the platform its wheel was built for: that version's
    # wheel, not another version's nor the pure one
    for wheel in compiled_wheels():
        tag = python_tag(wheel)
        platforms = wheel.name.removesuffix(".whl").split("-")[4].split(".")
        target = ["--python-version", f"{tag[2]}.{tag[3:]}", "--implementation", "cp", "--abi", tag]
        for platform in platforms:
            target += ["--platform", platform]
        assert picked(tmp_path / tag, *target) == wheel.name


@pytest.mark.parametrize(
    "target",
    [
        ("--python-version", "3.99", "--platform", "manylinux_2_17_x86_64"),
        ("--python-version", f"{sys.version_info.major}.{sys.version_info.minor}", "--platform", "win_amd64"),
        ("--python-version", f"{sys.version_info.major}.{sys.version_info.minor}", "--platform", "macosx_11_0_arm64"),
    ],
    ids=["other-python", "windows", "macos"],
)
def test_pip_installs_the_pure_wheel_everywhere_else(tmp_path: Path, target: tuple[str, ...]) -> None:
    assert picked(tmp_path, *target) == pure_wheel().name
