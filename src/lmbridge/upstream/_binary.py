"""Base64 as upstreams send it: padding left out, line breaks, the URL-safe alphabet."""

from __future__ import annotations

import base64
import binascii
import re

__all__ = ["decode_base64"]

_WHITESPACE = re.compile(rb"[\t\n\f\r ]")
_NOT_ALPHABET = re.compile(rb"[^A-Za-z0-9+/]")


def decode_base64(text: str | bytes, *, forgiving: bool = False) -> bytes:
    """Base64 to bytes, also taking the URL-safe alphabet and missing padding.

    By default this is the WHATWG algorithm ``atob`` uses: ASCII whitespace is ignored, and
    anything else that is not base64 raises ``ValueError`` naming the problem. With
    ``forgiving``, every character outside the alphabet is dropped and a lone trailing
    character (no whole byte) too: what can be decoded is kept, so that an image an upstream
    sent is not thrown away for a stray character.
    """
    raw = text.encode("ascii", "replace") if isinstance(text, str) else bytes(text)
    raw = raw.replace(b"-", b"+").replace(b"_", b"/")
    if forgiving:
        raw = _NOT_ALPHABET.sub(b"", raw)
        if len(raw) % 4 == 1:
            raw = raw[:-1]
        return base64.b64decode(raw + b"=" * (-len(raw) % 4))
    raw = _WHITESPACE.sub(b"", raw)
    if len(raw) % 4 == 0 and raw.endswith(b"="):
        raw = raw[:-2] if raw.endswith(b"==") else raw[:-1]
    if len(raw) % 4 == 1:
        raise ValueError(f"not valid base64 (length {len(raw)} after removing whitespace)")
    try:
        return base64.b64decode(raw + b"=" * (-len(raw) % 4), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"not valid base64 ({exc})") from None
