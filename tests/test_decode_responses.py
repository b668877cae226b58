"""The Responses API / OpenResponses decoder over every recorded stream, split anywhere, and bad input."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmbridge.contract import check
from lmbridge.errors import ToolArgumentsError, UpstreamProtocolError, UpstreamReportedError
from lmbridge.parts import DataPart, FinishReason, TextPart, ThinkingPart, ToolCallPart, Usage
from lmbridge.upstream import AssemblerOptions, decoder_for
from lmbridge.upstream.responses import CITATION_MIME, ResponsesDecoder, image_mime
from support.streams import (
    RESPONSES_FOLDERS,
    chunkings,
    data_parts,
    decode_body,
    decode_lines,
    fixture_body,
    fixture_files,
    fixture_lines,
    join_text,
    join_thinking,
    tool_calls,
    with_line_ends,
)

FORMAT = "responses"
WRAPPER = "openai-responses/parallel-tool-call-wrapper.1.chunks.txt"
ERROR = "openai-responses/openai-error.1.chunks.txt"
FIXTURES = [f for f in fixture_files(RESPONSES_FOLDERS) if f not in (WRAPPER, ERROR)]


# -- what the stream said, computed from the raw events with plain json


def _expected(rel: str) -> dict[str, Any]:
    text: list[str] = []
    thinking: list[str] = []
    calls: list[tuple[str, str, dict[str, Any]]] = []
    images: list[bytes] = []
    citations = 0
    usage = None
    for line in fixture_lines(rel):
        event = json.loads(line)
        kind = event["type"]
        if kind == "response.output_text.annotation.added":
            citations += 1
        elif kind == "response.completed":
            usage = event["response"]["usage"]
        elif kind == "response.output_item.done":
            item = event["item"]
            if item["type"] == "message":
                for content in item["content"]:
                    text.append(content.get("text") or content.get("refusal") or "")
            elif item["type"] == "reasoning":
                thinking.append("\n\n".join(s["text"] for s in item.get("summary") or []))
                thinking.extend(c["text"] for c in item.get("content") or [])
            elif item["type"] == "function_call":
                calls.append((item["call_id"], item["name"], json.loads(item["arguments"])))
            elif item["type"] == "custom_tool_call":
                calls.append((item["call_id"], item["name"], {"input": item["input"]}))
            elif item["type"] == "image_generation_call":
                images.append(item["result"])
    return {
        "text": "".join(text),
        "thinking": "".join(thinking),
        "calls": calls,
        "usage": usage,
        "images": images,
        "citations": citations,
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
    u = expected["usage"]
    assert result.usage == Usage(
        u["input_tokens"],
        u["output_tokens"],
        cache_read_tokens=u["input_tokens_details"]["cached_tokens"],
        reasoning_tokens=u["output_tokens_details"]["reasoning_tokens"],
    )
    wanted = FinishReason.TOOL_CALLS if expected["calls"] else FinishReason.STOP
    if "reasoning-encrypted" in rel:  # four responses in one body: the last one only talks
        wanted = FinishReason.STOP
    assert result.finish_reason is wanted
    datas = data_parts(result.parts)
    assert len([d for d in datas if d.mime_type == CITATION_MIME]) == expected["citations"]
    assert len([d for d in datas if d.mime_type.startswith("image/")]) == len(expected["images"])


def test_text_deltas_and_done_text_agree() -> None:
    """Where the recording streamed every delta, the text is exactly their concatenation."""
    rel = "open-responses/lmstudio-basic.1.chunks.txt"
    deltas = "".join(
        e["delta"]
        for e in map(json.loads, fixture_lines(rel))
        if e["type"] == "response.output_text.delta"
    )
    result = decode_body(FORMAT, [fixture_body(rel)])
    assert join_text(result.parts) == deltas
    assert len(result.parts) == sum(
        1 for line in fixture_lines(rel) if ".output_text.delta" in line
    )


def test_done_text_completes_what_the_deltas_missed() -> None:
    """openai-phase streams only the first deltas of each message; the done events finish it."""
    rel = "openai-responses/openai-phase.1.chunks.txt"
    result = decode_body(FORMAT, [fixture_body(rel)])
    text = join_text(result.parts)
    assert text.startswith("Got it — I’ll quickly check")
    assert "Here are a few **AI headlines" in text
    assert text.count("Got it") == 1


def test_reasoning_with_encrypted_content_and_item_ids() -> None:
    rel = "openai-responses/openai-reasoning-encrypted-content.1.chunks.txt"
    result = decode_body(FORMAT, [fixture_body(rel)])
    thinking = [p for p in result.parts if isinstance(p, ThinkingPart)]
    item_id = "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9"
    assert {p.id for p in thinking} == {item_id}
    final = thinking[-1]
    assert final.text == "" and final.metadata is not None
    assert final.metadata["itemId"] == item_id
    assert final.metadata["encryptedContent"].startswith("gAAAAABpPDIVOKrs")  # from .done
    # the three calls of three responses in one body, each once
    assert [name for _, name, _ in tool_calls(result.parts)] == ["calculator"] * 3
    assert join_text(result.parts) == "The final result is **570**."


def test_lmstudio_reasoning_text_events() -> None:
    result = decode_body(FORMAT, [fixture_body("open-responses/lmstudio-tool-call.1.chunks.txt")])
    kinds = [type(p) for p in result.parts]
    assert kinds[0] is ThinkingPart and kinds[-1] is ToolCallPart
    assert {p.id for p in result.parts if isinstance(p, ThinkingPart)} == {
        "rs_3yo6zy4vu4hq6iegqwhn1"
    }
    assert tool_calls(result.parts) == [
        ("call_2025306790300011", "weather", {"location": "San Francisco"})
    ]


def test_custom_tool_input_is_wrapped() -> None:
    result = decode_body(FORMAT, [fixture_body("openai-responses/openai-custom-tool.1.chunks.txt")])
    assert tool_calls(result.parts) == [
        ("call_custom_sql_001", "write_sql", {"input": "SELECT * FROM users WHERE age > 25"})
    ]


def test_hosted_tools_are_never_tool_calls() -> None:
    for rel in (
        "openai-responses/openai-apply-patch-tool.1.chunks.txt",
        "openai-responses/openai-file-search-tool.1.chunks.txt",
        "xai-responses/xai-web-search-tool.1.chunks.txt",
        "xai-responses/xai-image-generation-tool.1.chunks.txt",
    ):
        result = decode_body(FORMAT, [fixture_body(rel)])
        assert tool_calls(result.parts) == [], rel
    search = decode_body(FORMAT, [fixture_body("openai-responses/openai-tool-search.1.chunks.txt")])
    assert [name for _, name, _ in tool_calls(search.parts)] == ["get_weather"]


def test_generated_images_are_image_parts() -> None:
    xai = decode_body(
        FORMAT, [fixture_body("xai-responses/xai-image-generation-tool.1.chunks.txt")]
    )
    [image] = data_parts(xai.parts)
    assert image == DataPart(b"fakeImageBase64Data", "image/png")
    assert "paper boat" in join_text(xai.parts)  # the text is not polluted by the tool
    openai = decode_body(
        FORMAT, [fixture_body("openai-responses/openai-image-generation-tool.1.chunks.txt")]
    )
    [image] = data_parts(openai.parts)
    assert image.mime_type == "image/webp"  # output_format webp, RIFF/WEBP signature
    assert image.data.startswith(b"RIFF")
    assert join_text(openai.parts) == ""


def test_url_citations() -> None:
    result = decode_body(FORMAT, [fixture_body("xai-responses/xai-web-search-tool.1.chunks.txt")])
    citations = [d.decode_json() for d in data_parts(result.parts)]
    assert citations[0] == {
        "type": "citation",
        "url": "https://en.wikipedia.org/wiki/XAI_%28company%29",
    }
    assert len(citations) == 5


def test_error_fixture() -> None:
    result = decode_body(FORMAT, [fixture_body(ERROR)])
    assert result.parts == []
    assert isinstance(result.error, UpstreamReportedError)
    assert "exceeded your current quota" in str(result.error)
    assert (result.error.error_type, result.error.code) == (
        "insufficient_quota",
        "insufficient_quota",
    )
    assert result.finish_reason is FinishReason.ERROR


def test_wrapper_fixture_as_recorded_has_malformed_json() -> None:
    """The recording's first and last lines are not valid JSON (a brace is missing): the
    decoder says so and stops, with nothing half-emitted."""
    result = decode_body(FORMAT, [fixture_body(WRAPPER)])
    assert result.parts == []
    assert isinstance(result.error, UpstreamProtocolError)
    assert "not valid JSON" in str(result.error)


def _repaired_wrapper_lines() -> list[str]:
    out = []
    for line in fixture_lines(WRAPPER):
        try:
            json.loads(line)
        except ValueError:
            line += "}"
        out.append(line)
    return out


def test_parallel_wrapper_is_split_into_the_calls_it_wraps() -> None:
    result = decode_lines(FORMAT, _repaired_wrapper_lines())
    assert result.error is None
    assert tool_calls(result.parts) == [
        ("call_parallel_0", "weather", {"location": "San Francisco"}),
        ("call_parallel_1", "cityAttractions", {"city": "Rome"}),
    ]
    assert check(result.parts) == []
    whole = decode_lines(FORMAT, _repaired_wrapper_lines(), expand_parallel_wrapper=False)
    assert [name for _, name, _ in tool_calls(whole.parts)] == ["parallel"]


# -- split invariance


_BODIES = {rel: fixture_body(rel) for rel in [*FIXTURES, ERROR]}
_REFERENCE = {rel: decode_body(FORMAT, [body]).parts for rel, body in _BODIES.items()}


@pytest.mark.parametrize("rel", list(_BODIES))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), end=st.sampled_from([b"\n", b"\r", b"\r\n"]))
def test_any_chunking_and_line_end_gives_the_same_parts(
    rel: str, data: st.DataObject, end: bytes
) -> None:
    body = with_line_ends(_BODIES[rel], end)
    assert decode_body(FORMAT, data.draw(chunkings(body))).parts == _REFERENCE[rel]


# -- events not in the recordings


def _ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


def _decode(*events: dict[str, Any] | str, **kwargs: Any) -> Any:
    return decode_lines(
        FORMAT, [e if isinstance(e, str) else json.dumps(e) for e in events], **kwargs
    )


def _fc_added(
    index: int, call_id: str = "c1", name: str = "read", item_id: str = "fc_1"
) -> dict[str, Any]:
    item = {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": "",
    }
    return _ev("response.output_item.added", output_index=index, item=item)


def _fc_done(index: int, args: str, call_id: str = "c1", name: str = "read") -> dict[str, Any]:
    item = {
        "type": "function_call",
        "id": "fc_x",
        "call_id": call_id,
        "name": name,
        "arguments": args,
    }
    return _ev("response.output_item.done", output_index=index, item=item)


def _completed(**usage: Any) -> dict[str, Any]:
    return _ev("response.completed", response={"status": "completed", "usage": usage or None})


def test_call_correlated_by_output_index_when_item_id_changes_every_event() -> None:
    r = _decode(
        _fc_added(3),
        _ev("response.function_call_arguments.delta", output_index=3, item_id="A", delta='{"pa'),
        _ev("response.function_call_arguments.delta", output_index=3, item_id="B", delta='th": 1}'),
        _ev(
            "response.function_call_arguments.done",
            output_index=3,
            item_id="C",
            arguments='{"path": 1}',
        ),
        _fc_done(3, '{"path": 1}'),
        _completed(),
    )
    assert tool_calls(r.parts) == [("c1", "read", {"path": 1})]
    assert r.finish_reason is FinishReason.TOOL_CALLS


def test_call_emitted_once_and_only_when_complete() -> None:
    d = ResponsesDecoder()
    assert d.feed_json(_fc_added(0)) == []
    assert (
        d.feed_json(_ev("response.function_call_arguments.delta", output_index=0, delta='{"a": 1}'))
        == []
    )
    assert (
        d.feed_json(
            _ev("response.function_call_arguments.done", output_index=0, arguments='{"a": 1}')
        )
        == []
    )
    [part] = d.feed_json(_fc_done(0, '{"a": 1}'))
    assert part == ToolCallPart("c1", "read", {"a": 1})
    assert d.feed_json(_completed()) == []
    assert d.close() == []


def test_call_without_item_done_is_emitted_at_completed_from_the_done_arguments() -> None:
    r = _decode(
        _fc_added(0),
        _ev("response.function_call_arguments.done", output_index=0, arguments='{"a": 2}'),
        _completed(input_tokens=5, output_tokens=1),
    )
    assert tool_calls(r.parts) == [("c1", "read", {"a": 2})]
    assert r.usage == Usage(5, 1)


def test_spec_reasoning_names_and_summary_parts() -> None:
    r = _decode(
        _ev("response.output_item.added", output_index=0, item={"type": "reasoning", "id": "rs_1"}),
        _ev(
            "response.reasoning.delta", output_index=0, item_id="x", content_index=0, delta="think "
        ),
        _ev(
            "response.reasoning.delta",
            output_index=0,
            item_id="y",
            content_index=0,
            delta={"text": "more"},
        ),
        _ev("response.reasoning.done", output_index=0, content_index=0, text="think more"),
        _ev("response.reasoning_summary.delta", output_index=0, summary_index=0, delta="S1"),
        _ev("response.reasoning_summary_text.delta", output_index=0, summary_index=1, delta="S2"),
        _ev("response.reasoning_summary_text.done", output_index=0, summary_index=1, text="S2!"),
        _completed(),
    )
    thinking = [p for p in r.parts if isinstance(p, ThinkingPart)]
    assert "".join(p.text for p in thinking) == "think moreS1\n\nS2!"
    assert {p.id for p in thinking} == {"rs_1"}


def test_refusal_and_incomplete_reasons() -> None:
    r = _decode(
        _ev("response.refusal.delta", output_index=0, content_index=0, delta="I can't"),
        _ev("response.refusal.done", output_index=0, content_index=0, refusal="I can't help."),
        _ev("response.incomplete", response={"incomplete_details": {"reason": "content_filter"}}),
    )
    assert join_text(r.parts) == "I can't help."
    assert (r.finish_reason, r.raw_finish_reason) == (FinishReason.CONTENT_FILTER, "content_filter")
    r = _decode(
        _ev("response.output_text.delta", output_index=0, content_index=0, delta="long"),
        _fc_added(1),
        _ev("response.function_call_arguments.delta", output_index=1, delta='{"cut'),
        _ev(
            "response.incomplete",
            response={
                "incomplete_details": {"reason": "max_output_tokens"},
                "usage": {"input_tokens": 3, "output_tokens": 9},
            },
        ),
    )
    assert r.parts == [TextPart("long")]  # the call cut short is dropped, not an error
    assert r.error is None
    assert r.finish_reason is FinishReason.LENGTH
    assert r.usage == Usage(3, 9)


def test_failed_response() -> None:
    r = _decode(
        _ev("response.output_text.delta", output_index=0, content_index=0, delta="par"),
        _ev(
            "response.failed",
            response={"status": "failed", "error": {"code": "server_error", "message": "boom"}},
        ),
    )
    assert r.parts == [TextPart("par")]
    assert isinstance(r.error, UpstreamReportedError)
    assert r.error.code == "server_error" and "boom" in str(r.error)


def test_error_event_in_the_specs_flat_shape() -> None:
    r = _decode(_ev("error", code="rate_limit_exceeded", message="slow down", param=None))
    assert isinstance(r.error, UpstreamReportedError)
    assert r.error.code == "rate_limit_exceeded" and "slow down" in str(r.error)


def test_hosted_tool_events_produce_nothing() -> None:
    r = _decode(
        _ev(
            "response.output_item.added",
            output_index=0,
            item={"type": "code_interpreter_call", "id": "ci"},
        ),
        _ev("response.code_interpreter_call_code.delta", output_index=0, delta="print(1)"),
        _ev("response.code_interpreter_call.completed", output_index=0),
        _ev(
            "response.output_item.done",
            output_index=0,
            item={"type": "code_interpreter_call", "id": "ci", "code": "print(1)"},
        ),
        _ev(
            "response.output_item.added",
            output_index=1,
            item={"type": "mcp_call", "id": "m", "name": "x"},
        ),
        _ev("response.mcp_call_arguments.delta", output_index=1, delta="{}"),
        _ev(
            "response.output_item.done",
            output_index=1,
            item={"type": "mcp_call", "id": "m", "name": "x", "arguments": "{}"},
        ),
        _ev("response.web_search_call.searching", output_index=2),
        _ev(
            "response.image_generation_call.partial_image", output_index=3, partial_image_b64="AAAA"
        ),
        _ev("response.something_new", output_index=4, delta="?"),
        _ev("response.queued"),
        _completed(),
    )
    assert r.parts == []
    assert r.error is None
    assert r.finish_reason is FinishReason.STOP


def test_image_with_line_breaks_in_base64_and_mime_by_signature() -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 20
    encoded = base64.b64encode(png).decode()
    r = _decode(
        _ev(
            "response.output_item.done",
            output_index=0,
            item={
                "type": "image_generation_call",
                "id": "ig",
                "result": encoded[:10] + "\n" + encoded[10:],
                "output_format": "jpeg",
            },
        )
    )
    assert data_parts(r.parts) == [DataPart(png, "image/png")]
    assert image_mime(b"\xff\xd8\xff\xe0") == "image/jpeg"
    assert image_mime(b"????", "webp") == "image/webp"


def test_thinking_policy_text() -> None:
    r = _decode(
        _ev("response.reasoning_text.delta", output_index=0, content_index=0, delta="hmm"),
        _ev("response.output_text.delta", output_index=1, content_index=0, delta="ok"),
        options=AssemblerOptions(thinking="text"),
    )
    assert r.parts == [TextPart("hmm"), TextPart("ok")]


# -- bad input


def test_truncated_json_line_keeps_parts() -> None:
    r = _decode(
        _ev("response.output_text.delta", output_index=0, content_index=0, delta="ok"),
        '{"type": "response.output_text.delta", "output_index": 0, "del',
    )
    assert r.parts == [TextPart("ok")]
    assert isinstance(r.error, UpstreamProtocolError)


def test_missing_item_is_a_protocol_error_naming_the_event() -> None:
    r = _decode(
        _ev("response.output_text.delta", output_index=0, content_index=0, delta="ok"),
        _ev("response.output_item.added", output_index=1),
    )
    assert r.parts == [TextPart("ok")]
    assert isinstance(r.error, UpstreamProtocolError)
    assert "response.output_item.added" in str(r.error)


def test_missing_fields_are_tolerated() -> None:
    r = _decode(
        _ev("response.output_text.delta"),
        _ev("response.output_text.delta", delta="no index"),
        _ev("response.output_text.done"),
        {"no": "type"},
        _ev("response.completed"),
    )
    assert join_text(r.parts) == "no index"
    assert r.error is None


def test_tool_arguments_that_never_complete() -> None:
    r = _decode(
        _ev("response.output_text.delta", output_index=0, content_index=0, delta="Looking."),
        _fc_added(1),
        _ev("response.function_call_arguments.delta", output_index=1, delta='{"path": "x'),
    )
    assert r.parts == [TextPart("Looking.")]
    assert isinstance(r.error, ToolArgumentsError)
    assert "read" in str(r.error)


def test_invalid_final_arguments() -> None:
    r = _decode(_fc_added(0), _fc_done(0, "not json"))
    assert r.parts == []
    assert isinstance(r.error, ToolArgumentsError)
    assert "not json" in str(r.error)


def test_custom_tool_call_that_never_ends() -> None:
    r = _decode(
        _ev(
            "response.output_item.added",
            output_index=0,
            item={"type": "custom_tool_call", "call_id": "c", "name": "sql", "input": ""},
        ),
        _ev("response.custom_tool_call_input.delta", output_index=0, delta="SELECT"),
    )
    assert r.parts == []
    assert isinstance(r.error, UpstreamProtocolError)
    assert "custom tool call" in str(r.error)


def test_no_completed_event_flushes_complete_calls() -> None:
    d = decoder_for(FORMAT)
    parts = d.feed_json(_fc_added(0))
    parts += d.feed_json(_ev("response.function_call_arguments.delta", output_index=0, delta="{}"))
    parts += d.close()
    assert tool_calls(parts) == [("c1", "read", {})]
    assert d.finish_reason is None


def test_client_run_builtin_tools_are_not_tool_calls_and_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from lmbridge.contract import check

    with caplog.at_level("INFO", logger="lmbridge.upstream"):
        result = decode_lines(
            FORMAT, fixture_lines("openai-responses/openai-apply-patch-tool.1.chunks.txt")
        )
    assert not [p for p in result.parts if isinstance(p, ToolCallPart)]
    assert check(result.parts) == []
    assert "apply_patch_call" in caplog.text


# -- correlation without indexes: llama.cpp's server, and events naming no item


def _llama_message(text_deltas: list[str], done_text: str, item_id: str = "msg_1") -> list[Any]:
    """A message the way llama-server streams it: ``item_id`` on every event, no indexes."""
    item = {"type": "message", "id": item_id, "role": "assistant", "content": []}
    part = {"type": "output_text", "text": done_text, "annotations": []}
    return [
        _ev("response.output_item.added", item=item),
        _ev(
            "response.content_part.added", item_id=item_id, part={"type": "output_text", "text": ""}
        ),
        *(_ev("response.output_text.delta", item_id=item_id, delta=d) for d in text_deltas),
        _ev("response.output_text.done", item_id=item_id, text=done_text),
        _ev("response.content_part.done", item_id=item_id, part=part),
        _ev("response.output_item.done", item={**item, "status": "completed", "content": [part]}),
    ]


def test_llama_server_shape_text_appears_once() -> None:
    """item_id but no output_index/content_index/sequence_number: the done events add nothing."""
    r = _decode(
        _ev("response.created", response={"status": "in_progress"}),
        *_llama_message(["Hel", "lo", " there"], "Hello there"),
        _completed(input_tokens=5, output_tokens=3),
    )
    assert join_text(r.parts) == "Hello there"
    assert r.finish_reason is FinishReason.STOP
    assert r.usage == Usage(input_tokens=5, output_tokens=3)


def test_llama_server_shape_reasoning_and_call_once() -> None:
    """Reasoning deltas by item id, then the reasoning item's full content; a call by item id."""
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
        "content": [],
        "encrypted_content": "",
    }
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "read",
        "arguments": "",
    }
    r = _decode(
        _ev("response.output_item.added", item=reasoning),
        _ev("response.reasoning_text.delta", item_id="rs_1", delta="think"),
        _ev("response.reasoning_text.delta", item_id="rs_1", delta="ing"),
        _ev("response.output_item.added", item=call),
        _ev("response.function_call_arguments.delta", item_id="fc_1", delta='{"path"'),
        _ev("response.function_call_arguments.delta", item_id="fc_1", delta=': "a"}'),
        _ev(
            "response.output_item.done",
            item={**reasoning, "content": [{"type": "reasoning_text", "text": "thinking"}]},
        ),
        _ev("response.output_item.done", item={**call, "arguments": '{"path": "a"}'}),
        _completed(),
    )
    assert join_thinking(r.parts) == "thinking"
    assert tool_calls(r.parts) == [("call_1", "read", {"path": "a"})]
    assert r.finish_reason is FinishReason.TOOL_CALLS


