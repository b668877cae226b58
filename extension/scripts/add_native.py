"""Adds the native parts to ``python/lib`` for a platform-specific .vsix.

Run by ``package-native.mjs`` after ``build-wheel.mjs`` has made the universal (pure-Python)
``python/lib``: ``python add_native.py <extension>/python <dist> <repo>/constraints.txt``.

- The compiled lmbridge (docs/compiled.md): the C extensions of every compiled wheel in
  ``<dist>`` (made by ``scripts/build-dist``, one per Python version) are put beside the
  Python sources they were compiled from. Their file names carry the Python version and
  platform (``sse.cpython-311-x86_64-linux-gnu.so``), so each Python imports its own and every
  other Python imports the ``.py`` files as before. A compiled wheel must hold exactly the
  sources of the bundled wheel: the extensions were built from them.
- orjson (the ``fast`` extra, at the version of constraints.txt) for every Python the package
  supports on that platform, from the package index: one ``orjson/orjson.cpython-3XY-...so``
  per Python in one ``orjson`` folder. A Python without its own orjson uses the standard
  library's parser (orjson is optional).

- For "lmbridge: Create Python Environment": the same wheels (the compiled lmbridge wheels and
  the orjson wheels) are copied to ``python/native/``, which the .vsix ships beside
  ``python/deps/``. The lmbridge pin of ``python/requirements.txt`` also accepts each compiled
  wheel's hash, so pip installs the compiled build where a wheel matches the interpreter and
  the pure wheel elsewhere. orjson is pinned, with the hashes of its wheels, in a file of its
  own, ``python/native/orjson-requirements.txt``, which the command installs in a step that
  may fail (a Python no orjson wheel fits: free-threaded, another architecture): the
  environment then has no orjson and uses the standard library's JSON.

All compiled wheels must be for one platform, the .vsix's target; the last line printed is
that target (``linux-x64``, ``darwin-arm64``, ...). ``lib/NATIVE.txt`` lists what was added
with the SHA-256 of the wheel each file came from, and ``lib/.stamp`` is changed so that the
next universal build unpacks a clean ``lib`` again (``build-wheel.mjs`` then also removes
``python/native/`` and ``pin_deps.py`` writes the pure requirements).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from pin_deps import check_locked, read_constraints, read_lock, sha256  # (beside this script)

PYTHONS = ["3.10", "3.11", "3.12", "3.13", "3.14"]
NATIVE = (".so", ".pyd")
# orjson's pin for "Create Python Environment", in python/native/ (read by pyenv.ts)
ORJSON_REQUIREMENTS = "orjson-requirements.txt"
# a wheel's platform tag -> VS Code's target platform
TARGETS = [
    (re.compile(r"^(many|musl)linux_\d+_\d+_x86_64$"), "linux-x64"),
    (re.compile(r"^(many|musl)linux_\d+_\d+_aarch64$"), "linux-arm64"),
    (re.compile(r"^macosx_\d+_\d+_(x86_64|universal2)$"), "darwin-x64"),
    (re.compile(r"^macosx_\d+_\d+_arm64$"), "darwin-arm64"),
    (re.compile(r"^win_amd64$"), "win32-x64"),
    (re.compile(r"^win_arm64$"), "win32-arm64"),
]


def fail(message: str) -> None:
    print(f"add_native: {message}", file=sys.stderr)
    sys.exit(1)


def tags(wheel: Path) -> tuple[str, list[str]]:
    """The Python tag (``cp311``) and the platform tags of a wheel's file name."""
    parts = wheel.name[: -len(".whl")].split("-")
    return parts[-3], parts[-1].split(".")


def target_of(platforms: list[str]) -> str | None:
    for platform in platforms:
        for pattern, target in TARGETS:
            if pattern.match(platform):
                return target
    return None


def extract(wheel: Path, members: list[str], lib: Path, added: list[str]) -> None:
    source = f"{wheel.name} sha256:{sha256(wheel)}"
    with zipfile.ZipFile(wheel) as z:
        for name in members:
            target = (lib / name).resolve()
            if not target.is_relative_to(lib.resolve()):
                fail(f"{wheel.name}: the member {name!r} would land outside python/lib")
            z.extract(name, lib)
            added.append(f"{name} {source}")


def add_lmbridge(pure: Path, compiled: list[Path], lib: Path, added: list[str]) -> None:
    with zipfile.ZipFile(pure) as z:
        sources = {n: z.read(n) for n in z.namelist() if n.endswith(".py")}
    for wheel in compiled:
        with zipfile.ZipFile(wheel) as z:
            names = z.namelist()
            changed = [n for n, data in sources.items() if n not in names or z.read(n) != data]
            if changed:
                fail(f"{wheel.name} was not built from the bundled {pure.name}: {', '.join(changed[:5])} differ")
            native = [n for n in names if n.endswith(NATIVE)]
        if not native:
            fail(f"{wheel.name} holds no C extension: not a compiled build")
        extract(wheel, native, lib, added)


