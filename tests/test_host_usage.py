"""Usage and limits, through the real host (a subprocess) and a real upstream on 127.0.0.1.

Every answer gets one log line (numbers and names only) and a ``stats`` object in the
``chat/response`` result; a request certainly over the model's window (its estimate beyond the
estimator's measured error) fails before anything reaches the upstream, any other is sent, and
an upstream's context-length error comes back as the same message.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lmbridge.host.client import HostClient
from lmbridge.host.jsonrpc import RemoteError
from lmbridge.parts import ChatMessage, ChatRequestOptions, ChatTool, TextPart, ThinkingPart
from support.replay_server import ReplayServer, Reply
from support.streams import fixture_lines, sse_body

PHASE = "openai-responses/openai-phase.1.chunks.txt"
TEXT = "openai-chat/openai-text.chunks.txt"
SECRET_WORDS = "zebra-quartz-7731 violet umbrella"  # the prompt: must never reach the log


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


def entry(server: ReplayServer, fmt: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "up",
        "format": fmt,
        "baseUrl": server.url + "/v1",
        "models": [{"id": "m", "maxInputTokens": 2000, "maxOutputTokens": 500}],
        "retry": {"maxAttempts": 1},
        **extra,
    }


def stderr_of(tmp_path: Path) -> str:
    return (tmp_path / "stderr.txt").read_text(encoding="utf-8", errors="replace")


def recorded_usage(rel: str) -> dict[str, Any]:
    """The usage the recorded Responses stream reports, read from the recording itself."""
    for line in reversed(fixture_lines(rel)):
        event = json.loads(line)
        usage = (event.get("response") or {}).get("usage")
        if usage:
            return dict(usage)
    raise AssertionError(f"{rel} reports no usage")


async def test_stats_are_the_upstreams_usage_and_the_log_line_has_no_content(
    tmp_path: Path, upstream: ReplayServer
) -> None:
    upstream.route("POST", "/v1/responses", Reply.fixture(PHASE))
    with (tmp_path / "stderr.txt").open("wb") as err:
        async with HostClient.start(["--log-level", "info"], env=dict(os.environ), stderr=err) as host:
            await host.initialize(providers=[entry(upstream, "responses")], secrets={})
            parts, result = await host.chat("up/m", [ChatMessage.user(SECRET_WORDS)])
    stats = result["stats"]
    usage = recorded_usage(PHASE)
    assert stats["model"] == "up/m"
    assert stats["inputTokens"] == usage["input_tokens"] == 7112
    assert stats["outputTokens"] == usage["output_tokens"]
    assert stats["cachedTokens"] == usage["input_tokens_details"]["cached_tokens"]
    assert stats["reasoningTokens"] == usage["output_tokens_details"]["reasoning_tokens"]
    assert stats["finishReason"] == result["finishReason"] == "stop"
    assert stats["maxInputTokens"] == 2000
    assert isinstance(stats["estimatedInputTokens"], int) and stats["estimatedInputTokens"] > 0
    assert isinstance(stats["durationMs"], int) and stats["durationMs"] >= 0
    assert isinstance(stats["firstTokenMs"], int)
    assert 0 <= stats["firstTokenMs"] <= stats["durationMs"]
    assert set(stats) == {
        "model", "inputTokens", "outputTokens", "cachedTokens", "reasoningTokens", "durationMs",
        "firstTokenMs", "finishReason", "maxInputTokens", "estimatedInputTokens",
        "calibrationFactor",
    }  # fmt: skip
    assert stats["calibrationFactor"] == 1.0  # nothing learnt before the first answer

    log = stderr_of(tmp_path)
    lines = [line for line in log.splitlines() if "lmbridge.usage" in line]
    assert len(lines) == 1, log
    (line,) = lines
    assert " INFO " in line
    for number in (7112, stats["outputTokens"], stats["cachedTokens"], stats["reasoningTokens"]):
        assert re.search(rf"\b{number}\b", line), (number, line)
    assert "up/m" in line and "finish stop" in line and "cut by the output limit" not in line
    # the estimate beside the count: how far off it was, with the factor it was made with
    off = 100 * (stats["estimatedInputTokens"] - 7112) / 7112
    assert f"input 7112 tokens (estimated {stats['estimatedInputTokens']}, {off:+.1f}%, factor 1.000)" in line
    # no content anywhere on stderr at info level: neither the prompt nor any answer text
    answer = [p.value for p in parts if isinstance(p, TextPart)]
    answer += [p.text for p in parts if isinstance(p, ThinkingPart)]
    assert answer
    assert SECRET_WORDS not in log and "zebra" not in log
    for text in answer:
        for word in re.findall(r"[A-Za-z]{8,}", text):
            assert word not in line, word


def length_stream() -> bytes:
    chunk = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    lines = [
        {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Once"}}]},
        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
        {**chunk, "choices": [], "usage": {"prompt_tokens": 21, "completion_tokens": 500}},
    ]
    return sse_body([json.dumps(x) for x in lines], done=True)


async def test_an_answer_cut_by_the_output_limit_says_so(
    tmp_path: Path, upstream: ReplayServer
) -> None:
    upstream.route("POST", "/v1/chat/completions", Reply.sse(length_stream()))
    with (tmp_path / "stderr.txt").open("wb") as err:
        async with HostClient.start(["--log-level", "info"], env=dict(os.environ), stderr=err) as host:
            await host.initialize(providers=[entry(upstream, "chat-completions")], secrets={})
            _, result = await host.chat("up/m", [ChatMessage.user("tell a story")])
    assert result["stats"]["finishReason"] == "length"
    assert result["stats"]["outputTokens"] == 500 and result["stats"]["inputTokens"] == 21
    assert result["stats"]["cachedTokens"] is None and result["stats"]["reasoningTokens"] is None
    (line,) = [x for x in stderr_of(tmp_path).splitlines() if "lmbridge.usage" in x]
    assert "finish length" in line and "the answer was cut by the output limit" in line


def tools(count: int) -> list[ChatTool]:
    schema = {
        "type": "object",
        "properties": {f"arg{i}": {"type": "string", "description": "a path " * 20} for i in range(8)},
    }
    return [ChatTool(f"tool_{i}", "Reads files and reports them. " * 10, schema) for i in range(count)]


async def test_a_conversation_over_the_limit_fails_before_the_upstream_is_called(
    tmp_path: Path, upstream: ReplayServer
) -> None:
    upstream.route("POST", "/v1/chat/completions", Reply.fixture(TEXT))
    long = "the quick brown fox jumps over the lazy dog " * 400  # about 3,600 tokens
    with (tmp_path / "stderr.txt").open("wb") as err:
        async with HostClient.start(["--log-level", "info"], env=dict(os.environ), stderr=err) as host:
            await host.initialize(
                providers=[
                    entry(upstream, "chat-completions"),
                    {**entry(upstream, "chat-completions", contextCheck=False), "name": "off"},
                ],
                secrets={},
            )
            with pytest.raises(RemoteError) as info:
                await host.chat("up/m", [ChatMessage.user(long)])
            assert upstream.requests == []  # nothing was sent
            message = info.value.message
            assert info.value.data == {"languageModelError": "Unknown"}
            over = re.search(r"([\d,]+) tokens over", message)
            assert over is not None and int(over.group(1).replace(",", "")) > 1000, message
            assert "input limit of 2,000" in message
            assert "new chat" in message and "compact" in message and "larger context" in message

            # the host stays up; a short one goes through and reports its estimate
            _, small = await host.chat("up/m", [ChatMessage.user("hi")])
            assert len(upstream.requests) == 1
            plain = small["stats"]["estimatedInputTokens"]
            # tool definitions count: the same message with tools is estimated higher, and
            # enough tools alone push it over the limit without a request
            with pytest.raises(RemoteError, match="tokens over"):
                await host.chat("up/m", [ChatMessage.user("hi")], ChatRequestOptions(tools=tools(12)))
            assert len(upstream.requests) == 1
            _, with_tools = await host.chat(
                "up/m", [ChatMessage.user("hi")], ChatRequestOptions(tools=tools(1))
            )
            assert with_tools["stats"]["estimatedInputTokens"] > plain + 100

            # contextCheck: false sends it anyway (the upstream decides)
            _, result = await host.chat("off/m", [ChatMessage.user(long)])
            assert result["finishReason"] == "stop"
            assert len(upstream.requests) == 3
            assert result["stats"]["estimatedInputTokens"] > 2000


async def test_context_check_must_be_a_boolean(upstream: ReplayServer) -> None:
    async with HostClient.start([], env=dict(os.environ)) as host:
        result = await host.initialize(
            providers=[entry(upstream, "chat-completions", contextCheck="no")], secrets={}
        )
    (status,) = result["providers"]
    assert not status["ok"] and "contextCheck: expected true or false" in status["error"]



def test_the_usage_line_marks_an_estimate_the_upstream_did_not_confirm() -> None:
    from lmbridge.host.server import usage_line

    stats: dict[str, Any] = {
        "model": "up/m", "inputTokens": None, "outputTokens": 12, "cachedTokens": None,
        "reasoningTokens": None, "durationMs": 5, "firstTokenMs": 1, "finishReason": "stop",
        "maxInputTokens": 2000, "estimatedInputTokens": 345, "calibrationFactor": 1.25,
    }  # fmt: skip
    assert "input ~345 tokens (the upstream reported none; estimated 345, factor 1.250)" in (
        usage_line(stats)
    )
    stats.update(inputTokens=300)
    assert "input 300 tokens (estimated 345, +15.0%, factor 1.250)" in usage_line(stats)
    stats.update(estimatedInputTokens=None, calibrationFactor=None)
    assert "input 300 tokens (cached ?)" in usage_line(stats)


FOX = "the quick brown fox jumps over the lazy dog "  # about 9.75 tokens by lmbridge's estimate


async def test_a_request_that_may_fit_is_sent_and_only_one_certainly_over_is_refused(
    upstream: ReplayServer,
) -> None:
    # Each model: 2,000 input + 500 output = a 2,500-token window (what Copilot takes it for).
    upstream.route("POST", "/v1/chat/completions", Reply.fixture(TEXT))
    limits = {"maxInputTokens": 2000, "maxOutputTokens": 500}
    models = [{"id": f"m{i}", **limits} for i in range(4)]  # one each: no calibration between
    async with HostClient.start(env=dict(os.environ)) as host:
        await host.initialize(
            providers=[{**entry(upstream, "chat-completions"), "models": models}], secrets={}
        )
        # 99 % of the input limit; over it; over the window, but not by more than the error
        for i, (repeats, low, high) in enumerate([(203, 1900, 2000), (220, 2001, 2500), (266, 2501, 2750)]):
            _, result = await host.chat(f"up/m{i}", [ChatMessage.user(FOX * repeats)])
            assert len(upstream.requests) == i + 1  # sent
            assert low <= result["stats"]["estimatedInputTokens"] <= high, result["stats"]
        # beyond 2,500 * 1.1 = 2,750 even an estimate 10 % high is over the window
        with pytest.raises(RemoteError) as info:
            await host.chat("up/m3", [ChatMessage.user(FOX * 300)])
    assert len(upstream.requests) == 3  # nothing was sent
    message = info.value.message
    assert "nothing was sent" in message and "2,500-token context window" in message, message
    assert '"contextCheck": false' in message, message  # the option that turns it off


async def test_an_upstream_context_length_error_comes_back_as_the_same_clear_message(
    upstream: ReplayServer,
) -> None:
    said = (
        "This model's maximum context length is 2500 tokens. However, your messages resulted "
        "in 2690 tokens. Please reduce the length of the messages."
    )
    upstream.route(
        "POST",
        "/v1/chat/completions",
        Reply.error(400, {"error": {"message": said, "type": "invalid_request_error",
                                    "code": "context_length_exceeded"}}),
    )  # fmt: skip
    async with HostClient.start(env=dict(os.environ)) as host:
        await host.initialize(providers=[entry(upstream, "chat-completions")], secrets={})
        with pytest.raises(RemoteError) as info:
            await host.chat("up/m", [ChatMessage.user(FOX * 220)])
    assert len(upstream.requests) == 1  # it was sent: it might have fitted
    message = info.value.message
    assert message.startswith("the conversation is too long for up/m: the model's service refused")
    assert "maximum context length is 2500 tokens" in message  # what the service said
    over = re.search(r"about ([\d,]+) tokens against its input limit of 2,000, ([\d,]+) tokens over", message)
    assert over is not None, message
    assert "new chat" in message and "/compact" in message and "larger context" in message


async def test_the_usage_part_carries_the_upstreams_numbers_and_estimates_only_what_it_lacks(
    tmp_path: Path, upstream: ReplayServer
) -> None:
    no_usage = [
        json.dumps({"id": "c", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"content": "Hello there, " * 20}, "finish_reason": None}]}),
        json.dumps({"id": "c", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]  # fmt: skip
    upstream.route(
        "POST",
        "/v1/chat/completions",
        [Reply.fixture(TEXT), Reply.sse(sse_body(no_usage, done=True))],
    )
    with (tmp_path / "stderr.txt").open("wb") as err:
        async with HostClient.start(["--log-level", "info"], env=dict(os.environ), stderr=err) as host:
            await host.initialize(providers=[entry(upstream, "chat-completions")], secrets={})
            _, reported = await host.chat("up/m", [ChatMessage.user("hi")])
            _, estimated = await host.chat("up/m", [ChatMessage.user("hi")])
    stats = reported["stats"]
    assert (stats["inputTokens"], stats["outputTokens"]) == (16, 300)  # the recording's usage
    assert reported["usagePart"] == {
        "prompt_tokens": 16,
        "completion_tokens": 300,
        "total_tokens": 316,
        **({"prompt_tokens_details": {"cached_tokens": stats["cachedTokens"]}}
           if stats["cachedTokens"] is not None else {}),
        **({"completion_tokens_details": {"reasoning_tokens": stats["reasoningTokens"]}}
           if stats["reasoningTokens"] is not None else {}),
    }  # fmt: skip
    # no usage from the upstream: the host's estimates, marked in the usage line
    stats = estimated["stats"]
    assert stats["inputTokens"] is None and stats["outputTokens"] is None
    part = estimated["usagePart"]
    assert part["prompt_tokens"] == stats["estimatedInputTokens"] > 0
    assert part["completion_tokens"] == stats["estimatedOutputTokens"] > 20
    assert part["total_tokens"] == part["prompt_tokens"] + part["completion_tokens"]
    lines = [x for x in stderr_of(tmp_path).splitlines() if "lmbridge.usage" in x]
    assert len(lines) == 2
    assert f"output ~{stats['estimatedOutputTokens']} (the upstream reported none" in lines[1]
    assert f"input ~{stats['estimatedInputTokens']} tokens (the upstream reported none" in lines[1]
