"""docs/byok-comparison.md names a test for each row it says lmbridge has: every one exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "byok-comparison.md"


def _tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    return {
        n.name for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test")
    }  # fmt: skip


def test_every_test_the_comparison_names_exists() -> None:
    text = DOC.read_text("utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) >= 15
    named = 0
    for row in rows:
        checked = row.rstrip(" |").rsplit(" | ", 1)[-1]
        current: Path | None = None
        for ref in re.findall(r"`([^`]+)`", checked):
            path_part, _, name = ref.partition("::")
            if path_part.startswith("tests/"):
                current = ROOT / path_part
                assert current.exists(), ref
            if name:
                assert current is not None, ref
                assert name in _tests(current), f"{ref}: no such test in {current.name}"
                named += 1
        assert current is not None or "not checkable here" in checked, row
    assert named >= 20
