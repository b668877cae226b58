"""The stream contract checker finds each kind of violation, at the right position."""

from __future__ import annotations

from lmbridge.contract import ContractChecker, check
from lmbridge.parts import DataPart, TextPart, ThinkingPart, ToolCallPart, ToolResultPart


def rules(parts: list[object], **kw: bool) -> list[tuple[int, str]]:
    return [(v.index, v.rule) for v in check(parts, **kw)]


def test_a_good_stream_has_no_violations() -> None:
    good = [
        ThinkingPart("plan", "r"),
        ThinkingPart("", "r", {"signature": "x"}),
        TextPart("hi"),
        ToolCallPart("a", "t", {}),
        ToolCallPart("b", "t", {"k": [1]}),
        DataPart.json({"url": "u"}, "application/vnd.vscode.citation+json"),
    ]
    assert check(good) == []


def test_each_rule() -> None:
    assert rules([TextPart("a"), ToolResultPart("c", [])]) == [(1, "tool-result-in-response")]
    assert rules([ToolCallPart("c", "t", [1, 2])]) == [(0, "tool-input-not-object")]  # type: ignore[arg-type]
    assert rules([ToolCallPart("c", "t", {}), ToolCallPart("c", "u", {})]) == [(1, "duplicate-call-id")]
    assert rules([ToolCallPart("", "t", {})]) == [(0, "empty-call-id")]
    assert rules([ToolCallPart("c", "", {})]) == [(0, "empty-tool-name")]
    assert rules([TextPart("")]) == [(0, "empty-text")]
    assert rules([ThinkingPart("")]) == [(0, "empty-thinking")]
    assert rules([ThinkingPart("x")], allow_thinking=False) == [(0, "thinking-not-allowed")]
    assert rules([DataPart(b"", "not a mime")]) == [(0, "invalid-mime")]
    assert rules(["text"]) == [(0, "not-a-part")]


def test_nothing_after_end_or_cancellation() -> None:
    c = ContractChecker()
    c.observe(TextPart("a"))
    c.cancel()
    found = c.observe(TextPart("b"))
    assert [(v.index, v.rule) for v in found] == [(1, "part-after-end")]
    assert "cancelled" in found[0].message
