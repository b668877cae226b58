"""The real host as a subprocess, spoken to as the VS Code extension does.

The providers below are loaded *by the host process* (``test_host:HostTestProvider``, with this
folder on ``PYTHONPATH``), next to the built-in echo model and the function-tool example.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from lmbridge.config import ProviderContext
from lmbridge.errors import LanguageModelError
from lmbridge.host.client import HostClient
from lmbridge.host.framing import encode_message
from lmbridge.host.jsonrpc import RemoteError
from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    ModelInfo,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from lmbridge.provider import (
    CancellationToken,
    LanguageModelChatProvider,
    ResponseItem,
    ResponseProgress,
    model_info,
)

TESTS = Path(__file__).parent
EXAMPLES = TESTS.parent / "examples"
SECRET = "sk-test-" + secrets.token_hex(12)
SECRET_2 = "sk-storage-" + secrets.token_hex(12)
SECRET_INLINE = "sk-inline-" + secrets.token_hex(12)


class HostTestProvider(LanguageModelChatProvider):
    """Behaviour by model id; runs inside the host process."""

    def __init__(self, *, context: ProviderContext) -> None:
        super().__init__()
        self.context = context
        self.models = tuple(
            model_info(i, tool_calling=True)
            for i in ("tagged", "slow", "fail", "print", "key", "change")
        )

    async def provide_language_model_chat_response(
        self,
        model: ModelInfo,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        progress: ResponseProgress,
        token: CancellationToken,
    ) -> AsyncIterator[ResponseItem]:
        text = messages[-1].text
        mo = options.model_options
        if model.id == "tagged":
            for i in range(int(mo.get("count", 200))):
                yield TextPart(f"{text}:{i} ")
                if i % 7 == 0:
                    await asyncio.sleep(0)
        elif model.id == "slow":
            try:
                for i in range(5000):
                    yield TextPart(f"{i} ")
                    await asyncio.sleep(0.002)
            finally:  # where an upstream response would be closed
                Path(mo["marker"]).write_text("closed")  # noqa: ASYNC240
        elif model.id == "fail":
            yield TextPart("before the failure")
            if text == "runtime":
                raise RuntimeError("the provider's bug")
            if text == "violate":
                yield ToolResultPart("c", [TextPart("not allowed in a response")])
            if text == "blocked":
                raise LanguageModelError.blocked("rate limited; retry in 20 s")
        elif model.id == "print":
            print("STRAY-PRINT from a provider")
            os.write(1, b"STRAY-FD-WRITE\n")
            yield TextPart("printed")
        elif model.id == "key":
            self.context.log.debug("key present: %s", self.context.api_key is not None)
            yield TextPart(f"key length {len(self.context.api_key or '')}")
        elif model.id == "change":
            self.models_changed()
            yield TextPart("changed")


CONFIG = {
    "providers": [
        {"name": "t", "provider": "test_host:HostTestProvider", "apiKeyEnv": "LMB_TEST_SECRET"},
        {"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider", "delay": 0},
        {"name": "calc", "provider": "function_tool_provider:calculator"},
        {"name": "broken", "provider": "no_such_module_for_lmbridge:X"},
        {"name": "weird", "format": "grpc", "baseUrl": "http://127.0.0.1:9"},
    ]
}


@pytest.fixture
def host_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(EXAMPLES), env.get("PYTHONPATH", "")])
    env["LMB_TEST_SECRET"] = SECRET
    return env


@pytest.fixture
async def host(tmp_path: Path, host_env: dict[str, str]) -> AsyncIterator[HostClient]:
    config = tmp_path / "providers.json"
    config.write_text(json.dumps(CONFIG))
    with (tmp_path / "stderr.txt").open("wb") as err:
        async with HostClient.start(
            # --keep-going: broken entries are reported in initialize, as for VS Code's settings
            ["--config", str(config), "--keep-going", "--log-level", "debug"],
            env=host_env,
            stderr=err,
            record=True,
        ) as client:
            await client.initialize(providers=[], secrets={"echo": SECRET_2})
            yield client


def stderr_of(tmp_path: Path) -> str:
    return (tmp_path / "stderr.txt").read_text(encoding="utf-8", errors="replace")


async def test_initialize_lists_providers_and_isolates_the_broken_ones(
    host: HostClient, tmp_path: Path
) -> None:
    result = await host.initialize(providers=[], secrets={})
    status = {p["name"]: p for p in result["providers"]}
    assert result["vendor"] == "lmbridge"
    assert [n for n, p in status.items() if p["ok"]] == ["t", "echo", "calc"]
    assert "cannot import 'no_such_module_for_lmbridge'" in status["broken"]["error"]
    assert "unknown format 'grpc'" in status["weird"]["error"]
    # reported once each (initialize ran twice), as log notifications and on stderr
    errors = [log["message"] for log in host.logs if log["level"] == "error"]
    assert sum("'broken'" in m for m in errors) == 1
    assert sum("'weird'" in m for m in errors) == 1
    await asyncio.sleep(0.05)
    assert "no_such_module_for_lmbridge" in stderr_of(tmp_path)
    # a request to a broken provider fails with its configuration error; others work
    with pytest.raises(RemoteError) as info:
        await host.chat("broken/x", [ChatMessage.user("hi")])
    assert "cannot import" in info.value.message
    assert info.value.data == {"languageModelError": "Unknown"}
    parts, _ = await host.chat("echo/echo", [ChatMessage.user("still fine")])
    assert "still fine" in "".join(p.value for p in parts if isinstance(p, TextPart))


async def test_models_list_prefixes_ids_and_sets_detail(host: HostClient) -> None:
    models = (await host.request("models/list", {"silent": True}))["models"]
    ids = [m["id"] for m in models]
    assert "t/tagged" in ids and "echo/echo" in ids and "calc/calculator" in ids
    assert len(ids) == len(set(ids))
    echo = next(m for m in models if m["id"] == "echo/echo")
    assert echo["detail"] == "echo"
    assert echo["capabilities"] == {"imageInput": True, "toolCalling": True}


async def test_chat_streams_parts_before_the_result(host: HostClient) -> None:
    parts, result = await host.chat(
        "t/tagged", [ChatMessage.user("a")], ChatRequestOptions(model_options={"count": 300})
    )
    assert [p.value for p in parts if isinstance(p, TextPart)] == [f"a:{i} " for i in range(300)]
    assert result["finishReason"] == "stop"


async def test_parts_are_batched_into_few_notifications(host: HostClient) -> None:
    call = host.start_chat(
        "t/tagged", [ChatMessage.user("b")], ChatRequestOptions(model_options={"count": 3000})
    )
    await call.result()
    assert len(call.parts) == 3000
    assert call.notifications < 300, call.notifications


async def test_concurrent_requests_do_not_cross_talk(host: HostClient) -> None:
    calls = [
        host.start_chat(
            "t/tagged",
            [ChatMessage.user(f"r{i}")],
            ChatRequestOptions(model_options={"count": 400}),
        )
        for i in range(12)
    ]
    await asyncio.gather(*(c.result() for c in calls))
    for i, call in enumerate(calls):
        assert [p.value for p in call.parts if isinstance(p, TextPart)] == [
            f"r{i}:{n} " for n in range(400)
        ]
    assert not host.stray_parts


async def test_cancellation_mid_stream_sends_no_more_parts_and_closes_the_stream(
    host: HostClient, tmp_path: Path
) -> None:
    marker = tmp_path / "closed.txt"
    got_some = asyncio.Event()
    call = host.start_chat(
        "t/slow",
        [ChatMessage.user("go")],
        ChatRequestOptions(model_options={"marker": str(marker)}),
        on_parts=lambda parts: got_some.set(),
    )
    await asyncio.wait_for(got_some.wait(), 5)
    host.cancel(call)
    with pytest.raises(RemoteError) as info:
        await asyncio.wait_for(call.result(), 5)
    assert info.value.code == -32800
    received = len(call.parts)
    assert 0 < received < 5000
    await asyncio.sleep(0.2)  # a host that kept streaming would send more by now
    assert not host.stray_parts
    assert marker.read_text() == "closed"
    # the host is fine afterwards
    parts, _ = await host.chat("echo/echo", [ChatMessage.user("after cancel")])
    assert parts


@pytest.mark.parametrize(
    ("model", "text", "code", "message"),
    [
        ("t/fail", "runtime", "Unknown", "RuntimeError: the provider's bug"),
        ("t/fail", "violate", "Unknown", "tool-result-in-response"),
        ("t/fail", "blocked", "Blocked", "retry in 20 s"),
        ("echo/echo", "/error NoPermissions set the key", "NoPermissions", "set the key"),
        ("echo/nope", "hi", "NotFound", "has no model 'nope'"),
        ("nobody/x", "hi", "NotFound", "no provider named 'nobody'"),
    ],
)
async def test_errors_map_to_language_model_error_codes(
    host: HostClient, model: str, text: str, code: str, message: str
) -> None:
    call = host.start_chat(model, [ChatMessage.user(text)])
    with pytest.raises(RemoteError) as info:
        await call.result()
    assert info.value.data == {"languageModelError": code}
    assert message in info.value.message
    if model == "t/fail":  # parts sent before the error stay valid and came first
        assert call.parts == [TextPart("before the failure")]


async def test_bad_params_name_the_field(host: HostClient) -> None:
    with pytest.raises(RemoteError) as info:
        await host.request(
            "chat/response",
            {"modelId": "echo/echo", "messages": [{"role": 9, "content": []}], "options": {}},
        )
    assert info.value.code == -32602 and "messages[0].role" in info.value.message
    with pytest.raises(RemoteError) as info:
        await host.request("no/such/method", {})
    assert info.value.code == -32601


async def test_malformed_frames_get_parse_errors_and_the_host_stays_up(host: HostClient) -> None:
    write = host.process.stdin.write  # type: ignore[union-attr]
    write(b"Content-Length: 12\r\n\r\n{not json!!}")
    write(b"Content-Length: nope\r\n\r\n")
    body = b'{"jsonrpc":"2.0","id":"bad-1","method":"models/list",'
    write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    errors: list[Any] = []
    answered = asyncio.Event()

    def record(message: Any) -> None:
        errors.append(message)
        if any(e.get("id") == "bad-1" for e in errors):  # the last frame's answer
            answered.set()

    # answers to ids the client never used land in _on_response: record them
    host.connection._on_response = record  # type: ignore[method-assign]
    try:
        await asyncio.wait_for(answered.wait(), 30)
    finally:
        del host.connection._on_response
    codes = [e["error"]["code"] for e in errors]
    assert codes.count(-32700) >= 2
    models = await host.request("models/list", {"silent": True})
    assert models["models"]


async def test_stray_prints_in_providers_do_not_corrupt_the_protocol(
    host: HostClient, tmp_path: Path
) -> None:
    parts, _ = await host.chat("t/print", [ChatMessage.user("x")])
    assert parts == [TextPart("printed")]
    assert host.connection.malformed == 0
    assert host.received is not None and b"STRAY" not in host.received
    await asyncio.sleep(0.05)
    err = stderr_of(tmp_path)
    assert "STRAY-PRINT" in err and "STRAY-FD-WRITE" in err


async def test_tool_calling_round_trip_with_the_function_tool_example(host: HostClient) -> None:
    schema = {"type": "number"}
    add = ChatTool(
        "add",
        "",
        {"type": "object", "properties": {"a": schema, "b": schema}, "required": ["a", "b"]},
    )
    options = ChatRequestOptions(tools=[add])
    ask = ChatMessage.user("add 2 and 3.5")
    parts, result = await host.chat("calc/calculator", [ask], options)
    (call,) = parts
    assert isinstance(call, ToolCallPart) and call.input == {"a": 2.0, "b": 3.5}
    assert result["finishReason"] == "tool-calls"
    history = [
        ask,
        ChatMessage.assistant([call]),
        ChatMessage.user([ToolResultPart(call.call_id, [TextPart("5.5")])]),
    ]
    parts, _ = await host.chat("calc/calculator", history, options)
    assert parts == [TextPart("add returned 5.5.")]
    parts, _ = await host.chat("calc/calculator", [ask])  # tool not offered: it runs add
    assert parts == [TextPart("add(2.0, 3.5) = 5.5")]


async def test_tokens_count_for_text_and_messages(host: HostClient) -> None:
    n = await host.request("tokens/count", {"modelId": "echo/echo", "text": "hello " * 40})
    assert isinstance(n["tokens"], int) and n["tokens"] > 20
    m = await host.request(
        "tokens/count",
        {"modelId": "echo/echo", "text": {"role": 1, "content": [{"kind": "text", "value": "hi"}]}},
    )
    assert m["tokens"] > 0
    with pytest.raises(RemoteError) as info:
        await host.request("tokens/count", {"modelId": "echo/echo", "text": 5})
    assert info.value.code == -32602


async def test_model_changes_reach_the_extension(host: HostClient) -> None:
    before = host.models_changed
    await host.chat("t/change", [ChatMessage.user("x")])
    await host.request("configure", {"providers": [], "secrets": {}})
    await asyncio.sleep(0.05)
    assert host.models_changed >= before + 2


async def test_the_api_key_is_never_written_anywhere(
    tmp_path: Path, host_env: dict[str, str]
) -> None:
    config = dict(CONFIG)
    config["providers"] = [
        *CONFIG["providers"],
        {"name": "inline", "format": "responses", "baseUrl": "https://x", "apiKey": SECRET_INLINE},
    ]
    path = tmp_path / "providers.json"
    path.write_text(json.dumps(config))
    with (tmp_path / "stderr.txt").open("wb") as err:
        async with HostClient.start(
            # --keep-going: serve the good providers (the strict host would refuse "inline")
            ["--config", str(path), "--keep-going", "--log-level", "debug"],
            env=host_env,
            stderr=err,
            record=True,
        ) as client:
            init = await client.initialize(providers=[], secrets={"echo": SECRET_2})
            inline = next(p for p in init["providers"] if p["name"] == "inline")
            assert not inline["ok"] and "apiKeyEnv" in inline["error"]
            parts, _ = await client.chat("t/key", [ChatMessage.user("use the key")])
            assert parts == [TextPart(f"key length {len(SECRET)}")]  # the provider got it
            await client.chat("echo/echo", [ChatMessage.user("hi")])
            with pytest.raises(RemoteError):
                await client.chat("t/fail", [ChatMessage.user("runtime")])
            await client.request("configure", {"providers": [], "secrets": {"t": SECRET_2}})
            await client.request("models/list", {"silent": False})
            received = bytes(client.received or b"")
    everything = received + (tmp_path / "stderr.txt").read_bytes()
    assert b"key present: True" in everything  # debug logging was on
    for secret in (SECRET, SECRET_2, SECRET_INLINE):
        assert secret.encode() not in everything


async def test_exit_after_shutdown_ends_the_process(host_env: dict[str, str]) -> None:
    async with HostClient.start(env=host_env, stderr=asyncio.subprocess.DEVNULL) as client:
        await client.initialize()
        assert await client.request("shutdown", {}) is None
        client.connection.notify("exit")
        assert await asyncio.wait_for(client.process.wait(), 5) == 0


async def test_eof_on_stdin_ends_the_process(host_env: dict[str, str]) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "lmbridge",
        "host",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=host_env,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(encode_message({"jsonrpc": "2.0", "id": 1, "method": "initialize"}))
    await process.stdin.drain()
    process.stdin.close()
    out = await asyncio.wait_for(process.stdout.read(), 10)
    assert b'"vendor":"lmbridge"' in out
    # which build and JSON parser answer (the extension's log line shows both)
    expect_compiled = os.environ.get("LMBRIDGE_EXPECT_COMPILED") == "1"
    assert (b'"serverBuild":"compiled"' if expect_compiled else b'"serverBuild":"pure Python"') in out
    assert b'"serverJson":"orjson"' in out  # the dev install has the fast extra
    assert await asyncio.wait_for(process.wait(), 10) == 0


async def test_the_demo_command_runs_end_to_end(host_env: dict[str, str]) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "lmbridge",
        "demo",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=host_env,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    text = out.decode()
    assert process.returncode == 0, err.decode()
    for expected in ("echo/echo", "toolCall", "get_weather", "Tool result for", "tokens/count"):
        assert expected in text
    # the consumer side: the client streams, completes a tool call, and the endpoint answers
    # both SDK shapes
    consumer = text.partition("Consumer side")[2]
    for expected in (
        "gpt-4o (stand-in) heard: Hello from Python!",
        'tool call get_weather({"city": "Paris"})',
        "finish: tool-calls",
        "200: gpt-4o (stand-in) heard: Hi, OpenAI shape",
        "200: claude-sonnet-4.5 (stand-in) heard: Hi, Anthropic shape",
    ):
        assert expected in consumer, expected


async def test_token_counts_persist_in_the_storage_folder_across_hosts(
    tmp_path: Path, host_env: dict[str, str]
) -> None:
    """The default estimator keeps per-message counts in <storagePath>/tokens.sqlite: a new host
    process (after a restart) reads what the first one stored, and the file holds no content."""
    storage = tmp_path / "storage"
    storage.mkdir()
    secret_text = "the quick brown fox " + secrets.token_hex(8)
    message = {"role": 1, "content": [{"kind": "text", "value": secret_text * 20}]}
    echo = [{"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider", "delay": 0}]

    async def one_host() -> tuple[int, int]:
        async with HostClient.start([], env=host_env) as client:
            await client.initialize(providers=echo, storagePath=str(storage))
            await client.chat("echo/echo", [ChatMessage.user(secret_text * 20)])
            counted = await client.request("tokens/count", {"modelId": "echo/echo", "text": message})
            return counted["tokens"], (storage / "tokens.sqlite").stat().st_size

    first, size = await one_host()
    assert size > 0, "the store was written"
    second, _ = await one_host()
    assert second == first  # the restarted host answers from the stored count
    raw = b"".join(p.read_bytes() for p in storage.glob("tokens.sqlite*"))
    assert secret_text.encode() not in raw and b"quick brown" not in raw


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("bare.json", json.dumps(CONFIG["providers"][1:3])),
        ("wrapped.json", json.dumps({"providers": CONFIG["providers"][1:3]})),
        ("bare-no-suffix", json.dumps(CONFIG["providers"][1:3])),
        (
            "tables.toml",
            '[[providers]]\nname = "echo"\nprovider = "lmbridge.providers.echo:EchoProvider"\n'
            'delay = 0\n\n[[providers]]\nname = "calc"\n'
            'provider = "function_tool_provider:calculator"\n',
        ),
    ],
)
async def test_config_file_holds_the_settings_list_bare_or_wrapped(
    tmp_path: Path, host_env: dict[str, str], name: str, text: str
) -> None:
    config = tmp_path / name
    config.write_text(text)
    async with HostClient.start(["--config", str(config)], env=host_env) as client:
        result = await client.initialize(providers=[], secrets={})
        assert [p["name"] for p in result["providers"] if p["ok"]] == ["echo", "calc"]
        parts, _ = await client.chat("echo/echo", [ChatMessage.user("from the file")])
        assert "from the file" in "".join(p.value for p in parts if isinstance(p, TextPart))
