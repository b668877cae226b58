"""The byte pipeline's speed over the recorded streams, as ratios to plain ``json.loads``.

For every recorded stream under tests/fixtures (one payload per line) that a registered format
claims, the body a server would send (SSE: ``data:`` lines, ``event:`` lines first for
Responses and Anthropic, ``data: [DONE]`` at the end for Chat Completions) is cut into 1 KiB
chunks, and in one run, in the same process, interleaved round by round:

- floor: ``json.loads`` of each payload (a ``str``), nothing else: no decoder can skip parsing;
- pipeline: the path the host uses, :class:`lmbridge.upstream.ByteStreamDecoder` (SSE on bytes,
  JSON, the format's decoder, the part assembler) from the chunks to the finished result, with
  the decoders' default parser, orjson (the ``fast`` extra), and again with the parser they use
  without orjson (``set_json_loads(stdlib_loads)``);
- minimal loop: the least a Python program can do with the same chunks: join them, split events
  at ``\\n\\n``, cut each event's data after ``data: `` and parse it (orjson, or ``json.loads``),
  collecting the objects; no event types, no ids, no CR handling, no decoding, no parts.

Each time is the minimum over the rounds (the round least disturbed by other work on the
machine); every figure is a ratio of two times from this run. The assembler's cost per part is
timed in the same run. Goals: the pipeline at most 1.0x the floor with orjson and 1.3x without,
per format (median over its recordings).

The pipeline modules can be compiled with mypyc (the ``compiled`` build; the wheel does it
when asked to): each run says which build it measured (``lmbridge.sse`` loaded from an
extension module, not from its ``.py``). One command reports both builds: the script measures
the build it runs in, then runs itself under each ``--python`` given (by default
``.venv-compiled/bin/python`` when that exists and this run is not compiled), one after the
other, and puts all the runs on one page; each figure is still a ratio of two times measured
in one process.

Results go to docs/benchmarks/decoders.md. Run (a minute or two per build)::

    .venv/bin/python benchmarks/bench_decoders.py
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from readme_section import write_block

from lmbridge.compiled import COMPILED_MODULES, build, compiled_modules
from lmbridge.replay import detect_format
from lmbridge.sse import ServerSentEvent, SSEDecoder
from lmbridge.upstream import (
    ByteStreamDecoder,
    PartAssembler,
    decoder_class,
    set_json_loads,
    stdlib_loads,
)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
OUT = ROOT / "docs" / "benchmarks" / "decoders.md"
CHUNK = 1024
GOAL_ORJSON = 1.0
GOAL_STDLIB = 1.3
COMPILED_VENV = ROOT / ".venv-compiled" / "bin" / "python"
def build_info() -> dict[str, Any]:
    """Which build this process runs (:func:`lmbridge.compiled.build`): ``compiled`` when every
    module the compiled build compiles was loaded from an extension module, ``pure`` when none
    was, else ``partly compiled``."""
    found = compiled_modules()
    compiled = [name for name, is_compiled in found.items() if is_compiled]
    label = {"pure Python": "pure", "mixed": "partly compiled"}.get(build(found), "compiled")
    return {
        "build": label,
        "detected": label,
        "compiled_modules": compiled,
        "python": _shown(Path(sys.executable)),
        "package": _shown(Path(str(sys.modules["lmbridge"].__file__)).parent),
        "python_version": platform.python_version(),
    }


def _shown(path: Path) -> str:
    """A path as the page shows it: under the project, relative to it."""
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def sse_body(fmt: str, payloads: list[str]) -> bytes:
    """The body a server sends for these payloads (see the module docstring)."""
    out = []
    for p in payloads:
        if fmt in ("responses", "anthropic"):
            out.append(f"event: {json.loads(p).get('type', 'message')}\n")
        out.append(f"data: {p}\n\n")
    if fmt == "chat-completions":
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def chunked(data: bytes, size: int = CHUNK) -> list[bytes]:
    """``data`` in chunks of ``size`` bytes."""
    return [data[i : i + size] for i in range(0, len(data), size)]


def calibrate(fn: Callable[[], object], seconds: float) -> int:
    """How many calls of ``fn`` last about ``seconds``."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 >= seconds:
            return n
        n *= 2


