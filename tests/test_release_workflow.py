"""The release and test workflows (.github/workflows/): what they build, where they publish,
that every step of the chain is pinned, and the dry runs of their steps that run here
(cibuildwheel's build list, `twine check` of scripts/build-dist's files, the publishing tools'
presence in the extension's lock). The builds themselves run in tests/test_dist.py
(scripts/build-dist) and the end-to-end tests (the .vsix in a real VS Code)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.get("on", data.get(True))  # YAML 1.1 reads the key `on` as true
    return data


def script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "extension" / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(spec.origin and Path(spec.origin).parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    return module


SUPPORTED = script("pin_deps").PYTHONS  # the Pythons the .vsix and the wheels are made for
RELEASE = load("release.yml")
TEST = load("test.yml")


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job["steps"])


def runs(workflow: dict[str, Any]) -> list[str]:
    return [s["run"] for job in workflow["jobs"].values() for s in steps(job) if "run" in s]


def test_supported_pythons_agree_with_pyproject() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.10"' in text and SUPPORTED[0] == "3.10"
    assert [f"3.{m}" for m in range(10, 10 + len(SUPPORTED))] == SUPPORTED


def test_the_test_matrix_is_every_system_with_every_supported_python() -> None:
    matrix = TEST["jobs"]["test"]["strategy"]["matrix"]
    assert set(matrix["os"]) == {"ubuntu-latest", "macos-latest", "windows-latest"}
    assert matrix["python"] == SUPPORTED
    assert TEST["jobs"]["test"]["strategy"]["fail-fast"] is False
    assert any("python -m pytest" in r for r in runs(TEST))
    # the full check is the README's own command
    assert [s.get("run") for s in steps(TEST["jobs"]["check"])][-1] == ".ci/run"


def test_a_tag_builds_everything_and_publishes_only_after_all_of_it() -> None:
    assert RELEASE["on"]["push"]["tags"] == ["v*"]
    assert "workflow_dispatch" in RELEASE["on"]  # the dry run: builds, publishes nothing
    jobs = RELEASE["jobs"]
    assert set(jobs) == {"sdist", "wheels", "vsix", "publish-pypi", "publish-extension"}
    for name in ("publish-pypi", "publish-extension"):
        assert jobs[name]["if"] == "startsWith(github.ref, 'refs/tags/v')"
        assert {"vsix"} <= set(jobs[name]["needs"])
    assert set(jobs["publish-pypi"]["needs"]) == {"sdist", "wheels", "vsix"}
    assert RELEASE["permissions"] == {"contents": "read"}


def test_compiled_wheels_for_every_platform_and_python() -> None:
    wheels = RELEASE["jobs"]["wheels"]
    oses = set(wheels["strategy"]["matrix"]["os"])
    assert oses == {"ubuntu-latest", "ubuntu-24.04-arm", "macos-13", "macos-latest", "windows-latest"}
    (build,) = [s for s in steps(wheels) if "cibuildwheel" in s.get("run", "")]
    env = build["env"]
    assert env["CIBW_BUILD"].split() == [f"cp{v.replace('.', '')}-*" for v in SUPPORTED]
    assert env["CIBW_ENVIRONMENT"] == "HATCH_BUILD_HOOK_ENABLE_MYPYC=1"
    assert "--require-hashes -r {project}/locks/build.txt" in env["CIBW_BEFORE_BUILD"]
    assert env["CIBW_BUILD_FRONTEND"] == "build; args: --no-isolation"
    assert "lmbridge.compiled --require" in env["CIBW_TEST_COMMAND"]
    assert "sdist/lmbridge-*.tar.gz" in build["run"]  # wheels come from the released sdist


def test_a_vsix_for_every_platform_vs_code_knows_and_a_universal_one() -> None:
    include = RELEASE["jobs"]["vsix"]["strategy"]["matrix"]["include"]
    targets = {row["target"] for row in include}
    known = {target for _, target in script("add_native").TARGETS}
    assert targets - {"universal"} <= known
    assert targets == {"universal", "linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64"}
    # each platform's package is built on a runner of that platform, from its wheels
    runner = {row["target"]: row["os"] for row in include}
    wheel_runners = set(RELEASE["jobs"]["wheels"]["strategy"]["matrix"]["os"])
    assert {runner[t] for t in targets - {"universal"}} <= wheel_runners


def test_publishing_uses_the_forges_secrets_and_trusted_publishing() -> None:
    pypi = RELEASE["jobs"]["publish-pypi"]
    assert pypi["environment"] == "pypi" and pypi["permissions"] == {"id-token": "write"}
    assert steps(pypi)[-1]["uses"].startswith("pypa/gh-action-pypi-publish@")
    ext = RELEASE["jobs"]["publish-extension"]
    publish = {s["name"]: s for s in steps(ext) if "name" in s}
    assert publish["vsce publish"]["env"] == {"VSCE_PAT": "${{ secrets.VSCE_PAT }}"}
    assert publish["ovsx publish"]["env"] == {"OVSX_PAT": "${{ secrets.OVSX_PAT }}"}
    text = (WORKFLOWS / "release.yml").read_text()
    # no token is written anywhere but through a secret
    assert not re.search(r"(?i)(pat|token|password)\s*[:=]\s*['\"]?[A-Za-z0-9_-]{16,}", text)


@pytest.mark.parametrize("workflow", ["release.yml", "test.yml"])
def test_every_action_is_pinned_by_its_commit(workflow: str) -> None:
    data = load(workflow)
    used = [s["uses"] for job in data["jobs"].values() for s in steps(job) if "uses" in s]
    assert used
    for ref in used:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), ref
    # and the comment says which release the commit is
    for line in (WORKFLOWS / workflow).read_text().splitlines():
        if "uses:" in line:
            assert re.search(r"@[0-9a-f]{40} # v\d", line), line


def test_the_release_installs_only_locked_files() -> None:
    for command in runs(RELEASE):
        for line in command.splitlines():
            if "pip install" in line:
                assert re.search(r"--require-hashes -r locks/[a-z-]+\.txt$", line.strip()), line
            assert "npm install" not in line and "npx --yes" not in line, line
    assert any(r.strip() == "npm ci" for r in runs(RELEASE))
    # npx runs the locked copies of the publishing tools
    dev = json.loads((ROOT / "extension" / "package.json").read_text())["devDependencies"]
    assert {"@vscode/vsce", "ovsx"} <= set(dev)
    lock = json.loads((ROOT / "extension" / "package-lock.json").read_text())["packages"]
    assert lock["node_modules/ovsx"]["integrity"].startswith("sha512-")
    assert lock["node_modules/@vscode/vsce"]["integrity"].startswith("sha512-")


def test_cibuildwheel_would_build_every_supported_python_on_each_platform() -> None:
    # the dry run of the wheels job: cibuildwheel's own list of what it builds, with its env
    if importlib.util.find_spec("cibuildwheel") is None:
        pytest.skip("cibuildwheel needs Python 3.11 or newer (the dev extra installs it there)")
    (build,) = [s for s in steps(RELEASE["jobs"]["wheels"]) if "cibuildwheel" in s.get("run", "")]
    env = {**os.environ, **{k: v for k, v in build["env"].items() if k in ("CIBW_BUILD", "CIBW_SKIP")}}
    expected = {
        ("linux", "x86_64"): "manylinux_x86_64",
        ("linux", "aarch64"): "manylinux_aarch64",
        ("macos", "x86_64"): "macosx_x86_64",
        ("macos", "arm64"): "macosx_arm64",
        ("windows", "AMD64"): "win_amd64",
    }
    for (platform, arch), tag in expected.items():
        done = subprocess.run(
            [sys.executable, "-m", "cibuildwheel", "--print-build-identifiers", "--platform", platform,
             "--archs", arch, str(ROOT)],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [f"cp{v.replace('.', '')}-{tag}" for v in SUPPORTED], platform


def test_twine_check_passes_on_the_release_files() -> None:
    # the dry run of the sdist job's check, on what scripts/build-dist made
    dist = os.environ.get("LMBRIDGE_DIST")
    if not dist:
        pytest.skip("set LMBRIDGE_DIST to scripts/build-dist's folder (scripts/check does)")
    files = sorted(str(p) for p in Path(dist).glob("lmbridge-*") if p.suffix in (".whl", ".gz"))
    assert files
    twine = shutil.which("twine") or ""
    cmd = [twine] if twine else [sys.executable, "-m", "twine"]
    done = subprocess.run([*cmd, "check", "--strict", *files], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == len(files)
