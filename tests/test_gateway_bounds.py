"""The gateway's bounds on what an upstream sends, over real HTTP on 127.0.0.1: bodies inflated
a step at a time (gateway/_body.py), the model list's byte cap and deadline, a whole answer's
cap, and an SSE event's cap through the client (the parts before it kept)."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from lmbridge.errors import LanguageModelError
from lmbridge.gateway import ChatCompletionsClient
from lmbridge.gateway._body import STEP, BodyTooLarge, read_body, read_head
from lmbridge.gateway.catalog import ModelCatalog
from lmbridge.parts import ChatMessage, TextPart
from support.hostile_upstream import HostileUpstream
from support.replay_server import ReplayServer, Reply
from support.streams import fixture_body


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileUpstream]:
    with HostileUpstream(limit=256 << 20) as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(headers={"accept-encoding": "gzip, deflate"}) as client:
        yield client


def encoded(body: bytes, coding: str) -> Reply:
    return Reply(headers={"Content-Type": "application/json", "Content-Encoding": coding}, body=body)


async def fetch(http: httpx.AsyncClient, url: str, limit: int) -> bytes:
    async with http.stream("GET", url) as response:
        return await read_body(response, limit)


# --------------------------------------------------------------------------- bodies


@pytest.mark.parametrize(
    ("coding", "pack"),
    [
        ("gzip", lambda b: gzip.compress(b)),
        ("x-gzip", lambda b: gzip.compress(b)),
        ("gzip", lambda b: gzip.compress(b[:1000]) + gzip.compress(b[1000:])),  # two members
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, as some servers send it
        ("identity", lambda b: b),
    ],
    ids=["gzip", "x-gzip", "gzip-members", "deflate-zlib", "deflate-raw", "identity"],
)
async def test_bodies_are_decoded_as_httpx_would(
    upstream: ReplayServer, http: httpx.AsyncClient, coding: str, pack: object
) -> None:
    body = b'{"data": [' + b'{"id": "m"},' * 20_000 + b'{"id": "n"}]}'
    upstream.route("GET", "/m", encoded(pack(body), coding))  # type: ignore[operator]
    assert await fetch(http, upstream.url + "/m", 10 << 20) == body


async def test_a_gzip_bomb_is_stopped_a_step_past_the_cap(
    hostile: HostileUpstream, http: httpx.AsyncClient
) -> None:
    with pytest.raises(BodyTooLarge) as info:
        await fetch(http, hostile.url + "/bomb/models", 1 << 20)
    assert info.value.limit == 1 << 20


async def test_stacked_and_unknown_encodings_are_refused(
    upstream: ReplayServer, http: httpx.AsyncClient, hostile: HostileUpstream
) -> None:
    with pytest.raises(httpx.DecodingError, match="encoded several times"):
        await fetch(http, hostile.url + "/bomb2/models", 1 << 20)
    upstream.route("GET", "/br", encoded(b"\x1b\x00", "br"))
    with pytest.raises(httpx.DecodingError, match="Content-Encoding 'br' is not read"):
        await fetch(http, upstream.url + "/br", 1 << 20)
    upstream.route("GET", "/bad", encoded(b"not gzip at all", "gzip"))
    with pytest.raises(httpx.DecodingError, match="not valid gzip"):
        await fetch(http, upstream.url + "/bad", 1 << 20)


async def test_read_head_reads_no_further_than_it_needs(
    hostile: HostileUpstream, http: httpx.AsyncClient
) -> None:
    async with http.stream("GET", hostile.url + "/bomb/models") as response:
        head = await read_head(response, 1000)
    assert head.startswith(b'{"data": [') and len(head) == 1000
    assert STEP == 64 * 1024


# --------------------------------------------------------------------------- the model list


def catalog_for(http: httpx.AsyncClient, base: str, **kwargs: float) -> ModelCatalog:
    client = ChatCompletionsClient(http, base_url=base, provider="evil")
    return ModelCatalog(client, **kwargs)  # type: ignore[arg-type]


async def test_a_model_list_past_the_cap_is_an_error_naming_it(
    hostile: HostileUpstream, http: httpx.AsyncClient
) -> None:
    with pytest.raises(LanguageModelError, match="passed 8,388,608 bytes, more than any real model list"):
        await catalog_for(http, hostile.url + "/bomb").fetch()


async def test_the_cap_counts_every_page(upstream: ReplayServer, http: httpx.AsyncClient) -> None:
    page = b'{"data": [' + b'{"id": "m"},' * 1000 + b'{"id": "n"}], "has_more": true, "last_id": "n"}'
    upstream.route("GET", "/v1/models", Reply(headers={"Content-Type": "application/json"}, body=page))
    with pytest.raises(LanguageModelError, match="passed 30,000 bytes"):
        await catalog_for(http, upstream.url + "/v1", max_bytes=30_000).fetch()
    assert len(upstream.requests) == 3  # 12 KB a page: the third passes 30,000 bytes in all


async def test_a_trickled_model_list_is_given_up_at_the_deadline(
    hostile: HostileUpstream, http: httpx.AsyncClient
) -> None:
    with pytest.raises(LanguageModelError, match=r"did not arrive within 1\.5 s"):
        await catalog_for(http, hostile.url + "/trickle", deadline=1.5).fetch()


async def test_a_model_list_within_the_bounds_is_read(hostile: HostileUpstream, http: httpx.AsyncClient) -> None:
    models = await catalog_for(http, hostile.url + "/good").fetch()
    assert [m.info.id for m in models] == ["m"]


# --------------------------------------------------------------------------- answers


class Parts(list[object]):
    def report(self, value: object) -> None:
        self.append(value)


async def chat(client: ChatCompletionsClient) -> tuple[list[object], LanguageModelError]:
    parts = Parts()
    with pytest.raises(LanguageModelError) as info:
        await client.stream("m", [ChatMessage.user("hi")], None, parts)
    return parts, info.value


async def test_an_answer_past_its_cap_fails_after_the_parts_before_it(
    hostile: HostileUpstream, http: httpx.AsyncClient
) -> None:
    client = ChatCompletionsClient(http, base_url=hostile.url + "/huge-answer", provider="evil")
    client.max_answer_bytes = 1 << 20
    parts, error = await chat(client)
    assert "the answer passed 1,048,576 bytes without ending" in str(error)
    text = "".join(p.value for p in parts if isinstance(p, TextPart))
    assert 900_000 < len(text) <= 1 << 20 and set(text) == {"z"}


@pytest.mark.parametrize("kind", ["endless-line", "huge-event"])
async def test_an_event_past_its_cap_fails_the_request(
    hostile: HostileUpstream, http: httpx.AsyncClient, kind: str
) -> None:
    client = ChatCompletionsClient(http, base_url=f"{hostile.url}/{kind}", provider="evil")
    _, error = await chat(client)
    assert "grew past 16,777,216 bytes without ending" in str(error)
    assert "evil sent a response lmbridge cannot read" in str(error)


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
async def test_a_compressed_event_stream_is_decoded_as_it_arrives(
    upstream: ReplayServer, http: httpx.AsyncClient, coding: str
) -> None:
    body = fixture_body("openai-chat/openai-text.chunks.txt")
    packer = zlib.compressobj(9, zlib.DEFLATED, 31 if coding == "gzip" else 15)
    packed = packer.compress(body) + packer.flush()
    pieces = [packed[i : i + 7] for i in range(0, len(packed), 7)]  # cut anywhere
    upstream.route(
        "POST", "/v1/chat/completions",
        Reply(headers={"Content-Type": "text/event-stream", "Content-Encoding": coding}, chunks=pieces),
    )  # fmt: skip
    parts = Parts()
    client = ChatCompletionsClient(http, base_url=upstream.url + "/v1", provider="p")
    await client.stream("m", [ChatMessage.user("hi")], None, parts)
    plain = Parts()
    upstream.route("POST", "/v1/chat/completions", Reply.fixture("openai-chat/openai-text.chunks.txt"))
    await client.stream("m", [ChatMessage.user("hi")], None, plain)
    assert parts == plain and any(isinstance(p, TextPart) for p in parts)
