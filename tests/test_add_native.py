"""extension/scripts/add_native.py: what the platform-specific .vsix adds to python/lib and
python/native/, how it pins them for "Create Python Environment", and what it refuses. Wheels
are made here (installable zip files with the right names); orjson's are put in the download
cache first, and pip finds no package index, so nothing is fetched. The real package is built
and run in VS Code by tests/e2e/test_vscode_zero_setup.py."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "extension" / "scripts" / "add_native.py"
PLATFORM = "manylinux_2_17_x86_64.manylinux2014_x86_64"
SOURCES = {"lmbridge/__init__.py": b"__version__ = '9.9.9'\n", "lmbridge/sse.py": b"def f(): pass\n"}
PYTHONS = range(10, 15)
THIS = sys.version_info[1]
OFFLINE = {**os.environ, "PIP_NO_INDEX": "1", "PIP_INDEX_URL": "http://127.0.0.1:9", "PIP_FIND_LINKS": ""}
PURE_PIN = "lmbridge==9.9.9 --hash=sha256:"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def wheel(path: Path, members: dict[str, bytes]) -> Path:
    """A wheel of ``members`` with the metadata pip needs to install it."""
    name, version, *tag = path.name[: -len(".whl")].split("-")
    info = f"{name}-{version}.dist-info"
    members = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
               f"{info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {'-'.join(tag)}\n".encode(),
               **members}
    members[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in [*members, f"{info}/RECORD"]).encode()
    with zipfile.ZipFile(path, "w") as z:
        for member, data in members.items():
            z.writestr(member, data)
    return path


def setup(tmp_path: Path, compiled: dict[str, dict[str, bytes]], orjson: range | list[int] = PYTHONS) -> tuple[Path, Path, Path]:
    """What build-wheel.mjs leaves (the pure wheel, its pin, python/lib), the compiled wheels in
    dist/ and orjson's wheels for the Python versions ``orjson`` in the download cache."""
    out, dist = tmp_path / "python", tmp_path / "dist"
    (out / "lib").mkdir(parents=True)
    (out / "deps").mkdir()
    dist.mkdir()
    (out / "lib" / ".stamp").write_text("pure")
    pure = wheel(out / "lmbridge-9.9.9-py3-none-any.whl", SOURCES)
    (out / "requirements.txt").write_text(f"# made by pin_deps.py\n{PURE_PIN}{sha256(pure)}\n")
    for name, members in compiled.items():
        wheel(dist / name, members)
    cache = out / "native-deps"
    cache.mkdir()
    for minor in orjson:
        tag = f"cp3{minor}"
        wheel(cache / f"orjson-3.13.0-{tag}-{tag}-{PLATFORM}.whl", {
            "orjson/__init__.py": b"from .orjson import *\n",
            f"orjson/orjson.cpython-3{minor}-x86_64-linux-gnu.so": b"\x7fELF",
        })
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("httpx==0.28.1\norjson==3.13.0\n")
    # the committed lock beside constraints.txt (tools/lock.py): these orjson files' hashes
    (tmp_path / "locks").mkdir()
    hashes = " ".join(f"--hash=sha256:{sha256(w)}" for w in sorted(cache.glob("orjson-*.whl")))
    (tmp_path / "locks" / "bundle.txt").write_text(f"# the lock\norjson==3.13.0 {hashes}\n")
    return out, dist, constraints


def run(out: Path, dist: Path, constraints: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(out), str(dist), str(constraints)],
                          capture_output=True, text=True, timeout=60, check=False, env=OFFLINE)


def compiled_wheel(sources: dict[str, bytes] = SOURCES, minor: int = 11) -> dict[str, bytes]:
    return {**sources, f"lmbridge/sse.cpython-3{minor}-x86_64-linux-gnu.so": b"\x7fELF",
            f"abc__mypyc.cpython-3{minor}-x86_64-linux-gnu.so": b"\x7fELF"}


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


