"""The host's start-up: spawn -> ``initialize`` -> first ``models/list``, and spawn -> first
token of the first chat, against a bare interpreter's start in the same run.

Every VS Code start and window reload waits for the host: the extension spawns Python running
``lmbridge host``, sends ``initialize`` and lists the models. Each round (``ROUNDS``,
alternating, so that both see the same machine load) times:

- ``python -c pass``: spawn to exit, the floor any Python process pays;
- ``python -c "import asyncio"``: spawn to exit, the floor of a host built on asyncio;
- the host, spawned as ``python -m lmbridge host`` (stdio pipes,
  spoken to by :class:`lmbridge.host.client.HostClient`) with the built-in echo model: from
  the spawn to the answer of the first ``models/list``, and on to the first ``chat/parts`` of
  a first ``chat/response`` to ``echo/echo`` (no delay between its chunks);
- the host spawned with the extension's own command line (``python -c HOST_BOOTSTRAP`` of
  ``extension/src/python.ts``, or ``--python-ts``: it cleans ``sys.path``, looks for an
  installed compiled lmbridge of the bundled one's version, then runs the host), to the first
  ``models/list``.

Bytecode is cached (one warm-up round first; ``PYTHONDONTWRITEBYTECODE`` is dropped from the
children's environment). The figures are medians with the ratio to the
bare start of the same run; ``python -X importtime -c "import lmbridge.host"`` (best of
``IMPORT_RUNS``) gives what the import costs and its largest parts, and which lmbridge modules
``import lmbridge.host`` loads. The figures in docs/benchmarks/startup.md were made with it.

Run: ``.venv/bin/python benchmarks/bench_startup.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lmbridge.host.client import HostClient
from lmbridge.parts import ChatMessage, ResponsePart

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 15
IMPORT_RUNS = 7
ECHO = {"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider", "delay": 0}


async def bare_start() -> float:
    """Seconds from spawning ``python -c pass`` to its exit."""
    start = time.perf_counter()
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await process.wait()
    return time.perf_counter() - start


async def asyncio_start() -> float:
    """Seconds from spawning ``python -c "import asyncio"`` to its exit: what any host built on
    asyncio pays before its own code (the event loop's modules, ``ssl`` among them)."""
    start = time.perf_counter()
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", "import asyncio")
    await process.wait()
    return time.perf_counter() - start


async def host_start(storage: str) -> tuple[float, float]:
    """Seconds from spawn to the first ``models/list`` answer and to the first part of the
    first chat."""
    start = time.perf_counter()
    first_part = asyncio.get_running_loop().create_future()

    def on_parts(parts: list[ResponsePart]) -> None:
        if not first_part.done():
            first_part.set_result(time.perf_counter())

    async with HostClient.start(["--log-level", "warning"], stderr=subprocess.DEVNULL) as host:
        await host.initialize(providers=[ECHO], storagePath=storage)
        models = await host.request("models/list", {"silent": True})
        listed = time.perf_counter()
        assert any(m["id"] == "echo/echo" for m in models["models"]), models
        call = host.start_chat("echo/echo", [ChatMessage.user("hello there")], on_parts=on_parts)
        first = await first_part
        await call.result()
    return listed - start, first - start


def extension_bootstrap(source: Path) -> str:
    """The ``-c`` code the extension starts the host with (``HOST_BOOTSTRAP`` of
    ``extension/src/python.ts``: a list of single-line string literals joined with ``; ``)."""
    text = source.read_text()
    body = text.split("export const HOST_BOOTSTRAP = [", 1)[1].split("].join('; ');", 1)[0]
    lines = [ln.strip().rstrip(",") for ln in body.splitlines()]
    return "; ".join(ast.literal_eval(ln) for ln in lines if ln and not ln.startswith("//"))


async def bootstrap_start(code: str, storage: str) -> float:
    """Seconds from spawning the host as the extension does (its bootstrap, with the folder of a
    bundled lmbridge that is not there and a version: the check for an installed compiled
    build of that version runs, finds none, and the installed lmbridge serves) to the first
    ``models/list`` answer."""
    start = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, os.path.join(storage, "no-bundled-lib"), "0.0.0",
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=storage,
    )  # fmt: skip
    host = HostClient(process)
    try:
        await host.initialize(providers=[ECHO], storagePath=storage)
        models = await host.request("models/list", {"silent": True})
        listed = time.perf_counter()
        assert any(m["id"] == "echo/echo" for m in models["models"]), models
    finally:
        assert process.stdin is not None
        process.stdin.close()
        await process.wait()
    return listed - start


