"""``lmbridge host``: serve Python language models to VS Code over stdio (JSON-RPC)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Coroutine
from typing import Any

from ..errors import ConfigError

__all__ = ["add_parser", "run"]

_log = logging.getLogger("lmbridge.host")


def add_parser(sub: Any) -> None:
    """Register the subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "host",
        help="serve language models to VS Code over stdio (started by the extension)",
        description=(
            "Speak the lmbridge protocol (JSON-RPC 2.0, Content-Length framing) on stdin/stdout. "
            "The VS Code extension starts this; run it yourself with --config to try providers "
            "without VS Code. Logs go to stderr."
        ),
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help='providers as JSON or TOML: {"providers": [...]} (used when VS Code sends none); '
        "the host refuses to start when one cannot load, and also finds provider modules in "
        "the current folder",
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="with --config: serve the providers that load and report the others in "
        "initialize, as the host VS Code starts does (lmbridge check uses this)",
    )
    p.add_argument(
        "--log-level",
        default=None,
        choices=["debug", "info", "warning", "error"],
        help=(
            "stderr log level, fixed (default: $LMBRIDGE_LOG_LEVEL, then the logLevel setting "
            "the extension sends, else info; message bodies are logged at debug only)"
        ),
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the host until the extension sends ``exit`` or closes stdin."""
    from ..host.paths import clean_sys_path

    # First: nothing below may import from the folder the host was started in.
    removed = clean_sys_path()

    from ..config import load_config_file
    from ..host import serve_stdio
    from ..host.logs import setup_logging

    log_levels = setup_logging(args.log_level)
    if removed:
        logging.getLogger("lmbridge.host").debug("removed from sys.path: %s", removed)
    file_config: dict[str, Any] = {}
    if args.keep_going and not args.config:
        print("lmbridge host: --keep-going goes with --config FILE", file=sys.stderr)
        return 2
    if args.config:
        if args.config == "-":
            print(
                "lmbridge host: --config -: the host's standard input carries the protocol; "
                "give the configuration as a file",
                file=sys.stderr,
            )
            return 2
        try:
            file_config = load_config_file(args.config)
        except ConfigError as exc:
            print(f"lmbridge host: {exc}", file=sys.stderr)
            return 2
        # Run from a terminal with a file of the user's: their provider module in the current
        # folder is found, after everything installed (a json.py there shadows nothing). The
        # host VS Code starts never gets --config and keeps the clean path.
        with contextlib.suppress(OSError):  # the folder was removed under us
            sys.path.append(os.getcwd())
    strict = None if args.keep_going or not args.config else args.config
    return _run(serve_stdio(file_config, log_levels=log_levels, strict=strict))


_GRACE = 2.0
"""Seconds the tasks still running when the host is done get to end after their cancellation."""


def _run(main: Coroutine[Any, Any, int]) -> int:
    """``asyncio.run(main)``, except at the end: ``asyncio.run`` cancels the tasks still running
    and waits for every one of them, so a task that ignores its cancellation (an app's, or one
    an app left behind) would keep the process alive for ever after VS Code asked it to go.
    Here they get :data:`_GRACE` seconds; one that is still running then is left behind
    (named in the log) and the process exits."""
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main)
    finally:
        try:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                done, stuck = loop.run_until_complete(asyncio.wait(pending, timeout=_GRACE))
                for task in done:
                    if not task.cancelled() and task.exception() is not None:
                        _log.error("a task failed while the host stopped", exc_info=task.exception())
                for task in stuck:
                    _log.warning("left behind at exit: %r ignores its cancellation", task)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
