"""The package's own metadata: floors that exclude known-vulnerable versions, an exact build
backend, and the pinned test environment (constraints.txt) inside every range declared."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

packaging = pytest.importorskip("packaging.requirements")
from packaging.requirements import Requirement  # noqa: E402
from packaging.version import Version  # noqa: E402

ROOT = Path(__file__).parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def pyproject() -> dict:  # type: ignore[type-arg]
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def pins() -> dict[str, Version]:
    out: dict[str, Version] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[name.lower().replace("_", "-")] = Version(version)
    return out


def test_h11_floor_excludes_cve_2025_43859() -> None:
    (h11,) = [Requirement(r) for r in pyproject()["project"]["dependencies"] if r.startswith("h11")]
    assert not h11.specifier.contains("0.15.0") and h11.specifier.contains("0.16.0")


def test_the_build_backend_is_pinned_exactly_and_matches_the_constraints() -> None:
    (backend,) = [Requirement(r) for r in pyproject()["build-system"]["requires"]]
    (spec,) = list(backend.specifier)
    assert spec.operator == "==" and backend.name == "hatchling"
    assert pins()["hatchling"] == Version(spec.version)


def test_every_pinned_version_is_inside_the_declared_ranges() -> None:
    data = pyproject()["project"]
    declared = [*data["dependencies"]]
    for extra in data["optional-dependencies"].values():
        declared += extra
    pinned = pins()
    for text in declared:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = req.name.lower().replace("_", "-")
        assert name in pinned, f"{name} is not pinned in constraints.txt"
        assert req.specifier.contains(pinned[name]), f"{name}=={pinned[name]} is outside {req}"


def _init_version() -> str:
    text = (ROOT / "src" / "lmbridge" / "__init__.py").read_text(encoding="utf-8")
    (found,) = re.findall(r'^__version__ = "([^"]+)"$', text, re.MULTILINE)
    return found


def test_one_version_source_for_the_wheel_the_extension_and_the_command() -> None:
    data = pyproject()
    # the wheel's version is read from the package (hatchling), not written twice
    assert "version" not in data["project"] and data["project"]["dynamic"] == ["version"]
    assert data["tool"]["hatch"]["version"]["path"] == "src/lmbridge/__init__.py"
    version = _init_version()
    Version(version)  # a valid version string
    package = json.loads((ROOT / "extension" / "package.json").read_text(encoding="utf-8"))
    assert package["version"] == version, "extension/package.json's version differs"
    out = subprocess.run(
        [sys.executable, "-m", "lmbridge", "--version"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert out.stdout.strip() == f"lmbridge {version}"


def test_the_license_is_the_full_mit_text() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License")
    assert "Permission is hereby granted, free of charge" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS"' in text
    assert text == (ROOT / "extension" / "LICENSE").read_text(encoding="utf-8")