def race(fns: dict[str, Callable[[], object]], rounds: int, seconds: float) -> dict[str, float]:
    """Seconds per call of each function: the minimum over ``rounds`` rounds, the functions
    interleaved in each round (so that a disturbance hits them alike)."""
    counts = {name: calibrate(fn, seconds) for name, fn in fns.items()}
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            n = counts[name]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t0) / n)
    return best


def minimal_loop(body: list[bytes], loads: Callable[[bytes], Any]) -> list[Any]:
    """Split events at blank lines, parse each event's data: the least an SSE + JSON loop does."""
    out: list[Any] = []
    pending: list[bytes] = []  # an event's pieces, joined once it is complete (stays linear)
    for chunk in body:
        across = bool(pending) and pending[-1][-1:] == b"\n" and chunk[:1] == b"\n"
        pending.append(chunk)
        if b"\n\n" not in chunk and not across:
            continue
        *events, rest = b"".join(pending).split(b"\n\n")
        pending = [rest] if rest else []
        for event in events:
            data = event[event.find(b"data: ") + 6 :]
            if data != b"[DONE]":
                out.append(loads(data))
    return out


def recordings() -> list[tuple[str, str, list[str]]]:
    """(path under tests/fixtures, format, payloads) of every recording a format claims."""
    found = []
    for path in sorted(FIXTURES.rglob("*.chunks.txt")) + sorted(FIXTURES.rglob("*.jsonl")):
        payloads = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        try:
            for p in payloads:
                json.loads(p)
            fmt = detect_format([ServerSentEvent(p) for p in payloads])
        except ValueError:
            continue  # a recording of a broken stream, or one no registered format claims
        found.append((str(path.relative_to(FIXTURES)), fmt, payloads))
    return found


def assembler_costs(rounds: int, seconds: float) -> dict[str, float]:
    """Seconds per part the assembler takes to make each kind of part (and hand it over)."""
    deltas = [f"word{i} " for i in range(100)]
    fragments = ['{"path": "', "src/", "main", ".py", '", "line', '": 12', "}"]

    def text() -> None:
        asm = PartAssembler()
        for d in deltas:
            asm.text(d)
            asm.drain()

    def thinking() -> None:
        asm = PartAssembler()
        for d in deltas:
            asm.thinking(d, id="r1")
            asm.drain()

    def tool_calls() -> None:
        asm = PartAssembler()
        for i in range(20):
            asm.tool_start(i, call_id=f"call_{i}", name="read_file")
            for f in fragments:
                asm.tool_delta(i, f)
            asm.tool_end(i)
            asm.drain()

    t = race({"text": text, "thinking": thinking, "tool call": tool_calls}, rounds, seconds)
    return {
        "text": t["text"] / 100,
        "thinking": t["thinking"] / 100,
        "tool call": t["tool call"] / 20,
    }


