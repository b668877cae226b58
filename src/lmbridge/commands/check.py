"""``lmbridge check [--config FILE]``: load every provider and list its models, or say what is wrong.

The providers are loaded by the real host (a subprocess spoken to over stdio, as VS Code
does) that serves the good ones and reports the others (``lmbridge host --config FILE
--keep-going``); each loaded provider's models are then read afresh with ``providers/test``
(the Manage Models panel's Test), every provider with its own deadline, so a slow one is
reported without holding up the others. Without ``--config``: the default configuration (the
built-in echo model) and the installed entry points.

Output: per provider one line, ``ok`` with its models on the lines below it, or ``FAILED``
and what is wrong. Exit 0 when every provider works; 1 when one failed; 2 for a file that
cannot be read.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from typing import Any

from ._common import InputError, say_error, start_host_args

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register the subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "check",
        help="load every provider of a configuration and list its models, or say what is wrong",
        description=(
            "Load every provider (through the real host, as VS Code does), list each one's "
            "models read afresh from it, and say in one line per provider what is wrong. "
            "Exit 0 when all work, 1 when one failed, 2 when the file cannot be read. "
            "Provider modules are also looked up in the current folder."
        ),
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="providers as JSON or TOML, or - for standard input (default: the built-in "
        "echo model and the installed entry points)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="how long each provider may take to list its models (default: 20)",
    )
    p.add_argument("--verbose", action="store_true", help="also show the host's log (stderr)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``lmbridge check``."""
    if not args.timeout > 0:
        say_error("check", "--timeout takes a positive number of seconds, e.g. --timeout 20")
        return 2
    try:
        host_args, temp = start_host_args(args.config, "--keep-going")
    except InputError as exc:
        say_error("check", exc)
        return 2
    try:
        return asyncio.run(_check(host_args, args.timeout, args.verbose))
    finally:
        if temp is not None:
            temp.unlink(missing_ok=True)


async def _check(host_args: list[str], timeout: float, verbose: bool) -> int:
    from ..host.client import HostClient

    level = "info" if verbose else "error"
    with tempfile.TemporaryFile() as log:
        stderr: Any = None if verbose else log
        async with HostClient.start([*host_args, "--log-level", level], stderr=stderr) as host:
            try:
                init = await asyncio.wait_for(host.initialize(providers=[], secrets={}), 60)
            except (ConnectionError, asyncio.TimeoutError):
                log.seek(0)
                tail = log.read().decode("utf-8", "replace").strip().splitlines()[-3:]
                say_error("check", "the host did not start: " + " / ".join(tail))
                return 2
            providers: list[dict[str, Any]] = init["providers"]
            results = await asyncio.gather(
                *(_test(host, p, timeout) for p in providers if p["ok"])
            )
    tested = {r["name"]: r for r in results}
    failed = 0
    width = max((len(p["name"]) for p in providers), default=0)
    for p in providers:
        result = tested.get(p["name"], p)
        name = p["name"].ljust(width)
        if not result["ok"]:
            failed += 1
            print(f"FAILED  {name}  {' '.join(str(result.get('error')).split())}")
            continue
        models = result.get("models") or []
        print(f"ok      {name}  {len(models)} model{'' if len(models) == 1 else 's'}")
        for m in models:
            print(f"          {m['id']}  {_describe(m)}")
    total = len(providers)
    summary = f"{total - failed} of {total} provider{'' if total == 1 else 's'} ok"
    print(summary if not failed else f"{summary}; {failed} failed", file=sys.stderr)
    return 1 if failed else 0


async def _test(host: Any, provider: dict[str, Any], timeout: float) -> dict[str, Any]:
    name = provider["name"]
    ident, fut = host.connection.send_request("providers/test", {"name": name})
    try:
        return dict(await asyncio.wait_for(asyncio.shield(fut), timeout))
    except asyncio.TimeoutError:
        host.connection.cancel_request(ident)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(fut, 5)
        return {"name": name, "ok": False, "error": f"no model list within {timeout:g} s"}
    except Exception as exc:  # the host's error answer
        return {"name": name, "ok": False, "error": str(exc)}


def _describe(model: dict[str, Any]) -> str:
    caps = model.get("capabilities") or {}
    extras = [k for k, v in (("tools", caps.get("toolCalling")), ("images", caps.get("imageInput"))) if v]
    text = (
        f"{model.get('name', '')}: input {model.get('maxInputTokens', 0):,} / output "
        f"{model.get('maxOutputTokens', 0):,} tokens"
    )
    return text + (f", {', '.join(extras)}" if extras else "")