def test_done_events_supply_only_what_the_deltas_missed() -> None:
    """Each done event may carry more than the deltas did: only the missing tail is added, once."""
    item = {"type": "message", "id": "m", "content": []}
    r = _decode(
        _ev("response.output_item.added", item=item),
        _ev("response.output_text.delta", item_id="m", delta="one "),
        _ev("response.output_text.done", item_id="m", text="one two "),
        _ev(
            "response.content_part.done",
            item_id="m",
            part={"type": "output_text", "text": "one two three"},
        ),
        _ev(
            "response.output_item.done",
            item={**item, "content": [{"type": "output_text", "text": "one two three four"}]},
        ),
        _completed(),
    )
    assert join_text(r.parts) == "one two three four"
    assert [p.value for p in r.parts if isinstance(p, TextPart)] == [
        "one ",
        "two ",
        "three",
        " four",
    ]


def test_done_arguments_and_reasoning_fill_in_what_deltas_missed() -> None:
    reasoning = {"type": "reasoning", "id": "rs", "summary": [], "content": []}
    call = {"type": "function_call", "id": "fc", "call_id": "c", "name": "read", "arguments": ""}
    r = _decode(
        _ev("response.output_item.added", item=reasoning),
        _ev("response.reasoning_text.delta", item_id="rs", delta="a"),
        _ev("response.reasoning_text.done", item_id="rs", text="ab"),
        _ev(
            "response.content_part.done",
            item_id="rs",
            part={"type": "reasoning_text", "text": "abc"},
        ),
        _ev(
            "response.output_item.done",
            item={**reasoning, "content": [{"type": "reasoning_text", "text": "abcd"}]},
        ),
        _ev("response.output_item.added", item=call),
        _ev("response.function_call_arguments.delta", item_id="fc", delta='{"pa'),
        _ev("response.function_call_arguments.done", item_id="fc", arguments='{"path": 2}'),
        _ev("response.output_item.done", item={**call, "arguments": ""}),
        _completed(),
    )
    assert join_thinking(r.parts) == "abcd"
    assert [p.value for p in r.parts if isinstance(p, ThinkingPart)] == ["a", "b", "c", "d"]
    assert tool_calls(r.parts) == [("c", "read", {"path": 2})]


