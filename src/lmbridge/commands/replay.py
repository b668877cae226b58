"""``lmbridge replay``: decode a recorded upstream stream and show the VS Code parts."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any

from .. import formats
from ..replay import (
    RecordingError,
    bundled_recordings,
    detect_format,
    load_recording,
    parse_recording,
    replay,
)
from ..upstream import AssemblerOptions

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register the subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "replay",
        help="decode a recorded stream into VS Code parts",
        description=(
            "Decode a recorded upstream stream (a fixture *.chunks.txt file, a raw SSE body, or "
            "JSON lines of AI SDK parts) into VS Code response parts, and check them against the "
            "stream contract. FILE may be the name of a bundled recording (see --list)."
        ),
    )
    p.add_argument(
        "file", nargs="?", metavar="FILE", help="recording path, bundled name, or - for stdin"
    )
    p.add_argument("--format", choices=formats.names(), help="wire format (default: detected)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--thinking",
        choices=["part", "text", "drop"],
        default="part",
        help="how reasoning is reported (default: thinking parts)",
    )
    p.add_argument("--list", action="store_true", help="list the bundled recordings")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``lmbridge replay``. Exit 0: decoded, contract kept; 1: contract violations, or
    events that do not decode as the format; 2: unreadable input (a binary file too)."""
    if args.list or not args.file:
        for name, file_name in bundled_recordings().items():
            print(f"{name:32} {file_name}")
        return 0 if args.list else 2
    try:
        text, name = load_recording(args.file)
        recording = parse_recording(text, name)
        if args.format:
            try:
                seen = detect_format(recording.events)
            except (RecordingError, ValueError):
                seen = args.format
            if seen != args.format:
                print(
                    f"lmbridge replay: warning: the events look like {seen}, "
                    f"decoding them as {args.format} as asked",
                    file=sys.stderr,
                )
        report = replay(recording, args.format, AssemblerOptions(thinking=args.thinking))
    except (RecordingError, ValueError) as exc:
        print(f"lmbridge replay: {exc}", file=sys.stderr)
        return 2
    from ..errors import UpstreamProtocolError

    # the stream could not be decoded (not a recording of this format, or a broken one): a
    # failure of the command, not the replay of an upstream that reported an error
    undecodable = isinstance(report.result.error, UpstreamProtocolError)
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        _print_human(report.to_json())
    if undecodable:
        print(
            f"lmbridge replay: the events are not a {report.format} stream that decodes; "
            "is --format right? (without it the format is detected)",
            file=sys.stderr,
        )
    return 1 if report.violations or undecodable else 0


def _merge_thinking(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Adjacent thinking chunks of one block shown as one line (display only)."""
    out: list[dict[str, Any]] = []
    for wire in parts:
        prev = out[-1] if out else None
        if (
            prev is not None
            and wire["kind"] == prev["kind"] == "thinking"
            and wire.get("id") == prev.get("id")
            and not prev.get("metadata")
            and isinstance(prev["value"], str)
            and isinstance(wire["value"], str)
        ):
            out[-1] = {**wire, "value": prev["value"] + wire["value"]}
        else:
            out.append(wire)
    return out


def _print_human(rep: dict[str, Any]) -> None:
    print(f"format: {rep['format']}")
    for wire in _merge_thinking(rep["parts"]):
        kind = wire["kind"]
        if kind == "text":
            print(f"  text      {wire['value']!r}")
        elif kind == "thinking":
            value = wire["value"] if isinstance(wire["value"], str) else "".join(wire["value"])
            meta = f" metadata={sorted(wire['metadata'])}" if wire.get("metadata") else ""
            print(f"  thinking  {_short(value)!r}{meta}")
        elif kind == "toolCall":
            print(f"  toolCall  {wire['name']}({json.dumps(wire['input'])}) id={wire['callId']}")
        elif kind == "data":
            size = len(base64.b64decode(wire["data"]))
            print(f"  data      {wire['mimeType']} ({size} bytes)")
    print(f"usage: {json.dumps(rep['usage'])}")
    print(f"finish: {rep['finishReason']}")
    if rep["error"]:
        # ascii(): the message may quote the input, which must reach the terminal escaped
        message = ascii(rep["error"]["message"])[1:-1]
        print(f"error: {rep['error']['type']}: {message}")
    if rep["violations"]:
        print("contract: VIOLATED")
        for v in rep["violations"]:
            print(f"  part {v['index']}: {v['rule']}: {v['message']}")
    else:
        print("contract: kept")


def _short(s: str, n: int = 80) -> str:
    return s if len(s) <= n else s[:n] + "..."
