"""MIME types: validation and the choice of DataPart factory.

One place decides how bytes with a MIME type become a :class:`~lmbridge.parts.DataPart`:
``image/*`` -> :meth:`DataPart.image`, ``application/json`` and ``*/*+json`` ->
:meth:`DataPart.json` (kept as given when the bytes are not JSON), ``text/*`` ->
:meth:`DataPart.text`, anything else -> raw bytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from .errors import WireError
from .parts import DataPart

__all__ = [
    "MimeType",
    "MimeTypeError",
    "data_part",
    "factory_for",
    "is_image",
    "is_json",
    "is_text",
    "parse_mime",
]

# RFC 6838 restricted-name: first char alnum, then up to 126 of alnum and !#$&-^_.+
_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&\-^_.+]{0,126}"
_MIME_RE = re.compile(rf"^\s*({_NAME})/({_NAME})\s*((?:;.*)?)$")


class MimeTypeError(WireError):
    """A MIME type is malformed (``image``, ``image/``, ``a b/c`` ...)."""


@dataclass(frozen=True, slots=True)
class MimeType:
    """A parsed MIME type, lower-cased, without parameters."""

    type: str
    subtype: str
    params: str = ""

    @property
    def essence(self) -> str:
        """``type/subtype``."""
        return f"{self.type}/{self.subtype}"

    def __str__(self) -> str:
        return self.essence + (f"; {self.params}" if self.params else "")


def parse_mime(value: str) -> MimeType:
    """Parse and validate a MIME type; :class:`MimeTypeError` says what is wrong."""
    if not isinstance(value, str):
        raise MimeTypeError(f"MIME type must be a string, got {type(value).__name__}")
    m = _MIME_RE.match(value)
    if not m:
        raise MimeTypeError(f"malformed MIME type {value!r}: expected 'type/subtype'")
    params = m.group(3).lstrip(";").strip()
    return MimeType(m.group(1).lower(), m.group(2).lower(), params)


def is_image(mime: str | MimeType) -> bool:
    """``image/*``."""
    mt = parse_mime(mime) if isinstance(mime, str) else mime
    return mt.type == "image"


def is_json(mime: str | MimeType) -> bool:
    """``application/json``, ``text/x-json`` or any ``*/*+json``."""
    mt = parse_mime(mime) if isinstance(mime, str) else mime
    return mt.essence in ("application/json", "text/x-json", "text/json") or mt.subtype.endswith(
        "+json"
    )


def is_text(mime: str | MimeType) -> bool:
    """``text/*`` (JSON text types count as JSON first)."""
    mt = parse_mime(mime) if isinstance(mime, str) else mime
    return mt.type == "text" and not is_json(mt)


def factory_for(mime: str) -> Literal["image", "json", "text", "raw"]:
    """Which DataPart factory a MIME type takes."""
    mt = parse_mime(mime)
    if is_image(mt):
        return "image"
    if is_json(mt):
        return "json"
    if is_text(mt):
        return "text"
    return "raw"


def data_part(data: bytes | str, mime: str) -> DataPart:
    """A DataPart for ``data`` with the factory its MIME type calls for.

    ``str`` data is encoded as UTF-8. JSON data is re-serialised compactly when it parses, and
    kept byte for byte when it does not (the upstream's bytes are never dropped).
    """
    kind = factory_for(mime)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    mime = mime.strip()
    if kind == "image":
        return DataPart.image(raw, mime)
    if kind == "json":
        try:
            return DataPart.json(json.loads(raw.decode("utf-8")), mime)
        except (UnicodeDecodeError, ValueError):
            return DataPart(raw, mime)
    if kind == "text":
        try:
            return DataPart.text(raw.decode("utf-8"), mime)
        except UnicodeDecodeError:
            return DataPart(raw, mime)
    return DataPart(raw, mime)