def test_events_naming_no_item_belong_to_the_item_opened_last() -> None:
    """Neither output_index nor item_id anywhere: items are told apart by order."""
    r = _decode(
        _ev("response.output_item.added", item={"type": "message", "content": []}),
        _ev("response.output_text.delta", delta="first"),
        _ev("response.output_text.done", text="first"),
        _ev(
            "response.output_item.done",
            item={"type": "message", "content": [{"type": "output_text", "text": "first"}]},
        ),
        _ev(
            "response.output_item.added",
            item={"type": "function_call", "call_id": "c", "name": "read"},
        ),
        _ev("response.function_call_arguments.delta", delta='{"x": 1}'),
        _ev(
            "response.output_item.done",
            item={"type": "function_call", "call_id": "c", "name": "read"},
        ),
        _ev("response.output_item.added", item={"type": "message", "content": []}),
        _ev("response.output_text.delta", delta=" second"),
        _ev(
            "response.output_item.done",
            item={"type": "message", "content": [{"type": "output_text", "text": " second!"}]},
        ),
        _completed(),
    )
    assert join_text(r.parts) == "first second!"
    assert tool_calls(r.parts) == [("c", "read", {"x": 1})]


def test_index_on_added_and_only_item_id_on_deltas_are_one_item() -> None:
    """A server that indexes output_item events but not the deltas: the item id links them."""
    item = {"type": "message", "id": "m1", "content": []}
    r = _decode(
        _ev("response.output_item.added", output_index=0, item=item),
        _ev("response.output_text.delta", item_id="m1", delta="hi"),
        _ev(
            "response.output_item.done",
            output_index=0,
            item={**item, "content": [{"type": "output_text", "text": "hi"}]},
        ),
        _completed(),
    )
    assert join_text(r.parts) == "hi"


