"""The ``lmbridge`` command. Each subcommand lives in its own module under ``commands/``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

__all__ = ["main"]

# subcommand -> module in lmbridge.commands that defines add_parser(subparsers) and run(args) -> int
_COMMANDS = {
    "demo": "demo",
    "chat": "chat",
    "check": "check",
    "doctor": "doctor",
    "agent-env": "agent_env",
    "run": "run",
    "replay": "replay",
    "convert": "convert",
    "tokens": "tokens",
    "host": "host",
}


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line that says what to type, exit 2 (argparse prints the whole
    usage first, which buries the problem)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every available subcommand (``only``: with that one alone)."""
    parser = _Parser(
        prog="lmbridge",
        description="Python language models in VS Code, and VS Code's language models in Python.",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"lmbridge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module in _COMMANDS.items():
        if only is not None and name != only:
            continue
        try:
            mod = importlib.import_module(f"lmbridge.commands.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"lmbridge.commands.{module}":
                raise
            continue
        mod.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # A command named first needs its own module only: `lmbridge host`, which every VS Code
    # start and window reload waits for, then skips the other commands' imports (decoders,
    # converters, the token estimator's weights).
    parser = build_parser(argv[0] if argv and argv[0] in _COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args))
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
