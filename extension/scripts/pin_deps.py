"""Pins lmbridge's runtime dependencies for "lmbridge: Create Python Environment".

Run by ``build-wheel.mjs`` after the wheel is built (``python pin_deps.py <extension>/python
<repo>/constraints.txt``). Starting from the wheel's ``Requires-Dist``, it follows every
dependency for each Python the package supports (3.10 to 3.14) on Linux, Windows and macOS,
takes each one's version from constraints.txt (the versions the tests ran with; a dependency
missing there is an error), downloads its pure-Python wheel from the package index into
``python/deps/`` and writes ``python/requirements.txt``: one ``name==version --hash=sha256:...``
line per package, with an environment marker when only some Pythons or systems need it, and
the lmbridge wheel itself. The extension installs it offline: ``pip install --no-index
--find-links ... --require-hashes -r requirements.txt``.

Every dependency wheel must be one the committed lock lists (``locks/bundle.txt`` beside
constraints.txt, written by ``tools/lock.py``: each package's version with the SHA-256 of each
of its files on PyPI): a wheel whose version or hash it does not list fails the build, naming
the file, so that a release never bundles a file other than the one the lock was made from.
The check runs on every build, also when the resolution is reused.

Only the standard library and pip (whose vendored ``packaging`` evaluates the markers) are
needed. The resolution is redone only when constraints.txt or the wheel's requirements change.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

from pip._vendor.packaging.markers import default_environment
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name

PYTHONS = ["3.10", "3.11", "3.12", "3.13", "3.14"]
SYSTEMS = {
    "linux": {"sys_platform": "linux", "os_name": "posix", "platform_system": "Linux"},
    "win32": {"sys_platform": "win32", "os_name": "nt", "platform_system": "Windows"},
    "darwin": {"sys_platform": "darwin", "os_name": "posix", "platform_system": "Darwin"},
}


def fail(message: str) -> None:
    print(f"pin_deps: {message}", file=sys.stderr)
    sys.exit(1)


def read_constraints(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.fullmatch(r"([A-Za-z0-9._-]+)\s*==\s*([^\s;]+)", line)
        if m:
            pins[canonicalize_name(m.group(1))] = m.group(2)
    return pins


def read_lock(path: Path) -> dict[tuple[str, str], set[str]]:
    """A lock of ``tools/lock.py`` (one ``name==version [; marker] --hash=sha256:H ...`` line
    per package): the hashes of each (name, version)."""
    if not path.is_file():
        fail(f"the lock {path} is missing (tools/lock.py writes it)")
    locked: dict[tuple[str, str], set[str]] = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = re.match(r"([A-Za-z0-9._-]+)==(\S+)", line)
        if m is None:
            fail(f"{path}: cannot read the line {line[:80]!r}")
        hashes = set(re.findall(r"--hash=sha256:([0-9a-f]{64})", line))
        if not hashes:
            fail(f"{path}: {m.group(1)}=={m.group(2)} has no --hash=sha256:...")
        locked.setdefault((canonicalize_name(m.group(1)), m.group(2)), set()).update(hashes)
    return locked


def check_locked(wheel: Path, name: str, version: str, lock: dict[tuple[str, str], set[str]], lock_path: Path) -> None:
    """Fail unless ``wheel`` (of ``name==version``) is a file the lock lists."""
    hashes = lock.get((canonicalize_name(name), version))
    if hashes is None:
        fail(f"{name}=={version} is not in {lock_path}: update the lock with tools/lock.py")
    digest = sha256(wheel)
    if digest not in hashes:
        fail(f"{wheel}: its SHA-256 {digest} is not one {lock_path} lists for {name}=={version} "
             "(the index served another file than the lock was made from); the build stops")


def requires(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(z.read(name).decode("utf-8"))
    return [Requirement(r) for r in meta.get_all("Requires-Dist") or []]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def download(name: str, version: str, dest: Path) -> Path:
    """The pure-Python wheel of ``name==version`` (downloaded once into ``dest``)."""
    pattern = re.compile(rf"{re.escape(name.replace('-', '_'))}-{re.escape(version)}-.*-none-any\.whl", re.IGNORECASE)
    have = [p for p in dest.glob("*.whl") if pattern.fullmatch(p.name)]
    if not have:
        cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--quiet", "--no-deps",
               "--only-binary=:all:", "--platform", "any", "--implementation", "py", "--abi", "none",
               "--python-version", PYTHONS[0], "--dest", str(dest), f"{name}=={version}"]
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            fail(f"downloading {name}=={version} failed:\n{r.stdout}{r.stderr}")
        have = [p for p in dest.glob("*.whl") if pattern.fullmatch(p.name)]
    if len(have) != 1:
        fail(f"expected one pure-Python wheel of {name}=={version} in {dest}, found {[p.name for p in have]}")
    return have[0]


def marker(where: set[tuple[str, str]]) -> str:
    """The environment marker that holds exactly for the (python, system) pairs in ``where``."""
    everywhere = {(v, s) for v in PYTHONS for s in SYSTEMS}
    if where == everywhere:
        return ""
    by_system = {s: sorted({v for v, t in where if t == s}, key=PYTHONS.index) for s in SYSTEMS}

    def versions(vs: list[str]) -> str:
        if vs == PYTHONS[: len(vs)]:
            return f'python_version < "{PYTHONS[len(vs)]}"'
        if vs == PYTHONS[-len(vs):]:
            return f'python_version >= "{vs[0]}"'
        return " or ".join(f'python_version == "{v}"' for v in vs)

    if len({tuple(v) for v in by_system.values()}) == 1:
        return versions(next(iter(by_system.values())))
    terms = []
    for s, vs in by_system.items():
        if not vs:
            continue
        cond = f'sys_platform == "{s}"'
        terms.append(cond if len(vs) == len(PYTHONS) else f"({cond} and ({versions(vs)}))")
    return " or ".join(terms)


def main() -> None:
    out, constraints = Path(sys.argv[1]), Path(sys.argv[2])
    lock_path = Path(sys.argv[3]) if len(sys.argv) > 3 else constraints.parent / "locks" / "bundle.txt"
    lock = read_lock(lock_path)
    wheels = sorted(out.glob("lmbridge-*.whl"))
    if len(wheels) != 1:
        fail(f"expected one lmbridge wheel in {out}, found {[p.name for p in wheels]}")
    lmbridge = wheels[0]
    deps_dir = out / "deps"
    deps_dir.mkdir(exist_ok=True)
    root = [r for r in requires(lmbridge) if not (r.marker and "extra" in str(r.marker))]
    pins = read_constraints(constraints)
    stamp = hashlib.sha256((constraints.read_text() + "\n".join(map(str, root))).encode()).hexdigest()
    stamp_file, reqs_file = deps_dir / ".stamp", out / "requirements.txt"

    if stamp_file.is_file() and stamp_file.read_text() == stamp and reqs_file.is_file():
        lines = [line for line in reqs_file.read_text().splitlines() if not line.startswith("lmbridge==")]
    else:
        for old in deps_dir.glob("*.whl"):
            old.unlink()
        needed: dict[str, set[tuple[str, str]]] = {}
        files: dict[str, Path] = {}
        for version in PYTHONS:
            for system, fields in SYSTEMS.items():
                env = {**default_environment(), **fields, "python_version": version,
                       "python_full_version": f"{version}.0", "implementation_version": f"{version}.0", "extra": ""}
                todo, seen = list(root), set()
                while todo:
                    req = todo.pop()
                    name = canonicalize_name(req.name)
                    if (req.marker and not req.marker.evaluate(env)) or name in seen:
                        continue
                    seen.add(name)
                    pin = pins.get(name)
                    if pin is None:
                        fail(f"{req.name} (needed on Python {version}, {system}) has no pin in {constraints}; add one")
                    if not req.specifier.contains(pin, prereleases=True):
                        fail(f"constraints.txt pins {name}=={pin}, which does not satisfy {req}")
                    needed.setdefault(name, set()).add((version, system))
                    if name not in files:
                        files[name] = download(name, pin, deps_dir)
                    todo.extend(r for r in requires(files[name]) if not (r.marker and "extra" in str(r.marker)))
        lines = []
        for name in sorted(needed):
            m = marker(needed[name])
            lines.append(f"{name}=={pins[name]}{f' ; {m}' if m else ''} --hash=sha256:{sha256(files[name])}")
        stamp_file.write_text(stamp)

    # every bundled wheel, every build: the lock's files and no others
    for line in lines:
        m = re.match(r"([A-Za-z0-9._-]+)==(\S+)", line)
        if m is None:
            continue
        name, pinned = m.group(1), m.group(2)
        check_locked(download(name, pinned, deps_dir), name, pinned, lock, lock_path)

    version = lmbridge.name.split("-")[1]
    header = ("# lmbridge and its runtime dependencies, pinned to the versions the tests ran with\n"
              "# (constraints.txt), each with its hash; made by extension/scripts/pin_deps.py.\n")
    body = [f"lmbridge=={version} --hash=sha256:{sha256(lmbridge)}", *[line for line in lines if not line.startswith("#")]]
    reqs_file.write_text(header + "\n".join(body) + "\n")
    print(f"pin_deps: python/requirements.txt ({len(body)} packages, {len(list(deps_dir.glob('*.whl')))} dependency wheels)")


if __name__ == "__main__":
    main()
