"""Image sizes read from real headers, and each family's image token rule."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from lmbridge.tokens.images import (
    UNKNOWN_IMAGE_TOKENS,
    image_size,
    image_tokens,
    image_tokens_for_size,
)

IMAGES = Path(__file__).parent / "data" / "images"


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("python.png", (16, 16)),
        ("python.jpg", (16, 16)),
        ("python.gif", (16, 16)),
        ("python.webp", (16, 16)),
        ("wide-3000x1000.png", (3000, 1000)),
        ("small-37x23.png", (37, 23)),
        ("tall-20x45.gif", (20, 45)),
    ],
)
def test_real_image_sizes(name: str, size: tuple[int, int]) -> None:
    assert image_size((IMAGES / name).read_bytes()) == size


def _jpeg_progressive(w: int, h: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    dqt = b"\xff\xdb" + struct.pack(">H", 67) + b"\x00" + bytes(range(1, 65))
    sof2 = b"\xff\xc2" + struct.pack(">HBHHB", 11, 8, h, w, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + dqt + b"\xff\xff" + sof2 + b"\xff\xd9"


def _webp(chunk: bytes, payload: bytes) -> bytes:
    body = b"WEBP" + chunk + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_header_variants_built_per_spec() -> None:
    assert image_size(_jpeg_progressive(640, 480)) == (640, 480)
    # WebP lossy: frame tag, start code, 14-bit sizes (upper 2 bits are the scale)
    vp8 = b"\x00\x00\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", 0xC000 | 300, 200) + bytes(8)
    assert image_size(_webp(b"VP8 ", vp8)) == (300, 200)
    # WebP lossless: 0x2f, then width-1 and height-1 in 14 bits each
    bits = (1023 - 1) | ((77 - 1) << 14)
    assert image_size(_webp(b"VP8L", b"\x2f" + struct.pack("<I", bits) + bytes(8))) == (1023, 77)
    # WebP extended: flags, reserved, 24-bit canvas width-1 and height-1
    vp8x = b"\x10\x00\x00\x00" + (4000 - 1).to_bytes(3, "little") + (50 - 1).to_bytes(3, "little")
    assert image_size(_webp(b"VP8X", vp8x) + bytes(4)) == (4000, 50)
    assert image_size(b"GIF87a" + struct.pack("<HH", 7, 9) + bytes(8)) == (7, 9)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not an image at all",
        (IMAGES / "python.png").read_bytes()[:20],  # truncated before the size
        b"\xff\xd8\xff\xda\x00\x02",  # scan before any frame header
        b"BM" + bytes(60),  # BMP: not a supported format
    ],
)
def test_unreadable_headers_have_no_size(data: bytes) -> None:
    assert image_size(data) is None


def test_anthropic_rule() -> None:
    assert image_tokens_for_size("anthropic", 750, 1) == 1
    assert image_tokens_for_size("anthropic", 1000, 1000) == 1334  # ceil(1e6 / 750)
    # 3000x1000 is scaled to 1568 wide (long edge), 522 high
    assert image_tokens_for_size("anthropic", 3000, 1000) == -(-1568 * 522 // 750)
    # a huge square is capped near 1,600 tokens
    assert 1500 <= image_tokens_for_size("anthropic", 5000, 5000) <= 1600


def test_openai_tile_rule() -> None:
    assert image_tokens_for_size("openai", 512, 512) == 170 + 85
    assert image_tokens_for_size("openai", 1024, 1024) == 4 * 170 + 85  # 768x768: 2x2 tiles
    assert image_tokens_for_size("openai", 2048, 4096) == 6 * 170 + 85  # 768x1536: 2x3 tiles
    assert image_tokens_for_size("openai", 16, 16) == 170 + 85


def test_google_rule() -> None:
    assert image_tokens_for_size("google", 384, 384) == 258
    assert image_tokens_for_size("google", 1000, 1000) == 4 * 258


def test_other_families_use_the_area_rule() -> None:
    assert image_tokens_for_size("llama", 1000, 1000) == image_tokens_for_size(
        "anthropic", 1000, 1000
    )


def test_image_tokens_from_bytes_and_fallback() -> None:
    wide = (IMAGES / "wide-3000x1000.png").read_bytes()
    assert image_tokens("openai", wide) == image_tokens_for_size("openai", 3000, 1000)
    assert image_tokens("openai", b"garbage") == UNKNOWN_IMAGE_TOKENS["openai"]
    assert image_tokens("anthropic", b"garbage") == 1600
    assert image_tokens("qwen", b"garbage") == 1600
    # the fallback is the family's largest cost: no readable image costs more
    assert image_tokens_for_size("openai", 2048, 768) <= UNKNOWN_IMAGE_TOKENS["openai"]


def test_bad_size_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="positive"):
        image_tokens_for_size("openai", 0, 10)


def test_openai_thin_images_keep_at_least_one_tile() -> None:
    # 100000 x 1 fits in 2048 x 2048 as 2048 x 0.02: the side stays 1 px, so 4 x 1 tiles
    assert image_tokens_for_size("openai", 100_000, 1) == 4 * 170 + 85
    assert image_tokens_for_size("openai", 1, 100_000) == 4 * 170 + 85
    assert image_tokens_for_size("openai", 1, 1) == 170 + 85
    # no size costs more than the documented fallback (the largest cost)
    for w, h in ((2**31, 2**31), (2**31, 1), (5000, 1900), (2048, 768)):
        assert 255 <= image_tokens_for_size("openai", w, h) <= UNKNOWN_IMAGE_TOKENS["openai"]


def test_google_rule_is_bounded_by_the_3072_limit() -> None:
    # a header claiming 2^31 x 2^31 is scaled to 3072 x 3072: 4 x 4 tiles
    assert image_tokens_for_size("google", 2**31, 2**31) == 16 * 258
    assert image_tokens_for_size("google", 100_000, 1) == 4 * 258  # 3072 x 1
    assert image_tokens_for_size("google", 3072, 3072) == 16 * 258
    assert image_tokens_for_size("google", 6144, 3072) == 4 * 2 * 258  # 3072 x 1536
    assert UNKNOWN_IMAGE_TOKENS["google"] == 16 * 258  # the fallback is still the largest


def test_anthropic_rule_is_bounded_for_absurd_headers() -> None:
    for w, h in ((2**31, 2**31), (100_000, 1), (1, 100_000)):
        assert 1 <= image_tokens_for_size("anthropic", w, h) <= 1600