def test_deltas_without_any_item_before_an_added_event() -> None:
    """Deltas that name no item and open none still stream, and their done adds nothing."""
    r = _decode(
        _ev("response.output_text.delta", delta="a"),
        _ev("response.output_text.delta", delta="b"),
        _ev("response.output_text.done", text="ab"),
        _completed(),
    )
    assert join_text(r.parts) == "ab"


def test_odd_done_events_and_ids_change_nothing() -> None:
    """A content_part.done whose part is not an object, ids that are not strings, and a done
    text that contradicts the deltas: the streamed text stands, nothing is doubled or lost."""
    r = _decode(
        _ev("response.output_item.added", item={"type": "message", "id": 7, "content": []}),
        _ev("response.output_text.delta", item_id=7, delta="kept"),
        _ev("response.content_part.done", item_id=7, part="kept"),
        _ev("response.content_part.done", item_id=7, part={"type": "output_text", "text": 3}),
        _ev("response.output_text.done", item_id=7, text="other"),
        _completed(),
    )
    assert join_text(r.parts) == "kept"
    assert r.error is None


def _events(*events: dict[str, Any]) -> list[str]:
    return [json.dumps(event) for event in events]


def _message_added(index: int, item_id: str) -> dict[str, Any]:
    item = {"type": "message", "id": item_id, "role": "assistant", "content": []}
    return {"type": "response.output_item.added", "output_index": index, "item": item}


