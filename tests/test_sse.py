"""The SSE decoder against the WHATWG event-stream rules, at any chunking."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmbridge import sse as sse_module
from lmbridge.sse import ServerSentEvent, SSEDecoder
from support.streams import split_at


def _decode(*chunks: bytes, strict: bool = False) -> list[ServerSentEvent]:
    decoder = SSEDecoder(strict=strict)
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events


def _datas(*chunks: bytes, strict: bool = False) -> list[str]:
    return [e.data for e in _decode(*chunks, strict=strict)]


@pytest.mark.parametrize("end", [b"\n", b"\r", b"\r\n"])
def test_every_line_end_kind(end: bytes) -> None:
    body = b"data: a" + end + end + b"data: b" + end + end
    assert _datas(body) == ["a", "b"]


def test_mixed_line_ends_in_one_stream() -> None:
    assert _datas(b"data: a\r\n\rdata: b\n\r\ndata: c\r\r") == ["a", "b", "c"]


def test_cr_at_chunk_end_and_lf_at_next_start_are_one_line_end() -> None:
    # were they two line ends, the blank line would dispatch "a" alone before "b" arrived
    assert _datas(b"data: a\r", b"\ndata: b\r\n\r\n") == ["a\nb"]
    assert _datas(b"data: a\r", b"\n", b"\r", b"\n") == ["a"]


def test_cr_then_lf_across_an_empty_chunk() -> None:
    assert _datas(b"data: a\r", b"", b"\ndata: b\n\n") == ["a\nb"]


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c"])
def test_unicode_line_separators_are_data(sep: str) -> None:
    body = f'data: {{"t": "x{sep}y"}}\n\n'.encode()
    assert _datas(body) == [f'{{"t": "x{sep}y"}}']


def test_multi_line_data_joined_with_lf() -> None:
    assert _datas(b"data: a\ndata: b\ndata:c\n\n") == ["a\nb\nc"]


def test_empty_data_field_dispatches_an_empty_event() -> None:
    assert _datas(b"data\n\n") == [""]
    assert _datas(b"data:\ndata:\n\n") == ["\n"]


def test_only_one_space_after_the_colon_is_removed() -> None:
    assert _datas(b"data:  two\n\n") == [" two"]
    assert _datas(b"data:none\n\n") == ["none"]


def test_comments_and_unknown_fields_are_ignored() -> None:
    assert _datas(b": keep-alive\n:\ndata: a\nfoo: bar\n: more\n\n") == ["a"]
    assert _datas(b": only a comment\n\n") == []


def test_event_type_and_default() -> None:
    events = _decode(b"event: response.created\ndata: 1\n\ndata: 2\n\n")
    assert [(e.event, e.data) for e in events] == [("response.created", "1"), ("message", "2")]


def test_event_without_data_is_not_dispatched_and_its_type_does_not_leak() -> None:
    events = _decode(b"event: ping\n\ndata: x\n\n")
    assert [(e.event, e.data) for e in events] == [("message", "x")]


def test_id_persists_and_id_with_nul_is_ignored() -> None:
    events = _decode(b"id: 1\ndata: a\n\ndata: b\n\nid: 2\x00x\ndata: c\n\nid\ndata: d\n\n")
    assert [(e.id, e.data) for e in events] == [("1", "a"), ("1", "b"), ("1", "c"), ("", "d")]


def test_last_event_id_tracks_ids_without_data() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"id: 7\n\n")
    assert decoder.last_event_id == "7"


def test_retry_digits_only() -> None:
    events = _decode(b"retry: 3000\ndata: a\n\nretry: 3s\ndata: b\n\nretry: \ndata: c\n\n")
    assert [e.retry for e in events] == [3000, None, None]


@pytest.mark.parametrize("blocks", [True, False])
def test_retry_sets_the_reconnection_time_with_or_without_data(blocks: bool) -> None:
    decoder = SSEDecoder(blocks=blocks)
    assert decoder.reconnection_time is None
    decoder.feed(b"retry: 3000\ndata: a\n\n")
    assert decoder.reconnection_time == 3000
    decoder.feed(b"retry: 250\n\n")  # no data: nothing dispatched, the time applies still
    assert decoder.reconnection_time == 250
    decoder.feed(b"retry: 1s\ndata: b\n\n")  # not digits: ignored, the last time stays
    assert decoder.reconnection_time == 250


@pytest.mark.parametrize("blocks", [True, False])
def test_event_field_without_a_space_after_its_colon(blocks: bool) -> None:
    decoder = SSEDecoder(blocks=blocks)
    events = decoder.feed(b"event:x\ndata: 1\n\nevent:  y\ndata: 2\n\n")
    events += decoder.feed(b"event:z\r\ndata:3\r\n\r\n") + decoder.close()
    assert [(e.event, e.data) for e in events] == [("x", "1"), (" y", "2"), ("z", "3")]


@pytest.mark.parametrize(
    "body",
    [
        b"data: a\n\ndata: b\n\n",
        b"event: e\ndata: a\n\nevent: f\ndata: b\n\n",
        b"data: a\n\nevent: f\ndata: b\n\nid: 1\ndata: c\n\n",
    ],
)
def test_an_event_is_delivered_by_the_feed_that_completes_it(body: bytes) -> None:
    """Cut anywhere into two or three chunks, each event comes out of the very feed whose
    bytes hold its blank line (not a feed later, not only at the close), on both paths."""
    for blocks in (True, False):
        for cut in range(1, len(body)):
            for cut2 in (cut, min(cut + 1, len(body)), min(cut + 7, len(body))):
                chunks = [body[:cut], body[cut:cut2], body[cut2:]]
                decoder = SSEDecoder(blocks=blocks)
                seen = 0
                for chunk in chunks:
                    seen += len(chunk)
                    got = [data for _, data, _, _ in decoder.feed_raw(chunk)]
                    done = body[:seen].count(b"\n\n")
                    assert len(got) == done - (body[: seen - len(chunk)].count(b"\n\n")), (
                        blocks,
                        chunks,
                    )
                assert decoder.close_raw() == []


def test_bom_is_stripped_once_even_when_split() -> None:
    bom = "\ufeff".encode()
    assert _datas(bom + b"data: a\n\n") == ["a"]
    assert _datas(bom[:1], bom[1:2], bom[2:] + b"data: a\n\n") == ["a"]
    # only the stream's first character: a second BOM is part of the field name, so ignored
    assert _datas(bom + bom + b"data: a\n\ndata: b\n\n") == ["b"]


def test_field_name_is_case_sensitive() -> None:
    assert _datas(b"Data: a\n\n") == []


def test_last_event_without_blank_line() -> None:
    body = b"data: a\n\ndata: b"
    assert _datas(body) == ["a", "b"]
    assert _datas(body, strict=True) == ["a"]
    assert _datas(b"data: a\n\ndata: b\n") == ["a", "b"]
    assert _datas(b"data: a\n\ndata: b\n", strict=True) == ["a"]


def test_invalid_utf8_becomes_replacement_characters() -> None:
    assert _datas(b"data: a\xffb\n\n") == ["a\ufffdb"]
    # a truncated multi-byte character at the very end
    assert _datas(b"data: \xe6\x97") == ["\ufffd"]


def test_multibyte_characters_split_between_chunks() -> None:
    body = "data: 日本🙂\n\n".encode()
    for cut in range(1, len(body)):
        assert _datas(body[:cut], body[cut:]) == ["日本🙂"]


def test_done_sentinel() -> None:
    events = _decode(b"data: [DONE]\n\n")
    assert events[0].is_done
    assert not ServerSentEvent("[DONE]x").is_done


def test_feed_text_for_callers_holding_str() -> None:
    decoder = SSEDecoder()
    assert [e.data for e in decoder.feed_text("data: é\r")] == []
    assert [e.data for e in decoder.feed_text("\n\r\n")] == ["é"]


def test_large_chunk_is_decoded_in_linear_time() -> None:
    """A 2 MB body in one chunk: searching each line's end from scratch made this quadratic."""
    line = b'data: {"choices": [{"delta": {"content": "word"}}]}\n\n'
    body = line * 40_000
    start = time.perf_counter()
    events = _decode(body)
    elapsed = time.perf_counter() - start
    assert len(events) == 40_000
    # ~0.1 s when linear; the quadratic scan took tens of seconds
    assert elapsed < 5


