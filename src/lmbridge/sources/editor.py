"""Provider groups from VS Code's Language Models editor, as a source of entries.

VS Code 1.109 and later drive setup of a vendor that declares a ``configuration`` schema in
its ``languageModelChatProviders`` contribution: **Add Models** asks for a group name and each
property, keeps ``secret`` properties (the API key) in VS Code's secret storage and writes the
rest to ``chatLanguageModels.json`` in the user's profile (never a workspace's). lmbridge
declares the vendor :data:`EDITOR_VENDOR` for that; the extension hands the host each group it
was asked about as ``{"group": name, "configuration": {...}}`` (the key taken out and sent as
a stored key bound to an origin, as for ``lmbridge.providers``).

A group becomes an upstream entry named :func:`host_name` of the group: the prefix
:data:`EDITOR_PREFIX` is refused in ``lmbridge.providers`` names, so the two sources can never
claim the same name (and a model id ``editor:<group>/<model>`` says where it comes from).
Python providers (``provider``) stay in ``lmbridge.providers``: a group naming one is refused.
This module only produces entries; :func:`lmbridge.entries.parse_entries` validates them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config_fields import EDITOR_VENDOR
from ..entries import EDITOR_PREFIX
from ..errors import ConfigError

__all__ = [
    "EDITOR_LABEL",
    "EDITOR_PREFIX",
    "EDITOR_VENDOR",
    "EditorGroup",
    "editor_groups",
    "host_name",
]

EDITOR_LABEL = "Language Models editor group"
"""How messages refer to a group's entry (where ``lmbridge.providers`` says ``providers[i]``)."""

_NOT_OPTIONS = frozenset({"name", "apiKey"})
"""Configuration keys that are not entry fields: the group's name is the entry's name, and the
key travels apart (bound to an origin)."""


def host_name(group: str) -> str:
    """The provider name a group has in the host: :data:`EDITOR_PREFIX` and the group's name,
    with ``%`` and ``/`` escaped (a model id is ``<provider>/<model>``)."""
    return EDITOR_PREFIX + group.replace("%", "%25").replace("/", "%2F")


@dataclass(frozen=True)
class EditorGroup:
    """One group of the Language Models editor, as the host loads it."""

    group: str
    """The group's name, as the user gave it in the editor."""
    entry: dict[str, Any] | ConfigError
    """The upstream entry it describes, or why it has none."""

    @property
    def name(self) -> str:
        """The entry's (provider's) name in the host."""
        return host_name(self.group)


def editor_groups(raw: Any) -> list[EditorGroup]:
    """The groups of ``initialize``/``configure``'s ``editorProviders``, each with its entry.

    Pure. ``raw`` is a list of ``{"group": str, "configuration": object}``; a malformed item
    or a configuration naming a Python ``provider`` yields a :class:`ConfigError` naming the
    group (never a configuration value: it could be a key pasted in the wrong field). A group
    listed twice keeps its first description.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"editorProviders: expected a list, got {type(raw).__name__}")
    out: list[EditorGroup] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        group = item.get("group") if isinstance(item, Mapping) else None
        if not isinstance(group, str) or not group.strip():
            raise ConfigError(f"editorProviders[{i}].group: expected a non-empty string")
        if group in seen:
            continue
        seen.add(group)
        out.append(EditorGroup(group, _entry(group, item.get("configuration"))))
    return out


def _entry(group: str, configuration: Any) -> dict[str, Any] | ConfigError:
    here = f"{EDITOR_LABEL} {group!r}"
    if configuration is None:
        configuration = {}
    if not isinstance(configuration, Mapping):
        return ConfigError(f"{here}: expected an object, got {type(configuration).__name__}")
    if "provider" in configuration:
        return ConfigError(
            f"{here}: 'provider' (a Python provider) is not taken from the Language Models "
            f"editor; add Python providers to the 'lmbridge.providers' setting"
        )
    entry = {str(k): v for k, v in configuration.items() if k not in _NOT_OPTIONS}
    return {"name": host_name(group), **entry}