def test_pins_the_compiled_and_orjson_wheels_for_the_environment(tmp_path: Path) -> None:
    out, dist, constraints = setup(tmp_path, {f"lmbridge-9.9.9-cp311-cp311-{PLATFORM}.whl": compiled_wheel()})
    pure = out / "lmbridge-9.9.9-py3-none-any.whl"
    compiled = dist / f"lmbridge-9.9.9-cp311-cp311-{PLATFORM}.whl"
    for _ in range(2):  # a second run gives the same pins, not twice as many
        done = run(out, dist, constraints)
        assert done.returncode == 0, done.stderr
    orjson = sorted((out / "native-deps").glob("orjson-*.whl"))
    assert sorted(p.name for p in (out / "native").iterdir()) == sorted(
        [compiled.name, *(w.name for w in orjson), "orjson-requirements.txt"])
    lines = (out / "requirements.txt").read_text().splitlines()
    assert lines == ["# made by pin_deps.py", f"{PURE_PIN}{sha256(pure)} --hash=sha256:{sha256(compiled)}"]
    # orjson in a file of its own, with no marker: its install may fail on its own
    pins = [line for line in (out / "native" / "orjson-requirements.txt").read_text().splitlines() if not line.startswith("#")]
    assert pins == ["orjson==3.13.0 " + " ".join(f"--hash=sha256:{sha256(w)}" for w in orjson)]
    native = (out / "lib" / "NATIVE.txt").read_text()
    assert f"python/native/{compiled.name} sha256:{sha256(compiled)}" in native
    # the universal build (pin_deps.py, its pins unchanged) writes the pure pins again
    (out / "deps" / ".stamp").write_text(sha256(constraints))
    script = SCRIPT.with_name("pin_deps.py")
    done = subprocess.run([sys.executable, str(script), str(out), str(constraints)],
                          capture_output=True, text=True, timeout=60, check=False, env=OFFLINE)
    assert done.returncode == 0, done.stderr
    assert [line for line in (out / "requirements.txt").read_text().splitlines() if not line.startswith("#")] == [
        f"{PURE_PIN}{sha256(pure)}"]


def pip_install(out: Path, target: Path, requirements: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """An install step of "Create Python Environment" (python.ts, createEnvSteps) into ``target``;
    returns pip's result and the file it installed for each package."""
    report = target.with_name(f"{target.name}-{requirements.stem}.json")
    links = [a for d in ("", "deps", "native") for a in ("--find-links", str(out / d))]
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-index", *links,
                           "--require-hashes", "--force-reinstall", "-r", str(requirements),
                           "--target", str(target), "--report", str(report)],
                          capture_output=True, text=True, timeout=120, check=False, env=OFFLINE)
    files = {}
    if done.returncode == 0:
        for item in json.loads(report.read_text())["install"]:
            files[item["metadata"]["name"]] = item["download_info"]["url"].rsplit("/", 1)[-1]
    return done, files


# the test wheels are tagged for glibc Linux on x86-64
needs_manylinux_x64 = pytest.mark.skipif(
    not (sys.platform == "linux" and platform.machine() == "x86_64" and platform.libc_ver()[0] == "glibc"
         and sys.implementation.name == "cpython" and THIS in PYTHONS),
    reason="pip takes the test's wheels only on CPython 3.10-3.14 for glibc Linux on x86-64")


@needs_manylinux_x64
def test_the_environment_gets_the_compiled_build_and_orjson_that_match(tmp_path: Path) -> None:
    name = f"lmbridge-9.9.9-cp3{THIS}-cp3{THIS}-{PLATFORM}.whl"
    out, dist, constraints = setup(tmp_path, {name: compiled_wheel(minor=THIS)})
    assert run(out, dist, constraints).returncode == 0
    done, files = pip_install(out, tmp_path / "env", out / "requirements.txt")
    assert done.returncode == 0, done.stderr
    assert files == {"lmbridge": name}
    done, files = pip_install(out, tmp_path / "env", out / "native" / "orjson-requirements.txt")
    assert done.returncode == 0, done.stderr
    assert files == {"orjson": f"orjson-3.13.0-cp3{THIS}-cp3{THIS}-{PLATFORM}.whl"}
    assert (tmp_path / "env" / "lmbridge" / f"sse.cpython-3{THIS}-x86_64-linux-gnu.so").is_file()
    assert (tmp_path / "env" / "orjson" / f"orjson.cpython-3{THIS}-x86_64-linux-gnu.so").is_file()