_FIELD_LINES = st.sampled_from(
    [
        "data: x",
        "data: 日本",
        "data:",
        "data",
        "event: e",
        "id: 1",
        "retry: 10",
        ": comment",
        "",
        "",
        "data: \u2028",
        "data: 🙂🙂",
        "other: 1",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(_FIELD_LINES, max_size=30),
    end=st.sampled_from(["\n", "\r", "\r\n"]),
    bom=st.booleans(),
    data=st.data(),
)
def test_any_chunking_gives_the_same_events(
    lines: list[str], end: str, bom: bool, data: st.DataObject
) -> None:
    body = (("\ufeff" if bom else "") + end.join(lines) + end).encode()
    reference = _decode(body)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=len(body)))
    assert _decode(*split_at(body, cuts)) == reference
    byte_by_byte = [body[i : i + 1] for i in range(len(body))]
    assert _decode(*byte_by_byte) == reference


# -- line ends mixed inside one body, and the block path against the line state machine


def test_pending_cr_is_cleared_by_the_lf_that_completes_it() -> None:
    # The LF that starts the second chunk completes "a"'s CRLF; the LF that starts the third
    # is a blank line of its own: "a\nb" is dispatched there, "c" after it.
    assert _datas(b"data: a\r", b"\ndata: b\n", b"\ndata: c\n\n") == ["a\nb", "c"]
    assert _datas(b"data: a\r", b"\n", b"\n") == ["a"]


