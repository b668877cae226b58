"""Model selectors: which of VS Code's models a consumer wants, as text and as a wire object.

A selector is ``vscode.LanguageModelChatSelector``: any of vendor, family, version and id;
fields left out match anything, so the empty selector matches every model and the client takes
the first one. Settings hold selectors as text in one of two forms::

    vscodelm/auto                              the first model VS Code offers (the default)
    vscodelm/{vendor}[/{family}[/{identifier}]]  e.g. vscodelm/copilot/gpt-4o
    {vendor}/{family}/{version}/{id}            Cline's form, e.g. copilot/gpt-4o
    ""                                         any model

The model id (``identifier``) is always the last field and may itself contain ``/`` (lmbridge's
own ids are ``"<provider>/<model>"``), so everything after the earlier fields belongs to it. An
empty field in the middle (``copilot//my-id``) means "any". Cline prints selectors by dropping
empty fields, which is lossy; :func:`format_selector` keeps inner empty fields so that
``parse_selector(format_selector(s)) == s`` for every selector. The few selectors neither text
form can express (a vendor literally named ``vscodelm`` together with a version) print as a JSON
object, which :func:`parse_selector` also accepts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigError

__all__ = [
    "AUTO",
    "PREFIX",
    "ModelSelector",
    "SelectorError",
    "SelectorStyle",
    "format_selector",
    "parse_selector",
]

PREFIX = "vscodelm"
"""The first segment of the ``vscodelm/...`` form."""
AUTO = "vscodelm/auto"
"""The default selector text: the first model VS Code offers."""

SelectorStyle = Literal["vscodelm", "cline"]
_STYLES: tuple[SelectorStyle, ...] = ("vscodelm", "cline")

_FIELDS = ("vendor", "family", "version", "id")


class SelectorError(ConfigError):
    """A selector (setting text or object) is malformed; the message quotes it and says why."""


@dataclass(frozen=True, slots=True)
class ModelSelector:
    """``vscode.LanguageModelChatSelector``: ``None`` fields match any model."""

    vendor: str | None = None
    """The vendor that provides the model (``copilot``, ``lmbridge`` ...)."""
    family: str | None = None
    """The model family (``gpt-4o``, ``claude-sonnet-4`` ...)."""
    version: str | None = None
    """The model version."""
    id: str | None = None
    """The model's unique id."""

    def __post_init__(self) -> None:
        for name in _FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, str):
                raise SelectorError(
                    f"selector {name}: expected a string, got {type(value).__name__}"
                )
            if value == "":
                # "" would mean "must equal the empty string" to VS Code, which nobody wants;
                # callers say "any" with None.
                raise SelectorError(f"selector {name}: empty; leave the field out to match any")
            if value != value.strip() or any(ord(c) < 0x20 or c == "\x7f" for c in value):
                raise SelectorError(
                    f"selector {name} {value!r}: surrounding spaces or control characters"
                )
            if name != "id" and "/" in value:
                raise SelectorError(f"selector {name} {value!r}: only the id may contain '/'")
        if self.id is not None and self.id.endswith("/"):
            raise SelectorError(f"selector id {self.id!r}: must not end with '/'")

    @property
    def is_empty(self) -> bool:
        """Whether the selector matches any model (``vscodelm/auto``)."""
        return all(getattr(self, name) is None for name in _FIELDS)

    def to_wire(self) -> dict[str, str]:
        """The ``selector`` object of ``lm/selectChatModels``: only the fields that are set."""
        return {name: v for name in _FIELDS if (v := getattr(self, name)) is not None}

    @classmethod
    def from_wire(cls, obj: Any) -> ModelSelector:
        """Parse a selector object ``{"vendor"?, "family"?, "version"?, "id"?}``.

        Unknown keys are an error (a typo like ``"familly"`` would otherwise match any model);
        empty strings and ``null`` mean "any", as in VS Code.
        """
        if obj is None:
            return cls()
        if not isinstance(obj, Mapping):
            raise SelectorError(f"selector: expected an object, got {type(obj).__name__}")
        unknown = sorted(str(k) for k in obj if k not in _FIELDS)
        if unknown:
            raise SelectorError(
                f"selector: unknown field(s) {', '.join(unknown)}; expected vendor, family, version, id"
            )
        values: dict[str, str | None] = {}
        for name in _FIELDS:
            value = obj.get(name)
            if value is not None and not isinstance(value, str):
                raise SelectorError(
                    f"selector.{name}: expected a string, got {type(value).__name__}"
                )
            values[name] = value or None
        return cls(**values)

    def matches(self, *, vendor: str, family: str, version: str, id: str) -> bool:
        """Whether a model with these fields satisfies the selector (VS Code's rule: equality)."""
        return (
            (self.vendor is None or self.vendor == vendor)
            and (self.family is None or self.family == family)
            and (self.version is None or self.version == version)
            and (self.id is None or self.id == id)
        )

    def __str__(self) -> str:
        return format_selector(self)


