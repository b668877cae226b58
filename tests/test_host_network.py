"""VS Code's network settings in the host's HTTP client: the real host (a subprocess) sends
through a real proxy on 127.0.0.1 (tests/support/proxy.py) to a real upstream on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import httpcore
import httpx
import pytest

from lmbridge.gateway._network import ProxyRouter, ssl_verify
from lmbridge.host.client import HostClient
from lmbridge.host.jsonrpc import RemoteError
from lmbridge.network import NetworkSettings, no_proxy_matches, redact_proxy
from lmbridge.parts import ChatMessage, TextPart
from support.proxy import TestProxy
from support.replay_server import ReplayServer, Reply
from support.socks import SocksProxy

KEY = "sk-proxy-test-key-0123456789-NEVER-IN-CLEAR"
TEXT = "openai-chat/openai-text.chunks.txt"


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        server.route("POST", "/v1/chat/completions", Reply.fixture(TEXT))
        yield server


@pytest.fixture
def proxy(upstream: ReplayServer) -> Iterator[TestProxy]:
    with TestProxy(upstream.port) as p:
        yield p


def clean_env() -> dict[str, str]:
    # the proxy comes from the settings under test, not from the machine running the tests
    return {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}


def chat_entry(name: str, base_url: str) -> dict[str, Any]:
    return {
        "name": name,
        "format": "chat-completions",
        "baseUrl": base_url,
        "models": ["m"],
        "retry": {"maxAttempts": 1},
    }


def text_of(parts: list[Any]) -> str:
    return "".join(p.value for p in parts if isinstance(p, TextPart))


async def test_requests_go_through_the_proxy_except_loopback_and_no_proxy_hosts(
    upstream: ReplayServer, proxy: TestProxy
) -> None:
    providers = [
        chat_entry("via", "http://upstream.test/v1"),
        chat_entry("tls", "https://secure.test/v1"),
        chat_entry("local", upstream.url + "/v1"),
        chat_entry("direct", "http://direct.test/v1"),
    ]
    params = {
        "providers": providers,
        "secrets": {"tls": {"key": KEY, "origin": "https://secure.test:443"}},
        "network": {
            "proxy": proxy.url,
            "noProxy": ["direct.test", "other.example:8443"],
            "proxyStrictSSL": True,
            "systemCertificates": True,
        },
    }
    async with HostClient.start([], env=clean_env()) as host:
        result = await host.initialize(**params)
        assert all(p["ok"] for p in result["providers"]), result

        # a name only the proxy can reach: the request went through it, in absolute form
        parts, _ = await host.chat("via/m", [ChatMessage.user("hi")])
        assert text_of(parts)
        (seen,) = proxy.seen
        assert (seen.method, seen.target) == ("POST", "http://upstream.test/v1/chat/completions")
        assert upstream.requests[-1].headers["host"] == "upstream.test"

        # loopback is never proxied
        parts, _ = await host.chat("local/m", [ChatMessage.user("hi")])
        assert text_of(parts) and len(proxy.seen) == 1 and len(upstream.requests) == 2

        # a noProxy host is contacted directly (it does not resolve here, so it fails)
        with pytest.raises(RemoteError) as info:
            await host.chat("direct/m", [ChatMessage.user("hi")])
        assert "direct.test" in info.value.message
        assert len(proxy.seen) == 1 and len(upstream.requests) == 2

        # a noProxy host that resolves here (this machine's name, when it maps to 127.0.0.1,
        # yet is no loopback name) is reached directly and answers
        name = socket.gethostname().lower()
        try:
            resolves_here = socket.gethostbyname(name) == "127.0.0.1"
        except OSError:
            resolves_here = False
        if resolves_here and name != "localhost":
            await host.request(
                "configure",
                {
                    **params,
                    "providers": [*providers, chat_entry("named", f"http://{name}:{upstream.port}/v1")],
                    "network": {**params["network"], "noProxy": ["direct.test", name]},
                },
            )
            parts, _ = await host.chat("named/m", [ChatMessage.user("hi")])
            assert text_of(parts) and len(upstream.requests) == 3
            assert len(proxy.seen) == 1 and upstream.requests[-1].headers["host"].startswith(name)
            await host.request("configure", params)

        # https goes as a CONNECT tunnel: the proxy sees the host and port, never the key
        with pytest.raises(RemoteError):
            await host.chat("tls/m", [ChatMessage.user("hi")])
        connect = proxy.seen[1]
        assert (connect.method, connect.target) == ("CONNECT", "secure.test:443")
        assert "authorization" not in connect.headers
        assert connect.tunnelled.startswith(b"\x16\x03")  # a TLS handshake, nothing readable
        for seen in proxy.seen:
            assert KEY.encode() not in bytes(seen.tunnelled) + seen.body
            assert KEY not in repr(seen.headers)

        # without the setting (and no proxy in the environment) nothing goes to the proxy
        await host.request("configure", {**params, "network": None})
        with pytest.raises(RemoteError):
            await host.chat("via/m", [ChatMessage.user("hi")])
        assert len(proxy.seen) == 2


@pytest.mark.parametrize("scheme", ["socks5", "socks5h", "socks"])
async def test_requests_go_through_a_socks5_proxy(upstream: ReplayServer, scheme: str) -> None:
    with SocksProxy() as socks:
        params = {
            "providers": [chat_entry("via", f"http://upstream.test:{upstream.port}/v1")],
            "network": {"proxy": f"{scheme}://127.0.0.1:{socks.port}"},
        }
        async with HostClient.start([], env=clean_env()) as host:
            result = await host.initialize(**params)
            assert all(p["ok"] for p in result["providers"]), result
            parts, _ = await host.chat("via/m", [ChatMessage.user("hi")])
            assert text_of(parts)
            # a name only the proxy can reach: it resolved it
            assert socks.seen == [("upstream.test", upstream.port)]
            assert upstream.requests[-1].headers["host"] == f"upstream.test:{upstream.port}"


@pytest.mark.parametrize(
    ("proxy", "said"),
    [
        ("socks4://127.0.0.1:1080", "'socks4' proxies are not supported"),
        ("http://:8080", "is not a URL such as"),
        (8080, "is not a URL string"),
    ],
)
async def test_a_proxy_that_cannot_be_followed_is_reported_once_and_breaks_no_provider(
    upstream: ReplayServer, proxy: Any, said: str
) -> None:
    params = {
        "providers": [chat_entry("local", upstream.url + "/v1")],
        "network": {"proxy": proxy, "noProxy": []},
    }
    async with HostClient.start([], env=clean_env()) as host:
        result = await host.initialize(**params)
        assert all(p["ok"] for p in result["providers"]), result
        await host.request("configure", params)  # the same again: not said twice
        parts, _ = await host.chat("local/m", [ChatMessage.user("hi")])
        assert text_of(parts)
        reports = [e["message"] for e in host.logs if "network.proxy" in e["message"]]
        assert len(reports) == 1 and said in reports[0], host.logs
        assert "lmbridge's requests go without it" in reports[0]


async def test_an_environment_proxy_httpx_cannot_follow_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    router = ProxyRouter(NetworkSettings(), environ={"ALL_PROXY": "socks4://127.0.0.1:1"})
    assert router.proxy_for(httpx.URL("http://upstream.invalid/")) == "socks4://127.0.0.1:1"
    async with httpx.AsyncClient(transport=router) as client:
        for _ in range(2):
            # sent directly (the name does not resolve): a transport error, not httpx's
            # ValueError for a scheme it does not know
            with pytest.raises(httpx.ConnectError):
                await client.get("http://upstream.invalid/")
    said = [r.getMessage() for r in caplog.records if "cannot be used" in r.getMessage()]
    assert said == [
        "the proxy socks4://127.0.0.1:1 cannot be used (Unknown scheme for proxy URL "
        "URL('socks4://127.0.0.1:1')); requests go without it"
    ]


class _CancelInside:
    """A network backend whose connections cancel ``target`` (the task sending or reading a
    request) at one step of their life, as a chat request's cancellation lands now and then:
    ``"connect"`` right after the connect (the cancellation lands on httpcore's next await,
    before the request starts on the new connection), ``"close"`` as the connection is closed
    (httpx closes a response itself when its body ends), ``"failed read"`` together with a
    read that fails once the headers are in (a stream cut off), so that the cancellation lands
    while httpcore releases the connection."""

    def __init__(self, backend: Any, where: str) -> None:
        self.backend = backend
        self.where = where
        self.target: asyncio.Task[Any] | None = None
        self.streams: list[_Stream] = []

    def cancel(self, where: str) -> None:
        if self.where == where and self.target is not None:
            self.target.cancel()

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        stream = _Stream(await self.backend.connect_tcp(*args, **kwargs), self)
        self.streams.append(stream)
        self.cancel("connect")
        return stream

    async def all_closed(self) -> list[int]:
        """The file numbers of every connection's socket, once all are closed (-1) or after
        5 s: the host closes some in a task of their own."""
        for _ in range(500):
            if all(stream.socket().fileno() == -1 for stream in self.streams):
                break
            await asyncio.sleep(0.01)
        return [stream.socket().fileno() for stream in self.streams]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)


class _Stream:
    def __init__(self, stream: Any, owner: _CancelInside) -> None:
        self.stream = stream
        self.owner = owner
        self.reads = 0

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.reads += 1
        if self.reads > 1 and self.owner.where == "failed read":
            self.owner.cancel("failed read")
            raise httpcore.ReadError("the connection broke off")
        return await self.stream.read(max_bytes, timeout)

    async def aclose(self) -> None:
        self.owner.cancel("close")
        await self.stream.aclose()

    def socket(self) -> socket.socket:
        sock: socket.socket = self.stream.get_extra_info("socket")
        return sock

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


async def test_a_request_cancelled_right_after_its_connect_leaves_no_connection_behind(
    upstream: ReplayServer,
) -> None:
    """httpcore left such a connection in its pool for good (encode/httpcore#1093): a slot
    and a socket each, until the pool was full and every request failed."""
    router = ProxyRouter(NetworkSettings(), environ={})
    pool = router._direct._pool
    backend = _CancelInside(pool._network_backend, "connect")
    pool._network_backend = backend
    url = f"{upstream.url}/v1/chat/completions"
    for _ in range(3):
        sending = backend.target = asyncio.ensure_future(
            router.handle_async_request(httpx.Request("POST", url))
        )
        with pytest.raises(asyncio.CancelledError):
            await sending
    assert len(backend.streams) == 3
    assert pool.connections == []
    assert await backend.all_closed() == [-1, -1, -1]
    pool._network_backend = backend.backend
    response = await router.handle_async_request(httpx.Request("POST", url))
    await response.aread()
    assert response.status_code == 200
    await router.aclose()


@pytest.mark.parametrize("where", ["close", "failed read"])
async def test_a_cancellation_inside_httpcores_clean_up_leaves_nothing_behind(
    upstream: ReplayServer, where: str
) -> None:
    """httpcore releases a connection under an anyio shield, which a task's cancel() goes
    through. A cancellation landing in the close at the end of a body left the request in
    the pool for good (every later request walks past it); one landing in the release after
    a failed read left the connection counted in use (an open socket and a pool slot): the
    endurance run's hour ended with 59 of those."""
    upstream.route("POST", "/slow", Reply.fixture(TEXT, delay=0.02))
    router = ProxyRouter(NetworkSettings(), environ={})
    pool = router._direct._pool
    backend = _CancelInside(pool._network_backend, where)
    pool._network_backend = backend

    client = httpx.AsyncClient(transport=router)  # one client: closing it closes the pool

    async def read(url: str) -> bytes:
        async with client.stream("POST", url) as response:
            return await response.aread()

    for path in ("/v1/chat/completions", "/slow"):
        reading = backend.target = asyncio.ensure_future(read(upstream.url + path))
        with pytest.raises(asyncio.CancelledError):
            await reading
    assert len(backend.streams) == 2
    assert pool._requests == []
    assert pool.connections == []
    assert await backend.all_closed() == [-1, -1]
    pool._network_backend = backend.backend
    assert (await read(upstream.url + "/v1/chat/completions")).endswith(b"data: [DONE]\n\n")
    await client.aclose()


async def test_bad_network_settings_name_the_field() -> None:
    async with HostClient.start([], env=clean_env()) as host:
        for network, field in (
            ({"proxyStrictSSL": "no"}, "network.proxyStrictSSL"),
            ({"noProxy": "a.example"}, "network.noProxy"),
            ("on", "network"),
        ):
            with pytest.raises(RemoteError) as info:
                await host.initialize(providers=[], secrets={}, network=network)
            assert field in info.value.message, (network, info.value.message)
        # the host stays up and takes good settings
        result = await host.initialize(providers=[], secrets={}, network={"noProxy": []})
        assert result["providers"][0]["name"] == "echo"


def test_proxy_credentials_never_appear_in_messages() -> None:
    settings = NetworkSettings.from_wire({"proxy": "http://user:s3cret-pw@:8080"})
    assert settings.proxy is None and settings.problem is not None
    assert "s3cret-pw" not in settings.problem


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:p@ss@proxy.example:8080", "http://***@proxy.example:8080"),
        ("http://us@er:p@ss:w@rd@proxy.example:8080/", "http://***@proxy.example:8080/"),
        ("user:p@ss@proxy.example:3128", "http://***@proxy.example:3128"),
        ("http://proxy.example:8080", "http://proxy.example:8080"),
    ],
)
def test_redact_proxy_hides_a_password_with_an_at_sign_in_it(url: str, shown: str) -> None:
    redacted = redact_proxy(url)
    assert redacted == shown
    for secret in ("p@ss", "ss@", "w@rd", "rd@", "user", "us@er"):
        assert secret not in redacted


