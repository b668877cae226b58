"""Image sizes from their headers (PNG, JPEG, GIF, WebP) and each family's image token rule.

Pure: reads the bytes it is given, never decodes pixels.

Rules (the providers' published formulas):

- **Anthropic**: an image whose long edge exceeds 1568 px, or whose area exceeds about
  1.15 megapixels (~1,600 tokens), is first scaled down keeping its aspect ratio; then it costs
  ``width * height / 750`` tokens.
- **OpenAI** (``detail: high``, the default for ``auto`` on large images): scale to fit in
  2048 x 2048, then scale so the shortest side is at most 768 px; count 512 px tiles;
  ``170 * tiles + 85`` tokens. A side never scales below 1 px, so every image has at least
  one tile (a 100000 x 1 strip becomes 2048 x 1: four tiles).
- **Google** (Gemini): an image with both sides <= 384 px costs 258 tokens; larger images are
  first scaled down to fit in 3072 x 3072 (keeping the aspect ratio; Vertex AI documents this
  limit), then cut into 768 x 768 tiles of 258 tokens each: at most 16 tiles, 4,128 tokens.
- **Other families** use the Anthropic formula (area / 750), a middle ground between the
  tile rules.

Fallback when the size cannot be read (unknown format, truncated header): the family's
largest possible cost (Anthropic 1,600, OpenAI 1,445 for a 2048 x 768 image, Google 258 x 16,
others 1,600), so an unreadable image never makes the estimate too low.
"""

from __future__ import annotations

import math
import struct

__all__ = [
    "UNKNOWN_IMAGE_TOKENS",
    "image_size",
    "image_tokens",
    "image_tokens_for_size",
]


def _png(data: bytes) -> tuple[int, int] | None:
    # 8-byte signature, then the IHDR chunk: length, "IHDR", width, height (big-endian)
    if len(data) >= 24 and data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        w, h = struct.unpack(">II", data[16:24])
        return w, h
    return None


def _gif(data: bytes) -> tuple[int, int] | None:
    if len(data) >= 10 and data[:6] in (b"GIF87a", b"GIF89a"):
        w, h = struct.unpack("<HH", data[6:10])
        return w, h
    return None


def _webp(data: bytes) -> tuple[int, int] | None:
    if len(data) < 30 or data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return None
    chunk = data[12:16]
    if chunk == b"VP8 ":
        # lossy: frame tag (3 bytes), start code 9d 01 2a, then 14-bit width and height
        if data[23:26] != b"\x9d\x01\x2a":
            return None
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L":
        # lossless: signature 0x2f, then 14 bits width-1 and 14 bits height-1, little-endian
        if data[20] != 0x2F:
            return None
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        # extended: 24-bit canvas width-1 and height-1 at offsets 24 and 27
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return w, h
    return None


# JPEG start-of-frame markers carry the size (not DHT C4, JPG C8 or DAC CC).
_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


def _jpeg(data: bytes) -> tuple[int, int] | None:
    if len(data) < 4 or data[:2] != b"\xff\xd8":
        return None
    i = 2
    n = len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            i += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image / start of scan before any frame header
            return None
        length = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if marker in _SOF:
            if i + 9 > n:
                return None
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return w, h
        i += 2 + length
    return None


def image_size(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` from a PNG, JPEG, GIF or WebP header; ``None`` if unreadable."""
    for parse in (_png, _jpeg, _gif, _webp):
        size = parse(data)
        if size is not None:
            w, h = size
            return (w, h) if w > 0 and h > 0 else None
    return None


UNKNOWN_IMAGE_TOKENS: dict[str, int] = {
    "anthropic": 1600,
    "openai": 170 * 8 + 85,
    "google": 258 * 16,
}
"""What an image of unknown size costs per family (its largest cost); others: 1,600."""

_ANTHROPIC_MAX_EDGE = 1568
_ANTHROPIC_MAX_PIXELS = 1_150_000


def _anthropic(w: int, h: int) -> int:
    scale = min(1.0, _ANTHROPIC_MAX_EDGE / max(w, h), math.sqrt(_ANTHROPIC_MAX_PIXELS / (w * h)))
    # the epsilon keeps 3000 * (1568 / 3000) at 1568 despite float rounding
    sw, sh = max(1, int(w * scale + 1e-9)), max(1, int(h * scale + 1e-9))
    return max(1, math.ceil(sw * sh / 750))


def _openai(w: int, h: int) -> int:
    fw, fh = float(w), float(h)
    if max(fw, fh) > 2048:
        s = 2048 / max(fw, fh)
        fw, fh = fw * s, fh * s
    if min(fw, fh) > 768:
        s = 768 / min(fw, fh)
        fw, fh = fw * s, fh * s
    # a side scaled below one pixel is still one pixel (one tile), as the resize keeps it
    tiles = math.ceil(max(1, int(fw)) / 512) * math.ceil(max(1, int(fh)) / 512)
    return 170 * tiles + 85


_GOOGLE_MAX_EDGE = 3072


def _google(w: int, h: int) -> int:
    if w <= 384 and h <= 384:
        return 258
    scale = min(1.0, _GOOGLE_MAX_EDGE / max(w, h))
    sw, sh = max(1, int(w * scale + 1e-9)), max(1, int(h * scale + 1e-9))
    return 258 * math.ceil(sw / 768) * math.ceil(sh / 768)


def image_tokens_for_size(family: str, width: int, height: int) -> int:
    """Tokens of a ``width`` x ``height`` image for a family (see the module rules)."""
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    if family == "openai":
        return _openai(width, height)
    if family == "google":
        return _google(width, height)
    return _anthropic(width, height)


def image_tokens(family: str, data: bytes) -> int:
    """Tokens of an encoded image for a family; the documented fallback if its size is unknown."""
    size = image_size(data)
    if size is None:
        return UNKNOWN_IMAGE_TOKENS.get(family, 1600)
    return image_tokens_for_size(family, *size)
