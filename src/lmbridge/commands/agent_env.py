"""``lmbridge agent-env CLIENT``: the environment that points a client at VS Code's models.

The loopback endpoint of the running VS Code (off by default: setting
``lmbridge.endpoint.enabled``) serves OpenAI's and Anthropic's APIs with a token that changes
at every start, on a port that changes too. This prints, as shell commands, what each client
needs to use it, read from the endpoint file (found as :func:`lmbridge.client.find_endpoint`
says, or ``--endpoint-file``), after checking the file (the user's own, mode 0600, its host
process alive, the user's and started before the file) and that the endpoint answers:

==============  ==============================================================================
``claude-code``  ``ANTHROPIC_BASE_URL`` (no ``/v1``), ``ANTHROPIC_AUTH_TOKEN`` (sent as a
                 bearer token; no key-approval prompt); ``ANTHROPIC_API_KEY`` unset
``codex``        ``LMBRIDGE_ENDPOINT_URL``, ``LMBRIDGE_ENDPOINT_TOKEN``; Codex takes its
                 provider from its configuration, so it is started with ``-c`` options
                 (:func:`client_setup` gives them; ``lmbridge run -- codex`` adds them)
``openai``       ``OPENAI_BASE_URL`` (with ``/v1``), ``OPENAI_API_KEY`` (the OpenAI SDKs)
``anthropic``    ``ANTHROPIC_BASE_URL`` (no ``/v1``), ``ANTHROPIC_API_KEY`` (the Anthropic
                 SDKs); ``ANTHROPIC_AUTH_TOKEN`` unset
==============  ==============================================================================

The values are good while that VS Code runs; ``lmbridge run -- PROGRAM`` reads the file afresh
at every start instead, so nothing goes stale.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._common import say_error

__all__ = ["CLIENTS", "ClientSetup", "add_parser", "client_setup", "endpoint_for", "run"]

CLIENTS = ("claude-code", "codex", "openai", "anthropic")


@dataclass
class ClientSetup:
    """What a client needs to use the endpoint."""

    env: dict[str, str]
    """Variables to set."""
    unset: list[str] = field(default_factory=list)
    """Variables to remove (they would override or confuse the ones set)."""
    args: list[str] = field(default_factory=list)
    """Arguments to put right after the program's name (Codex's ``-c`` options)."""
    notes: list[str] = field(default_factory=list)
    """Hints shown as comments."""


def client_setup(client: str, url: str, token: str, models: list[str]) -> ClientSetup:
    """The environment (and arguments) ``client`` needs for the endpoint at ``url``."""
    first = models[0] if models else "MODEL"
    listed = ", ".join(models[:12]) + (" ..." if len(models) > 12 else "")
    shown = f"VS Code's models here: {listed}" if models else "VS Code offers no model right now"
    if client == "claude-code":
        return ClientSetup(
            {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_AUTH_TOKEN": token},
            ["ANTHROPIC_API_KEY"],
            notes=[
                shown,
                "Claude Code asks for Claude model names; the endpoint answers them with the "
                "first of VS Code's models unless lmbridge.endpoint.models (user settings) maps "
                "them. To pick one:",
                f"export ANTHROPIC_MODEL={shlex.quote(first)}",
            ],
        )
    if client == "codex":
        provider = (
            f'model_providers.lmbridge={{name="lmbridge",base_url="{url}/v1",'
            'env_key="LMBRIDGE_ENDPOINT_TOKEN",wire_api="responses"}'
        )
        args = ["-c", "model_provider=lmbridge", "-c", provider]
        if not _codex_has_model():
            # Codex offers its tools only for model names it knows; the endpoint maps this one
            # (a gpt-* name) to VS Code's model. -m on the command line still chooses.
            args += ["-c", f"model={CODEX_MODEL}"]
        return ClientSetup(
            {"LMBRIDGE_ENDPOINT_URL": url, "LMBRIDGE_ENDPOINT_TOKEN": token},
            args=args,
            notes=[
                shown,
                "Codex reads its provider from its configuration, not from the environment: "
                "start it as `lmbridge run -- codex ...`, or with these options:",
                "codex " + " ".join(shlex.quote(a) for a in args),
                f"pick a model with: codex -m {shlex.quote(first)} (gpt-* names go to the first "
                "model unless lmbridge.endpoint.models maps them)",
            ],
        )
    if client == "openai":
        return ClientSetup(
            {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": token},
            notes=[shown, f'e.g. OpenAI().chat.completions.create(model="{first}", ...)'],
        )
    if client == "anthropic":
        return ClientSetup(
            {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": token},
            ["ANTHROPIC_AUTH_TOKEN"],
            notes=[shown, f'e.g. Anthropic().messages.create(model="{first}", ...)'],
        )
    raise ValueError(client)


CODEX_MODEL = "gpt-5"
"""The model name Codex is started with when its configuration names none."""


def _codex_has_model() -> bool:
    """Whether the user's Codex configuration (``$CODEX_HOME/config.toml``) names a model."""
    home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    try:
        text = (home / "config.toml").read_text(encoding="utf-8")
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
        return isinstance(tomllib.loads(text).get("model"), str)
    except (OSError, ValueError):
        return False


