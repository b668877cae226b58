"""A diagnosis a user can paste into a bug report: ``lmbridge: Diagnose`` and ``lmbridge doctor``.

What it holds: the versions (lmbridge, Python, the platform), the build (compiled or pure
Python, the JSON library), the interpreter, each provider's state (loaded or not, its format
and the origin its key goes to, the error that stopped it, the last error a request got), the
endpoint's state, the proxy and certificate settings in effect (a proxy's credentials
redacted), what a workspace tried to set and was refused, and the known traps. What it never
holds: an API key, a token, a message's content. Every value is a name, a number, an origin or
an error message (the gateway's messages never carry a key); :func:`render` also drops any
line that holds one of the secrets it is given, as a last guard.

The host builds the facts it knows (``diagnose`` request, :meth:`HostServer.diagnose
<lmbridge.host.server.HostServer>`); the extension adds VS Code's side (its version, why it
chose the interpreter, the settings behind the known traps) and shows the text. ``lmbridge
doctor`` builds the same from the command line, for a ``--config`` file.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from . import __version__
from .compiled import build, json_library
from .network import NetworkSettings, redact_proxy

__all__ = [
    "KNOWN_TRAPS",
    "environment_proxies",
    "network_facts",
    "python_facts",
    "render",
    "scrub",
]

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY")

KNOWN_TRAPS = (
    (
        "utility-model",
        "With a model of another vendor than Copilot selected, Copilot's agent fails with "
        '"No utility model is configured ..." unless the setting chat.byokUtilityModelDefault is '
        '"mainAgent" (or "copilot").',
    ),
    (
        "restricted-mode",
        "In Restricted Mode (an untrusted workspace) VS Code's model picker shows only Auto; "
        "trust the workspace to pick an lmbridge model.",
    ),
    (
        "interpreter",
        "The host runs in the interpreter shown above; a Python provider's package must be "
        "installed there (lmbridge.pythonCommand chooses another).",
    ),
    (
        "proxy",
        "The host follows VS Code's http.proxy, http.noProxy and http.proxyStrictSSL; requests to "
        "this machine never go through the proxy.",
    ),
)
"""``(id, text)`` of the traps users hit most."""


def python_facts() -> dict[str, Any]:
    """lmbridge's and Python's versions, the build and the interpreter."""
    return {
        "lmbridge": __version__,
        "build": build(),
        "json": json_library(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "platform": platform.platform(terse=True),
    }


def environment_proxies(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The proxy variables of the environment, credentials redacted."""
    env = os.environ if environ is None else environ
    out = {}
    for name in PROXY_VARIABLES:
        value = env.get(name) or env.get(name.lower())
        if value:
            out[name] = value if name == "NO_PROXY" else redact_proxy(value)
    return out


def network_facts(network: NetworkSettings) -> dict[str, Any]:
    """VS Code's proxy and certificate settings in effect, the proxy's credentials redacted."""
    wire = network.to_wire()
    if wire.get("proxy"):
        wire["proxy"] = redact_proxy(str(wire["proxy"]))
    return wire


def _value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(_value(v) for v in value) or "-"
    return str(value)


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` with every string holding one of ``secrets`` (4 characters or more) replaced by
    ``"[hidden]"``: a last guard, since no field should hold one."""
    hidden = [s for s in secrets if isinstance(s, str) and len(s) >= 4]
    if isinstance(value, str):
        return "[hidden]" if any(s in value for s in hidden) else value
    if isinstance(value, Mapping):
        return {k: scrub(v, hidden) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, hidden) for v in value]
    return value


def render(report: Mapping[str, Any], secrets: Iterable[str] = ()) -> str:
    """The report as Markdown text. Sections: any mapping of the report (``Versions`` ...); the
    ``providers`` list as one block each; ``ignored`` and ``traps`` as lists. A line that holds
    one of ``secrets`` (4 characters or more) is left out."""
    lines = ["# lmbridge diagnosis", ""]
    for title, key in (
        ("Versions and build", "versions"),
        ("VS Code", "vscode"),
        ("Interpreter", "interpreter"),
        ("Network", "network"),
        ("Endpoint", "endpoint"),
    ):
        section = report.get(key)
        if not isinstance(section, Mapping) or not section:
            continue
        lines += [f"## {title}", ""]
        lines += [f"- {name}: {_value(value)}" for name, value in section.items()]
        lines.append("")
    providers = report.get("providers")
    if isinstance(providers, list):
        lines += ["## Providers", ""]
        if not providers:
            lines.append("- none")
        for p in providers:
            if not isinstance(p, Mapping):
                continue
            state = "loaded" if p.get("ok") else "not loaded"
            lines.append(f"- {p.get('name')}: {state}")
            for name in ("kind", "format", "origin", "models", "error", "keyError", "lastError"):
                if p.get(name) not in (None, ""):
                    lines.append(f"  - {name}: {_value(p.get(name))}")
        lines.append("")
    ignored = report.get("ignored")
    if isinstance(ignored, list) and ignored:
        lines += ["## What a workspace tried to set", ""]
        for item in ignored:
            if isinstance(item, Mapping):
                what = f"{item.get('field')} = {item.get('value')}" if item.get("field") else item.get("value")
                lines.append(
                    f"- {item.get('setting')} entry {item.get('name')!r}: {what}: {item.get('reason')}"
                )
        lines.append("")
    traps = report.get("traps")
    if isinstance(traps, list) and traps:
        lines += ["## Known traps", ""]
        lines += [f"- {t}" for t in traps if isinstance(t, str)]
        lines.append("")
    hidden = [s for s in secrets if isinstance(s, str) and len(s) >= 4]
    return "\n".join(line for line in lines if not any(s in line for s in hidden)).rstrip() + "\n"