def measure(rounds: int, seconds: float) -> dict[str, Any]:
    """This process's figures: every recording's ratios, the assembler's costs, the build."""
    import orjson

    rows: list[dict[str, Any]] = []
    for rel, fmt, payloads in recordings():
        body = chunked(sse_body(fmt, payloads))
        cls = decoder_class(fmt)

        def floor(payloads: list[str] = payloads) -> object:
            return [json.loads(p) for p in payloads]

        def pipeline(body: list[bytes] = body, cls: Any = cls) -> object:
            return ByteStreamDecoder(cls()).decode_all(body)

        def with_orjson(pipeline: Callable[[], object] = pipeline) -> object:
            set_json_loads(orjson.loads)
            return pipeline()

        def with_stdlib(pipeline: Callable[[], object] = pipeline) -> object:
            set_json_loads(stdlib_loads)
            return pipeline()

        def min_orjson(body: list[bytes] = body) -> object:
            return minimal_loop(body, orjson.loads)

        def min_json(body: list[bytes] = body) -> object:
            return minimal_loop(body, json.loads)

        splitter = SSEDecoder()
        events = [e for chunk in body for e in splitter.feed_raw(chunk)] + splitter.close_raw()
        datas = [e[1] for e in events if e[1] != b"[DONE]"]

        def sse_only(body: list[bytes] = body) -> object:
            decoder = SSEDecoder()
            out = [decoder.feed_raw(chunk) for chunk in body]
            return out, decoder.close_raw()

        def parse_only(datas: list[bytes] = datas) -> object:
            return [orjson.loads(d) for d in datas]

        def from_events(events: list[Any] = events, cls: Any = cls) -> object:
            set_json_loads(orjson.loads)
            decoder = cls()
            return decoder.feed_raw_events(events), decoder.close()

        t = race(
            {
                "floor": floor,
                "orjson": with_orjson,
                "stdlib": with_stdlib,
                "min_orjson": min_orjson,
                "min_json": min_json,
                "sse": sse_only,
                "parse": parse_only,
                "to_parts": from_events,
            },
            rounds,
            seconds,
        )
        set_json_loads(None)
        result = pipeline()
        f = t["floor"]
        row = {
            "file": rel,
            "format": fmt,
            "events": len(payloads),
            "parts": len(result.parts),  # type: ignore[attr-defined]
            "kb": sum(len(p) for p in payloads) / 1024,
            "floor_us": f * 1e6,
            "orjson": t["orjson"] / f,
            "stdlib": t["stdlib"] / f,
            "min_orjson": t["min_orjson"] / f,
            "min_json": t["min_json"] / f,
            "sse": t["sse"] / f,
            "parse": t["parse"] / f,
            "to_parts": t["to_parts"] / f,
        }
        rows.append(row)
        print(
            f"{rel:66} orjson x{row['orjson']:.2f}  stdlib x{row['stdlib']:.2f}  "
            f"minimal x{row['min_orjson']:.2f}",
            file=sys.stderr,
            flush=True,
        )

    floor_per_event = statistics.median(r["floor_us"] / r["events"] for r in rows) / 1e6
    return {
        **build_info(),
        "rows": rows,
        "assembler": assembler_costs(rounds, seconds),
        "floor_per_event": floor_per_event,
        "rounds": rounds,
        "load": os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"),
    }


def run_other(python: str, rounds: int, seconds: float) -> dict[str, Any]:
    """This script's figures measured by another interpreter (another build), in its process.
    ``python``: its path, or ``LABEL=PATH`` to name the run on the page."""
    label, _, path = python.rpartition("=")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        cmd = [path, str(Path(__file__).resolve()), "--json", str(out)]
        cmd += ["--rounds", str(rounds), "--seconds", str(seconds)]
        if label:
            cmd += ["--label", label]
        print(f"running {' '.join(cmd)}", file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, cwd=ROOT)
        run: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=200, help="interleaved rounds per figure")
    parser.add_argument(
        "--seconds",
        type=float,
        default=0.00002,
        help="length of one timing (short: less often cut by other work)",
    )
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--python",
        action="append",
        default=None,
        metavar="[LABEL=]PATH",
        help="also measure the build of this interpreter (repeatable; default: "
        ".venv-compiled/bin/python when it exists and this run is not compiled; 'none': only "
        "this process)",
    )
    parser.add_argument(
        "--label", help="this run's name on the page (default: its build, pure or compiled)"
    )
    parser.add_argument(
        "--json", type=Path, help="write this process's figures as JSON to this file, nothing else"
    )
    args = parser.parse_args(argv)
    try:
        import orjson  # noqa: F401
    except ImportError:  # the dev tools install it; the figures need both parsers
        print("orjson is not installed: .venv/bin/pip install orjson", file=sys.stderr)
        return 2

    runs = [measure(args.rounds, args.seconds)]
    if args.label:
        runs[0]["build"] = args.label
    if args.json is not None:
        args.json.write_text(json.dumps(runs[0]), encoding="utf-8")
        return 0
    others = args.python
    if others is None:
        here_compiled = runs[0]["build"] == "compiled"
        # (a venv's python is a link to the same interpreter as every other venv's: compare
        # the environments, not the executables)
        same = Path(sys.prefix).resolve() == COMPILED_VENV.parent.parent.resolve()
        others = (
            [str(COMPILED_VENV)]
            if COMPILED_VENV.exists() and not here_compiled and not same
            else []
        )
    for python in others:
        if python != "none":
            runs.append(run_other(python, args.rounds, args.seconds))
    text = render(runs)
    if args.no_write:
        print(text)
    else:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUT.relative_to(ROOT)}")
        if write_block("bench_decoders", headline(runs)):
            print("wrote README.md (Measurements)")
    return 0


def by_format(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["format"], []).append(r)
    return dict(sorted(out.items()))


def med(rs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(r[key]) for r in rs)


