"""``lmbridge doctor [--config FILE]``: a diagnosis to paste into a bug report.

The real host is started as ``lmbridge check`` starts it (a subprocess over stdio, with the
``--config`` file's providers, or the default echo model and the installed entry points), and
asked for its ``diagnose`` report (:mod:`lmbridge.diagnose`): versions, build, interpreter,
each provider's state and error, the endpoint, the proxy and certificate settings of the
environment, and the known traps. No key, token or message content is in it. Exit 0, or 2
when the file cannot be read or the host does not start.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from typing import Any

from ._common import InputError, say_error, start_host_args

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register the subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "doctor",
        help="print a diagnosis to paste into a bug report (no keys, no content)",
        description=(
            "Start the host with the configuration, as VS Code does, and print what it knows: "
            "versions, build, interpreter, each provider's state and error, the endpoint, the "
            "proxy settings and the known traps. It holds no key, token or message content."
        ),
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="providers as JSON or TOML, or - for standard input (default: the built-in "
        "echo model and the installed entry points)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``lmbridge doctor``."""
    try:
        host_args, temp = start_host_args(args.config, "--keep-going")
    except InputError as exc:
        say_error("doctor", exc)
        return 2
    try:
        return asyncio.run(_doctor(host_args))
    finally:
        if temp is not None:
            temp.unlink(missing_ok=True)


async def _doctor(host_args: list[str]) -> int:
    from ..host.client import HostClient

    with tempfile.TemporaryFile() as log:
        async with HostClient.start([*host_args, "--log-level", "error"], stderr=log) as host:
            try:
                await asyncio.wait_for(host.initialize(providers=[], secrets={}), 60)
                result = await asyncio.wait_for(host.request("diagnose", {}), 60)
            except (ConnectionError, asyncio.TimeoutError):
                log.seek(0)
                tail = log.read().decode("utf-8", "replace").strip().splitlines()[-3:]
                say_error("doctor", "the host did not start: " + " / ".join(tail))
                return 2
    print(result["text"], end="")
    return 0
