"""Unpacks lmbridge and its pinned runtime dependencies into ``python/lib`` of the extension.

Run by ``build-wheel.mjs`` after ``pin_deps.py`` (``python unpack_lib.py <extension>/python``).
The host runs from that folder with any Python >= 3.10: the start line puts it first on
``sys.path`` (see ``src/python.ts``), so no pip, virtual environment or network is needed.

Every wheel ``python/requirements.txt`` names (lmbridge's own and those in ``python/deps/``) is
checked against its recorded hash and must be pure Python (``py3-none-any``): a wheel with
compiled code would only work on one platform and Python, so it is an error here (the
platform-specific package adds its native parts afterwards: ``add_native.py``). A pin with a
marker must be a backport needed only below some Python version (``python_version < "3.11"``:
tomli, exceptiongroup); it is unpacked too and is simply not imported on newer Pythons, since
the code that needs it checks ``sys.version_info`` first. Any other marker is an error.
Redone only when requirements.txt changes (``lib/.stamp``).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
import zipfile
from pathlib import Path

PURE = re.compile(r"-(py3|py2\.py3)-none-any\.whl$")
LINE = re.compile(r"^([A-Za-z0-9._-]+)==(\S+)(?: ; (.+?))? --hash=sha256:([0-9a-f]{64})$")
BACKPORT = re.compile(r'^python_version < "3\.\d+"$')


def fail(message: str) -> None:
    print(f"unpack_lib: {message}", file=sys.stderr)
    sys.exit(1)


def wheel_of(name: str, version: str, dirs: list[Path]) -> Path:
    stem = re.sub(r"[-_.]+", "_", name).lower()
    for d in dirs:
        for p in d.glob("*.whl"):
            parts = p.name.split("-")
            if re.sub(r"[-_.]+", "_", parts[0]).lower() == stem and parts[1] == version:
                return p
    fail(f"no wheel of {name}=={version} in {', '.join(map(str, dirs))}")
    raise AssertionError


def main() -> None:
    out = Path(sys.argv[1])
    reqs = out / "requirements.txt"
    lib = out / "lib"
    text = reqs.read_text()
    stamp = hashlib.sha256(text.encode()).hexdigest()
    if (lib / ".stamp").is_file() and (lib / ".stamp").read_text() == stamp:
        print("unpack_lib: python/lib is up to date")
        return
    wheels: list[Path] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = LINE.match(line)
        if not m:
            fail(f"cannot read the pin {line!r} in {reqs}")
            raise AssertionError
        name, version, marker, digest = m.groups()
        if marker and not BACKPORT.match(marker):
            fail(f"{name}: only backports for older Pythons can be bundled, not a pin with the marker {marker!r}")
        wheel = wheel_of(name, version, [out, out / "deps"])
        if not PURE.search(wheel.name):
            fail(f"{wheel.name} is not a pure-Python wheel (py3-none-any): it cannot run from the extension on every platform")
        if hashlib.sha256(wheel.read_bytes()).hexdigest() != digest:
            fail(f"{wheel.name} does not match the hash requirements.txt records")
        wheels.append(wheel)
    tmp = out / "lib.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                top = info.filename.split("/", 1)[0]
                # scripts and headers (`<name>.data/`) are not needed to import the package
                if top.endswith(".data") or "__pycache__" in info.filename:
                    continue
                target = (tmp / info.filename).resolve()
                if not target.is_relative_to(tmp.resolve()):
                    fail(f"{wheel.name}: the member {info.filename!r} would land outside python/lib")
                z.extract(info, tmp)
    (tmp / ".stamp").write_text(stamp)
    shutil.rmtree(lib, ignore_errors=True)
    tmp.rename(lib)
    size = sum(p.stat().st_size for p in lib.rglob("*") if p.is_file())
    print(f"unpack_lib: python/lib ({len(wheels)} wheels, {size / 1e6:.1f} MB unpacked)")


if __name__ == "__main__":
    main()