def parse_selector(value: str | ModelSelector | Mapping[str, Any] | None) -> ModelSelector:
    """Parse a selector setting: text in either form, a selector object, or ``None`` (any).

    Raises :class:`SelectorError` naming the text and what is wrong with it.
    """
    if value is None:
        return ModelSelector()
    if isinstance(value, ModelSelector):
        return value
    if isinstance(value, Mapping):
        return ModelSelector.from_wire(value)
    if not isinstance(value, str):
        raise SelectorError(f"selector: expected text or an object, got {type(value).__name__}")
    text = value.strip()
    if text == "":
        return ModelSelector()
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise SelectorError(f"selector {value!r}: invalid JSON ({exc})") from None
        return ModelSelector.from_wire(obj)
    if text.endswith("/"):
        raise SelectorError(f"selector {value!r}: ends with '/'; drop it or add the missing field")
    segments = text.split("/")
    try:
        if segments[0] == PREFIX:
            return _parse_vscodelm(segments[1:], value)
        return _from_segments(segments, ("vendor", "family", "version"))
    except SelectorError as exc:
        raise SelectorError(f"selector {value!r}: {_strip_prefix(exc)}") from None


def _strip_prefix(exc: SelectorError) -> str:
    text = str(exc)
    return text[len("selector ") :] if text.startswith("selector ") else text


def _parse_vscodelm(rest: list[str], original: str) -> ModelSelector:
    if not rest:
        raise SelectorError(f"expected {AUTO} or {PREFIX}/<vendor>[/<family>[/<id>]]")
    if rest[0] == "auto":
        if len(rest) > 1:
            raise SelectorError(f"'{PREFIX}/auto' takes no further fields")
        return ModelSelector()
    return _from_segments(rest, ("vendor", "family"))


def _from_segments(segments: list[str], leading: tuple[str, ...]) -> ModelSelector:
    """Assign ``segments`` to the ``leading`` fields in order; what is left is the id."""
    values: dict[str, str | None] = {}
    for name, segment in zip(leading, segments, strict=False):
        values[name] = segment or None
    rest = segments[len(leading) :]
    values["id"] = "/".join(rest) or None
    return ModelSelector(**values)


def format_selector(selector: ModelSelector, style: SelectorStyle | None = None) -> str:
    """Print a selector so that :func:`parse_selector` gives it back.

    ``style=None`` picks ``vscodelm/...`` when it can express the selector and Cline's form when
    a version is set. Asking for a style that cannot express the selector raises
    :class:`SelectorError`.
    """
    if style is None:
        for candidate in _STYLES:
            try:
                return format_selector(selector, candidate)
            except SelectorError:
                continue
        # Neither text form can say it: a JSON object always can.
        return json.dumps(selector.to_wire(), separators=(",", ":"))
    if style == "vscodelm":
        if selector.version is not None:
            raise SelectorError(f"{selector!r}: the {PREFIX}/ form cannot express a version")
        if selector.is_empty:
            return AUTO
        if selector.vendor == "auto":  # would read back as vscodelm/auto
            raise SelectorError(f"{selector!r}: the vendor 'auto' reads as {AUTO}")
        return f"{PREFIX}/{_join([selector.vendor, selector.family, selector.id])}"
    if style == "cline":
        text = _join([selector.vendor, selector.family, selector.version, selector.id])
        if text.split("/")[0] == PREFIX or text.startswith("{"):
            raise SelectorError(f"{selector!r}: Cline's form would read as the {PREFIX}/ form")
        return text
    raise ValueError(f"unknown selector style {style!r}; expected 'vscodelm' or 'cline'")


def _join(values: list[str | None]) -> str:
    """Join fields with '/', keeping inner empty fields and dropping trailing ones."""
    while values and values[-1] is None:
        values.pop()
    return "/".join(v or "" for v in values)
