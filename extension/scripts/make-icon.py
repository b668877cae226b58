"""Draws extension/media/icon.png (128x128): a bridge arch over a deck on a rounded square.

Run with any Python that has Pillow (not a dependency of lmbridge):
    python extension/scripts/make-icon.py
Drawn at 4x and scaled down, for smooth edges.
"""

from __future__ import annotations

import math
from pathlib import Path

from PIL import Image, ImageDraw

SIZE, SCALE = 128, 4
S = SIZE * SCALE
OUT = Path(__file__).resolve().parents[1] / "media" / "icon.png"

BG_TOP, BG_BOTTOM = (28, 61, 110), (14, 32, 64)
ARCH, DECK, HANGER, WATER = (255, 196, 61), (240, 244, 250), (240, 244, 250), (93, 156, 236)


def px(v: float) -> int:
    return round(v * SCALE)


def main() -> None:
    img = Image.new("RGBA", (S, S), (0, 0, 0, 0))
    # background: a vertical gradient inside a rounded square
    grad = Image.new("RGBA", (S, S))
    g = ImageDraw.Draw(grad)
    for y in range(S):
        t = y / (S - 1)
        g.line([(0, y), (S, y)], fill=(*(round(a + (b - a) * t) for a, b in zip(BG_TOP, BG_BOTTOM, strict=True)), 255))
    mask = Image.new("L", (S, S), 0)
    ImageDraw.Draw(mask).rounded_rectangle([0, 0, S - 1, S - 1], radius=px(26), fill=255)
    img.paste(grad, (0, 0), mask)
    d = ImageDraw.Draw(img)

    left, right, deck_y, top_y = 18, 110, 82, 34
    # hangers from the arch down to the deck
    cx, half = (left + right) / 2, (right - left) / 2
    for i in range(1, 8):
        x = left + (right - left) * i / 8
        u = (x - cx) / half
        y = deck_y - (deck_y - top_y) * (1 - u * u)
        d.line([(px(x), px(y)), (px(x), px(deck_y))], fill=HANGER, width=px(2.2))
    # the arch: a parabola, drawn as a thick polyline with round joints
    pts = []
    for k in range(121):
        u = -1 + 2 * k / 120
        pts.append((px(cx + u * half), px(deck_y - (deck_y - top_y) * (1 - u * u))))
    d.line(pts, fill=ARCH, width=px(7), joint="curve")
    for p in (pts[0], pts[-1]):
        r = px(3.5)
        d.ellipse([p[0] - r, p[1] - r, p[0] + r, p[1] + r], fill=ARCH)
    # the deck, end to end
    d.rounded_rectangle([px(10), px(deck_y - 3), px(118), px(deck_y + 3)], radius=px(3), fill=DECK)
    # water: two short waves under the deck
    for row, (x0, x1) in enumerate([(30, 98), (44, 84)]):
        y = 98 + row * 9
        wave = [(px(x), px(y + 2.2 * math.sin((x - x0) / 5.0))) for x in range(x0, x1 + 1)]
        d.line(wave, fill=WATER, width=px(3), joint="curve")

    img.resize((SIZE, SIZE), Image.Resampling.LANCZOS).save(OUT, optimize=True)
    print(OUT)


if __name__ == "__main__":
    main()