_LINE_ENDS = st.sampled_from(["\n", "\r", "\r\n"])


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.tuples(_FIELD_LINES, _LINE_ENDS), max_size=30),
    bom=st.booleans(),
    data=st.data(),
)
def test_any_chunking_of_mixed_line_ends_gives_the_same_events(
    lines: list[tuple[str, str]], bom: bool, data: st.DataObject
) -> None:
    """CR, LF and CRLF mixed in one body (a CR then an LF that starts the next line's end is one
    CRLF, as the whole body says too); chunks cut anywhere, also between a CR and its LF."""
    body = (("\ufeff" if bom else "") + "".join(line + end for line, end in lines)).encode()
    reference = _decode(body)
    crs = [i + 1 for i, b in enumerate(body) if b == 0x0D]
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=len(body)))
    if crs:
        cuts += data.draw(st.lists(st.sampled_from(crs), max_size=8))
    assert _decode(*split_at(body, cuts)) == reference
    byte_by_byte = [body[i : i + 1] for i in range(len(body))]
    assert _decode(*byte_by_byte) == reference


def _raw_run(chunks: list[bytes], *, blocks: bool, strict: bool) -> tuple[object, ...]:
    """The events each ``feed_raw`` (and the ``close_raw``) returned, the last event id and
    the reconnection time; with ``blocks``, the same from both ways the block path reads named
    events (the interpreter's chunk-at-a-time split, and the event loop compiled code runs),
    which must agree. Each call's events are kept apart: an event delivered a feed late (or
    only at the close) is a difference even when the whole stream's events are the same."""
    runs = []
    for compiled_loop in (False, True) if blocks else (False,):
        saved = sse_module._COMPILED
        sse_module._COMPILED = compiled_loop  # type: ignore[misc]  # (no effect when compiled)
        try:
            decoder = SSEDecoder(strict=strict, blocks=blocks)
            events = [tuple(decoder.feed_raw(chunk)) for chunk in chunks]
            events.append(tuple(decoder.close_raw()))
        finally:
            sse_module._COMPILED = saved  # type: ignore[misc]
        runs.append((tuple(events), decoder.last_event_id, decoder.reconnection_time))
    assert all(run == runs[0] for run in runs)
    return runs[0]


_PIECES = st.one_of(
    _FIELD_LINES,
    st.sampled_from(
        [
            'data: {"type": "x"}',
            "event: response.output_text.delta",
            "event:",
            "event:x",
            "data:x",
            "id: 7",
            "id: a\x00b",
            "retry: 5",
            "retry: x",
            ":",
            "\ufeffdata: bom",
        ]
    ),
    st.text(st.sampled_from("dat:evn \r\n\ufeff\u2028x"), max_size=12),
)


