"""The Chat Completions decoder over every recorded vendor stream, split anywhere, and bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmbridge.contract import check
from lmbridge.errors import ToolArgumentsError, UpstreamProtocolError, UpstreamReportedError
from lmbridge.parts import FinishReason, TextPart, ThinkingPart, ToolCallPart, Usage
from lmbridge.sse import ServerSentEvent
from lmbridge.upstream import AssemblerOptions, decoder_for
from lmbridge.upstream.chat_completions import ChatCompletionsDecoder
from support.streams import (
    CHAT_FOLDERS,
    chunkings,
    decode_body,
    decode_lines,
    fixture_body,
    fixture_files,
    fixture_lines,
    join_text,
    join_thinking,
    sse_body,
    tool_calls,
    with_line_ends,
)

FORMAT = "chat-completions"
FIXTURES = fixture_files(CHAT_FOLDERS) + fixture_files(["openai-compatible"], "*.sse")


# -- what the stream said, computed from the raw chunks with plain json


def _chunks(rel: str) -> list[dict[str, Any]]:
    if rel.endswith(".sse"):
        body = fixture_body(rel).decode()
        datas = [ln[len("data: ") :] for ln in body.split("\n") if ln.startswith("data: ")]
        return [json.loads(d) for d in datas if d != "[DONE]"]
    return [json.loads(line) for line in fixture_lines(rel)]


def _expected(rel: str) -> dict[str, Any]:
    text: list[str] = []
    thinking: list[str] = []
    calls: dict[Any, dict[str, Any]] = {}
    usage: dict[str, Any] | None = None
    finish = None
    for chunk in _chunks(rel):
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if isinstance(content, str):
                text.append(content)
            elif isinstance(content, list):
                for item in content:
                    if item["type"] == "text":
                        text.append(item["text"])
                    elif item["type"] == "thinking":
                        thinking.extend(t["text"] for t in item["thinking"])
            thinking.append(delta.get("reasoning_content") or delta.get("reasoning") or "")
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(tc.get("index", tc.get("id")), {"args": ""})
                slot["id"] = slot.get("id") or tc.get("id")
                slot["name"] = slot.get("name") or tc["function"].get("name")
                slot["args"] += tc["function"].get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    return {
        "text": "".join(text),
        "thinking": "".join(thinking),
        "calls": [(c["id"], c["name"], json.loads(c["args"] or "{}")) for c in calls.values()],
        "usage": usage,
        "finish": finish,
    }


@pytest.mark.parametrize("rel", FIXTURES)
def test_fixture_replays_with_the_streams_content(rel: str) -> None:
    result = decode_body(FORMAT, [fixture_body(rel)])
    expected = _expected(rel)
    assert check(result.parts) == []
    assert result.error is None
    assert join_text(result.parts) == expected["text"]
    assert join_thinking(result.parts) == expected["thinking"]
    assert tool_calls(result.parts) == expected["calls"]
    assert result.raw_finish_reason == expected["finish"]
    if expected["usage"] is None:
        assert result.usage is None
    else:
        u = expected["usage"]
        assert result.usage is not None
        assert result.usage.input_tokens == u["prompt_tokens"]
        cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens")
        assert result.usage.cache_read_tokens == cached
        reasoning = (u.get("completion_tokens_details") or {}).get("reasoning_tokens")
        assert result.usage.reasoning_tokens == reasoning
        # output tokens include reasoning; a vendor that leaves it out of completion_tokens
        # (xAI) says so through its total
        outside = reasoning and u.get("total_tokens") == u["prompt_tokens"] + u["completion_tokens"] + reasoning
        assert result.usage.output_tokens == u["completion_tokens"] + (reasoning if outside else 0)


def test_fixture_spot_checks() -> None:
    """A few facts read off the recordings by eye, so the helper above is not the only judge."""
    deepseek = decode_body(FORMAT, [fixture_body("deepseek/deepseek-tool-call.chunks.txt")])
    assert tool_calls(deepseek.parts) == [
        ("call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "weather", {"location": "San Francisco"})
    ]
    assert deepseek.finish_reason is FinishReason.TOOL_CALLS
    assert deepseek.usage == Usage(339, 83, cache_read_tokens=320, reasoning_tokens=39)
    assert isinstance(deepseek.parts[0], ThinkingPart)
    assert isinstance(deepseek.parts[-1], ToolCallPart)

    mistral = decode_body(FORMAT, [fixture_body("mistral/mistral-reasoning.chunks.txt")])
    assert [type(p) for p in mistral.parts] == [ThinkingPart, ThinkingPart, TextPart]
    assert join_text(mistral.parts) == "2 + 2 = 4"

    mistral_tool = decode_body(FORMAT, [fixture_body("mistral/mistral-tool-call.chunks.txt")])
    assert tool_calls(mistral_tool.parts) == [
        ("gSIMJiOkT", "weather", {"location": "San Francisco"})
    ]

    groq = decode_body(FORMAT, [fixture_body("groq/groq-tool-call.chunks.txt")])
    assert tool_calls(groq.parts) == [("tk85n1k4m", "weather", {})]
    assert groq.usage == Usage(210, 15)

    azure = decode_body(FORMAT, [fixture_body("openai-chat/azure-model-router.1.chunks.txt")])
    assert join_text(azure.parts) == "Capital of Denmark."
    assert azure.usage == Usage(15, 78, cache_read_tokens=0, reasoning_tokens=64)
    assert azure.finish_reason is FinishReason.STOP


# -- split invariance


_BODIES = {rel: fixture_body(rel) for rel in FIXTURES}
_REFERENCE = {rel: decode_body(FORMAT, [body]).parts for rel, body in _BODIES.items()}


@pytest.mark.parametrize("rel", FIXTURES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), end=st.sampled_from([b"\n", b"\r", b"\r\n"]))
def test_any_chunking_and_line_end_gives_the_same_parts(
    rel: str, data: st.DataObject, end: bytes
) -> None:
    body = with_line_ends(_BODIES[rel], end)
    chunks = data.draw(chunkings(body))
    assert decode_body(FORMAT, chunks).parts == _REFERENCE[rel]


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_multibyte_text_split_anywhere(data: st.DataObject) -> None:
    pieces = ["Grüße ", "— ", "日本語 ", "🙂 ", "\u2028 sep"]
    lines = [json.dumps({"choices": [{"index": 0, "delta": {"content": p}}]}) for p in pieces]
    body = sse_body(lines, done=True)
    result = decode_body(FORMAT, data.draw(chunkings(body, max_cuts=len(body))))
    assert join_text(result.parts) == "".join(pieces)
    assert result.error is None


# -- variants not in the recordings


def _decode(*chunks: dict[str, Any] | str, **kwargs: Any) -> Any:
    lines = [c if isinstance(c, str) else json.dumps(c) for c in chunks]
    return decode_lines(FORMAT, lines, **kwargs)


def _delta(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _tc(
    index: int | None = None,
    id: str | None = None,
    name: str | None = None,
    args: str | None = None,
) -> dict[str, Any]:
    call: dict[str, Any] = {"function": {}}
    if index is not None:
        call["index"] = index
    if id:
        call["id"] = id
    if name:
        call["function"]["name"] = name
    if args is not None:
        call["function"]["arguments"] = args
    return call


def test_parallel_tool_calls_by_index_interleaved() -> None:
    r = _decode(
        _delta({"tool_calls": [_tc(0, "a", "read", ""), _tc(1, "b", "list", "")]}),
        _delta({"tool_calls": [_tc(1, args='{"dir":'), _tc(0, args='{"path":')]}),
        _delta({"tool_calls": [_tc(0, args='"x"}'), _tc(1, args='"."}')]}),
        _delta({}, "tool_calls"),
    )
    assert tool_calls(r.parts) == [("a", "read", {"path": "x"}), ("b", "list", {"dir": "."})]
    assert r.finish_reason is FinishReason.TOOL_CALLS


def test_calls_without_index_keyed_by_id_and_continued_without_either() -> None:
    r = _decode(
        _delta({"tool_calls": [_tc(id="a", name="read", args='{"path"')]}),
        _delta({"tool_calls": [_tc(args=': "x"}')]}),
        _delta({"tool_calls": [_tc(id="b", name="list", args="{}")]}),
        _delta({}, "tool_calls"),
    )
    assert tool_calls(r.parts) == [("a", "read", {"path": "x"}), ("b", "list", {})]


def test_reused_index_with_a_new_id_is_a_new_call() -> None:
    r = _decode(
        _delta({"tool_calls": [_tc(0, "a", "read", '{"path": "1"}')]}),
        _delta({"tool_calls": [_tc(0, "b", "read", '{"path": "2"}')]}),
        _delta({}, "tool_calls"),
    )
    assert tool_calls(r.parts) == [("a", "read", {"path": "1"}), ("b", "read", {"path": "2"})]


def test_id_repeated_on_every_fragment_is_one_call() -> None:
    r = _decode(
        _delta({"tool_calls": [_tc(0, "a", "read", '{"pa')]}),
        _delta({"tool_calls": [_tc(0, "a", "read", 'th": "1"}')]}),
    )
    assert tool_calls(r.parts) == [("a", "read", {"path": "1"})]


def test_tool_call_flushed_at_done_without_finish_reason() -> None:
    r = _decode(_delta({"tool_calls": [_tc(0, "a", "read", '{"path": "1"}')]}))
    assert tool_calls(r.parts) == [("a", "read", {"path": "1"})]
    assert r.finish_reason is None


def test_arguments_as_object_and_legacy_function_call() -> None:
    r = _decode(
        _delta(
            {
                "tool_calls": [
                    {"index": 0, "id": "a", "function": {"name": "f", "arguments": {"x": 1}}}
                ]
            }
        ),
        _delta({"function_call": {"name": "g", "arguments": '{"y"'}}),
        _delta({"function_call": {"arguments": ": 2}"}}, "function_call"),
    )
    calls = tool_calls(r.parts)
    assert [(name, inp) for _, name, inp in calls] == [("f", {"x": 1}), ("g", {"y": 2})]
    assert len({cid for cid, _, _ in calls}) == 2  # the id-less call got a generated one
    assert check(r.parts) == []


def test_reasoning_fields_and_details() -> None:
    r = _decode(
        _delta({"reasoning": "a"}),
        _delta({"reasoning_content": "b"}),
        # OpenRouter repeats the text in reasoning_details: taken once
        _delta({"reasoning": "c", "reasoning_details": [{"type": "reasoning.text", "text": "c"}]}),
        _delta({"reasoning_details": [{"type": "reasoning.text", "text": "d"}]}),
        _delta({"reasoning_details": [{"type": "reasoning.encrypted", "data": "xyz"}]}),
        _delta({"content": "answer"}, "stop"),
    )
    assert join_thinking(r.parts) == "abcd"
    encrypted = [p for p in r.parts if isinstance(p, ThinkingPart) and p.metadata]
    assert encrypted[0].metadata == {
        "reasoningDetails": [{"type": "reasoning.encrypted", "data": "xyz"}]
    }
    assert join_text(r.parts) == "answer"
    assert check(r.parts) == []


@pytest.mark.parametrize(
    ("policy", "text", "thinking"), [("part", "B", "A"), ("text", "AB", ""), ("drop", "B", "")]
)
def test_thinking_policy(policy: Any, text: str, thinking: str) -> None:
    r = _decode(
        _delta({"reasoning_content": "A"}),
        _delta({"content": "B"}),
        options=AssemblerOptions(thinking=policy),
    )
    assert (join_text(r.parts), join_thinking(r.parts)) == (text, thinking)


def test_refusal_is_text() -> None:
    r = _decode(_delta({"refusal": "I can't"}), _delta({"refusal": " help."}, "content_filter"))
    assert join_text(r.parts) == "I can't help."
    assert r.finish_reason is FinishReason.CONTENT_FILTER


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("stop", FinishReason.STOP),
        ("length", FinishReason.LENGTH),
        ("tool_calls", FinishReason.TOOL_CALLS),
        ("function_call", FinishReason.TOOL_CALLS),
        ("content_filter", FinishReason.CONTENT_FILTER),
        ("something_new", FinishReason.OTHER),
    ],
)
def test_finish_reasons(raw: str, reason: FinishReason) -> None:
    r = _decode(_delta({"content": "x"}, raw))
    assert (r.finish_reason, r.raw_finish_reason) == (reason, raw)


def test_usage_only_chunk_with_empty_choices_and_deepseek_cache_field() -> None:
    r = _decode(
        _delta({"content": "x"}, "stop"),
        {
            "choices": [],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "prompt_cache_hit_tokens": 7},
        },
    )
    assert r.usage == Usage(10, 2, cache_read_tokens=7)
    assert r.finish_reason is FinishReason.STOP


def test_only_the_first_choice_is_decoded() -> None:
    r = _decode(
        {
            "choices": [
                {"index": 1, "delta": {"content": "other"}},
                {"index": 0, "delta": {"content": "mine"}},
            ]
        }
    )
    assert join_text(r.parts) == "mine"


# -- bad input: a clear error, the parts before it kept, never a crash


def test_in_stream_error_object_ends_the_stream_keeping_parts() -> None:
    r = _decode(
        _delta({"content": "partial"}),
        {"error": {"message": "overloaded", "type": "server_error", "code": 529}},
        _delta({"content": "never"}),
    )
    assert r.parts == [TextPart("partial")]
    assert isinstance(r.error, UpstreamReportedError)
    assert "overloaded" in str(r.error)
    assert (r.error.error_type, r.error.code) == ("server_error", "529")
    assert r.finish_reason is FinishReason.ERROR


def test_truncated_json_line() -> None:
    r = _decode(_delta({"content": "ok"}), '{"choices": [{"index": 0, "delta": {"conte')
    assert r.parts == [TextPart("ok")]
    assert isinstance(r.error, UpstreamProtocolError)
    assert "not valid JSON" in str(r.error)


def test_non_json_data_line() -> None:
    r = _decode(_delta({"content": "ok"}), "Internal Server Error")
    assert r.parts == [TextPart("ok")]
    assert isinstance(r.error, UpstreamProtocolError)
    assert "Internal Server Error" in str(r.error)


def test_json_that_is_not_an_object() -> None:
    r = _decode(_delta({"content": "ok"}), "[1, 2]")
    assert isinstance(r.error, UpstreamProtocolError)
    assert r.parts == [TextPart("ok")]


def test_unknown_chunks_and_missing_fields_produce_nothing() -> None:
    r = _decode(
        {"object": "chat.completion.chunk"},
        {"choices": None},
        {"choices": [{"index": 0}]},
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]},
        {"choices": [{"index": 0, "delta": {"content": ""}}]},
        {"ping": True},
        {"choices": [{"index": 0, "delta": {"content": [{"type": "image_url", "image_url": {}}]}}]},
    )
    assert r.parts == []
    assert r.error is None


def test_mistyped_field_is_a_protocol_error_naming_it() -> None:
    r = _decode(_delta({"content": "ok"}), _delta({"content": 5}))
    assert r.parts == [TextPart("ok")]
    assert isinstance(r.error, UpstreamProtocolError)
    assert "content" in str(r.error)


def test_no_finish_no_done() -> None:
    d = ChatCompletionsDecoder()
    parts = d.feed_json(_delta({"content": "half"}))
    parts += d.close()
    assert parts == [TextPart("half")]
    assert d.error is None and d.finish_reason is None


def test_tool_arguments_that_never_complete() -> None:
    r = _decode(
        _delta({"content": "Let me look."}),
        _delta({"tool_calls": [_tc(0, "a", "read", '{"path": "x')]}),
    )
    assert r.parts == [TextPart("Let me look.")]  # the text stays, no broken call
    assert isinstance(r.error, ToolArgumentsError)
    assert "read" in str(r.error) and '{"path": "x' in str(r.error)


def test_tool_arguments_not_an_object() -> None:
    r = _decode(_delta({"tool_calls": [_tc(0, "a", "read", "[1]")]}, "tool_calls"))
    assert r.parts == []
    assert isinstance(r.error, ToolArgumentsError)


def test_tool_call_without_name() -> None:
    r = _decode(_delta({"tool_calls": [_tc(0, "a", None, "{}")]}, "tool_calls"))
    assert isinstance(r.error, ToolArgumentsError)
    assert "no name" in str(r.error)


def test_nothing_after_done() -> None:
    d = decoder_for(FORMAT)
    assert d.feed_event(ServerSentEvent(json.dumps(_delta({"content": "a"})))) == [TextPart("a")]
    assert d.feed_event(ServerSentEvent("[DONE]")) == []
    assert d.feed_event(ServerSentEvent(json.dumps(_delta({"content": "b"})))) == []
    assert d.close() == []


def test_lone_surrogate_escapes_split_across_chunks_become_one_character() -> None:
    """JavaScript servers may cut a UTF-16 pair between two deltas; the JSON then holds lone
    surrogate escapes, which orjson refuses: the text must still come out whole and valid."""
    from lmbridge.upstream import ByteStreamDecoder, decoder_for

    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"a\\ud83d"}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"content":"\\ude00b"},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    result = ByteStreamDecoder(decoder_for("chat-completions")).decode_all([body])
    assert result.error is None
    assert "".join(p.value for p in result.parts) == "a\U0001f600b"  # type: ignore[union-attr]


def test_calls_by_index_and_by_id_are_each_emitted_once_with_text_once() -> None:
    """Text between call fragments is text once; a call keyed by index and one keyed only by id
    (sent whole, then its id repeated with nothing new) are one call each."""
    r = _decode(
        _delta({"content": "Checking."}),
        _delta({"tool_calls": [_tc(0, "a", "read", '{"path"')]}),
        _delta({"content": " Still."}),
        _delta({"tool_calls": [_tc(0, args=': "x"}')]}),
        _delta({"tool_calls": [_tc(id="b", name="list", args="{}")]}),
        _delta({"tool_calls": [_tc(id="b")]}),
        _delta({}, "tool_calls"),
    )
    assert join_text(r.parts) == "Checking. Still."
    assert tool_calls(r.parts) == [("a", "read", {"path": "x"}), ("b", "list", {})]


def _chunk(delta: dict[str, Any], *, usage: bool = False) -> str:
    obj: dict[str, Any] = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    if usage:  # a chunk with usage beside its delta takes the general path, not the usual one
        obj["usage"] = {"prompt_tokens": 3, "completion_tokens": 1}
    return json.dumps(obj)


@pytest.mark.parametrize("usage", [False, True])
def test_an_empty_reasoning_content_does_not_hide_the_reasoning_beside_it(usage: bool) -> None:
    result = decode_lines(
        FORMAT, [_chunk({"reasoning_content": "", "reasoning": "think"}, usage=usage)]
    )
    assert join_thinking(result.parts) == "think"
    result = decode_lines(
        FORMAT, [_chunk({"reasoning_content": "first", "reasoning": "second"}, usage=usage)]
    )
    assert join_thinking(result.parts) == "first"  # the same text under two names: once


@pytest.mark.parametrize("usage", [False, True])
def test_a_delta_with_content_and_reasoning_or_tool_calls_keeps_both(usage: bool) -> None:
    result = decode_lines(
        FORMAT, [_chunk({"content": "Hi", "reasoning_content": "hmm"}, usage=usage)]
    )
    assert (join_text(result.parts), join_thinking(result.parts)) == ("Hi", "hmm")
    call = {"index": 0, "id": "c1", "type": "function"}
    call["function"] = {"name": "read", "arguments": '{"p": 1}'}
    result = decode_lines(FORMAT, [_chunk({"content": "Reading.", "tool_calls": [call]}, usage=usage)])
    assert join_text(result.parts) == "Reading."
    assert tool_calls(result.parts) == [("c1", "read", {"p": 1})]
    result = decode_lines(
        FORMAT, [_chunk({"role": "assistant", "content": "a", "reasoning": "r"}, usage=usage)]
    )
    assert (join_text(result.parts), join_thinking(result.parts)) == ("a", "r")
