"""The API key over real HTTP: it goes to its own origin only, and never into a log or error.

A second :class:`ReplayServer` on 127.0.0.1 (another port, hence another origin) stands in for
an attacker's server: an absolute ``chatPath`` / ``modelsPath`` or a redirect pointing there must
never bring it the key. Each log and error path gets the key put into it (as the upstream echoes
it: plain, JSON-escaped, URL-encoded, broken by CR/LF, cut) and must come out without it.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from lmbridge.config import ProviderContext, parse_entries
from lmbridge.errors import ConfigError, LanguageModelError
from lmbridge.gateway import (
    AnthropicClient,
    ChatCompletionsClient,
    ModelCatalog,
    RetryPolicy,
    UpstreamClient,
    build_provider,
)
from lmbridge.gateway._errors import redact
from lmbridge.parts import ChatMessage, ResponsePart
from support.replay_server import RecordedRequest, ReplayServer, Reply
from support.streams import fixture_body

KEY = "sk-safety-Z9y8X7w6V5u4T3s2R1q0-DO-NOT-LEAK"
TEXT_STREAM = "openai-chat/openai-text.chunks.txt"


def forms(key: str) -> dict[str, str]:
    """The key as an upstream or a logger may print it."""
    return {
        "plain": key,
        "json-escaped": json.dumps(key, ensure_ascii=True)[1:-1],
        "unicode-escaped": "".join(f"\\u{ord(c):04x}" for c in key),
        "url-encoded": urllib.parse.quote(key, safe=""),
        "all-percent": "".join(f"%{b:02X}" for b in key.encode()),
        "split-crlf": f"{key[:14]}\r\n{key[14:]}",
        "split-escaped": json.dumps(f"{key[:14]}\r\n{key[14:]}")[1:-1],
        "split-u000d": f"{key[:14]}\\u000d\\u000a{key[14:]}",
        "repr": repr(f"{key[:10]}\n{key[10:]}"),
        "prefix": key[:24] + "...",
        "suffix": "..." + key[-20:],
    }


def leaks(text: str, key: str = KEY) -> list[str]:
    """12-character pieces of the key still in ``text`` (none after redaction)."""
    return [key[i : i + 12] for i in range(len(key) - 11) if key[i : i + 12] in text]


def has_key(req: RecordedRequest, key: str = KEY) -> bool:
    return any(key in v for v in req.headers.values()) or key.encode() in req.body


class Sink:
    def __init__(self) -> None:
        self.parts: list[ResponsePart] = []

    def report(self, value: ResponsePart) -> None:
        self.parts.append(value)


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


@pytest.fixture
def attacker() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    # follow_redirects=True on purpose: the client must not follow even when httpx would
    async with httpx.AsyncClient(trust_env=False, timeout=10, follow_redirects=True) as client:
        yield client


def make(
    cls: type[UpstreamClient], upstream: ReplayServer, http: httpx.AsyncClient, **kw: Any
) -> UpstreamClient:
    async def no_sleep(_: float) -> None:
        return None

    kw.setdefault("retry", RetryPolicy(max_attempts=1, jitter=0.0))
    return cls(http, base_url=upstream.url + "/v1", api_key=KEY, provider="p", sleep=no_sleep, **kw)


# --------------------------------------------------------------------------- redact


@pytest.mark.parametrize("form", list(forms(KEY)))
def test_redact_covers_escaped_split_and_cut_forms(form: str) -> None:
    text = f"error: invalid key {forms(KEY)[form]} (code 401)"
    out = redact(text, [KEY])
    assert "[redacted]" in out and not leaks(out), out
    assert out.startswith("error: invalid key ") and out.endswith(" (code 401)")


def test_redact_covers_a_key_that_holds_a_line_break() -> None:
    key = "sk-abc123\r\ndef456ghi789"
    for text in (key, json.dumps(key), repr(key), urllib.parse.quote(key)):
        assert redact(f"x {text} y", [key]).count("abc123") == 0
        assert "def456" not in redact(f"x {text} y", [key])


def test_redact_leaves_short_and_unrelated_text() -> None:
    text = "sk-proj- is the prefix; the key ends in ...LEAK; api-version=2024"
    assert redact(text, [KEY, None, ""]) == text


# --------------------------------------------------------------------------- where the key goes


async def test_an_absolute_chat_path_elsewhere_gets_no_key(
    upstream: ReplayServer, attacker: ReplayServer, http: httpx.AsyncClient
) -> None:
    attacker.route("POST", "/steal", Reply.sse(fixture_body(TEXT_STREAM)))
    client = make(ChatCompletionsClient, upstream, http, chat_path=attacker.url + "/steal")
    await client.stream("m", [ChatMessage.user("hi")], None, Sink())
    (req,) = attacker.wait_for_requests(1)
    assert not has_key(req) and "authorization" not in req.headers


@pytest.mark.parametrize("header", [None, "api-key"])
async def test_an_absolute_models_path_elsewhere_gets_no_key(
    upstream: ReplayServer, attacker: ReplayServer, http: httpx.AsyncClient, header: str | None
) -> None:
    attacker.route("GET", "/models", Reply.json({"data": [{"id": "m"}]}))
    client = make(
        AnthropicClient, upstream, http, models_path=attacker.url + "/models", api_key_header=header
    )
    models = await ModelCatalog(client).models()
    assert [m.info.id for m in models] == ["m"]
    (req,) = attacker.wait_for_requests(1)
    assert not has_key(req)
    assert "anthropic-version" in req.headers  # the rest of the request is unchanged


async def test_the_own_origin_still_gets_the_key(
    upstream: ReplayServer, http: httpx.AsyncClient
) -> None:
    upstream.route("POST", "/v1/chat/completions", Reply.sse(fixture_body(TEXT_STREAM)))
    client = make(ChatCompletionsClient, upstream, http, chat_path=upstream.url + "/v1/chat/completions")
    await client.stream("m", [ChatMessage.user("hi")], None, Sink())
    (req,) = upstream.wait_for_requests(1)
    assert req.headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_redirects_are_not_followed_so_the_key_stays_home(
    upstream: ReplayServer, attacker: ReplayServer, http: httpx.AsyncClient, status: int
) -> None:
    attacker.route("POST", "/v1/messages", Reply.sse(fixture_body(TEXT_STREAM)))
    attacker.route("GET", "/v1/models", Reply.json({"data": [{"id": "m"}]}))
    moved = {"location": attacker.url + "/v1/messages"}
    upstream.route("POST", "/v1/messages", Reply(status, headers=moved, body=b""))
    upstream.route("GET", "/v1/models", Reply(status, headers={"location": attacker.url + "/v1/models"}, body=b""))
    client = make(AnthropicClient, upstream, http)  # x-api-key: httpx would carry it along
    with pytest.raises(LanguageModelError, match=f"HTTP {status}"):
        await client.stream("m", [ChatMessage.user("hi")], None, Sink())
    with pytest.raises(LanguageModelError):
        await ModelCatalog(client).models()
    assert attacker.requests == []


def test_credentials_in_chat_path_are_refused() -> None:
    (entry,) = parse_entries(
        [
            {
                "name": "p",
                "format": "chat-completions",
                "baseUrl": "https://x.example/v1",
                "chatPath": "/chat?api_key=s3cr3t-value",
            }
        ]
    )
    assert not isinstance(entry, ConfigError)
    with pytest.raises(ConfigError, match="chatPath: its query parameter 'api_key'") as info:
        build_provider(entry, ProviderContext("p"))
    assert "s3cr3t" not in str(info.value)


# --------------------------------------------------------------------------- every log and error path


def _echo(key_text: str) -> bytes:
    return json.dumps({"error": {"message": f"Incorrect API key provided: {key_text}"}}).encode()


@pytest.mark.parametrize("form", list(forms(KEY)))
async def test_error_bodies_never_show_the_key(
    upstream: ReplayServer, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture, form: str
) -> None:
    caplog.set_level(logging.DEBUG)
    upstream.route("POST", "/v1/chat/completions", Reply(401, body=_echo(forms(KEY)[form])))
    upstream.route("GET", "/v1/models", Reply(403, body=_echo(forms(KEY)[form])))
    client = make(ChatCompletionsClient, upstream, http)
    with pytest.raises(LanguageModelError) as chat:
        await client.stream("m", [ChatMessage.user("hi")], None, Sink())
    with pytest.raises(LanguageModelError) as catalog:
        await ModelCatalog(client).models()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "Incorrect API key provided" in logged  # the bodies were logged
    for text in (str(chat.value), str(catalog.value), logged):
        assert not leaks(text), text


@pytest.mark.parametrize("form", ["plain", "json-escaped", "split-escaped", "prefix"])
async def test_a_json_answer_instead_of_a_stream_is_logged_without_the_key(
    upstream: ReplayServer, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture, form: str
) -> None:
    caplog.set_level(logging.DEBUG)
    upstream.route(
        "POST",
        "/v1/chat/completions",
        Reply(200, headers={"content-type": "application/json"}, body=_echo(forms(KEY)[form])),
    )
    client = make(ChatCompletionsClient, upstream, http)
    with pytest.raises(LanguageModelError, match="JSON document instead of an event stream") as info:
        await client.stream("m", [ChatMessage.user("hi")], None, Sink())
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "a JSON answer instead of an event stream" in logged
    assert not leaks(logged) and not leaks(str(info.value))


async def test_the_logged_request_url_never_shows_the_key(
    upstream: ReplayServer, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    # a key that ended up in a path segment (some gateways take it there)
    caplog.set_level(logging.DEBUG, logger="lmbridge")
    path = f"/{KEY}/v1/chat/completions"
    upstream.route("POST", path, Reply.sse(fixture_body(TEXT_STREAM)))
    upstream.route("GET", f"/{KEY}/v1/models", Reply(500, body=b"no"))
    client = ChatCompletionsClient(
        http, base_url=f"{upstream.url}/{KEY}/v1", api_key=KEY, provider="p",
        retry=RetryPolicy(max_attempts=1),
    )  # fmt: skip
    await client.stream("m", [ChatMessage.user("hi")], None, Sink())
    with pytest.raises(LanguageModelError):
        await ModelCatalog(client).models()
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("lmbridge"))
    assert "POST " in logged and "HTTP 500" in logged
    assert not leaks(logged), logged


@pytest.mark.parametrize("form", ["plain", "split-crlf", "url-encoded", "prefix"])
async def test_a_network_error_message_never_shows_the_key(
    caplog: pytest.LogCaptureFixture, form: str
) -> None:
    caplog.set_level(logging.DEBUG)
    text = forms(KEY)[form]

    def fail(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"proxy said: bad credentials {text}", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(fail)) as http:
        client = ChatCompletionsClient(
            http, base_url="https://api.example.com/v1", api_key=KEY, provider="p",
            retry=RetryPolicy(max_attempts=2, initial_delay=0.0, jitter=0.0),
        )  # fmt: skip
        with pytest.raises(LanguageModelError, match="cannot reach p") as chat:
            await client.stream("m", [ChatMessage.user("hi")], None, Sink())
        with pytest.raises(LanguageModelError, match="cannot reach p") as catalog:
            await ModelCatalog(client).models()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "retrying" in logged
    for out in (str(chat.value), str(catalog.value), logged):
        assert not leaks(out), out


async def test_a_stream_that_breaks_off_is_logged_without_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)

    class Broken(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
            raise httpx.ReadError(f"reset by peer {forms(KEY)['split-crlf']}")

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Broken())

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        client = ChatCompletionsClient(
            http, base_url="https://api.example.com/v1", api_key=KEY, provider="p"
        )
        sink = Sink()
        with pytest.raises(LanguageModelError, match="broke off") as info:
            await client.stream("m", [ChatMessage.user("hi")], None, sink)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "the stream broke off" in logged
    assert not leaks(logged) and not leaks(str(info.value))
    assert sink.parts  # what came before the break stays