@pytest.mark.parametrize(
    ("entries", "host", "port", "bypass"),
    [
        (["example.com"], "example.com", 443, True),
        (["example.com"], "api.example.com", 443, True),
        (["example.com"], "notexample.com", 443, False),
        ([".example.com"], "api.example.com", 80, True),
        (["*.example.com"], "api.example.com", 80, True),
        (["example.com:8443"], "example.com", 8443, True),
        (["example.com:8443"], "example.com", 443, False),
        (["*"], "anything.org", 443, True),
        ([" API.Example.COM "], "api.example.com", 443, True),
        ([], "example.com", 443, False),
    ],
)
def test_no_proxy_matches_as_vscode_does(
    entries: list[str], host: str, port: int, bypass: bool
) -> None:
    assert no_proxy_matches(entries, host, port) is bypass


def test_the_router_picks_settings_then_environment_and_never_proxies_loopback() -> None:
    configured = ProxyRouter(
        NetworkSettings(proxy="http://proxy.corp:3128", no_proxy=("internal.corp",)),
        environ={"HTTPS_PROXY": "http://env-proxy:1"},
    )
    assert configured.proxy_for(httpx.URL("https://api.openai.com/v1")) == "http://proxy.corp:3128"
    assert configured.proxy_for(httpx.URL("https://llm.internal.corp/v1")) is None
    for url in ("http://127.0.0.1:1234/v1", "http://localhost:11434", "http://[::1]:8080/"):
        assert configured.proxy_for(httpx.URL(url)) is None
    from_env = ProxyRouter(
        NetworkSettings(), environ={"HTTPS_PROXY": "http://env-proxy:1", "NO_PROXY": "skip.me"}
    )
    assert from_env.proxy_for(httpx.URL("https://api.openai.com/v1")) == "http://env-proxy:1"
    assert from_env.proxy_for(httpx.URL("http://api.openai.com/v1")) is None  # no HTTP_PROXY
    assert from_env.proxy_for(httpx.URL("https://a.skip.me/")) is None
    assert from_env.proxy_for(httpx.URL("https://127.0.0.1/")) is None


def test_certificate_checks_follow_the_settings() -> None:
    import truststore

    assert ssl_verify(NetworkSettings(proxy_strict_ssl=False)) is False
    system = ssl_verify(NetworkSettings())
    assert isinstance(system, truststore.SSLContext) and isinstance(system, ssl.SSLContext)
    assert system.verify_mode == ssl.CERT_REQUIRED
    assert ssl_verify(NetworkSettings(system_certificates=False)) is True
