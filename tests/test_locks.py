"""The release chain's locks (tools/lock.py): every package a release bundles or builds with,
one version each with the hashes of its files, agreeing with the pins the tests ran with; and
the extension's npm lock, whose integrity hashes `npm ci` checks. The checks at build time
(a file the lock does not list stops the build) are tested in tests/test_add_native.py."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
LINE = re.compile(
    r"(?P<name>[a-z0-9-]+)==(?P<version>[^\s;]+)(?: ; (?P<marker>[^-][^\n]*?))?"
    r"(?P<hashes>(?: --hash=sha256:[0-9a-f]{64})+)"
)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("lock_tool", ROOT / "tools" / "lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read(name: str) -> dict[str, list[tuple[str, str | None, int]]]:
    """name -> [(version, marker, number of hashes)]"""
    out: dict[str, list[tuple[str, str | None, int]]] = {}
    for line in (ROOT / "locks" / f"{name}.txt").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE.fullmatch(line)
        assert m, f"locks/{name}.txt: not a locked package line: {line[:100]}"
        out.setdefault(m["name"], []).append(
            (m["version"], m["marker"], m["hashes"].count("--hash="))
        )
    return out


def constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, _, version = line.partition("==")
        pins[canonical(name)] = re.split(r"[\s;]", version.strip(), maxsplit=1)[0]
    return pins


@pytest.mark.parametrize("lock", ["bundle", "build", "release-tools"])
def test_every_package_is_one_version_per_marker_with_its_hashes(lock: str) -> None:
    packages = read(lock)
    assert packages
    for name, entries in packages.items():
        markers = [marker for _, marker, _ in entries]
        assert len(markers) == len(set(markers)), f"{name} is locked twice for one environment"
        assert len(entries) == 1 or all(markers), f"{name}: several versions need markers"


@pytest.mark.parametrize("lock", ["bundle", "build", "release-tools"])
def test_the_locks_hold_what_the_release_needs_at_the_tested_versions(lock: str) -> None:
    packages = read(lock)
    wanted = lock_tool().inputs()[lock]
    names = {canonical(re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0]) for r in wanted}
    assert names - set(packages) == set(), f"locks/{lock}.txt lacks packages: rewrite it"
    pins = constraints()
    for name, entries in packages.items():
        if name in pins:
            versions = {version for version, _, _ in entries}
            # several versions (each for some Pythons) are the resolver's choice where the
            # pinned one does not support them all
            assert pins[name] in versions, (
                f"locks/{lock}.txt has {name} {versions}, constraints.txt {pins[name]}: "
                "run tools/lock.py"
            )


def test_the_build_lock_holds_pyprojects_exact_build_pins() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    exact = re.findall(r'"([A-Za-z0-9_-]+)==([^"]+)"', text)
    assert ("hatchling", "1.33.0") in exact and ("mypy", "2.4.1") in exact
    build = read("build")
    for name, version in exact:
        assert {v for v, _, _ in build[canonical(name)]} == {version}, name


def test_platform_packages_carry_every_platforms_files() -> None:
    # orjson and mypy are compiled per Python and platform: the lock must hold all of them,
    # not only this machine's, or a build elsewhere stops at the hash check
    assert read("bundle")["orjson"][0][2] >= 20
    assert read("build")["mypy"][0][2] >= 20


def test_the_extensions_npm_lock_pins_every_package_with_an_integrity_hash() -> None:
    lock = json.loads((ROOT / "extension" / "package-lock.json").read_text())
    assert lock["lockfileVersion"] >= 2
    packages = {k: v for k, v in lock["packages"].items() if k and not v.get("link")}
    assert packages
    for where, entry in packages.items():
        assert re.fullmatch(r"sha512-[A-Za-z0-9+/=]{80,}", entry.get("integrity", "")), where
        assert entry.get("version"), where


def test_the_builds_read_the_locks() -> None:
    # the checks themselves are tested with changed files in tests/test_add_native.py
    build_dist = (ROOT / "scripts" / "build-dist").read_text()
    assert "--require-hashes \\\n      -r locks/build.txt" in build_dist
    assert build_dist.count("--no-isolation") == 2 and "--no-build-isolation" in build_dist
    wheel_build = (ROOT / "extension" / "scripts" / "build-wheel.mjs").read_text()
    assert "'locks', 'build.txt'" in wheel_build and "'--require-hashes'" in wheel_build
