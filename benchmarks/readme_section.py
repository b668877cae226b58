"""Write a benchmark's headline into the README's Measurements section.

The section holds one block per benchmark between ``<!-- <name>: ... -->`` and ``<!-- /<name> -->``
lines; the benchmark that owns the block rewrites it from the run it just made, so that the
README's figures are generated like the reports they summarise.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def write_block(name: str, text: str, readme: Path = README) -> bool:
    """Replace the block ``name`` with ``text`` (one bullet, rewrapped to 100 columns); whether
    the README has such a block."""
    source = readme.read_text(encoding="utf-8")
    pattern = re.compile(
        rf"(<!-- {re.escape(name)}:[^\n]*-->\n)(.*?)(<!-- /{re.escape(name)} -->)", re.S
    )
    if not pattern.search(source):
        return False
    text = textwrap.fill(
        " ".join(text.split()),
        width=100,
        initial_indent="",
        subsequent_indent="  ",
        break_on_hyphens=False,  # (names such as ai-sdk stay whole)
    )
    updated = pattern.sub(lambda m: m.group(1) + text + "\n" + m.group(3), source)
    readme.write_text(updated, encoding="utf-8")
    return True