def missed(run: dict[str, Any], key: str, goal: float) -> list[str]:
    """The formats whose median misses ``goal``, each with its figure."""
    return [
        f"{fmt} ({med(rs, key):.2f}x)"
        for fmt, rs in by_format(run["rows"]).items()
        if med(rs, key) > goal
    ]


def headline(runs: list[dict[str, Any]]) -> str:
    """The README's bullet: per build and format, the median ratios with and without orjson."""
    builds = []
    for run in runs:
        parts = [
            f"{fmt} {med(rs, 'orjson'):.2f}x / {med(rs, 'stdlib'):.2f}x"
            for fmt, rs in by_format(run["rows"]).items()
        ]
        met_o = not missed(run, "orjson", GOAL_ORJSON)
        met_s = not missed(run, "stdlib", GOAL_STDLIB)
        builds.append(
            f"{run['build']} build: "
            + ", ".join(parts)
            + " ("
            + ("met" if met_o else "missed")
            + " with orjson, "
            + ("met" if met_s else "missed")
            + " without)"
        )
    return (
        "- [Decoders](docs/benchmarks/decoders.md) (`.venv/bin/python benchmarks/bench_decoders.py`):\n"
        "  the byte pipeline (SSE, JSON, decoder, assembler) as a multiple of plain `json.loads` of\n"
        "  the same payloads, median per format, with orjson / without, against goals of "
        f"{GOAL_ORJSON:.1f}x / {GOAL_STDLIB:.1f}x; " + "; ".join(builds) + "."
    )


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def render(runs: list[dict[str, Any]]) -> str:
    """The page: every run (build) side by side."""

    def verdict(value: float, goal: float) -> str:
        return "met" if value <= goal else "**MISSED**"

    lines = [
        "# Decoder speed: the byte pipeline against the json.loads floor",
        "",
        "Generated by `.venv/bin/python benchmarks/bench_decoders.py` (this whole page: no figure",
        "here is typed by hand; with `.venv-compiled` present it measures that build too, or",
        f"`--python PATH` names another interpreter). {_cpu()}, {os.cpu_count()} CPUs.",
        "",
        "Every figure is a ratio of two times measured in one run, in the same process: the time",
        "of the byte pipeline the host uses (SSE on bytes in 1 KiB chunks, JSON, the format's",
        "decoder, the part assembler, to the finished result) divided by the time of plain",
        "`json.loads` of the same payloads (the floor: no decoder can skip parsing). *orjson*: the",
        "default install with the `fast` extra; *without orjson*: the parser the decoders use when",
        "orjson is missing (the standard library's C scanner), forced in the same run with",
        "`set_json_loads(stdlib_loads)`. *Minimal loop*: split at blank lines, cut after `data: `,",
        "parse, collect: no event types, ids, CR line ends, decoding or parts (see",
        "`minimal_loop` in the script). Per format: the median over its recordings, and the",
        "worst recording.",
        "",
        f"Goals: at most {GOAL_ORJSON:.1f}x with orjson, at most {GOAL_STDLIB:.1f}x without.",
        "",
        "## Builds",
        "",
        "Each build measured in its own process, one after the other (*pure*: the modules as",
        "Python source; *compiled*: the pipeline's modules compiled with mypyc, as the wheel",
        "builds them when asked to). The build is what the process loaded, not what was asked for.",
        "",
        "| run | interpreter | lmbridge loaded from | Python | modules compiled | "
        "rounds per figure (minimum taken) | load average at the end |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        compiled = run["compiled_modules"]
        lines.append(
            f"| {run['build']} | `{run['python']}` | `{run['package']}` | {run['python_version']} | "
            f"{len(compiled)} of {len(COMPILED_MODULES)} ({run['detected']}) | {run['rounds']} | "
            f"{run['load']:.1f} |"
        )
    lines += [
        "",
        "## Per format",
        "",
        "| format | build | recordings | events | orjson: pipeline x floor (median / worst) | "
        "verdict | without orjson: pipeline x floor (median / worst) | verdict | minimal loop, "
        "orjson x floor | minimal loop, json.loads x floor |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    formats = sorted({r["format"] for run in runs for r in run["rows"]})
    for fmt in formats:
        for run in runs:
            rs = by_format(run["rows"]).get(fmt)
            if not rs:
                continue
            o, s = med(rs, "orjson"), med(rs, "stdlib")
            lines.append(
                f"| {fmt} | {run['build']} | {len(rs)} | {sum(r['events'] for r in rs)} | "
                f"{o:.2f} / {max(r['orjson'] for r in rs):.2f} | {verdict(o, GOAL_ORJSON)} | "
                f"{s:.2f} / {max(r['stdlib'] for r in rs):.2f} | {verdict(s, GOAL_STDLIB)} | "
                f"{med(rs, 'min_orjson'):.2f} | {med(rs, 'min_json'):.2f} |"
            )
    lines += ["", "## Verdict", ""]
    for run in runs:
        missed_o = missed(run, "orjson", GOAL_ORJSON)
        missed_s = missed(run, "stdlib", GOAL_STDLIB)
        lines += [
            f"- {run['build']} build, with orjson (goal {GOAL_ORJSON:.1f}x): "
            + (
                "met for every format."
                if not missed_o
                else "**MISSED** for " + ", ".join(missed_o) + "."
            ),
            f"- {run['build']} build, without orjson (goal {GOAL_STDLIB:.1f}x): "
            + (
                "met for every format."
                if not missed_s
                else "**MISSED** for " + ", ".join(missed_s) + "."
            ),
        ]
    lines += [
        "",
        "## Where the time goes (with orjson)",
        "",
        "The pipeline's stages timed apart in the same run, each as a multiple of the floor",
        "(median per format): *SSE*: the event-stream decoder alone on the same chunks; *JSON*:",
        "orjson on the events' data alone; *events -> parts*: the format's decoder fed the",
        "split events (JSON, decoder, assembler, end of stream). Whole pipeline = SSE + events",
        "-> parts + the glue between them.",
        "",
        "| format | build | SSE x floor | JSON (orjson) x floor | events -> parts x floor | events -> parts minus JSON |",
        "|---|---|---|---|---|---|",
    ]
    for fmt in formats:
        for run in runs:
            rs = by_format(run["rows"]).get(fmt)
            if rs:
                lines.append(
                    f"| {fmt} | {run['build']} | {med(rs, 'sse'):.2f} | {med(rs, 'parse'):.2f} | "
                    f"{med(rs, 'to_parts'):.2f} | {med(rs, 'to_parts') - med(rs, 'parse'):.2f} |"
                )
    lines += [
        "",
        "## The assembler's cost per part",
        "",
        "The part assembler alone (what every decoder hands its deltas to), timed in each run:",
        "per part produced, and as a share of `json.loads` of one event of the median recording",
        "in the same run ("
        + ", ".join(f"{run['build']}: {run['floor_per_event'] * 1e6:.2f} us" for run in runs)
        + ").",
        "",
        "| part | build | ns per part | x json.loads of one event |",
        "|---|---|---|---|",
    ]
    what = {
        "text": "text delta -> TextPart",
        "thinking": "reasoning delta -> ThinkingPart",
        "tool call": "tool call from 7 argument fragments -> ToolCallPart",
    }
    for key, label in what.items():
        for run in runs:
            cost = run["assembler"][key]
            lines.append(
                f"| {label} | {run['build']} | {cost * 1e9:.0f} | {cost / run['floor_per_event']:.2f} |"
            )
    header = "| recording | format | events | parts | KiB | json.loads floor (us) |"
    rule = "|---|---|---|---|---|---|"
    for run in runs:
        b = run["build"]
        header += f" {b}: orjson x | {b}: without orjson x | {b}: minimal loop, orjson x |"
        rule += "---|---|---|"
    lines += [
        "",
        "## Per recording",
        "",
        "The floor is the first build's (each build's ratios use its own run's floor).",
        "",
        header,
        rule,
    ]
    keyed = [{r["file"]: r for r in run["rows"]} for run in runs]
    for r in runs[0]["rows"]:
        line = (
            f"| {r['file']} | {r['format']} | {r['events']} | {r['parts']} | {r['kb']:.1f} | "
            f"{r['floor_us']:.0f} |"
        )
        for same_build in keyed:
            other = same_build.get(r["file"])
            line += (
                f" {other['orjson']:.2f} | {other['stdlib']:.2f} | {other['min_orjson']:.2f} |"
                if other
                else " - | - | - |"
            )
        lines.append(line)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
