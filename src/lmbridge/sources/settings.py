"""The ``lmbridge.providers`` setting and ``lmbridge host --config`` files, as a source of entries.

A ``--config`` file holds the same list as the setting (JSON: the list itself or
``{"providers": [...]}``; TOML: ``[[providers]]`` tables). VS Code sends the user's entries and
a workspace's apart; :func:`merge_workspace_entries` puts them together and applies the trust
classes of :mod:`lmbridge.config_fields` to the workspace's. This module only produces entries
(:mod:`lmbridge.entries`); :mod:`lmbridge.config` loads them.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config_fields import PROVIDER_FIELDS, workspace_fields
from ..entries import PROVIDERS_SETTING
from ..errors import ConfigError

__all__ = ["IgnoredSetting", "load_config_file", "merge_workspace_entries"]


# --------------------------------------------------------------------------- files


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read the providers from a ``.json`` or ``.toml`` file: the same list as the
    ``lmbridge.providers`` setting, bare (JSON ``[...]``) or as ``{"providers": [...]}``
    (TOML: ``[[providers]]`` tables, TOML has no bare lists). Returns ``{"providers": [...],
    ...}`` either way.

    ``-`` reads standard input. A file without a suffix (and standard input) is sniffed (``{``
    or ``[`` starts JSON, unless it is TOML's ``[[providers]]``, else TOML); any other suffix
    (``.yaml`` ...) is an error saying which types are read. A top-level key other than
    ``providers`` (and JSON's ``$schema``) is an error naming the right one:
    ``{"provider": [...]}`` must not quietly mean no providers.
    """
    stdin = str(path) == "-"
    p = Path("<stdin>") if stdin else Path(path)
    suffix = "" if stdin else p.suffix.lower()
    if suffix not in ("", ".json", ".toml"):
        raise ConfigError(
            f"{p}: {suffix!r} files are not read; use a .json or .toml file (JSON: the "
            f'providers list or {{"providers": [...]}}; TOML: [[providers]] tables)'
        )
    try:
        text = sys.stdin.read() if stdin else p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the configuration file {p}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text ({exc.reason})") from None
    as_toml = suffix == ".toml" or (suffix != ".json" and not _looks_like_json(text))
    try:
        data: Any = _toml_loads(text) if as_toml else json.loads(text)
    except ValueError as exc:
        kind = "TOML" if as_toml else "JSON"
        hint = "" if suffix else " (a file without a suffix is read as JSON or TOML)"
        raise ConfigError(f"{p}: not valid {kind}{hint}: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"{p}: nested too deeply to read") from None
    if isinstance(data, list):
        return {"providers": data}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected the providers list, or an object with a 'providers' list")
    for key in data:
        if key not in ("providers", "$schema"):
            near = difflib.get_close_matches(str(key).lower(), ["providers"], n=1, cutoff=0.6)
            hint = "did you mean 'providers'?" if near else "the file holds 'providers' only"
            raise ConfigError(f"{p}: unknown top-level key {key!r}: {hint}")
    providers = data.get("providers", [])
    if not isinstance(providers, list):
        raise ConfigError(f"{p}: 'providers' must be a list, got {type(providers).__name__}")
    return data


def _looks_like_json(text: str) -> bool:
    head = text.lstrip()
    # TOML's table headers ("[[providers]]", "[x]") also start with "["; a JSON list of
    # entries starts with "[" then "{" (or is empty)
    return head.startswith("{") or (head.startswith("[") and head[1:].lstrip()[:1] in ("{", "]", ""))


def _toml_loads(text: str) -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
    return tomllib.loads(text)


# --------------------------------------------------------------------------- workspace entries


@dataclass(frozen=True)
class IgnoredSetting:
    """A part of a workspace's configuration the host did not honour, and why."""

    name: str | None
    """The entry's name (``None`` when it has none)."""
    field: str | None
    """``provider``, ``apiKeyEnv``, ``allowInsecureHttp``, ``vertex``, ``name``; ``None`` for an entry."""
    value: str
    """The ignored value, shortened (names and references only; never a key)."""
    reason: str
    """One sentence saying why."""
    setting: str = PROVIDERS_SETTING
    """The setting it came from."""

    def to_wire(self) -> dict[str, Any]:
        """The item of ``initialize``/``configure``'s ``ignored`` list."""
        return {
            "setting": self.setting,
            "name": self.name,
            "field": self.field,
            "value": self.value,
            "reason": self.reason,
        }

    def __str__(self) -> str:
        where = f"{self.setting} entry {self.name!r}" if self.name else self.setting
        what = f"{self.field} = {self.value}" if self.field else self.value
        return f"ignored from the workspace settings: {where}: {what}: {self.reason}"


def _short_value(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_WORKSPACE_REASONS = {
    "name": "a provider of this name is already configured (user settings win, and a name is "
    "used once)",
    **{
        f.name: f.workspace_reason
        for f in PROVIDER_FIELDS
        if f.workspace != "honoured" or f.workspace_maximum is not None
    },
}
# The trust classes of :mod:`lmbridge.config_fields`: fields whose presence drops a workspace's
# entry (``provider``), and fields removed from it (``apiKeyEnv``, ``allowInsecureHttp``, ``vertex``).
_WORKSPACE_DROPS_ENTRY = workspace_fields("entry-ignored")
_WORKSPACE_REMOVED = workspace_fields("removed")
# Numbers a workspace may set only up to a bound (``timeout``): name -> the bound.
_WORKSPACE_MAXIMUM = {
    f.name: f.workspace_maximum for f in PROVIDER_FIELDS if f.workspace_maximum is not None
}


def merge_workspace_entries(
    user: Any, workspace: Any
) -> tuple[list[Any], list[IgnoredSetting]]:
    """The user's entries followed by what a workspace may add, and what it may not.

    Pure. A workspace entry with ``provider`` (a Python reference: it would import and call
    code) is ignored; ``apiKeyEnv`` (it could send any environment variable),
    ``allowInsecureHttp`` and ``vertex`` (it would send the token of the user's Vertex AI
    token command) are removed from it; a number with a workspace bound (``timeout``) is
    lowered to it; one whose name a user entry (or an earlier
    workspace entry) has is ignored, so a workspace can never take over a user's provider or
    its stored key. Malformed entries pass through to be reported by :func:`parse_entries`.
    """
    merged: list[Any] = list(user) if isinstance(user, list) else ([] if user is None else [user])
    ignored: list[IgnoredSetting] = []
    if workspace is None:
        return merged, ignored
    if not isinstance(workspace, list):
        ignored.append(
            IgnoredSetting(None, None, _short_value(workspace), "expected a list of providers")
        )
        return merged, ignored
    taken = {
        e["name"] for e in merged if isinstance(e, Mapping) and isinstance(e.get("name"), str)
    }
    for obj in workspace:
        if not isinstance(obj, Mapping):
            merged.append(obj)
            continue
        name = obj.get("name")
        label = name if isinstance(name, str) else None
        dropping = next((k for k in _WORKSPACE_DROPS_ENTRY if k in obj), None)
        whole = dropping if dropping is not None else "name" if label in taken else None
        if whole is not None:  # the entry goes entirely
            ignored.append(
                IgnoredSetting(label, whole, _short_value(obj[whole]), _WORKSPACE_REASONS[whole])
            )
            continue
        entry = dict(obj)
        for key in _WORKSPACE_REMOVED:  # the entry stays without them
            if key in entry:
                value = _short_value(entry.pop(key))
                ignored.append(IgnoredSetting(label, key, value, _WORKSPACE_REASONS[key]))
        for key, most in _WORKSPACE_MAXIMUM.items():  # lowered to the bound
            number = entry.get(key)
            if isinstance(number, (int, float)) and not isinstance(number, bool) and number > most:
                entry[key] = most
                ignored.append(
                    IgnoredSetting(
                        label, key, _short_value(number),
                        f"{_WORKSPACE_REASONS[key]}; lowered to {most:g}",
                    )
                )  # fmt: skip
        if label is not None:
            taken.add(label)
        merged.append(entry)
    return merged, ignored

