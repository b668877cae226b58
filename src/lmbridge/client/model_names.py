"""Which VS Code model answers a model name a client sends (``claude-sonnet-4-5``, ``gpt-5`` ...).

Agents and SDKs name models by their vendor's names; VS Code's models have their own ids and
families. :func:`pick_model` finds the model for a name among the models VS Code offers, in
this order (sans-IO: the caller lists the models once and passes them in):

1. a VS Code model whose id is the name (ids may contain ``/``);
2. the name as selector text (``vscodelm/auto``, ``vscodelm/copilot/gpt-4o``,
   ``copilot/gpt-4o``): the first model it matches;
3. the same model by family: the name and the models' families and ids compared without
   case, date suffix (``-20250929``, ``-2025-04-14``) and with ``.`` read as ``-``, so
   ``claude-sonnet-4-5-20250929`` finds the family ``claude-sonnet-4.5``;
4. the user's setting ``lmbridge.endpoint.models``: ``{pattern: selector}``, patterns in
   shell style (``claude-*haiku*``), tried in the setting's order, then
   :data:`DEFAULT_MODEL_MAP`; the first pattern that matches the name and whose selector
   matches a model wins.

The setting only maps names to selectors: nothing in it runs or is fetched. It is read from
the user's (or remote) settings only: it steers agents that run in any folder.

A model of a provider that a workspace's settings added (:attr:`ChatModel.workspace`) is never
the answer of steps 1 to 3 or of the defaults: a repository could otherwise name its provider's
models like the ones agents ask for and receive their prompts. Only an entry of the user's
setting whose selector names the model's id chooses it.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .selectors import AUTO, ModelSelector, SelectorError, parse_selector
from .transport import ChatModel

__all__ = ["DEFAULT_MODEL_MAP", "ModelNameMap", "normalize_model_name", "pick_model"]

DEFAULT_MODEL_MAP: Mapping[str, str] = {
    "claude-*": AUTO,
    "gpt-*": AUTO,
    "o[1-9]*": AUTO,
    "gemini-*": AUTO,
}
"""What Anthropic, OpenAI and Gemini model names that nothing else matched get: the first model VS
Code offers. Agents send their vendor's model names (Claude Code also a small model's name for
background tasks), and an answer from another model is what their users want; other unknown
names are an error (``{"*": "vscodelm/auto"}`` in the setting takes every name)."""

_DATE_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


def normalize_model_name(name: str) -> str:
    """A name as :func:`pick_model` compares families: lower case, ``.`` as ``-``, no date."""
    text = name.strip().lower().replace(".", "-").replace("_", "-")
    return _DATE_SUFFIX.sub("", text)


@dataclass(frozen=True, slots=True)
class ModelNameMap:
    """The patterns of ``lmbridge.endpoint.models`` with their parsed selectors, in order."""

    entries: tuple[tuple[str, ModelSelector], ...] = ()

    @classmethod
    def from_setting(cls, value: Any) -> tuple[ModelNameMap, list[str]]:
        """The map of a setting value and a problem for each entry that was unusable."""
        problems: list[str] = []
        entries: list[tuple[str, ModelSelector]] = []
        if value is None:
            return cls(), problems
        if not isinstance(value, Mapping):
            problems.append(
                "lmbridge.endpoint.models: expected an object of pattern -> selector, "
                f"got {type(value).__name__}"
            )
            return cls(), problems
        for pattern, selector in value.items():
            if not isinstance(pattern, str) or not pattern.strip():
                problems.append(f"lmbridge.endpoint.models: empty pattern {pattern!r} ignored")
                continue
            if not isinstance(selector, str):
                problems.append(
                    f"lmbridge.endpoint.models[{pattern!r}]: expected selector text, "
                    f"got {type(selector).__name__}"
                )
                continue
            try:
                entries.append((pattern.strip(), parse_selector(selector)))
            except SelectorError as exc:
                problems.append(f"lmbridge.endpoint.models[{pattern!r}]: {exc}")
        return cls(tuple(entries)), problems

    def with_defaults(self) -> tuple[tuple[str, ModelSelector], ...]:
        """The user's entries, then :data:`DEFAULT_MODEL_MAP`'s."""
        defaults = tuple((p, parse_selector(s)) for p, s in DEFAULT_MODEL_MAP.items())
        return self.entries + defaults


def pick_model(
    name: str, models: Sequence[ChatModel], names: ModelNameMap | None = None
) -> ChatModel | None:
    """The model ``name`` stands for among ``models`` (module docstring), or ``None``."""
    # what a client's own name may reach: no model of a workspace's provider
    users = [m for m in models if m.workspace is None]
    for model in users:
        if model.id == name:
            return model
    if name.strip() in ("", "auto"):
        return users[0] if users else None
    try:
        selector = parse_selector(name)
    except SelectorError:
        selector = None
    if selector is not None and ("/" in name or name.startswith("{")):
        for model in users:
            if model.matches(selector):
                return model
    wanted = normalize_model_name(name)
    for model in users:
        if wanted in (normalize_model_name(model.family), normalize_model_name(model.id)):
            return model
    mapped = names or ModelNameMap()
    for pattern, pattern_selector in mapped.with_defaults():
        if fnmatch.fnmatchcase(name.lower(), pattern.lower()):
            # the user's entries: a workspace's model only when the selector names its id
            for model in models:
                if model.chosen_by(pattern_selector):
                    return model
    return None