class EndpointProblem(Exception):
    """The endpoint cannot be used: the message says why and where the file is."""


def endpoint_for(endpoint_file: str | None) -> tuple[Any, list[str]]:
    """The live endpoint (:class:`~lmbridge.client.EndpointInfo`) and the ids of its models.

    Reads the endpoint file afresh and asks the endpoint for its models (which also proves the
    token is the running host's); :class:`EndpointProblem` when that fails.
    """
    import httpx

    from ..client.discovery import EndpointNotFoundError, find_endpoint

    try:
        info = find_endpoint(Path(endpoint_file) if endpoint_file else None)
    except EndpointNotFoundError as exc:
        raise EndpointProblem(str(exc)) from None
    where = f"the endpoint file {info.path}" if info.path else "LMBRIDGE_ENDPOINT_URL"
    try:
        answer = httpx.get(
            f"{info.url}/v1/models",
            headers={"Authorization": f"Bearer {info.token}"},
            timeout=5.0,
            trust_env=False,  # loopback: never through a proxy
        )
    except httpx.HTTPError as exc:
        raise EndpointProblem(
            f"{where} names {info.url}, which does not answer ({type(exc).__name__}): is VS "
            "Code still running with the endpoint on (setting lmbridge.endpoint.enabled)?"
        ) from None
    if answer.status_code == 401:
        raise EndpointProblem(
            f"the endpoint at {info.url} refused the token of {where}: the file is stale; "
            "restart the endpoint (or VS Code) to write it again"
        )
    if answer.status_code != 200:
        raise EndpointProblem(f"the endpoint at {info.url} answered HTTP {answer.status_code}")
    try:
        models = [str(m["id"]) for m in answer.json()["data"]]
    except (ValueError, KeyError, TypeError):
        models = []
    return info, models


def add_parser(sub: Any) -> None:
    """Register the subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "agent-env",
        help="print the environment that points Claude Code, Codex or an SDK at VS Code's models",
        description=(
            "Print, as shell commands, the environment a client needs to use VS Code's models "
            "through the running loopback endpoint: eval \"$(lmbridge agent-env claude-code)\". "
            "The token and port change when VS Code restarts; `lmbridge run -- PROGRAM` reads "
            "them afresh at every start."
        ),
    )
    p.add_argument("client", choices=CLIENTS, metavar="CLIENT", help=" | ".join(CLIENTS))
    p.add_argument(
        "--shell",
        choices=["sh", "fish", "powershell", "json"],
        default="powershell" if sys.platform == "win32" else "sh",
        help="how to print it (default: sh; powershell on Windows); json: one object",
    )
    p.add_argument(
        "--endpoint-file",
        metavar="FILE",
        help="the endpoint file (default: $LMBRIDGE_ENDPOINT_FILE, ~/.cache/lmbridge/endpoint.json, "
        "then the one VS Code's lmbridge host wrote)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``lmbridge agent-env``. Exit 0: printed; 1: no usable endpoint."""
    try:
        info, models = endpoint_for(args.endpoint_file)
    except EndpointProblem as exc:
        say_error("agent-env", exc)
        return 1
    setup = client_setup(args.client, info.url, info.token, models)
    source = str(info.path) if info.path else "LMBRIDGE_ENDPOINT_URL/LMBRIDGE_ENDPOINT_TOKEN"
    if args.shell == "json":
        print(
            json.dumps(
                {
                    "client": args.client,
                    "endpoint": info.url,
                    "endpointFile": str(info.path) if info.path else None,
                    "env": setup.env,
                    "unset": setup.unset,
                    "args": setup.args,
                    "models": models,
                },
                indent=2,
            )
        )
        return 0
    lines = [
        f"lmbridge endpoint {info.url}, from {source}",
        "good while this VS Code runs; `lmbridge run -- PROGRAM` reads it afresh every time",
    ]
    out = [f"# {line}" for line in lines]
    for name, value in setup.env.items():
        out.append(_set(args.shell, name, value))
    for name in setup.unset:
        out.append(_unset(args.shell, name))
    out.extend(f"# {note}" for note in setup.notes)
    print("\n".join(out))
    return 0


def _set(shell: str, name: str, value: str) -> str:
    if shell == "fish":
        return f"set -gx {name} {shlex.quote(value)}"
    if shell == "powershell":
        return f"$env:{name} = '{value.replace(chr(39), chr(39) * 2)}'"
    return f"export {name}={shlex.quote(value)}"


def _unset(shell: str, name: str) -> str:
    if shell == "fish":
        return f"set -e {name}"
    if shell == "powershell":
        return f"Remove-Item Env:{name} -ErrorAction SilentlyContinue"
    return f"unset {name}"


def environ_for(setup: ClientSetup, base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``setup`` applied."""
    env = dict(os.environ if base is None else base)
    for name in setup.unset:
        env.pop(name, None)
    env.update(setup.env)
    return env
