"""The loopback endpoint under hostile local clients, over real sockets on 127.0.0.1: head-first
checks (Host, Origin, token) before any body byte, 413 unread, deadlines for head, body and idle
connections, the connection cap under a flood, and the endpoint file's folder mode."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import h11
import httpx
import openai
import pytest

from lmbridge.client.endpoint import (
    Api,
    EndpointServer,
    ErrorInfo,
    Exchange,
    Limits,
    Request,
    Route,
)
from lmbridge.client.testing import FakeBridge, fake_model
from lmbridge.parts import TextPart

GPT = fake_model("gpt-4o-id", vendor="copilot", family="gpt-4o")
OWN = fake_model("openai/gpt-4o", vendor="lmbridge", family="gpt-4o")
MiB = 1024 * 1024
WAIT = 10.0  # bounds every wait so that a broken endpoint fails the test instead of hanging it


@pytest.fixture
def bridge() -> FakeBridge:
    return FakeBridge([GPT, OWN])


async def started(bridge: FakeBridge, **limits: object) -> EndpointServer:
    server = EndpointServer(bridge, endpoint_file=False, keepalive=0.2, limits=Limits(**limits))  # type: ignore[arg-type]
    await server.start()
    return server


@pytest.fixture
async def server(bridge: FakeBridge) -> AsyncIterator[EndpointServer]:
    srv = await started(bridge, max_body=1024)
    try:
        yield srv
    finally:
        await srv.aclose()


class Raw:
    """One client connection, written by hand and read with h11's client side."""

    def __init__(self, server: EndpointServer) -> None:
        self.server = server
        self.host = server.url.removeprefix("http://")
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter
        self.conn = h11.Connection(h11.CLIENT)

    async def open(self) -> Raw:
        host, port = self.host.split(":")
        self.reader, self.writer = await asyncio.open_connection(host, int(port))
        return self

    async def request(
        self,
        method: str,
        path: str,
        headers: dict[str, str] | None = None,
        *,
        token: bool = True,
        host: str | None = None,
        body: bytes | None = None,
    ) -> None:
        """Send a request head (and ``body`` when given; else the body stays unsent)."""
        lines = [("Host", host or self.host)]
        if token:
            lines.append(("Authorization", f"Bearer {self.server.token}"))
        lines += list((headers or {}).items())
        if body is not None:
            lines.append(("Content-Length", str(len(body))))
        data = self.conn.send(h11.Request(method=method, target=path, headers=lines)) or b""
        if body is not None:
            data += (self.conn.send(h11.Data(data=body)) or b"") + (
                self.conn.send(h11.EndOfMessage()) or b""
            )
        await self.send(data)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def answer(self) -> tuple[int, dict[str, str], bytes]:
        """The next response: status, headers, whole body."""
        status, headers, body = 0, {}, bytearray()
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                data = await asyncio.wait_for(self.reader.read(65536), WAIT)
                self.conn.receive_data(data)
                continue
            if isinstance(event, h11.Response):
                status = event.status_code
                headers = {k.decode(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.InformationalResponse):
                continue
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return status, headers, bytes(body)
            else:
                raise AssertionError(f"unexpected {event!r}")

    async def closed_by_server(self) -> bool:
        """True when the server ends the connection (EOF or reset) within WAIT."""
        try:
            while await asyncio.wait_for(self.reader.read(65536), WAIT):
                pass
        except ConnectionError:
            pass
        return True

    def close(self) -> None:
        self.writer.close()


async def connect(server: EndpointServer) -> Raw:
    return await Raw(server).open()


# --------------------------------------------------------------------------- head first


@pytest.mark.parametrize(
    ("headers", "token", "status"),
    [
        ({}, False, 401),  # no token
        ({"Authorization": "Bearer nope"}, False, 401),
        ({"Origin": "http://evil.example"}, True, 403),
        ({"Origin": "null"}, True, 403),
    ],
)
async def test_head_is_refused_before_its_8_mib_body_is_sent(
    server: EndpointServer, bridge: FakeBridge, headers: dict[str, str], token: bool, status: int
) -> None:
    c = await connect(server)
    await c.request(
        "POST",
        "/v1/chat/completions",
        {"Content-Type": "application/json", "Content-Length": str(8 * MiB), **headers},
        token=token,
    )
    # Not one byte of the body was sent: an answer now proves the head alone decided it.
    got, answer_headers, body = await c.answer()
    assert got == status
    assert answer_headers["connection"] == "close"
    if status == 401:
        assert b"token" in body and answer_headers["www-authenticate"] == "Bearer"
    assert await c.closed_by_server()
    assert bridge.requests == []
    c.close()


async def test_a_client_that_sends_the_body_anyway_still_reads_the_401(
    server: EndpointServer,
) -> None:
    async with httpx.AsyncClient(trust_env=False) as http:
        response = await http.post(
            f"{server.url}/v1/chat/completions", content=b"x" * (8 * MiB), timeout=WAIT
        )
    assert response.status_code == 401


@pytest.mark.parametrize(
    "host",
    ["evil.example", "127.0.0.1", "localhost", "127.0.0.1:1", "evil.example:{port}"],
)
async def test_foreign_host_headers_are_refused(server: EndpointServer, host: str) -> None:
    port = server.url.rsplit(":", 1)[1]
    c = await connect(server)
    await c.request("GET", "/v1/models", host=host.format(port=port))
    status, _, body = await c.answer()
    assert status == 403 and b"Host" in body
    c.close()


async def test_localhost_host_header_is_served(server: EndpointServer) -> None:
    port = server.url.rsplit(":", 1)[1]
    async with httpx.AsyncClient(trust_env=False) as http:
        response = await http.get(
            f"http://localhost:{port}/v1/models",
            headers={"Authorization": f"Bearer {server.token}"},
        )
    assert response.status_code == 200


async def test_origin_is_refused_even_with_the_token(server: EndpointServer) -> None:
    async with httpx.AsyncClient(trust_env=False) as http:
        response = await http.get(
            f"{server.url}/v1/models",
            headers={"Authorization": f"Bearer {server.token}", "Origin": "https://evil.example"},
        )
    assert response.status_code == 403
    assert "Origin" in response.json()["error"]["message"]


async def test_node_fetch_headers_without_origin_are_served(server: EndpointServer) -> None:
    # Node's fetch (undici: Claude Code, Codex's npm wrapper, the JS SDKs) sends
    # Sec-Fetch-Mode but no Origin: only Origin marks a web page.
    headers = {
        "Authorization": f"Bearer {server.token}",
        "sec-fetch-mode": "cors",
        "accept-language": "*",
        "user-agent": "undici",
    }
    async with httpx.AsyncClient(trust_env=False) as http:
        response = await http.get(f"{server.url}/v1/models", headers=headers)
    assert response.status_code == 200


async def test_basic_is_not_a_bearer_token(server: EndpointServer) -> None:
    user_token = base64.b64encode(f"user:{server.token}".encode()).decode()
    async with httpx.AsyncClient(trust_env=False) as http:
        for value in (f"Basic {server.token}", f"Basic {user_token}", server.token):
            response = await http.get(f"{server.url}/v1/models", headers={"Authorization": value})
            assert response.status_code == 401, value
        response = await http.get(
            f"{server.url}/v1/models", auth=httpx.BasicAuth("user", server.token)
        )
        assert response.status_code == 401


async def test_x_api_key_carries_the_token_where_the_api_accepts_it(
    server: EndpointServer,
) -> None:
    async with httpx.AsyncClient(trust_env=False) as http:
        ok = await http.get(f"{server.url}/v1/models", headers={"x-api-key": server.token})
        assert ok.status_code == 200
        wrong = await http.get(f"{server.url}/v1/models", headers={"x-api-key": "nope"})
        assert wrong.status_code == 401
        # the native routes take the bearer token only
        lm = await http.post(
            f"{server.url}/lm/selectChatModels", json={}, headers={"x-api-key": server.token}
        )
        assert lm.status_code == 401
        assert "Authorization: Bearer" in lm.json()["error"]["message"]


async def test_unknown_routes_answer_only_after_the_token(server: EndpointServer) -> None:
    async with httpx.AsyncClient(trust_env=False) as http:
        assert (await http.get(f"{server.url}/nope")).status_code == 401
        auth = {"Authorization": f"Bearer {server.token}"}
        assert (await http.get(f"{server.url}/nope", headers=auth)).status_code == 404


# --------------------------------------------------------------------------- body size


async def test_declared_oversized_body_gets_413_unread(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    c = await connect(server)
    await c.request("POST", "/v1/chat/completions", {"Content-Length": "1025"})
    status, headers, body = await c.answer()
    assert status == 413 and b"1024" in body
    assert headers["connection"] == "close"
    assert bridge.requests == []
    c.close()


async def test_chunked_body_is_counted_while_it_arrives(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    c = await connect(server)
    await c.request("POST", "/v1/chat/completions", {"Transfer-Encoding": "chunked"})
    for _ in range(3):  # 1536 bytes, over the limit of 1024, and never a final chunk
        await c.send(c.conn.send(h11.Data(data=b" " * 512)) or b"")
    status, _, _ = await c.answer()
    assert status == 413
    assert bridge.requests == []
    c.close()


async def test_body_within_the_limit_is_served(server: EndpointServer, bridge: FakeBridge) -> None:
    async with httpx.AsyncClient(trust_env=False) as http:
        body = b'{"model": "auto", "messages": [{"role": "user", "content": "%s"}]}'
        padded = body % (b"x" * (1024 - len(body) + 2))
        assert len(padded) == 1024
        response = await http.post(
            f"{server.url}/v1/chat/completions",
            content=padded,
            headers={"Authorization": f"Bearer {server.token}"},
        )
    assert response.status_code == 200


async def test_expect_100_continue_is_answered_only_after_the_checks(
    server: EndpointServer,
) -> None:
    body = b'{"model": "auto", "messages": [{"role": "user", "content": "x"}]}'
    expect = {"Expect": "100-continue", "Content-Length": str(len(body))}
    refused = await connect(server)
    await refused.request("POST", "/v1/chat/completions", expect, token=False)
    first = await asyncio.wait_for(refused.reader.read(65536), WAIT)
    assert first.startswith(b"HTTP/1.1 401")  # no 100 Continue: the body is not wanted
    refused.close()
    c = await connect(server)
    await c.request("POST", "/v1/chat/completions", expect)
    interim = await asyncio.wait_for(c.reader.readuntil(b"\r\n\r\n"), WAIT)
    assert interim.startswith(b"HTTP/1.1 100")
    await c.send(
        (c.conn.send(h11.Data(data=body)) or b"") + (c.conn.send(h11.EndOfMessage()) or b"")
    )
    status, _, answer = await c.answer()
    assert status == 200 and b"chat.completion" in answer
    c.close()


# --------------------------------------------------------------------------- deadlines


async def test_idle_kept_alive_connection_is_closed(bridge: FakeBridge) -> None:
    server = await started(bridge, idle_timeout=0.3)
    try:
        c = await connect(server)
        for _ in range(2):  # kept alive between two quick requests
            await c.request("GET", "/v1/models")
            await c.send(c.conn.send(h11.EndOfMessage()) or b"")
            status, headers, _ = await c.answer()
            assert status == 200 and headers.get("connection") != "close"
            c.conn.start_next_cycle()
        assert server.open_connections == 1
        assert await c.closed_by_server()  # idle for longer than 0.3 s
        assert server.open_connections == 0
        c.close()
    finally:
        await server.aclose()


async def test_slow_head_is_closed(bridge: FakeBridge) -> None:
    server = await started(bridge, head_timeout=0.3)
    try:
        c = await connect(server)
        await c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: ")  # and nothing more
        assert await c.closed_by_server()
        assert server.open_connections == 0
        c.close()
    finally:
        await server.aclose()


async def test_slow_body_gets_408(bridge: FakeBridge) -> None:
    server = await started(bridge, body_timeout=0.3)
    try:
        c = await connect(server)
        await c.request("POST", "/v1/chat/completions", {"Content-Length": "100"})
        await c.send(c.conn.send(h11.Data(data=b'{"model": ')) or b"")
        status, headers, _ = await c.answer()
        assert status == 408 and headers["connection"] == "close"
        assert await c.closed_by_server()
        assert bridge.requests == []
        c.close()
    finally:
        await server.aclose()


# --------------------------------------------------------------------------- flood


async def test_token_holder_is_answered_during_a_flood(
    bridge: FakeBridge, caplog: pytest.LogCaptureFixture
) -> None:
    """300 half-open connections and oversized unauthenticated requests, with the head deadline
    far away: the cap (not a timeout) keeps room, and the real client gets its answer."""
    caplog.set_level(logging.WARNING, "lmbridge.client.endpoint")
    server = await started(bridge, max_connections=32, head_timeout=60.0, linger=0.2)
    attackers: list[Raw] = []
    try:
        for i in range(300):
            c = await connect(server)
            attackers.append(c)
            with contextlib.suppress(ConnectionError):  # the cap may have closed it already
                await c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: " + b"x" * (i % 7))
        for _ in range(20):
            c = await connect(server)
            attackers.append(c)
            with contextlib.suppress(ConnectionError):
                await c.request(
                    "POST", "/v1/chat/completions", {"Content-Length": str(64 * MiB)}, token=False
                )
                await c.send(b"x" * 65536)
        assert server.open_connections <= 32
        bridge.script(GPT.id, [TextPart("still here")])
        client = openai.AsyncOpenAI(
            base_url=f"{server.url}/v1",
            api_key=server.token,
            max_retries=0,
            http_client=httpx.AsyncClient(trust_env=False),
        )
        completion = await asyncio.wait_for(
            client.chat.completions.create(
                model="gpt-4o-id", messages=[{"role": "user", "content": "x"}]
            ),
            WAIT,
        )
        assert completion.choices[0].message.content == "still here"
        await client.close()
        assert server.open_connections <= 32
        cap_lines = [r for r in caplog.records if "over the cap" in r.getMessage()]
        assert len(cap_lines) == 1  # rate-limited: one line for the whole flood
    finally:
        for c in attackers:
            c.writer.transport.abort()
        await server.aclose()
    assert server.open_connections == 0


async def test_over_the_cap_with_every_connection_busy_the_new_one_is_closed(
    bridge: FakeBridge,
) -> None:
    server = await started(bridge, max_connections=2)
    bridge.script(GPT.id, [TextPart("one"), 30.0])
    busy: list[Raw] = []
    try:
        for _ in range(2):
            c = await connect(server)
            busy.append(c)
            body = b'{"model": "gpt-4o-id", "stream": true, "messages": [{"role": "user", '
            body += b'"content": "x"}]}'
            await c.request("POST", "/v1/chat/completions", body=body)
            first = await asyncio.wait_for(c.reader.read(65536), WAIT)
            assert first.startswith(b"HTTP/1.1 200")
        extra = await connect(server)
        assert await extra.closed_by_server()
        assert server.open_connections == 2
        extra.close()
    finally:
        for c in busy:
            c.writer.transport.abort()
        await server.aclose()


# --------------------------------------------------------------------------- paths


async def test_paths_are_percent_decoded_for_the_openai_sdk(server: EndpointServer) -> None:
    client = openai.AsyncOpenAI(
        base_url=f"{server.url}/v1",
        api_key=server.token,
        max_retries=0,
        http_client=httpx.AsyncClient(trust_env=False),
    )
    model = await client.models.retrieve("openai/gpt-4o")  # sent as /v1/models/openai%2Fgpt-4o
    assert model.id == "openai/gpt-4o" and model.owned_by == "lmbridge"
    with pytest.raises(openai.NotFoundError):
        await client.models.retrieve("no/such model")
    await client.close()
    async with httpx.AsyncClient(trust_env=False) as http:
        auth = {"Authorization": f"Bearer {server.token}"}
        bad = await http.get(f"{server.url}/v1/models/%ff", headers=auth)
        assert bad.status_code == 400 and "UTF-8" in bad.json()["error"]["message"]


# --------------------------------------------------------------------------- the file's folder


async def test_existing_own_folder_is_made_private(bridge: FakeBridge, tmp_path: Path) -> None:
    folder = tmp_path / "lmbridge"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    server = EndpointServer(bridge, endpoint_file=folder / "endpoint.json")
    await server.start()
    try:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert stat.S_IMODE((folder / "endpoint.json").stat().st_mode) == 0o600
    finally:
        await server.aclose()


async def test_new_folders_are_private_and_a_named_folder_keeps_its_mode(
    bridge: FakeBridge, tmp_path: Path
) -> None:
    fresh = tmp_path / "a" / "b"
    named = tmp_path / "mine"
    named.mkdir()
    named.chmod(0o750)
    for path in (fresh / "endpoint.json", named / "endpoint.json"):
        server = EndpointServer(bridge, endpoint_file=path)
        await server.start()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        await server.aclose()
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700
    assert stat.S_IMODE(named.stat().st_mode) == 0o750


# --------------------------------------------------------------------------- plugging in an API


async def test_an_api_module_plugs_into_the_core(bridge: FakeBridge) -> None:
    """Routes with a placeholder and a header condition, the API's token header, its error
    shape and its own reading of a failure, without touching the core."""

    class Busy(Exception):
        pass

    def describe(exc: BaseException) -> ErrorInfo | None:
        if isinstance(exc, Busy):
            return ErrorInfo(529, "overloaded_error", "busy", headers=(("retry-after", "3"),))
        return None

    toy = Api(
        "toy",
        lambda info: {"type": "error", "error": {"type": info.type, "message": info.message}},
        token_headers=("x-api-key",),
        describe_error=describe,
    )

    async def echo(request: Request, out: Exchange) -> None:
        await out.json(200, {"name": request.params["name"], "beta": request.query.get("beta")})

    async def busy(request: Request, out: Exchange) -> None:
        raise Busy

    async def models(request: Request, out: Exchange) -> None:
        await out.json(200, {"toy": True})

    server = await started(bridge)
    server.add_route(Route("GET", "/toy/{name}", echo, toy))
    server.add_route(Route("POST", "/toy", busy, toy))
    server.add_route(Route("GET", "/v1/models", models, toy, when=lambda h: "toy-version" in h))
    with pytest.raises(ValueError, match="exists already"):
        server.add_route(Route("POST", "/toy", busy, toy))
    key = {"x-api-key": server.token}
    try:
        async with httpx.AsyncClient(trust_env=False) as http:
            ok = await http.get(f"{server.url}/toy/a%2Fb?beta=true", headers=key)
            assert ok.json() == {"name": "a/b", "beta": ["true"]}
            bearer = {"Authorization": f"Bearer {server.token}"}
            refused = await http.get(f"{server.url}/toy/a", headers=bearer)
            assert refused.status_code == 401
            assert refused.json()["error"]["type"] == "authentication_error"
            assert "x-api-key" in refused.json()["error"]["message"]
            failed = await http.post(f"{server.url}/toy", headers=key)
            assert failed.status_code == 529 and failed.headers["retry-after"] == "3"
            assert failed.json() == {
                "type": "error",
                "error": {"type": "overloaded_error", "message": "busy"},
            }
            mine = await http.get(f"{server.url}/v1/models", headers={**key, "toy-version": "1"})
            assert mine.json() == {"toy": True}
            theirs = await http.get(f"{server.url}/v1/models", headers=key)
            assert theirs.json()["object"] == "list"
    finally:
        await server.aclose()