def import_profile() -> tuple[float, list[tuple[str, float, float]]]:
    """``import lmbridge.host`` under ``-X importtime``: the fastest of ``IMPORT_RUNS`` runs,
    its total in ms and (module, cumulative ms, self ms) for every module it imported."""
    best: tuple[float, list[tuple[str, float, float]]] | None = None
    for _ in range(IMPORT_RUNS):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import lmbridge.host"],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        rows: list[tuple[str, float, float]] = []
        for line in err.splitlines():
            fields = line.removeprefix("import time:").split("|")
            if len(fields) != 3 or not fields[0].strip().isdigit():
                continue  # the header, or another line
            rows.append((fields[2].strip(), int(fields[1]) / 1000, int(fields[0]) / 1000))
        total = next(cum for name, cum, _ in rows if name == "lmbridge.host")
        if best is None or total < best[0]:
            best = (total, rows)
    assert best is not None
    return best


def loaded_modules() -> list[str]:
    """The lmbridge modules ``import lmbridge.host`` loads."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, lmbridge.host; print('\\n'.join(sorted(m for m in sys.modules "
            "if m.startswith('lmbridge'))))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


async def measure(rounds: int, bootstrap: str) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {"bare": [], "asyncio": [], "listed": [], "first": [], "ext": []}
    with tempfile.TemporaryDirectory() as storage:
        await bare_start()
        await asyncio_start()
        await host_start(storage)  # bytecode written, the token store made
        await bootstrap_start(bootstrap, storage)
        for _ in range(rounds):
            results["bare"].append(await bare_start())
            results["asyncio"].append(await asyncio_start())
            listed, first = await host_start(storage)
            results["listed"].append(listed)
            results["first"].append(first)
            results["ext"].append(await bootstrap_start(bootstrap, storage))
    return results


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    return (
        f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def report(results: dict[str, list[float]], rounds: int) -> str:
    bare = statistics.median(results["bare"]) * 1000
    floor = statistics.median(results["asyncio"]) * 1000
    listed = statistics.median(results["listed"]) * 1000
    first = statistics.median(results["first"]) * 1000
    ext = statistics.median(results["ext"]) * 1000
    total, rows = import_profile()
    ours = sorted((r for r in rows if r[0].startswith("lmbridge")), key=lambda r: -r[1])
    by_self = sorted(rows, key=lambda r: -r[2])
    modules = loaded_modules()
    lines = [
        f"Machine: {machine()}. {rounds} rounds, medians (ms); ratio to `python -c pass` "
        "measured in the same run.",
        "",
        "| path | median ms | ratio to bare start |",
        "|---|---:|---:|",
        f"| `python -c pass` (spawn to exit) | {bare:.0f} | 1.0 |",
        f'| `python -c "import asyncio"` (spawn to exit) | {floor:.0f} | {floor / bare:.1f} |',
        f"| spawn -> `initialize` -> first `models/list` | {listed:.0f} | {listed / bare:.1f} |",
        f"| spawn -> first token of the first chat (echo) | {first:.0f} | {first / bare:.1f} |",
        f"| the extension's bootstrap: spawn -> first `models/list` | {ext:.0f} | {ext / bare:.1f} |",
        "",
        f"`import lmbridge.host`: {total:.0f} ms (`-X importtime`, the fastest of {IMPORT_RUNS} "
        "runs); "
        f"{len(modules)} lmbridge modules loaded.",
        "",
        "| largest lmbridge imports (cumulative) | ms |",
        "|---|---:|",
        *(f"| `{name}` | {cum:.1f} |" for name, cum, _ in ours[:10]),
        "",
        "| largest imports by own time | ms |",
        "|---|---:|",
        *(f"| `{name}` | {own:.1f} |" for name, _, own in by_self[:10]),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument(
        "--python-ts",
        type=Path,
        default=ROOT / "extension" / "src" / "python.ts",
        help="where the extension's host bootstrap is read (HOST_BOOTSTRAP)",
    )
    args = parser.parse_args()
    # Every child (bare starts, hosts, import profiles) writes and then reads its bytecode, as
    # an installed lmbridge does; with PYTHONDONTWRITEBYTECODE set (some shells and CI set it)
    # each start would compile lmbridge's sources again and measure the compiler.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    results = asyncio.run(measure(args.rounds, extension_bootstrap(args.python_ts)))
    print(report(results, args.rounds))


if __name__ == "__main__":
    main()
