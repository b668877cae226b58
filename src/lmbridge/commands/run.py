"""``lmbridge run -- PROGRAM [ARGS...]``: start a program on VS Code's models.

Reads the endpoint file afresh (so nothing goes stale when VS Code restarts: a new port and
token every time), checks it as ``lmbridge agent-env`` does (the user's own file, its host
alive and the user's, the endpoint answering with its token) and starts ``PROGRAM`` with the
environment of its client (:mod:`.agent_env`): ``claude`` as Claude Code, ``codex`` as Codex
(with its ``-c`` provider options put first), any other program with the OpenAI and
Anthropic SDKs' variables and ``LMBRIDGE_ENDPOINT_URL``/``LMBRIDGE_ENDPOINT_TOKEN`` (lmbridge's
own client). ``--client`` chooses instead. On POSIX the program replaces this process; its
exit status is the command's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ._common import say_error
from .agent_env import (
    CLIENTS,
    ClientSetup,
    EndpointProblem,
    client_setup,
    endpoint_for,
    environ_for,
)

__all__ = ["add_parser", "run"]

_BY_PROGRAM = {"claude": "claude-code", "codex": "codex"}


def add_parser(sub: Any) -> None:
    """Register the subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "run",
        help="start a program (claude, codex, a script) on VS Code's models",
        description=(
            "Start PROGRAM with the environment that points it at VS Code's models through the "
            "running loopback endpoint, read afresh from the endpoint file: "
            "lmbridge run -- claude, lmbridge run -- codex exec 'fix the tests', "
            "lmbridge run -- python app.py."
        ),
    )
    p.add_argument(
        "--client",
        choices=[*CLIENTS, "any"],
        help="whose environment to give (default: from the program's name: claude -> "
        "claude-code, codex -> codex, else any: OpenAI's, Anthropic's and lmbridge's variables)",
    )
    p.add_argument("--endpoint-file", metavar="FILE", help="the endpoint file (as for agent-env)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...]")
    p.set_defaults(run=run)


def _client_of(program: str) -> str:
    name = Path(program).name.lower()
    for suffix in (".exe", ".cmd", ".bat", ".ps1"):
        name = name.removesuffix(suffix)
    return _BY_PROGRAM.get(name, "any")


def _setup(client: str, url: str, token: str, models: list[str]) -> ClientSetup:
    if client != "any":
        return client_setup(client, url, token, models)
    env: dict[str, str] = {"LMBRIDGE_ENDPOINT_URL": url, "LMBRIDGE_ENDPOINT_TOKEN": token}
    unset: list[str] = []
    for name in ("openai", "anthropic"):
        part = client_setup(name, url, token, models)
        env.update(part.env)
        unset.extend(part.unset)
    return ClientSetup(env, unset)


def run(args: argparse.Namespace) -> int:
    """Run ``lmbridge run``."""
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        say_error("run", "name the program to start: lmbridge run -- claude (or codex, python app.py ...)")
        return 2
    program = shutil.which(command[0])
    if program is None:
        say_error("run", f"{command[0]}: no such program on PATH")
        return 127
    try:
        info, models = endpoint_for(args.endpoint_file)
    except EndpointProblem as exc:
        say_error("run", exc)
        return 1
    setup = _setup(args.client or _client_of(command[0]), info.url, info.token, models)
    argv = [command[0], *setup.args, *command[1:]]
    env = environ_for(setup)
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        try:
            os.execve(program, argv, env)  # noqa: S606 (the user named the program)
        except OSError as exc:
            say_error("run", f"cannot start {command[0]}: {exc.strerror or exc}")
            return 126
    try:
        return subprocess.call([program, *argv[1:]], env=env)
    except OSError as exc:
        say_error("run", f"cannot start {command[0]}: {exc.strerror or exc}")
        return 126
    except KeyboardInterrupt:
        return 130
