"""The Gemini decoder: recorded streams (SSE and JSON array), byte-split invariance, every part
kind, finish reasons, usage and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmbridge.contract import check
from lmbridge.errors import ToolArgumentsError, UpstreamProtocolError, UpstreamReportedError
from lmbridge.parts import DataPart, FinishReason, TextPart, ThinkingPart, ToolCallPart, Usage
from lmbridge.replay import detect_format, parse_recording, replay
from lmbridge.upstream import AssemblerOptions, ByteStreamDecoder, StreamResult
from lmbridge.upstream._citations import CITATION_MIME
from lmbridge.upstream.gemini import (
    CODE_EXECUTION_RESULT_MIME,
    EXECUTABLE_CODE_MIME,
    GeminiArrayStreamDecoder,
    GeminiDecoder,
    JSONArrayStream,
)
from support.streams import (
    chunkings,
    join_text,
    join_thinking,
    sse_body,
    tool_calls,
    with_line_ends,
)

FIXTURES = Path(__file__).parent / "fixtures" / "google"
ALL = sorted(FIXTURES.glob("*.chunks.txt"))


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def sse(objs: list[dict[str, Any]]) -> bytes:
    return sse_body([json.dumps(o, ensure_ascii=False) for o in objs])


def array(objs: list[dict[str, Any]]) -> bytes:
    """The JSON-array body Gemini sends without ``alt=sse`` (elements on their own lines)."""
    return ("[" + "\r\n,".join(json.dumps(o, ensure_ascii=False) for o in objs) + "]").encode()


def decode(chunks: bytes | list[bytes], options: AssemblerOptions | None = None) -> StreamResult:
    return ByteStreamDecoder(GeminiDecoder(options)).decode_all(
        [chunks] if isinstance(chunks, bytes) else chunks
    )


def decode_array(chunks: bytes | list[bytes]) -> StreamResult:
    return GeminiArrayStreamDecoder().decode_all([chunks] if isinstance(chunks, bytes) else chunks)


def candidate(*parts: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, **extra}
    if finish:
        cand["finishReason"] = finish
    return {"candidates": [cand], "responseId": "r1"}


# -- what each recording says, computed straight from its objects ----------------------------


def expected(objs: list[dict[str, Any]]) -> dict[str, Any]:
    text, thinking, calls, signatures = [], [], [], 0
    current: dict[str, Any] | None = None
    usage: dict[str, int] = {}
    for o in objs:
        usage.update({k: v for k, v in o.get("usageMetadata", {}).items() if isinstance(v, int)})
        for p in o["candidates"][0]["content"]["parts"]:
            signatures += "thoughtSignature" in p
            if "text" in p:
                (thinking if p.get("thought") else text).append(p["text"])
            fc = p.get("functionCall")
            if fc is None:
                continue
            if "name" in fc:
                current = {"name": fc["name"], "args": dict(fc.get("args", {}))}
                calls.append(current)
            for arg in fc.get("partialArgs", []):
                key = arg["jsonPath"].removeprefix("$.")
                assert current is not None
                current["args"][key] = current["args"].get(key, "") + arg["stringValue"]
    return {
        "text": "".join(text),
        "thinking": "".join(thinking),
        "calls": [(c["name"], c["args"]) for c in calls],
        "signatures": signatures,
        "usage": Usage(
            input_tokens=usage.get("promptTokenCount"),
            output_tokens=usage.get("candidatesTokenCount", 0) + usage.get("thoughtsTokenCount", 0),
            reasoning_tokens=usage.get("thoughtsTokenCount"),
        ),
    }


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_recording_decodes_to_what_its_objects_say(path: Path) -> None:
    objs = load(path)
    want = expected(objs)
    result = decode(sse(objs))
    assert result.error is None and check(result.parts) == []
    assert join_text(result.parts) == want["text"]
    assert join_thinking(result.parts) == want["thinking"]
    assert [(name, args) for _, name, args in tool_calls(result.parts)] == want["calls"]
    signed = [p for p in result.parts if isinstance(p, ThinkingPart) and p.metadata]
    assert len(signed) == want["signatures"]
    assert all(p.metadata and p.metadata["thoughtSignature"] for p in signed)
    assert result.usage == want["usage"]
    assert result.finish_reason == (FinishReason.TOOL_CALLS if want["calls"] else FinishReason.STOP)
    assert result.raw_finish_reason == "STOP"
    # the JSON-array form of the same stream is the same answer
    assert decode_array(array(objs)).parts == result.parts


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_replay_detects_gemini_in_both_shapes(path: Path) -> None:
    objs = load(path)
    rec = parse_recording(path.read_text("utf-8"), path.name)
    assert detect_format(rec.events) == "gemini"
    as_array = parse_recording(array(objs).decode(), "x.json")
    assert as_array.shape == "json-array"
    assert replay(as_array).result.parts == replay(rec).result.parts
    assert replay(rec).violations == []


SSE_BODIES = {p.name: sse(load(p)) for p in ALL}
ARRAY_BODIES = {p.name: array(load(p)) for p in ALL}
WHOLE = {name: decode(body).parts for name, body in SSE_BODIES.items()}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(sorted(SSE_BODIES)), end=st.sampled_from([b"\n", b"\r\n", b"\r"]))
def test_sse_byte_splits_change_nothing(data: st.DataObject, name: str, end: bytes) -> None:
    body = with_line_ends(SSE_BODIES[name], end)
    assert decode(data.draw(chunkings(body))).parts == WHOLE[name]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(sorted(ARRAY_BODIES)))
def test_json_array_byte_splits_change_nothing(data: st.DataObject, name: str) -> None:
    body = ARRAY_BODIES[name]
    assert decode_array(data.draw(chunkings(body, max_cuts=len(body) // 20))).parts == WHOLE[name]


def test_json_array_one_byte_at_a_time_with_escapes_and_multibyte_text() -> None:
    objs = [
        candidate({"text": 'a "quoted" \\ brace } ] [ { and é€😀'}),
        candidate({"text": "!"}, finish="STOP"),
    ]
    body = array(objs)
    result = decode_array([body[i : i + 1] for i in range(len(body))])
    assert result.error is None
    assert join_text(result.parts) == 'a "quoted" \\ brace } ] [ { and é€😀!'


# -- parts ----------------------------------------------------------------------------------------


def test_thoughts_are_thinking_with_one_id_per_run_and_signatures_ride_along() -> None:
    result = decode(
        sse(
            [
                candidate({"text": "plan ", "thought": True}),
                candidate({"text": "more", "thought": True, "thoughtSignature": "sig-t"}),
                candidate({"text": "Answer", "thoughtSignature": "sig-a"}),
                candidate({"text": "again", "thought": True}, finish="STOP"),
            ]
        )
    )
    parts = result.parts
    assert result.error is None and check(parts) == []
    thinking = [p for p in parts if isinstance(p, ThinkingPart)]
    assert [(p.text, p.id) for p in thinking] == [
        ("plan ", "r1:t1"),
        ("more", "r1:t1"),
        ("", "r1:s1"),
        ("again", "r1:t2"),
    ]
    assert thinking[1].metadata == {"thoughtSignature": "sig-t"}
    assert thinking[2].metadata == {"thoughtSignature": "sig-a", "signedPart": "text"}
    # the signature comes right before the part it was on
    assert parts.index(thinking[2]) + 1 == parts.index(TextPart("Answer"))
    no_thinking = decode(sse([candidate({"text": "x", "thought": True}, finish="STOP")]), AssemblerOptions(thinking="drop"))
    assert no_thinking.parts == []


def test_whole_calls_several_in_one_object_with_nested_and_array_arguments() -> None:
    args = {"where": {"city": "Paris", "tags": ["a", {"b": 1}]}, "n": 2.5, "ok": False}
    result = decode(
        sse(
            [
                candidate(
                    {"functionCall": {"name": "one", "args": args, "id": "fc-1"}, "thoughtSignature": "s"},
                    {"functionCall": {"name": "two", "args": {}}},
                    {"functionCall": {"name": "three"}},
                ),
                candidate({"text": ""}, finish="STOP"),
            ]
        )
    )
    assert result.error is None and check(result.parts) == []
    assert tool_calls(result.parts)[0] == ("fc-1", "one", args)
    assert [(n, a) for _, n, a in tool_calls(result.parts)[1:]] == [("two", {}), ("three", {})]
    assert result.finish_reason is FinishReason.TOOL_CALLS


def test_streamed_arguments_build_nested_paths_indexes_and_typed_values() -> None:
    def more(*args: dict[str, Any]) -> dict[str, Any]:
        return candidate({"functionCall": {"partialArgs": list(args), "willContinue": True}})

    result = decode(
        sse(
            [
                candidate({"functionCall": {"name": "f", "willContinue": True}}),
                more({"jsonPath": "$.a.b", "stringValue": "hel", "willContinue": True}),
                more({"jsonPath": "$.a.b", "stringValue": "lo"}),
                more({"jsonPath": "$.list[1]", "numberValue": 3}, {"jsonPath": "$.list[0]", "boolValue": True}),
                more({"jsonPath": "$['odd key'].x[0].y", "nullValue": None}),
                more({"jsonPath": "$.s", "stringValue": "one"}),
                more({"jsonPath": "$.s2", "stringValue": "two"}),
                candidate({"functionCall": {}}, finish="STOP"),
            ]
        )
    )
    assert result.error is None
    assert tool_calls(result.parts) == [
        (
            "call_1",
            "f",
            {"a": {"b": "hello"}, "list": [True, 3], "odd key": {"x": [{"y": None}]}, "s": "one", "s2": "two"},
        )
    ]


def test_a_streamed_call_without_its_closing_part_is_emitted_when_the_stream_finished() -> None:
    result = decode(
        sse(
            [
                candidate({"functionCall": {"name": "f", "willContinue": True}}),
                candidate({"functionCall": {"partialArgs": [{"jsonPath": "$.x", "stringValue": "1"}], "willContinue": True}}, finish="STOP"),
            ]
        )
    )
    assert result.error is None and tool_calls(result.parts) == [("call_1", "f", {"x": "1"})]


def test_a_stream_cut_inside_a_streamed_call_drops_it_with_an_error() -> None:
    result = decode(
        sse(
            [
                candidate({"text": "Let me look."}),
                candidate({"functionCall": {"name": "f", "willContinue": True}}),
                candidate({"functionCall": {"partialArgs": [{"jsonPath": "$.x", "stringValue": "pa", "willContinue": True}], "willContinue": True}}),
            ]
        )
    )
    assert isinstance(result.error, ToolArgumentsError) and "'f'" in str(result.error)
    assert result.parts == [TextPart("Let me look.")] and check(result.parts) == []


def test_code_execution_inline_data_files_and_grounding_are_data_never_calls() -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
    import base64

    grounding = {
        "groundingChunks": [
            {"web": {"uri": "https://a.example", "title": "A"}},
            {"retrievedContext": {"uri": "gs://b", "title": "B"}},
        ]
    }
    result = decode(
        sse(
            [
                candidate({"executableCode": {"language": "PYTHON", "code": "print(1)"}}),
                candidate({"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}}),
                candidate({"inlineData": {"mimeType": "image/png", "data": base64.b64encode(png).decode()}}),
                candidate({"fileData": {"mimeType": "application/pdf", "fileUri": "gs://f.pdf"}}),
                candidate({"text": "Done."}, groundingMetadata=grounding),
                candidate({"text": ""}, finish="STOP", groundingMetadata=grounding,
                          citationMetadata={"citationSources": [{"uri": "https://c.example", "license": "mit"}]}),
            ]
        )
    )
    assert result.error is None and check(result.parts) == [] and tool_calls(result.parts) == []
    data = [p for p in result.parts if isinstance(p, DataPart)]
    assert [p.mime_type for p in data] == [
        EXECUTABLE_CODE_MIME,
        CODE_EXECUTION_RESULT_MIME,
        "image/png",
        "application/vnd.lmbridge.file-url+json",
        CITATION_MIME,
        CITATION_MIME,
        CITATION_MIME,
    ]
    assert data[0].decode_json() == {"language": "PYTHON", "code": "print(1)"}
    assert data[2].data == png
    assert data[3].decode_json() == {"url": "gs://f.pdf", "mediaType": "application/pdf"}
    cites = [p.decode_json() for p in data[4:]]
    assert [(c.get("url"), c.get("title")) for c in cites] == [
        ("https://a.example", "A"),
        ("gs://b", "B"),
        ("https://c.example", None),
    ]
    assert cites[2]["license"] == "mit"
    assert result.finish_reason is FinishReason.STOP


def test_usage_counts_thoughts_as_output_and_cached_prompt_tokens() -> None:
    usage = {
        "promptTokenCount": 100,
        "cachedContentTokenCount": 60,
        "candidatesTokenCount": 7,
        "thoughtsTokenCount": 20,
        "toolUsePromptTokenCount": 5,
        "totalTokenCount": 132,
    }
    result = decode(sse([{**candidate({"text": "x"}, finish="STOP"), "usageMetadata": usage}]))
    assert result.usage == Usage(
        input_tokens=105, output_tokens=27, cache_read_tokens=60, reasoning_tokens=20
    )


_COUNT_KEYS = (
    "promptTokenCount",
    "candidatesTokenCount",
    "thoughtsTokenCount",
    "cachedContentTokenCount",
    "toolUsePromptTokenCount",
)
_COUNT = st.one_of(
    st.integers(0, 10**6),
    st.integers(-5, -1),  # not a count: an earlier value stays
    st.sampled_from([3.0, 2.5, True, "7", None, [1]]),
)
_REPORT: st.SearchStrategy[Any] = st.one_of(
    st.dictionaries(st.sampled_from([*_COUNT_KEYS, "totalTokenCount", "trafficType"]), _COUNT),
    st.sampled_from([None, [], "x", 3]),  # not an object: ignored
)


def _expected_usage(reports: list[Any]) -> Usage | None:
    """Each report read in turn, each field's latest valid count winning (the rule
    update_counts states), made into a Usage as the decoder makes it."""
    counts: dict[str, int] = {}
    for report in reports:
        if not isinstance(report, dict):
            continue
        for key in _COUNT_KEYS:
            value = report.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if value < 0 or (isinstance(value, float) and not value.is_integer()):
                continue
            counts[key] = int(value)
    if not counts:
        return None
    prompt = counts.get("promptTokenCount")
    cands = counts.get("candidatesTokenCount")
    thoughts = counts.get("thoughtsTokenCount")
    return Usage(
        input_tokens=None if prompt is None else prompt + counts.get("toolUsePromptTokenCount", 0),
        output_tokens=None if cands is None and thoughts is None else (cands or 0) + (thoughts or 0),
        cache_read_tokens=counts.get("cachedContentTokenCount"),
        reasoning_tokens=thoughts,
    )


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_REPORT, max_size=80), st.sets(st.integers(0, 80)))
def test_usage_is_each_fields_latest_valid_count_even_when_asked_midway(
    reports: list[Any], asked: set[int]
) -> None:
    # Reports are read only when the usage is asked for (newest first): asking after any
    # event, or never until the end, and streams longer than the decoder keeps unread, give
    # the usage that reading every report in turn gives.
    decoder = GeminiDecoder()
    for i, report in enumerate(reports):
        obj = candidate({"text": "x"})
        if report is not None:
            obj["usageMetadata"] = report
        decoder.feed_json(obj)
        if i in asked:
            assert decoder.usage == _expected_usage(reports[: i + 1])
    decoder.feed_json(candidate(finish="STOP"))
    decoder.close()
    assert decoder.usage == _expected_usage(reports)


# -- finish reasons and errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("MAX_TOKENS", FinishReason.LENGTH),
        ("SAFETY", FinishReason.CONTENT_FILTER),
        ("RECITATION", FinishReason.CONTENT_FILTER),
        ("PROHIBITED_CONTENT", FinishReason.CONTENT_FILTER),
        ("OTHER", FinishReason.OTHER),
        ("SOMETHING_NEW", FinishReason.OTHER),
    ],
)
def test_finish_reasons(reason: str, finish: FinishReason) -> None:
    result = decode(sse([candidate({"text": "partial"}, finish=reason)]))
    assert result.error is None
    assert (result.finish_reason, result.raw_finish_reason) == (finish, reason)
    assert result.parts == [TextPart("partial")]


@pytest.mark.parametrize("reason", ["MALFORMED_FUNCTION_CALL", "MISSING_THOUGHT_SIGNATURE", "TOO_MANY_TOOL_CALLS"])
def test_protocol_finish_reasons_are_errors_that_say_why(reason: str) -> None:
    result = decode(
        sse([candidate({"text": "Calling"}), candidate(finish=reason, finishMessage="bad call: x(")])
    )
    assert isinstance(result.error, UpstreamReportedError)
    assert result.error.code == reason and reason in str(result.error) and "bad call" in str(result.error)
    assert result.parts == [TextPart("Calling")]
    assert result.finish_reason is FinishReason.ERROR


def test_a_blocked_prompt_is_an_error_naming_the_reason() -> None:
    blocked = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {"promptTokenCount": 8}}
    result = decode(sse([blocked]))
    assert isinstance(result.error, UpstreamReportedError)
    assert result.error.error_type == "prompt_blocked" and result.error.code == "PROHIBITED_CONTENT"
    assert "blocked" in str(result.error) and result.parts == []


def test_an_error_object_in_the_stream_is_reported_with_its_status() -> None:
    err = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    result = decode(sse([candidate({"text": "a"}), err]))
    assert isinstance(result.error, UpstreamReportedError)
    assert (result.error.error_type, result.error.code) == ("UNAVAILABLE", "503")
    assert "overloaded" in str(result.error) and result.parts == [TextPart("a")]


def test_malformed_json_keeps_what_came_before() -> None:
    body = sse([candidate({"text": "kept"})]) + b"data: {not json\n\n" + sse([candidate({"text": "lost"}, finish="STOP")])
    result = decode(body)
    assert isinstance(result.error, UpstreamProtocolError) and "not valid JSON" in str(result.error)
    assert result.parts == [TextPart("kept")]


def test_wrong_types_are_named() -> None:
    result = decode(sse([candidate({"text": "ok"}), candidate({"text": 5}), candidate({"text": "no"}, finish="STOP")]))
    assert isinstance(result.error, UpstreamProtocolError) and "not a string" in str(result.error)
    assert result.parts == [TextPart("ok")]
    bad_path = decode(
        sse(
            [
                candidate({"functionCall": {"name": "f", "willContinue": True}}),
                candidate({"functionCall": {"partialArgs": [{"jsonPath": "x.y", "stringValue": "1"}]}}),
            ]
        )
    )
    assert isinstance(bad_path.error, UpstreamProtocolError) and "jsonPath" in str(bad_path.error)
    assert tool_calls(bad_path.parts) == []


def test_a_stream_without_a_finish_reason_was_cut_off() -> None:
    result = decode(sse([candidate({"text": "half"})]))
    assert isinstance(result.error, UpstreamProtocolError) and "finishReason" in str(result.error)
    assert result.parts == [TextPart("half")]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"candidates": []}', "expected '['"),
        (b'[{"candidates": []} {"x": 1}]', "expected ',' or ']'"),
        (b"[1]", "expected an object or ']'"),
        (b'[{"candidates": []}] trailing', "after the closing ']'"),
        (b'[{"candidates": [{"content": {"parts": [{"text": "cut', "cut inside an element"),
        (b"", "empty"),
    ],
)
def test_broken_json_arrays_are_named(body: bytes, message: str) -> None:
    with pytest.raises(UpstreamProtocolError, match=message.replace("[", r"\[").replace("]", r"\]")):
        stream = JSONArrayStream()
        stream.feed(body)
        stream.close()
    result = decode_array(body)
    assert isinstance(result.error, UpstreamProtocolError)


def test_an_array_missing_only_its_closing_bracket_after_the_finish_loses_nothing() -> None:
    objs = [candidate({"text": "a"}), candidate({"text": "b"}, finish="STOP")]
    body = array(objs)[:-1]
    assert decode_array(body).error is None
    cut = array(objs[:1])[:-1]
    result = decode_array(cut)
    assert isinstance(result.error, UpstreamProtocolError) and result.parts == [TextPart("a")]


def test_an_array_broken_midway_keeps_the_parts_before() -> None:
    body = b"[" + json.dumps(candidate({"text": "a"})).encode() + b",]"
    result = decode_array(body)
    assert isinstance(result.error, UpstreamProtocolError) and "expected an object" in str(result.error)
    assert result.parts == [TextPart("a")]
    assert isinstance(result.parts[0], TextPart)
    assert not any(isinstance(p, ToolCallPart) for p in result.parts)


def test_a_streamed_string_at_one_path_then_one_at_another_stay_apart() -> None:
    def more(*args: dict[str, Any]) -> dict[str, Any]:
        return candidate({"functionCall": {"partialArgs": list(args), "willContinue": True}})

    result = decode(
        sse(
            [
                candidate({"functionCall": {"name": "f", "willContinue": True}}),
                more({"jsonPath": "$.a", "stringValue": "hel", "willContinue": True}),
                more({"jsonPath": "$.b", "stringValue": "wor", "willContinue": True}),
                more({"jsonPath": "$.b", "stringValue": "ld"}),
                more({"jsonPath": "$.c", "stringValue": "x", "willContinue": True}),
                more({"jsonPath": "$.a", "stringValue": "new"}),  # $.a again: a new value
                candidate({"functionCall": {}}, finish="STOP"),
            ]
        )
    )
    assert result.error is None
    assert tool_calls(result.parts) == [("call_1", "f", {"a": "new", "b": "world", "c": "x"})]