def add_orjson(version: str, platforms: list[str], cache: Path, lib: Path, added: list[str],
               lock: dict[tuple[str, str], set[str]], lock_path: Path) -> dict[str, Path]:
    """Unpacks orjson for every Python it has a wheel for; returns those wheels by Python version.
    Each wheel must be a file the lock lists (checked before anything is unpacked)."""
    cache.mkdir(exist_ok=True)
    wheels: dict[str, Path] = {}
    platform_args = [a for p in platforms for a in ("--platform", p)]
    for python in PYTHONS:
        tag = "cp" + python.replace(".", "")
        pattern = f"orjson-{version}-{tag}-{tag}-*.whl"
        if not list(cache.glob(pattern)):
            cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--quiet", "--no-deps",
                   "--only-binary=:all:", *platform_args, "--python-version", python, "--implementation", "cp",
                   "--dest", str(cache), f"orjson=={version}"]
            r = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if r.returncode != 0:
                print(f"add_native: no orjson {version} for Python {python} on {platforms[0]}; that Python uses the standard library's JSON",
                      file=sys.stderr)
                continue
        (wheel,) = cache.glob(pattern)
        check_locked(wheel, "orjson", version, lock, lock_path)
        with zipfile.ZipFile(wheel) as z:
            # the package (the same Python files for every version), its metadata and licences
            members = [n for n in z.namelist()
                       if n.startswith("orjson/") or n.endswith(".dist-info/METADATA") or "/licenses/" in n]
        extract(wheel, members, lib, added)
        wheels[python] = wheel
    return wheels


def pin_native(out: Path, pure: Path, compiled: list[Path], orjson: str, orjson_wheels: dict[str, Path]) -> list[str]:
    """Copies the wheels to ``python/native/``, adds the compiled wheels' hashes to the lmbridge
    pin of ``python/requirements.txt`` and pins orjson in ``python/native/orjson-requirements.txt``."""
    native = out / "native"
    shutil.rmtree(native, ignore_errors=True)
    native.mkdir()
    for wheel in [*compiled, *orjson_wheels.values()]:
        shutil.copyfile(wheel, native / wheel.name)
    reqs = out / "requirements.txt"
    lines = reqs.read_text().splitlines()
    version = pure.name.split("-")[1]
    pin = f"lmbridge=={version} --hash=sha256:{sha256(pure)}"
    # the pure pin of build-wheel.mjs (pin_deps.py), or the one an earlier run extended
    at = [i for i, line in enumerate(lines) if line == pin or line.startswith(pin + " ")]
    if not at:
        fail(f"{reqs} does not pin the bundled {pure.name}: run build-wheel.mjs first")
    lines[at[0]] = " ".join([pin, *(f"--hash=sha256:{sha256(w)}" for w in compiled)])
    reqs.write_text("\n".join(lines) + "\n")
    if orjson_wheels:
        hashes = " ".join(f"--hash=sha256:{sha256(w)}" for w in orjson_wheels.values())
        (native / ORJSON_REQUIREMENTS).write_text(
            f"# orjson (optional: the `fast` extra) for Python {', '.join(orjson_wheels)} on this platform;\n"
            f"# installed by Create Python Environment when a wheel fits; made by add_native.py.\n"
            f"orjson=={orjson} {hashes}\n")
    return [f"python/native/{w.name} sha256:{sha256(w)}" for w in sorted(native.iterdir())]


def main() -> None:
    out, dist, constraints = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    lib = out / "lib"
    pures = sorted(out.glob("lmbridge-*-py3-none-any.whl"))
    if len(pures) != 1 or not (lib / ".stamp").is_file():
        fail(f"expected the universal build in {out} (one pure lmbridge wheel and python/lib): run build-wheel.mjs first")
    pure = pures[0]
    version = pure.name.split("-")[1]
    compiled = sorted(dist.glob(f"lmbridge-{version}-cp*-cp*-*.whl"))
    if not compiled:
        fail(f"no compiled lmbridge {version} wheel in {dist}: make it with scripts/build-dist")
    targets = {target_of(tags(w)[1]) for w in compiled}
    if None in targets or len(targets) != 1:
        fail(f"the compiled wheels must all be for one platform VS Code knows: {[w.name for w in compiled]}")
    (target,) = targets
    assert target is not None
    added: list[str] = []
    add_lmbridge(pure, compiled, lib, added)
    orjson = read_constraints(constraints).get("orjson")
    if orjson is None:
        fail(f"{constraints} pins no version of orjson")
        raise AssertionError
    lock_path = constraints.parent / "locks" / "bundle.txt"
    orjson_wheels = add_orjson(orjson, tags(compiled[0])[1], out / "native-deps", lib, added,
                               read_lock(lock_path), lock_path)
    added += pin_native(out, pure, compiled, orjson, orjson_wheels)
    (lib / "NATIVE.txt").write_text(f"target {target}\n" + "\n".join(added) + "\n")
    # the next universal build must start again from the pure wheels
    (lib / ".stamp").write_text(f"native {target}\n")
    print(f"add_native: {len(added)} files for {target} ({', '.join(tags(w)[0] for w in compiled)} compiled)", file=sys.stderr)
    print(target)


if __name__ == "__main__":
    main()
