"""The Python provider API: both response styles, the contract guard, cancellation, defaults."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    DataPart,
    FinishReason,
    ModelInfo,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from lmbridge.provider import (
    CancellationToken,
    CancellationTokenSource,
    ChatResult,
    ContractGuard,
    ContractViolationError,
    LanguageModelChatProvider,
    ResponseProgress,
    chat_model,
    estimate_tokens,
    model_info,
    respond,
)
from lmbridge.tokens.exact import exact_counter

MODEL = model_info("m", tool_calling=True)
HELLO = [ChatMessage.user("hello")]


async def run(
    provider: Any, token: CancellationToken = CancellationToken.NONE
) -> tuple[list[ResponsePart], ChatResult]:
    parts: list[ResponsePart] = []
    result = await respond(provider, MODEL, HELLO, ChatRequestOptions(), parts.append, token)
    return parts, result


# --------------------------------------------------------------------------- styles


async def test_progress_style_subclass_with_returned_usage() -> None:
    class Shout(LanguageModelChatProvider):
        models = (MODEL,)

        async def provide_language_model_chat_response(
            self, model, messages, options, progress, token
        ):  # type: ignore[no-untyped-def]
            progress.report(TextPart(messages[-1].text.upper()))
            progress.finish(FinishReason.LENGTH)
            return Usage(input_tokens=3, output_tokens=1)

    parts, result = await run(Shout())
    assert parts == [TextPart("HELLO")]
    assert result == ChatResult(Usage(input_tokens=3, output_tokens=1), FinishReason.LENGTH)


async def test_async_generator_style_yields_parts_usage_and_finish() -> None:
    @chat_model("gen", max_input_tokens=100)
    async def gen(messages, options, token):  # type: ignore[no-untyped-def]
        yield ThinkingPart("hmm", id="r1")
        yield TextPart("a")
        yield Usage(input_tokens=5)
        yield ToolCallPart("c1", "tool", {"x": 1})
        yield Usage(output_tokens=7)

    assert gen.models[0].id == "gen" and gen.models[0].max_input_tokens == 100
    parts, result = await run(gen)
    assert parts == [
        ThinkingPart("hmm", id="r1"),
        TextPart("a"),
        ToolCallPart("c1", "tool", {"x": 1}),
    ]
    assert result.usage == Usage(input_tokens=5, output_tokens=7)
    assert result.finish_reason is FinishReason.TOOL_CALLS  # inferred from the tool call


@pytest.mark.parametrize(
    "returned",
    ["plain", [TextPart("pl"), TextPart("ain")], iter([TextPart("plain")])],
)
async def test_sync_functions_returning_text_lists_or_iterators(returned: Any) -> None:
    provider = chat_model("s")(lambda messages, options, token: returned)
    parts, result = await run(provider)
    assert "".join(p.value for p in parts if isinstance(p, TextPart)) == "plain"
    assert result.finish_reason is FinishReason.STOP


async def test_a_provider_returning_nonsense_is_a_clear_error() -> None:
    provider = chat_model("s")(lambda messages, options, token: 42)
    with pytest.raises(ContractViolationError, match="got 42"):
        await run(provider)


# --------------------------------------------------------------------------- the guard


@pytest.mark.parametrize(
    ("bad", "rule"),
    [
        (ToolResultPart("c", [TextPart("x")]), "tool-result-in-response"),
        (ToolCallPart("c", "t", ["not", "an", "object"]), "tool-input-not-object"),  # type: ignore[arg-type]
        (ToolCallPart("", "t", {}), "empty-call-id"),
        (ToolCallPart("c", "", {}), "empty-tool-name"),
        (DataPart(b"x", "not a mime"), "invalid-mime"),
        (b"raw bytes", "not-a-part"),  # a str is text; bytes are not
    ],
)
async def test_guard_refuses_contract_violations(bad: Any, rule: str) -> None:
    @chat_model("v")
    async def bad_provider(messages, options, token):  # type: ignore[no-untyped-def]
        yield TextPart("ok so far")
        yield bad

    parts: list[ResponsePart] = []
    with pytest.raises(ContractViolationError, match=rule):
        await respond(bad_provider, MODEL, HELLO, ChatRequestOptions(), parts.append)
    assert parts == [TextPart("ok so far")]  # what came before stays


async def test_guard_refuses_duplicate_call_ids() -> None:
    guard = ContractGuard(lambda p: None)
    guard.report(ToolCallPart("c1", "t", {}))
    with pytest.raises(ContractViolationError, match="duplicate-call-id"):
        guard.report(ToolCallPart("c1", "t", {}))


async def test_guard_drops_empty_text_and_empty_thinking_but_keeps_signatures() -> None:
    seen: list[ResponsePart] = []
    guard = ContractGuard(seen.append)
    guard.report(TextPart(""))
    guard.report(ThinkingPart(""))
    signature = ThinkingPart("", id="r", metadata={"signature": "sig"})
    guard.report(signature)
    assert seen == [signature]
    assert guard.dropped == 2


async def test_guard_refuses_reports_after_the_end() -> None:
    guard = ContractGuard(lambda p: None)
    guard.close()
    with pytest.raises(ContractViolationError, match="part-after-end"):
        guard.report(TextPart("late"))


async def test_thinking_can_be_refused_for_callers_without_it() -> None:
    guard = ContractGuard(lambda p: None, allow_thinking=False)
    with pytest.raises(ContractViolationError, match="thinking-not-allowed"):
        guard.report(ThinkingPart("x"))


# --------------------------------------------------------------------------- cancellation


async def test_cancellation_stops_parts_and_closes_the_generator() -> None:
    source = CancellationTokenSource()
    closed = asyncio.Event()

    @chat_model("slow")
    async def slow(messages, options, token):  # type: ignore[no-untyped-def]
        try:
            for i in range(1000):
                yield TextPart(f"{i} ")
                await asyncio.sleep(0.001)
        finally:
            closed.set()  # where an upstream HTTP response would be closed

    parts: list[ResponsePart] = []

    def on_part(part: ResponsePart) -> None:
        parts.append(part)
        if len(parts) == 5:
            source.cancel()

    result = await respond(slow, MODEL, HELLO, ChatRequestOptions(), on_part, source.token)
    assert len(parts) == 5
    assert closed.is_set()
    assert result.finish_reason is FinishReason.CANCELLED


async def test_progress_style_reports_after_cancellation_are_dropped() -> None:
    source = CancellationTokenSource()

    class Chatty(LanguageModelChatProvider):
        async def provide_language_model_chat_response(
            self,
            model: ModelInfo,
            messages: Sequence[ChatMessage],
            options: ChatRequestOptions,
            progress: ResponseProgress,
            token: CancellationToken,
        ) -> None:
            progress.report(TextPart("before"))
            source.cancel()
            progress.report(TextPart("after"))  # a provider that ignores the token

    parts, result = await run(Chatty(), source.token)
    assert parts == [TextPart("before")]
    assert result.finish_reason is FinishReason.CANCELLED


async def test_token_callbacks_and_wait() -> None:
    source = CancellationTokenSource()
    token = source.token
    calls: list[str] = []
    token.on_cancellation_requested(lambda: calls.append("a"))
    removed = token.on_cancellation_requested(lambda: calls.append("removed"))
    removed.dispose()
    waiter = asyncio.ensure_future(token.wait())
    await asyncio.sleep(0)
    assert not waiter.done() and not token.is_cancellation_requested
    source.cancel()
    source.cancel()  # idempotent
    await asyncio.wait_for(waiter, 1)
    assert calls == ["a"]
    token.on_cancellation_requested(lambda: calls.append("late"))  # already cancelled: at once
    assert calls == ["a", "late"]
    with pytest.raises(asyncio.CancelledError):
        token.raise_if_cancelled()
    assert not CancellationToken.NONE.is_cancellation_requested


async def test_cancel_from_another_thread_wakes_the_waiter() -> None:
    source = CancellationTokenSource()
    waiter = asyncio.ensure_future(source.token.wait())
    await asyncio.sleep(0)
    await asyncio.to_thread(source.cancel)
    await asyncio.wait_for(waiter, 1)


# --------------------------------------------------------------------------- defaults


async def test_default_model_list_token_count_and_change_event() -> None:
    class P(LanguageModelChatProvider):
        models = (MODEL,)

    p = P()
    assert p.provide_language_model_chat_information(None, CancellationToken.NONE) == [MODEL]  # type: ignore[arg-type]
    text = "日本語のテキストを数える。" * 30  # chars/4 would say 97; exact o200k says 300
    count = p.provide_token_count(MODEL, text, CancellationToken.NONE)
    exact = exact_counter("openai")(text)  # the default estimator, not chars/4, answered
    assert isinstance(count, int) and abs(count - exact) <= 0.25 * exact
    assert estimate_tokens(MODEL, ChatMessage.user(text)) >= count  # plus the message overhead
    fired: list[int] = []
    sub = p.on_did_change_language_model_chat_information(lambda: fired.append(1))
    p.models_changed()
    sub.dispose()
    p.models_changed()
    assert fired == [1]


async def test_unimplemented_response_says_which_class() -> None:
    class NoAnswer(LanguageModelChatProvider):
        pass

    with pytest.raises(NotImplementedError, match="NoAnswer"):
        await run(NoAnswer())


async def test_async_model_information_is_accepted_by_the_driver_side() -> None:
    class AsyncInfo(LanguageModelChatProvider):
        async def provide_language_model_chat_information(self, options, token):  # type: ignore[no-untyped-def, override]
            return [MODEL]

    got = AsyncInfo().provide_language_model_chat_information(None, CancellationToken.NONE)  # type: ignore[arg-type]
    assert await got == [MODEL]  # type: ignore[misc]


async def test_a_generator_may_yield_plain_strings_as_text() -> None:
    @chat_model("words")
    async def words(messages, options, token):  # type: ignore[no-untyped-def]
        yield "Hello, "
        yield ""  # dropped, as an empty text part is
        yield ThinkingPart("so", id="r1")
        yield messages[-1].text.upper()

    parts, result = await run(words)
    assert parts == [TextPart("Hello, "), ThinkingPart("so", id="r1"), TextPart("HELLO")]
    assert result.finish_reason is FinishReason.STOP


async def test_progress_style_may_report_plain_strings() -> None:
    class Reporter(LanguageModelChatProvider):
        models = (model_info("r"),)

        async def provide_language_model_chat_response(  # type: ignore[no-untyped-def]
            self, model, messages, options, progress, token
        ):
            progress.report("plain")

    parts, _ = await run(Reporter())
    assert parts == [TextPart("plain")]