def test_two_responses_in_one_body_each_with_text_only_in_done_events() -> None:
    """The second response's output index 0 is a new item: its ``.done`` text is not compared
    with what the first response's item 0 streamed."""
    lines = _events(
        {"type": "response.created", "response": {"id": "r1"}},
        _message_added(0, "m1"),
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
         "item_id": "m1", "delta": "Hello"},
        {"type": "response.output_text.done", "output_index": 0, "content_index": 0,
         "item_id": "m1", "text": "Hello"},
        {"type": "response.completed", "response": {"id": "r1"}},
        {"type": "response.created", "response": {"id": "r2"}},
        _message_added(0, "m2"),
        {"type": "response.output_text.done", "output_index": 0, "content_index": 0,
         "item_id": "m2", "text": "World"},
        {"type": "response.completed", "response": {"id": "r2"}},
    )
    result = decode_lines("responses", lines)
    assert join_text(result.parts) == "HelloWorld"
    lines[-2] = lines[-2].replace("World", "Hello, world")  # starts like the first: still whole
    assert join_text(decode_lines("responses", lines).parts) == "HelloHello, world"


def test_a_call_the_response_completes_without_its_item_done_finishes_as_tool_calls() -> None:
    item = {"type": "function_call", "id": "fc1", "call_id": "c1", "name": "read", "arguments": ""}
    lines = _events(
        {"type": "response.created", "response": {"id": "r1"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.function_call_arguments.delta", "output_index": 0,
         "item_id": "fc1", "delta": '{"p": 1}'},
        {"type": "response.completed", "response": {"id": "r1"}},
    )
    result = decode_lines("responses", lines)
    assert tool_calls(result.parts) == [("c1", "read", {"p": 1})]
    assert result.finish_reason is FinishReason.TOOL_CALLS
    assert result.error is None
