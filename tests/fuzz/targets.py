"""Fuzz targets: everything that parses bytes from outside, each with the invariants it holds.

A target is a function of one input (bytes) that returns normally for every input and raises
(an ``AssertionError`` naming the broken invariant, or the unexpected exception itself) when
the code under test misbehaves. The same functions run three ways:

- ``tests/test_fuzz.py`` replays every file of ``tests/fuzz/corpus/<target>/`` (the seeds and
  every input that once failed) through its target: deterministic, in every test run;
- the same test module runs each target for a few seconds under atheris, coverage-guided, in
  a subprocess (``tests/fuzz/run.py``);
- ``scripts/fuzz --minutes N`` runs them longer, keeping what it finds.

What "only the documented errors" means per target: the decoders (SSE, every upstream format,
the frame decoder) never raise: a broken stream is data (an ``error`` on the result, a
:class:`~lmbridge.host.framing.FrameError`); the request parsers answer 4xx, never 5xx, over
HTTP; the converters raise :class:`~lmbridge.errors.ConversionError` /
:class:`~lmbridge.errors.WireError`; the model-list parsers ``ValueError`` (a
:class:`~lmbridge.errors.ConfigError` for the configured models); the configuration loader
:class:`~lmbridge.errors.ConfigError`. Decoders must also give the same result whatever the
chunking of their input: each input is decoded whole and cut at places derived from its own
bytes (so a failing input replays exactly).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["TARGETS", "chunkings", "shutdown"]

Target = Callable[[bytes], None]
TARGETS: dict[str, Target] = {}
"""Every target by name (the name is also its corpus folder)."""


def target(name: str) -> Callable[[Target], Target]:
    def register(fn: Target) -> Target:
        TARGETS[name] = fn
        return fn

    return register


def chunkings(data: bytes) -> Iterator[list[bytes]]:
    """Ways to cut ``data``: at a few places drawn from its own checksum, and byte by byte
    when it is short (CR/LF pairs and multi-byte characters get split either way)."""
    rng = random.Random(zlib.crc32(data))
    for _ in range(2):
        if len(data) < 2:
            break
        cuts = sorted({rng.randrange(1, len(data)) for _ in range(rng.randint(1, 8))})
        yield [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    if 1 < len(data) <= 300:
        yield [data[i : i + 1] for i in range(len(data))]


def json_value(data: bytes) -> Any:
    """``data`` as JSON as the host reads it (:func:`lmbridge._json.loads`: its messages and
    the endpoint's bodies), or a ``_NotJson`` marker: the JSON targets skip what is not JSON
    (the JSON parser is not what they test)."""
    from lmbridge._json import loads

    try:
        return loads(data)
    except ValueError:
        return _NOT_JSON


_NOT_JSON: Any = object()


def _serialisable(value: Any, what: str) -> None:
    """``value`` is JSON that UTF-8 can carry (what goes on a wire: no lone surrogates)."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    text.encode("utf-8")  # UnicodeEncodeError: a lone surrogate reached a request body
    assert text, what


# --------------------------------------------------------------------------- SSE


def _sse_feeds(chunks: list[bytes], *, blocks: bool, strict: bool = False) -> list[Any]:
    from lmbridge.sse import SSEDecoder

    decoder = SSEDecoder(strict=strict, blocks=blocks)
    out: list[Any] = [decoder.feed_raw(chunk) for chunk in chunks]
    out.append(decoder.close_raw())
    out.append(decoder.last_event_id)
    return out


def _flat(feeds: list[Any]) -> list[Any]:
    return [event for batch in feeds[:-1] for event in batch] + [feeds[-1]]


@target("sse")
def sse(data: bytes) -> None:
    """The event-stream decoder: the block path and the line path (the reference) give the
    same events from every ``feed()`` of every chunking, and the same stream whatever the
    chunking; the object API agrees with the raw one."""
    from lmbridge.sse import SSEDecoder

    for strict in (False, True):
        whole = _flat(_sse_feeds([data], blocks=False, strict=strict))
        for chunks in chunkings(data):
            lines = _sse_feeds(chunks, blocks=False, strict=strict)
            fast = _sse_feeds(chunks, blocks=True, strict=strict)
            assert fast == lines, "the block path and the line path differ at some feed()"
            assert _flat(lines) == whole, "the events depend on the chunking"
    decoder = SSEDecoder()
    objects = [*decoder.feed(data), *decoder.close()]
    raw = [e for e in _flat(_sse_feeds([data], blocks=True))[:-1]]
    assert [(e.event, e.raw, e.id, e.retry) for e in objects] == raw
    for e in objects:
        assert isinstance(e.data, str)


# --------------------------------------------------------------------------- upstream decoders


def _decoded(format: str, chunks: list[bytes], *, array: bool = False) -> tuple[Any, ...]:
    from lmbridge.errors import UpstreamError
    from lmbridge.parts import DataPart, TextPart, ThinkingPart, ToolCallPart
    from lmbridge.upstream import ByteStreamDecoder, decoder_for
    from lmbridge.upstream.gemini import GeminiArrayStreamDecoder

    decoder = GeminiArrayStreamDecoder() if array else ByteStreamDecoder(decoder_for(format))
    result = decoder.decode_all(chunks)
    assert result.error is None or isinstance(result.error, UpstreamError), result.error
    for part in result.parts:
        assert isinstance(part, (TextPart, ThinkingPart, ToolCallPart, DataPart)), part
        if isinstance(part, ToolCallPart):
            assert isinstance(part.input, dict), part
            _serialisable(part.input, "tool call input")
    error = None if result.error is None else (type(result.error), str(result.error))
    return (result.parts, result.usage, result.finish_reason, result.raw_finish_reason, error)


def _decoder_target(format: str, *, array: bool = False) -> Target:
    def run(data: bytes) -> None:
        from lmbridge.upstream import set_json_loads, stdlib_loads

        whole = _decoded(format, [data], array=array)
        for chunks in chunkings(data):
            assert _decoded(format, chunks, array=array) == whole, "the result depends on the chunking"
        # the standard library's parser (the path without orjson) reads the same stream; the
        # two word their errors differently
        set_json_loads(stdlib_loads)
        try:
            other = _decoded(format, [data], array=array)
        finally:
            set_json_loads(None)
        assert other[:4] == whole[:4], "orjson and json give different parts"
        assert (other[4] is None) == (whole[4] is None), "orjson and json differ on the error"
        assert other[4] is None or other[4][0] is whole[4][0], (other[4], whole[4])

    run.__doc__ = (
        f"The {format} decoder{' (JSON-array form)' if array else ''}: never raises, and gives "
        "the same result whatever the chunking and the JSON parser."
    )
    return run


for _fmt in ("chat-completions", "responses", "anthropic", "ai-sdk", "gemini"):
    target(f"decode-{_fmt}")(_decoder_target(_fmt))
target("decode-gemini-array")(_decoder_target("gemini", array=True))


# --------------------------------------------------------------------------- JSON-RPC framing


@target("framing")
def framing(data: bytes) -> None:
    """The frame decoder never raises; a stream of valid frames decodes to the same messages
    whatever the chunking; every message read encodes back to a frame that reads the same."""
    from lmbridge.host.framing import FrameDecoder, FrameError, Message, encode_message

    decoder = FrameDecoder()
    whole = decoder.feed(data)
    for event in whole:
        assert isinstance(event, (Message, FrameError)), event
        if isinstance(event, Message):
            again = FrameDecoder().feed(encode_message(event.value))
            assert again == [event], (event, again)
    if not any(isinstance(e, FrameError) for e in whole):
        for chunks in chunkings(data):
            decoder = FrameDecoder()
            events = [e for chunk in chunks for e in decoder.feed(chunk)]
            assert events == whole, "the messages depend on the chunking"


class _Peer:
    """A JSON-RPC connection with a few handlers, on a loop of its own (made once)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.failures: list[logging.LogRecord] = []
        self.handler = logging.Handler(logging.ERROR)
        self.handler.emit = self.failures.append  # type: ignore[method-assign]
        logging.getLogger("lmbridge").addHandler(self.handler)


    def close(self) -> None:
        logging.getLogger("lmbridge").removeHandler(self.handler)
        self.loop.close()


_PEER: _Peer | None = None


async def _rpc_session(data: bytes) -> tuple[list[Any], int, list[asyncio.Future[Any]]]:
    from lmbridge.host.jsonrpc import JsonRpcConnection, RpcError

    written = bytearray()
    conn = JsonRpcConnection(written.extend, name="fuzz")

    async def echo(params: Any, _request: Any) -> Any:
        await asyncio.sleep(0)
        return params

    async def fail(params: Any, _request: Any) -> Any:
        raise RpcError(-32001, f"failed: {str(params)[:40]}")

    async def wait(_params: Any, _request: Any) -> Any:
        await asyncio.Event().wait()  # until cancelled

    conn.on_request("echo", echo)
    conn.on_request("fail", fail)
    conn.on_request("wait", wait)
    conn.on_notification("note", lambda params: None)
    # requests of ours that the input may answer (ids 1, 2, 3)
    pending = [conn.send_request("ask", {"n": n})[1] for n in range(3)]
    written.clear()
    for chunk in next(chunkings(data), [data]):
        conn.feed(chunk)
        await asyncio.sleep(0)
    for _ in range(3):
        await asyncio.sleep(0)
    conn.connection_lost()
    for _ in range(5):
        await asyncio.sleep(0)
    inflight = len(conn.inflight)
    for fut in pending:
        if fut.done() and not fut.cancelled():
            fut.exception()  # retrieved: no "never retrieved" warning
    return _frames(bytes(written)), inflight, pending


def _frames(data: bytes) -> list[Any]:
    """The JSON values of the frames a connection wrote (the standard library's parser: it
    also reads lone surrogate escapes, as the extension's JSON.parse does)."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep and head.startswith(b"Content-Length: "), data[:100]
        length = int(head[16:])
        assert len(rest) >= length, "a frame written in part"
        out.append(json.loads(rest[:length]))
        data = rest[length:]
    return out


@target("jsonrpc")
def jsonrpc(data: bytes) -> None:
    """A JSON-RPC peer fed arbitrary bytes: nothing raises out of ``feed()``, nothing is logged
    as a failure of the connection's own code, every frame it writes is a JSON-RPC 2.0
    message, no request is left in flight after the connection ends, and every request of
    ours gets an answer or the connection's end."""
    global _PEER
    if _PEER is None:
        _PEER = _Peer()
    peer = _PEER
    peer.failures.clear()
    answers, inflight, pending = peer.loop.run_until_complete(_rpc_session(data))
    bugs = [r for r in peer.failures if r.exc_info]
    assert not bugs, [r.getMessage() for r in bugs]
    for msg in answers:
        assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0", msg
        if "error" in msg:
            error = msg["error"]
            assert isinstance(error.get("code"), int) and isinstance(error.get("message"), str)
    assert inflight == 0, f"{inflight} requests still in flight after the connection ended"
    for fut in pending:
        assert fut.done(), "a request of ours was neither answered nor failed at the end"


# --------------------------------------------------------------------------- the endpoint


class _Endpoint:
    """The loopback endpoint with a scripted VS Code behind it, on a loop in a thread."""

    def __init__(self) -> None:
        import httpx

        from lmbridge.client.endpoint import EndpointServer
        from lmbridge.client.testing import FakeBridge, fake_model
        from lmbridge.parts import ModelCapabilities

        self.bridge = FakeBridge(
            [
                fake_model(
                    "claude-sonnet-4.6",
                    vendor="copilot",
                    family="claude-sonnet-4.6",
                    max_input_tokens=100_000,
                    capabilities=ModelCapabilities(image_input=True, tool_calling=True),
                ),
                fake_model("gpt-4o", vendor="copilot", family="gpt-4o", max_input_tokens=100_000),
            ]
        )
        self.loop = asyncio.new_event_loop()
        self.server = EndpointServer(
            self.bridge, endpoint_file=False, keepalive=5, first_part_wait=5
        )
        self.thread = threading.Thread(
            target=self.loop.run_forever, daemon=True, name="fuzz-endpoint"
        )
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)
        self.client = httpx.Client(base_url=self.server.url, trust_env=False, timeout=20)

    def idle(self) -> bool:
        return self.bridge.active_streams == 0

    def close(self) -> None:
        self.client.close()
        asyncio.run_coroutine_threadsafe(self.server.aclose(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


_ENDPOINT: _Endpoint | None = None


def _request_of(data: bytes) -> tuple[str, str, list[tuple[str, str]], bytes] | None:
    """``METHOD PATH`` line, ``name: value`` header lines, a blank line, the body."""
    head, _, body = data.partition(b"\n\n")
    try:
        lines = head.decode("ascii").split("\n")
    except UnicodeDecodeError:
        return None
    method, _, path = lines[0].partition(" ")
    if not path.startswith("/") or method not in ("GET", "POST", "PUT", "DELETE", "HEAD"):
        return None
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            return None
        headers.append((name.strip(), value.strip()))
    return method, path, headers, body


@target("endpoint")
def endpoint(data: bytes) -> None:
    """A request to the loopback endpoint (``METHOD PATH``, header lines, blank line, body;
    the token and ``Host`` are added): answered with a status below 500 (bad input is the
    client's error: 4xx naming the problem; the scripted model never fails), and every
    VS Code request it started is ended once the answer is read."""
    import httpx

    global _ENDPOINT
    if _ENDPOINT is None:
        _ENDPOINT = _Endpoint()
    ep = _ENDPOINT
    request = _request_of(data)
    if request is None:
        return
    method, path, headers, body = request
    names = {name.lower() for name, _ in headers}
    if "authorization" not in names and "x-api-key" not in names:
        headers.append(("authorization", f"Bearer {ep.server.token}"))
    headers = [
        (name, value.replace("{token}", ep.server.token)) for name, value in headers
        if name.lower() not in ("host", "content-length", "transfer-encoding", "connection")
    ]
    try:
        response = ep.client.request(method, path, headers=headers, content=body)
    except (httpx.LocalProtocolError, httpx.InvalidURL, UnicodeEncodeError, ValueError):
        return  # not a request an HTTP client can send
    assert response.status_code < 500, (response.status_code, response.text[:500])
    if response.status_code >= 400 and response.content:
        error = response.json()
        assert isinstance(error, dict) and ("error" in error or "type" in error), error
    for _ in range(2000):
        if ep.idle():
            break
        threading.Event().wait(0.001)
    assert ep.idle(), "a VS Code request is still running after its answer was read"


def shutdown() -> None:
    """Close what the targets keep between inputs (the endpoint, the JSON-RPC peer's loop)."""
    global _ENDPOINT, _PEER
    if _ENDPOINT is not None:
        _ENDPOINT.close()
        _ENDPOINT = None
    if _PEER is not None:
        _PEER.close()
        _PEER = None


# --------------------------------------------------------------------------- converters


_FORMAT_ARGS = {
    "chat-completions": {"model": "m"},
    "responses": {"model": "m"},
    "anthropic": {"model": "m", "max_tokens": 100},
    "ai-sdk": {},
    "gemini": {},
}


@target("convert")
def convert(data: bytes) -> None:
    """VS Code messages as the host receives them (``{"messages": [...], "options": {...}}``
    in the wire shape) to every upstream's request body, and other shapes' histories
    (``{"anthropic" | "chat" | "gemini": [...], "system": ...}``) to VS Code messages: only
    ``WireError`` / ``ConversionError``, and every body is JSON that UTF-8 can carry."""
    from lmbridge import formats
    from lmbridge.convert import from_anthropic, from_chat_completions, from_gemini
    from lmbridge.errors import ConversionError, WireError
    from lmbridge.parts import ChatMessage, messages_from_wire, options_from_wire

    doc = json_value(data)
    if not isinstance(doc, dict):
        return
    batches: list[list[ChatMessage]] = []
    options = None
    try:
        if "messages" in doc:
            batches.append(messages_from_wire(doc["messages"]))
        options = options_from_wire(doc.get("options"))
    except WireError:
        return
    system = doc.get("system")
    for key, consumer in (
        ("anthropic", from_anthropic),
        ("chat", from_chat_completions),
        ("gemini", from_gemini),
    ):
        if key in doc:
            with contextlib.suppress(ConversionError):
                batches.append(consumer(doc[key], system))  # type: ignore[operator]
    for messages in batches:
        for name, args in _FORMAT_ARGS.items():
            fn = formats.get(name).converter_function()
            try:
                body = fn(messages, options, **args)
            except ConversionError:
                continue
            _serialisable(body, f"{name} body")


# --------------------------------------------------------------------------- model lists, config


@target("catalog")
def catalog(data: bytes) -> None:
    """A ``GET /models`` answer, read by both model-list parsers, and the configuration's
    static model list: only ``ValueError`` (``ConfigError`` for the configuration), and each
    model has a string id and positive limits."""
    from lmbridge.errors import ConfigError
    from lmbridge.gateway.catalog import parse_catalog, parse_static_models
    from lmbridge.gateway.gemini import parse_gemini_catalog

    doc = json_value(data)
    if doc is _NOT_JSON:
        return
    found = []
    for parser in (parse_catalog, parse_gemini_catalog):
        try:
            found += parser(doc, provider="p")
        except ValueError as exc:
            assert not isinstance(exc, ConfigError) or parser is not parse_catalog
    if isinstance(doc, list):
        with contextlib.suppress(ConfigError):
            found += parse_static_models(doc, provider="p")
    for model in found:
        info = model.info
        assert isinstance(info.id, str) and info.id, info
        assert info.max_input_tokens > 0 and info.max_output_tokens > 0, info


@target("config")
def config(data: bytes) -> None:
    """A configuration file (read as ``.json``, ``.toml`` and without a suffix) and the
    providers and secrets in it: only ``ConfigError``, whatever the bytes."""
    from lmbridge.config import load_config_file, parse_entries, parse_secrets
    from lmbridge.errors import ConfigError

    with tempfile.TemporaryDirectory(prefix="lmbridge-fuzz-") as tmp:
        loaded = []
        for name in ("providers.json", "providers.toml", "providers"):
            path = Path(tmp) / name
            path.write_bytes(data)
            with contextlib.suppress(ConfigError):
                loaded.append(load_config_file(path))
    for doc in loaded:
        for entry in parse_entries(doc.get("providers")):
            assert entry is not None
        with contextlib.suppress(ConfigError):
            parse_secrets(doc.get("secrets"))