@settings(max_examples=400, deadline=None)
@given(
    lines=st.lists(st.tuples(_PIECES, _LINE_ENDS | st.just("\n\n") | st.just("")), max_size=25),
    junk=st.binary(max_size=8),
    strict=st.booleans(),
    data=st.data(),
)
def test_block_path_and_line_state_machine_give_identical_events(
    lines: list[tuple[str, str]], junk: bytes, strict: bool, data: st.DataObject
) -> None:
    """The block path (whole events split with bytes methods) against the line state machine,
    the reference: the same events (type, data bytes, id, retry), the same last event id and
    reconnection time, for arbitrary bodies (mixed line ends, comments, BOMs, stray bytes and
    invalid UTF-8) cut at arbitrary places."""
    body = "".join(line + end for line, end in lines).encode("utf-8", "surrogatepass")
    at = data.draw(st.integers(0, len(body)))
    body = body[:at] + junk + body[at:]
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=min(len(body), 40)))
    chunks = split_at(body, cuts)
    expected = _raw_run(chunks, blocks=False, strict=strict)
    assert _raw_run(chunks, blocks=True, strict=strict) == expected
    assert _raw_run([body], blocks=True, strict=strict) == _raw_run(
        [body], blocks=False, strict=strict
    )


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=200), data=st.data())
def test_block_path_and_line_state_machine_agree_on_any_bytes(
    body: bytes, data: st.DataObject
) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=min(len(body), 30)))
    chunks = split_at(body, cuts)
    assert _raw_run(chunks, blocks=True, strict=False) == _raw_run(
        chunks, blocks=False, strict=False
    )


def test_block_path_takes_the_common_shapes_and_leaves_the_rest_to_the_lines() -> None:
    body = (
        b"event: message_start\ndata: {}\n\n"
        b"data:{}\n\n"
        b"id: 3\nevent: e\ndata: a\ndata: b\n\n"
        b": keep-alive\n\n"
        b"data: last"
    )
    for blocks in (True, False):
        decoder = SSEDecoder(blocks=blocks)
        events = decoder.feed_raw(body[:40]) + decoder.feed_raw(body[40:]) + decoder.close_raw()
        assert events == [
            ("message_start", b"{}", "", None),
            ("message", b"{}", "", None),
            ("e", b"a\nb", "3", None),
            ("message", b"last", "3", None),
        ]


@pytest.mark.parametrize(
    "body",
    [
        b"data: a\n\ndata: b\n\nid: 4\ndata: c\n\ndata: d\n\n",  # a run of data events, then not
        b"data: a\n\ndata: b\n\n\ndata: c\n\n",  # a third LF after an event
        b"data: a\n\n\n",
        b"data: a\n\nevent: e\ndata: b\n\ndata: c\n\n",  # a named event after data events
        b"data: a\ndata: b\n\ndata: c\n\n",  # two data lines in the first event
        b"data: a\n\ndata:b\n\n",  # no space after the colon
        b"event: e\ndata: a\n\n",  # one named event
        b"event: e\ndata: a\nid: 1\n\n",
        b"event: e\n\ndata: a\n\n",  # an event line alone, then data: the type does not carry
        b"event: a\ndata: 1\n\nevent:  b\ndata: 2\n\nevent: \ndata: 3\n\n",  # named runs
        b"event: a\ndata: 1\n\ndata: 2\n\nevent: b\ndata: 3\n\n",  # named and unnamed
        b"event: a\ndata: 1\n\nevent: b\nid: 2\ndata: 3\n\n",
    ],
)
def test_block_path_runs_of_events_stop_where_the_shape_changes(body: bytes) -> None:
    """The data-line runs and single events read by the block path, stopped part-way by other
    shapes, against the line state machine at every cut."""
    for cut in range(len(body) + 1):
        chunks = [body[:cut], body[cut:]]
        assert _raw_run(chunks, blocks=True, strict=False) == _raw_run(
            chunks, blocks=False, strict=False
        ), cut


# --------------------------------------------------------------------------- size limits

LIMIT = 64 * 1024


