"""Provider groups from VS Code's Language Models editor, as a source of entries.

VS Code 1.109 and later drive setup of a vendor that declares a ``configuration`` schema in
its ``languageModelChatProviders`` contribution: **Add Models** asks for a group name and each
property, keeps ``secret`` properties (the API key) in VS Code's secret storage and writes the
rest to ``chatLanguageModels.json`` in the user's profile (never a workspace's). lmbridge
declares the vendor ``lmbridge-api`` (:data:`lmbridge.config_fields.EDITOR_VENDOR`) for that.
VS Code asks the vendor's provider for each group's models with the group's configuration (not
its name); the extension gives each group an id made from its configuration
(``extension/src/editorGroups.ts``) and hands the host ``{"id": ..., "configuration": {...}}``,
the key taken out and sent as a stored key bound to an origin, as for ``lmbridge.providers``.

A group becomes an upstream entry named ``editor:<id>`` (:data:`EDITOR_PREFIX`): that prefix
is refused in ``lmbridge.providers`` names, so the two sources can never claim the same name.
Python providers (``provider``) stay in ``lmbridge.providers``: a group naming one is refused.
This module only produces entries; :func:`lmbridge.entries.parse_entries` validates them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..entries import EDITOR_PREFIX
from ..errors import ConfigError

__all__ = [
    "EDITOR_LABEL",
    "EDITOR_PREFIX",
    "EditorGroup",
    "editor_groups",
    "host_name",
]

EDITOR_LABEL = "Language Models editor group"
"""How messages refer to a group's entry (where ``lmbridge.providers`` says ``providers[i]``)."""

_NOT_OPTIONS = frozenset({"name", "apiKey"})
"""Configuration keys that are not entry fields: the entry's name is made from the group's id,
and the key travels apart (bound to an origin)."""


def host_name(group_id: str) -> str:
    """The provider name of the group ``group_id`` in the host."""
    return EDITOR_PREFIX + group_id


@dataclass(frozen=True)
class EditorGroup:
    """One group of the Language Models editor, as the host loads it."""

    id: str
    """The group's id (the extension's, made from its configuration)."""
    entry: dict[str, Any] | ConfigError
    """The upstream entry it describes, or why it has none."""

    @property
    def name(self) -> str:
        """The entry's (provider's) name in the host."""
        return host_name(self.id)


def editor_groups(raw: Any) -> list[EditorGroup]:
    """The groups of ``initialize``/``configure``'s ``editorProviders``, each with its entry.

    Pure. ``raw`` is a list of ``{"id": str, "configuration": object}``; a malformed item is an
    error of the whole list (the extension made it), a configuration naming a Python
    ``provider`` yields a :class:`ConfigError` for its group (never quoting a configuration
    value: it could be a key pasted in the wrong field). An id listed twice keeps its first
    description.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"editorProviders: expected a list, got {type(raw).__name__}")
    out: list[EditorGroup] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        group_id = item.get("id") if isinstance(item, Mapping) else None
        if not isinstance(group_id, str) or not group_id.strip() or "/" in group_id:
            raise ConfigError(f"editorProviders[{i}].id: expected a non-empty string without '/'")
        if group_id in seen:
            continue
        seen.add(group_id)
        out.append(EditorGroup(group_id, _entry(group_id, item.get("configuration"))))
    return out


def _entry(group_id: str, configuration: Any) -> dict[str, Any] | ConfigError:
    here = f"{EDITOR_LABEL} ({host_name(group_id)!r})"
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
    return {"name": host_name(group_id), **entry}
