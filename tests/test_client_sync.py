"""The synchronous client and the one-call answer (:class:`Completion`): against the in-process
fake bridge and through a real loopback endpoint over HTTP."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from lmbridge import (
    ChatRequestError,
    Completion,
    EndpointNotFoundError,
    ErrorKind,
    FinishReason,
    LanguageModelClient,
    SyncLanguageModelClient,
)
from lmbridge.client.endpoint import EndpointServer
from lmbridge.client.testing import FakeBridge, fake_model
from lmbridge.parts import ChatMessage, TextPart, ThinkingPart, ToolCallPart

MODEL = fake_model("m1", vendor="copilot", family="gpt-4o")
USER = [{"role": "user", "content": "What's the weather in Paris?"}]
WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object"}},
}
SCRIPT = [
    ThinkingPart("The user wants the weather.", id="r1"),
    TextPart("Let me "),
    TextPart("check."),
    ToolCallPart("call_1", "get_weather", {"city": "Paris"}),
]


def bridge(script: list[object] | None = None) -> FakeBridge:
    b = FakeBridge([MODEL])
    b.script("m1", script if script is not None else SCRIPT)  # type: ignore[arg-type]
    return b


def check_tool_answer(answer: Completion) -> None:
    assert answer.text == "Let me check." and str(answer) == "Let me check."
    assert answer.thinking == "The user wants the weather."
    assert answer.tool_calls == [ToolCallPart("call_1", "get_weather", {"city": "Paris"})]
    assert answer.finish_reason is FinishReason.TOOL_CALLS
    assert answer.parts == SCRIPT
    assert answer.model == MODEL and not answer.degraded
    assert answer.usage.input_tokens and answer.usage.output_tokens


async def test_async_complete_returns_the_whole_answer() -> None:
    client = LanguageModelClient(bridge(), selector="vscodelm/auto")
    answer = await client.complete(USER, format="chat-completions", tools=[WEATHER])
    check_tool_answer(answer)


async def test_a_text_answer_finishes_with_stop_and_a_stream_says_it_too() -> None:
    client = LanguageModelClient(bridge([TextPart("Hi")]), selector="vscodelm/auto")
    response = await client.send_request([ChatMessage.user("hello")])
    assert response.finish_reason is None  # not read yet
    answer = await response.final()
    assert answer.text == "Hi" and answer.tool_calls == [] and answer.thinking == ""
    assert answer.finish_reason is FinishReason.STOP is response.finish_reason


async def test_complete_raises_the_error_that_ended_the_stream() -> None:
    failing = [TextPart("par"), ChatRequestError(ErrorKind.RATE_LIMITED, "slow down")]
    client = LanguageModelClient(bridge(failing), selector="vscodelm/auto", retry=None)
    with pytest.raises(ChatRequestError) as caught:
        await client.complete([ChatMessage.user("hello")])
    assert caught.value.kind is ErrorKind.RATE_LIMITED


def test_the_sync_client_completes_and_streams_without_an_event_loop() -> None:
    fake = bridge()
    with SyncLanguageModelClient(fake, selector="vscodelm/auto") as client:
        check_tool_answer(client.complete(USER, format="chat-completions", tools=[WEATHER]))
        assert client.model() == MODEL and client.current_model == MODEL
        assert client.count_tokens("abcdefgh") == 2  # the fake counts characters / 4

        response = client.send_request(USER, format="chat-completions", tools=[WEATHER])
        assert list(response) == SCRIPT
        assert response.finished and response.finish_reason is FinishReason.TOOL_CALLS
        assert response.thinking == "The user wants the weather."
        assert response.final().tool_calls == response.tool_calls  # already read: no wait
    assert [r.finished for r in fake.requests] == [True, True]
    with pytest.raises(RuntimeError, match="closed"):
        client.complete(USER, format="chat-completions")


async def test_the_sync_client_works_where_an_event_loop_is_running() -> None:
    # a notebook or an async app calling synchronous code: the client's loop is its own
    with SyncLanguageModelClient(bridge([TextPart("fine")]), selector="vscodelm/auto") as client:
        assert client.complete([ChatMessage.user("hi")]).text == "fine"


def test_cancel_from_another_thread_stops_a_stream_being_read() -> None:
    fake = bridge([TextPart("first"), 600.0, TextPart("never")])
    first_read = threading.Event()
    with SyncLanguageModelClient(fake, selector="vscodelm/auto") as client:
        response = client.send_request([ChatMessage.user("hi")])

        def cancel_once_the_first_part_is_read() -> None:
            first_read.wait()
            response.cancel()

        canceller = threading.Thread(target=cancel_once_the_first_part_is_read)
        canceller.start()
        parts = []
        with pytest.raises(ChatRequestError) as caught:
            for part in response:
                parts.append(part)
                first_read.set()  # the next part waits 600 s unless cancelled
        canceller.join()
    assert parts == [TextPart("first")]
    assert caught.value.kind is ErrorKind.CANCELLED
    assert response.finish_reason is FinishReason.CANCELLED
    assert fake.requests[0].cancelled and fake.active_streams == 0


def test_closing_a_response_early_cancels_the_request() -> None:
    fake = bridge([TextPart("a"), TextPart("b"), TextPart("c")])
    with SyncLanguageModelClient(fake, selector="vscodelm/auto") as client:
        with client.send_request([ChatMessage.user("hi")]) as response:
            assert next(response) == TextPart("a")
        assert response.finished and response.error is not None
    assert fake.requests[0].cancelled and fake.active_streams == 0


async def test_the_sync_client_reaches_a_real_loopback_endpoint(tmp_path: Path) -> None:
    fake = bridge([TextPart("over "), TextPart("HTTP")])
    path = tmp_path / "endpoint.json"

    def use_it() -> tuple[str, FinishReason]:
        with SyncLanguageModelClient(endpoint_file=path, selector="vscodelm/copilot") as client:
            answer = client.complete([ChatMessage.user("hi")])
            return answer.text, answer.finish_reason

    async with EndpointServer(fake, endpoint_file=path):
        text, reason = await asyncio.to_thread(use_it)
    assert (text, reason) == ("over HTTP", FinishReason.STOP)
    assert fake.requests[0].messages[-1].text == "hi"


def test_no_endpoint_is_a_clear_error_at_once_and_leaves_no_thread(tmp_path: Path) -> None:
    before = threading.active_count()
    with pytest.raises(EndpointNotFoundError):
        SyncLanguageModelClient(endpoint_file=tmp_path / "missing.json")
    assert threading.active_count() == before


@pytest.mark.parametrize("method", ["__init__", "send_request", "complete", "count_tokens", "model"])
def test_the_sync_client_takes_what_the_async_one_takes(method: str) -> None:
    # the same arguments, so that neither drifts: the sync client has no asyncio.Event to
    # cancel with (SyncChatResponse.cancel instead) and finds its endpoint by file
    import inspect

    def params(cls: type) -> dict[str, object]:
        sig = inspect.signature(getattr(cls, method))
        return {n: p.default for n, p in sig.parameters.items() if n not in ("self", "cancel")}

    sync, async_ = params(SyncLanguageModelClient), params(LanguageModelClient)
    sync.pop("endpoint_file", None)
    assert sync == async_