@needs_manylinux_x64
def test_where_no_wheel_matches_the_environment_gets_the_pure_build_and_the_orjson_install_fails_alone(tmp_path: Path) -> None:
    # as on a free-threaded Python, or one of a version or architecture no bundled wheel is for:
    # neither the compiled lmbridge nor any orjson wheel fits
    other = 10 if THIS != 10 else 11
    out, dist, constraints = setup(tmp_path, {f"lmbridge-9.9.9-cp3{other}-cp3{other}-{PLATFORM}.whl": compiled_wheel(minor=other)},
                                   orjson=[m for m in PYTHONS if m != THIS])
    done = run(out, dist, constraints)
    assert done.returncode == 0, done.stderr
    assert f"no orjson 3.13.0 for Python 3.{THIS}" in done.stderr
    assert "orjson" not in (out / "requirements.txt").read_text()
    done, files = pip_install(out, tmp_path / "env", out / "requirements.txt")
    assert done.returncode == 0, done.stderr
    assert files == {"lmbridge": "lmbridge-9.9.9-py3-none-any.whl"}
    # the separate orjson install fails, saying why, and installs nothing
    done, files = pip_install(out, tmp_path / "env", out / "native" / "orjson-requirements.txt")
    assert done.returncode != 0
    assert "No matching distribution found for orjson==3.13.0" in done.stderr, done.stderr
    assert not list((tmp_path / "env").rglob("*.so"))
    assert (tmp_path / "env" / "lmbridge" / "sse.py").is_file()
    assert not (tmp_path / "env" / "orjson").exists()


def test_an_orjson_wheel_the_lock_does_not_list_stops_the_build(tmp_path: Path) -> None:
    out, dist, constraints = setup(tmp_path, {f"lmbridge-9.9.9-cp3{THIS}-cp3{THIS}-{PLATFORM}.whl": compiled_wheel(minor=THIS)})
    tampered = next((out / "native-deps").glob("orjson-*-cp312-*.whl"))
    tampered.write_bytes(tampered.read_bytes() + b"\0")  # another file than the lock was made from
    done = run(out, dist, constraints)
    assert done.returncode == 1
    assert f"{tampered}: its SHA-256 {sha256(tampered)} is not one" in done.stderr
    assert "locks/bundle.txt lists for orjson==3.13.0" in done.stderr
    assert not (out / "native").exists()  # stopped before anything was pinned


def pin_deps(out: Path, constraints: Path) -> subprocess.CompletedProcess[str]:
    script = SCRIPT.with_name("pin_deps.py")
    return subprocess.run([sys.executable, str(script), str(out), str(constraints)],
                          capture_output=True, text=True, timeout=60, check=False, env=OFFLINE)


def test_pin_deps_bundles_only_the_dependency_files_the_lock_lists(tmp_path: Path) -> None:
    out, constraints = tmp_path / "python", tmp_path / "constraints.txt"
    (out / "deps").mkdir(parents=True)
    wheel(out / "lmbridge-9.9.9-py3-none-any.whl", {
        **SOURCES,
        "lmbridge-9.9.9.dist-info/METADATA": b"Metadata-Version: 2.1\nName: lmbridge\nVersion: 9.9.9\nRequires-Dist: h11>=0.16\n",
    })
    h11 = wheel(out / "deps" / "h11-0.16.0-py3-none-any.whl", {"h11/__init__.py": b""})  # "downloaded"
    constraints.write_text("h11==0.16.0\n")
    # a resolution made before (its stamp and pins), so that nothing is downloaded
    stamp = hashlib.sha256((constraints.read_text() + "h11>=0.16").encode()).hexdigest()
    (out / "deps" / ".stamp").write_text(stamp)
    (out / "requirements.txt").write_text(f"h11==0.16.0 --hash=sha256:{sha256(h11)}\n")
    (tmp_path / "locks").mkdir()
    lock = tmp_path / "locks" / "bundle.txt"
    lock.write_text(f"h11==0.16.0 --hash=sha256:{'0' * 64} --hash=sha256:{sha256(h11)}\n")
    done = pin_deps(out, constraints)
    assert done.returncode == 0, done.stderr
    assert f"h11==0.16.0 --hash=sha256:{sha256(h11)}" in (out / "requirements.txt").read_text()

    # the same file, changed: refused on the next build, also with the resolution reused
    h11.write_bytes(h11.read_bytes() + b"\0")
    done = pin_deps(out, constraints)
    assert done.returncode == 1
    assert f"{h11}: its SHA-256 {sha256(h11)} is not one {lock} lists for h11==0.16.0" in done.stderr

    # a version the lock does not hold at all
    lock.write_text(f"h11==0.15.0 --hash=sha256:{'0' * 64}\n")
    done = pin_deps(out, constraints)
    assert done.returncode == 1 and "h11==0.16.0 is not in" in done.stderr and "tools/lock.py" in done.stderr

    lock.unlink()
    done = pin_deps(out, constraints)
    assert done.returncode == 1 and "is missing (tools/lock.py writes it)" in done.stderr