def _feed_until_refused(decoder: SSEDecoder, chunks: list[bytes], rounds: int) -> tuple[int, Exception]:
    """Feed ``chunks`` over and over; the bytes fed when the decoder refused, and its error."""
    fed = 0
    for _ in range(rounds):
        for chunk in chunks:
            fed += len(chunk)
            try:
                decoder.feed_raw(chunk)
            except sse_module.SSELimitError as exc:
                return fed, exc
    raise AssertionError(f"{fed} bytes fed and no SSELimitError")


@pytest.mark.parametrize("blocks", [True, False], ids=["block-path", "line-path"])
@pytest.mark.parametrize(
    "shape",
    [
        [b"data: " + b"x" * 1000],  # one endless line
        [b"data: " + b"x" * 993 + b"\r"],  # CR-ended data lines: one endless event
        [b"data: " + b"y" * 993 + b"\n"],  # one endless event of many data lines
        [b"data: ", b"z", b"z", b"z"],  # a trickle: tiny pieces
    ],
    ids=["endless-line", "cr-data-lines", "endless-event", "trickle"],
)
def test_an_event_that_never_ends_is_refused_at_the_limit(shape: list[bytes], blocks: bool) -> None:
    decoder = SSEDecoder(max_event_bytes=LIMIT, blocks=blocks)
    assert decoder.feed_raw(b"data: before\n\n")[0][1] == b"before"
    fed, exc = _feed_until_refused(decoder, shape, 100_000)
    assert "grew past 65,536 bytes without ending" in str(exc)
    assert exc.limit == LIMIT  # type: ignore[attr-defined]
    # refused once it held the limit: not much later (a piece is counted with its bookkeeping)
    assert fed <= LIMIT + 1024
    # and it holds nothing more: a new stream could start from here
    assert decoder.feed_raw(b"\n\ndata: after\n\n")[-1][1] == b"after"


@pytest.mark.parametrize("blocks", [True, False], ids=["block-path", "line-path"])
def test_events_completed_before_the_overflow_are_carried_by_the_error(blocks: bool) -> None:
    decoder = SSEDecoder(max_event_bytes=LIMIT, blocks=blocks)
    chunk = b"data: one\n\nevent: e\ndata: two\n\ndata: " + b"x" * (LIMIT + 10)
    with pytest.raises(sse_module.SSELimitError) as info:
        decoder.feed_raw(chunk)
    assert [(name, data) for name, data, _, _ in info.value.events] == [
        ("message", b"one"),
        ("e", b"two"),
    ]


@pytest.mark.parametrize("blocks", [True, False], ids=["block-path", "line-path"])
def test_large_events_within_the_limit_pass_in_any_chunking(blocks: bool) -> None:
    big = b"a" * (LIMIT - 8 * 1024)  # (the pieces of 1 KiB are counted 64 bytes more each)
    body = b"data: " + big + b"\n\n" + (b"data: small\n\n" * 1000) + b"data: " + big + b"\n\n"
    for size in (1024, 7777, len(body)):
        decoder = SSEDecoder(max_event_bytes=LIMIT, blocks=blocks)
        events = []
        for start in range(0, len(body), size):
            events += decoder.feed_raw(body[start : start + size])
        events += decoder.close_raw()
        assert [e[1] for e in events] == [big] + [b"small"] * 1000 + [big]


def test_comments_and_blank_lines_between_events_hold_nothing() -> None:
    # keep-alive comments for ever are no event that grows: never refused
    decoder = SSEDecoder(max_event_bytes=LIMIT)
    for _ in range(2 * LIMIT // 100):
        assert decoder.feed_raw(b": keep-alive " + b"." * 80 + b"\n\n") == []
    assert decoder.feed_raw(b"data: x\n\n")[0][1] == b"x"


def test_the_default_limit_and_no_limit() -> None:
    assert SSEDecoder().max_event_bytes == sse_module.MAX_EVENT_BYTES == 16 * 1024 * 1024
    decoder = SSEDecoder(max_event_bytes=0)
    for _ in range(40):
        decoder.feed_raw(b"x" * LIMIT)
    assert decoder.feed_raw(b"\n\n") == []
