"""The replay upstream (tests/support/replay_server.py) over real sockets, with httpx."""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from support.replay_server import ReplayServer, Reply, split_events
from support.streams import fixture_body

CHAT = "openai-chat/azure-model-router.1.chunks.txt"
RESPONSES = "openai-responses/openai-error.1.chunks.txt"
RAW = "openai-compatible/anthropic-fallback-tool-call.sse"


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


@pytest.mark.parametrize("rel", [CHAT, RESPONSES, RAW])
def test_split_events_keeps_every_byte(rel: str) -> None:
    body = fixture_body(rel)
    pieces = split_events(body)
    assert b"".join(pieces) == body
    assert len(pieces) > 1
    # every event ends with its blank line (a recorded body may end without one)
    assert all(p.endswith((b"\n\n", b"\r\n\r\n")) for p in pieces[:-1])


def test_split_events_crlf_and_unterminated_tail() -> None:
    body = b"data: 1\r\n\r\ndata: 2\r\n\r\ndata: 3"
    assert split_events(body) == [b"data: 1\r\n\r\n", b"data: 2\r\n\r\n", b"data: 3"]


def test_listens_on_loopback_only(upstream: ReplayServer) -> None:
    assert upstream.url == f"http://127.0.0.1:{upstream.port}"
    assert upstream._server is not None
    assert upstream._server.socket.getsockname()[0] == "127.0.0.1"


def test_replays_a_fixture_and_records_the_request(upstream: ReplayServer) -> None:
    upstream.route("POST", "/v1/chat/completions", Reply.fixture(CHAT))
    resp = httpx.post(
        upstream.url + "/v1/chat/completions?api-version=1",
        json={"model": "m", "stream": True},
        headers={"Authorization": "Bearer sk-test", "X-Extra": "yes"},
    )
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "text/event-stream"
    assert resp.content == fixture_body(CHAT)
    assert resp.content.endswith(b"data: [DONE]\n\n")
    [req] = upstream.requests
    assert req.wait_done()
    assert (req.method, req.path, req.query) == ("POST", "/v1/chat/completions", {"api-version": ["1"]})
    assert req.headers["authorization"] == "Bearer sk-test"
    assert req.headers["x-extra"] == "yes"
    assert req.json() == {"model": "m", "stream": True}
    assert req.status == 200
    assert req.chunks_sent == len(split_events(fixture_body(CHAT)))
    assert not req.closed_early


def test_responses_fixture_gets_event_lines(upstream: ReplayServer) -> None:
    upstream.route("POST", "/responses", Reply.fixture(RESPONSES))
    body = httpx.post(upstream.url + "/responses", json={}).text
    assert body.startswith("event: response.created\ndata: {")
    assert "[DONE]" not in body


def test_chunks_arrive_one_by_one_with_the_delay(upstream: ReplayServer) -> None:
    upstream.route("POST", "/s", Reply.sse(b"data: 1\n\ndata: 2\n\ndata: 3\n\n", delay=0.15))
    arrivals = []
    start = time.monotonic()
    with httpx.stream("POST", upstream.url + "/s") as resp:
        for chunk in resp.iter_raw():
            arrivals.append((time.monotonic() - start, chunk))
    assert [c for _, c in arrivals] == [b"data: 1\n\n", b"data: 2\n\n", b"data: 3\n\n"]
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(arrivals)]
    assert all(g > 0.1 for g in gaps), gaps


def test_replies_in_turn_with_retry_after_then_the_last_repeats(upstream: ReplayServer) -> None:
    upstream.route(
        "POST",
        "/v1/messages",
        [Reply.error(429, retry_after=2), Reply.error(503), Reply.json({"ok": True})],
    )
    with httpx.Client(base_url=upstream.url) as client:
        first = client.post("/v1/messages", json={})
        assert first.status_code == 429
        assert first.headers["retry-after"] == "2"
        assert first.json()["error"]["message"] == "replayed error 429"
        assert client.post("/v1/messages", json={}).status_code == 503
        assert client.post("/v1/messages", json={}).json() == {"ok": True}
        assert client.post("/v1/messages", json={}).json() == {"ok": True}
    assert [r.status for r in upstream.requests] == [429, 503, 200, 200]


def test_unknown_route_is_a_404_naming_the_routes(upstream: ReplayServer) -> None:
    upstream.route("GET", "/v1/models", Reply.json({"data": []}))
    resp = httpx.post(upstream.url + "/nope", json={})
    assert resp.status_code == 404
    assert "no route for POST /nope (routes: GET /v1/models)" in resp.json()["error"]["message"]


def test_records_a_client_that_closes_mid_stream(upstream: ReplayServer) -> None:
    upstream.route("POST", "/s", Reply.fixture(CHAT, delay=0.1))
    total = len(split_events(fixture_body(CHAT)))
    with httpx.stream("POST", upstream.url + "/s") as resp:
        next(resp.iter_raw())
    [req] = upstream.wait_for_requests(1)
    assert req.wait_done(5)
    assert req.closed_early
    assert 1 <= req.chunks_sent < total
    # noticed while waiting, not at the end of the whole stream
    assert req.ended_at is not None and req.ended_at - req.received_at < 0.1 * total


def test_hanging_reply_ends_when_the_client_leaves(upstream: ReplayServer) -> None:
    upstream.route("POST", "/hang", Reply.sse(b"data: a\n\n", hang=True, hang_timeout=10))
    sock = socket.create_connection(("127.0.0.1", upstream.port))
    sock.sendall(b"POST /hang HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    received = b""
    while b"data: a" not in received:
        received += sock.recv(4096)
    [req] = upstream.wait_for_requests(1)
    assert not req.wait_done(0.3), "a hanging reply stays open"
    sock.close()
    assert req.wait_done(5)
    assert req.closed_early and req.chunks_sent == 1


def test_hanging_reply_times_out_and_completes(upstream: ReplayServer) -> None:
    upstream.route("POST", "/hang", Reply.sse(b"data: a\n\n", hang=True, hang_timeout=0.2))
    resp = httpx.post(upstream.url + "/hang", timeout=5)
    assert resp.text == "data: a\n\n"
    assert not upstream.requests[0].closed_early


async def test_async_client_cancel_is_recorded(upstream: ReplayServer) -> None:
    upstream.route("POST", "/v1/chat/completions", Reply.fixture(CHAT, delay=0.2))
    async with (
        httpx.AsyncClient(base_url=upstream.url) as client,
        client.stream("POST", "/v1/chat/completions", json={"stream": True}) as resp,
    ):
        async for _ in resp.aiter_raw():
            break
    [req] = upstream.wait_for_requests(1)
    assert req.wait_done(5)
    assert req.closed_early
    assert req.json() == {"stream": True}


def test_wait_for_requests_times_out_clearly(upstream: ReplayServer) -> None:
    with pytest.raises(TimeoutError, match="0 of 1 requests arrived"):
        upstream.wait_for_requests(1, timeout=0.05)


def test_route_needs_a_reply(upstream: ReplayServer) -> None:
    with pytest.raises(ValueError, match="at least one reply"):
        upstream.route("GET", "/x", [])
