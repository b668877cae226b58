"""Citations and sources as VS Code data parts, one shape for every upstream.

VS Code has no citation part; a :class:`~lmbridge.parts.DataPart` with the MIME type
``application/vnd.vscode.citation+json`` carries one citation as a JSON object::

    {"type": "citation", "url"?: str, "title"?: str, "citedText"?: str, "sourceId"?: str,
     "mediaType"?: str, "filename"?: str, ...upstream-specific fields in camelCase}

Fields the upstream did not give are left out (never ``null``). Opaque replay tokens
(``encrypted_*``) are dropped: they are large and mean nothing to a reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..parts import DataPart

__all__ = ["CITATION_MIME", "camel_fields", "citation_part"]

CITATION_MIME = "application/vnd.vscode.citation+json"
"""The MIME type of a citation data part."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def camel_fields(obj: Mapping[str, Any], *, skip: tuple[str, ...] = ("type",)) -> dict[str, Any]:
    """The scalar fields of ``obj`` with camelCase names, without ``skip`` and ``encrypted_*``."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if key in skip or key.startswith(("encrypted_", "encrypted")) or value is None:
            continue
        if isinstance(value, (str, int, float, bool)):
            out[_camel(key)] = value
    return out


def citation_part(
    *,
    url: str | None = None,
    title: str | None = None,
    cited_text: str | None = None,
    source_id: str | None = None,
    media_type: str | None = None,
    filename: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> DataPart:
    """A citation data part; ``None`` fields are left out, ``extra`` fields are added as given."""
    record: dict[str, Any] = {"type": "citation"}
    for key, value in (
        ("url", url),
        ("title", title),
        ("citedText", cited_text),
        ("sourceId", source_id),
        ("mediaType", media_type),
        ("filename", filename),
    ):
        if value is not None:
            record[key] = value
    for key, value in (extra or {}).items():
        if value is not None and key not in record:
            record[key] = value
    return DataPart.json(record, CITATION_MIME)
