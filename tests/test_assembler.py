"""The shared part assembler: the rules every decoder inherits."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lmbridge.contract import check
from lmbridge.errors import ToolArgumentsError, UpstreamReportedError
from lmbridge.parts import FinishReason, TextPart, ThinkingPart, ToolCallPart, Usage
from lmbridge.upstream import AssemblerOptions, PartAssembler


def test_text_deltas_become_parts_and_empty_deltas_nothing() -> None:
    asm = PartAssembler()
    asm.text("Hel")
    asm.text("")
    asm.text(None)
    asm.text("lo")
    assert asm.drain() == [TextPart("Hel"), TextPart("lo")]
    assert asm.drain() == []


def test_tool_call_is_emitted_once_complete_with_object_input() -> None:
    asm = PartAssembler()
    asm.tool_start(0, call_id="c1", name="read")
    asm.tool_delta(0, '{"pa')
    assert asm.drain() == []  # never a half tool call
    asm.tool_delta(0, 'th": "a.py"}')
    asm.tool_end(0)
    assert asm.drain() == [ToolCallPart("c1", "read", {"path": "a.py"})]


def test_empty_arguments_are_an_empty_object() -> None:
    asm = PartAssembler()
    asm.tool_start("k", call_id="c", name="now")
    asm.tool_end("k")
    assert asm.drain() == [ToolCallPart("c", "now", {})]


def test_final_arguments_win_over_fragments() -> None:
    asm = PartAssembler()
    asm.tool_delta(1, '{"a": 1', call_id="c", name="t")
    asm.tool_end(1, arguments={"a": 2})
    assert asm.drain() == [ToolCallPart("c", "t", {"a": 2})]


def test_calls_still_open_at_close_are_flushed() -> None:
    asm = PartAssembler()
    asm.tool_delta(0, '{"x": 1}', call_id="a", name="t")
    asm.tool_delta(1, "{}", call_id="b", name="u")
    asm.close()
    assert asm.drain() == [ToolCallPart("a", "t", {"x": 1}), ToolCallPart("b", "u", {})]
    assert asm.error is None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [('{"x": ', "not valid JSON"), ("[1, 2]", "a JSON list, not an object"), ('"s"', "a JSON str")],
)
def test_bad_arguments_end_the_stream_with_a_named_error(raw: str, reason: str) -> None:
    asm = PartAssembler()
    asm.text("before")
    asm.tool_delta(0, raw, call_id="c9", name="search")
    asm.close()
    assert asm.drain() == [TextPart("before")]  # what was produced stays; no broken call
    assert isinstance(asm.error, ToolArgumentsError)
    assert "search" in str(asm.error) and "c9" in str(asm.error) and reason in str(asm.error)
    assert asm.error.raw_arguments == raw
    assert asm.finish_reason is FinishReason.ERROR


def test_missing_and_duplicate_call_ids_become_unique() -> None:
    asm = PartAssembler(AssemblerOptions(call_id_prefix="lmb-"))
    asm.tool_call("x", "t", "{}")
    asm.tool_call("x", "t", "{}")
    asm.tool_call(None, "t", "{}")
    asm.tool_call("", "t", {})
    parts = asm.drain()
    ids = [p.call_id for p in parts if isinstance(p, ToolCallPart)]
    assert ids[0] == "lmb-x"
    assert len(set(ids)) == 4 and all(i.startswith("lmb-") for i in ids)
    assert check(parts) == []


def test_tool_call_without_a_name_is_an_error_not_a_part() -> None:
    asm = PartAssembler()
    asm.tool_call("c", None, "{}")
    assert asm.drain() == []
    assert isinstance(asm.error, ToolArgumentsError)
    assert "no name" in str(asm.error)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("part", [ThinkingPart("hmm", "r1"), ThinkingPart("", "r1", {"signature": "s"})]),
        ("text", [TextPart("hmm")]),
        ("drop", []),
    ],
)
def test_thinking_policy(policy: str, expected: list[object]) -> None:
    asm = PartAssembler(AssemblerOptions(thinking=policy))  # type: ignore[arg-type]
    asm.thinking("hmm", id="r1")
    asm.thinking("", id="r1", metadata={"signature": "s"})
    asm.thinking("")
    assert asm.drain() == expected


def test_error_keeps_parts_drops_pending_calls_and_stops_everything() -> None:
    asm = PartAssembler()
    asm.text("partial")
    asm.tool_delta(0, '{"a": 1}', call_id="c", name="t")
    asm.fail(UpstreamReportedError("overloaded", error_type="overloaded_error"))
    asm.text("late")
    asm.tool_call("d", "t", "{}")
    asm.close()
    assert asm.drain() == [TextPart("partial")]
    assert isinstance(asm.error, UpstreamReportedError)
    assert asm.closed


def test_usage_merges_field_by_field() -> None:
    asm = PartAssembler()
    assert asm.usage is None
    asm.set_usage(Usage(input_tokens=10, cache_read_tokens=4))
    asm.set_usage(Usage(output_tokens=7))
    assert asm.usage == Usage(input_tokens=10, output_tokens=7, cache_read_tokens=4)


def test_a_cut_off_stream_never_turns_a_half_received_call_into_empty_input() -> None:
    asm = PartAssembler()
    asm.text("Deleting now.")
    asm.tool_start(0, call_id="c1", name="delete_files")  # the arguments never came
    asm.close()  # end of input, no finish reason: the stream was cut
    assert asm.drain() == [TextPart("Deleting now.")]
    assert isinstance(asm.error, ToolArgumentsError)
    assert "delete_files" in str(asm.error) and "ended before its arguments" in str(asm.error)


def test_a_finished_stream_may_end_a_call_without_arguments() -> None:
    asm = PartAssembler()
    asm.tool_start(0, call_id="c1", name="now")
    asm.set_finish(FinishReason.TOOL_CALLS, "tool_calls")
    asm.close()
    assert asm.drain() == [ToolCallPart("c1", "now", {})]
    asm2 = PartAssembler()
    asm2.tool_start(0, call_id="c2", name="now")
    asm2.close(finished=True)  # an end event said the stream is complete
    assert asm2.drain() == [ToolCallPart("c2", "now", {})]


def test_complete_json_arguments_survive_a_cut() -> None:
    asm = PartAssembler()
    asm.tool_delta(0, '{"path": "a.py"}', call_id="c", name="read")
    asm.close()
    assert asm.drain() == [ToolCallPart("c", "read", {"path": "a.py"})]
    assert asm.error is None


def test_arguments_nested_too_deeply_are_an_error_not_a_crash() -> None:
    asm = PartAssembler()
    asm.tool_call("c", "f", '{"a":' + "[" * 100_000 + "]" * 100_000 + "}")
    assert isinstance(asm.error, ToolArgumentsError) and "nested more than 100" in str(asm.error)
    asm.set_finish(FinishReason.TOOL_CALLS)
    assert asm.finish_reason is FinishReason.ERROR  # the error stays the final word


def _deep(depth: int) -> dict[str, Any]:
    """An object ``depth`` levels deep (arrays inside it)."""
    value: Any = []
    for _ in range(depth - 2):
        value = [value]
    return {"a": value}


@pytest.mark.parametrize("as_text", [True, False], ids=["json-text", "parsed-object"])
def test_arguments_deeper_than_the_protocol_carries_are_refused_when_parsed(as_text: bool) -> None:
    # 150 levels parse fine with either parser, but the tool call would come back in the next
    # request inside the protocol's wrapping, past the frame limit (200), and fail it there.
    args: Any = _deep(150)
    asm = PartAssembler()
    asm.text("before")
    asm.tool_call("c", "f", json.dumps(args) if as_text else args)
    error = asm.error
    assert isinstance(error, ToolArgumentsError)
    assert "nested more than 100 levels deep" in str(error) and error.tool_name == "f"
    assert [type(p) for p in asm.drain()] == [TextPart]  # what came before stays, no call


def test_arguments_as_deep_as_the_protocol_carries_pass() -> None:
    asm = PartAssembler()
    asm.tool_call("c", "f", json.dumps(_deep(100)))
    asm.tool_call("d", "f", _deep(100))
    assert asm.error is None
    calls = asm.drain()
    assert [type(p) for p in calls] == [ToolCallPart, ToolCallPart]


def test_a_surrogate_pair_cut_between_deltas_is_joined() -> None:
    asm = PartAssembler()
    asm.text("a\ud83d")
    asm.text("\ude00b")
    asm.text("\udc00 lone")
    asm.text("end\ud83d")
    asm.close(finished=True)
    text = "".join(p.value for p in asm.drain() if isinstance(p, TextPart))
    assert text == "a\U0001f600b\ufffd loneend\ufffd"
    text.encode("utf-8")  # valid Unicode throughout


def test_usage_from_a_report_is_made_when_asked_for_and_merges_in_order() -> None:
    asm = PartAssembler()
    counts = {"out": 1}
    calls = []

    def report() -> Usage:
        calls.append(counts["out"])
        return Usage(output_tokens=counts["out"])

    asm.set_usage(Usage(input_tokens=5, output_tokens=0))
    asm.set_usage_from(report)
    counts["out"] = 2
    asm.set_usage_from(report)  # the same report again: not added twice
    assert calls == []
    assert asm.usage == Usage(input_tokens=5, output_tokens=2)
    assert calls == [2]
    counts["out"] = 7
    asm.set_usage_from(report)  # after a read: counted again
    asm.set_usage(Usage(reasoning_tokens=3))
    assert asm.usage == Usage(input_tokens=5, output_tokens=7, reasoning_tokens=3)
    assert calls == [2, 7]


def test_text_fast_path_is_off_while_a_surrogate_is_held_or_the_stream_is_over() -> None:
    asm = PartAssembler()
    assert asm.plain
    asm.text("a\ud83d")  # a high surrogate held for the next delta
    assert not asm.plain
    asm.text("\ude00b")
    assert asm.plain
    assert asm.drain() == [TextPart("a"), TextPart("\U0001f600b")]
    asm.close()
    assert not asm.plain


@pytest.mark.parametrize("blank", [" ", "\n\t ", "  \n"])
def test_a_cut_off_call_whose_arguments_are_only_whitespace_is_an_error(blank: str) -> None:
    asm = PartAssembler()
    asm.tool_delta(0, blank, call_id="c1", name="delete_files")
    asm.close()  # cut off: whitespace is no more an argument object than nothing is
    assert asm.drain() == []
    assert isinstance(asm.error, ToolArgumentsError)
    assert "ended before its arguments" in str(asm.error)


def test_a_held_half_surrogate_comes_out_before_the_tool_call_that_follows_it() -> None:
    asm = PartAssembler()
    asm.text("see\ud83d")  # a high surrogate held for a low one that never comes
    asm.tool_call("c1", "read", {"path": "a.py"})
    asm.close(finished=True)
    assert asm.drain() == [
        TextPart("see"),
        TextPart("\ufffd"),
        ToolCallPart("c1", "read", {"path": "a.py"}),
    ]
