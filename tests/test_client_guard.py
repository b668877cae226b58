"""What every request goes through first (images fit, context guard, retry) and how client
model names find VS Code models; also through LanguageModelClient, which uses the same."""

from __future__ import annotations

import asyncio

import pytest

from lmbridge.client.api import LanguageModelClient
from lmbridge.client.classify import ChatRequestError, ErrorKind
from lmbridge.client.guard import (
    CONTEXT_MARGIN,
    NO_RETRY,
    PromptTooLongError,
    RetryPolicy,
    as_prompt_too_long,
    check_context,
    estimate_input_tokens,
    fit_to_model,
    retry_after_seconds,
)
from lmbridge.client.model_names import ModelNameMap, normalize_model_name, pick_model
from lmbridge.client.testing import FakeBridge, fake_model
from lmbridge.client.transport import ChatModel
from lmbridge.errors import LanguageModelError
from lmbridge.parts import (
    ChatMessage,
    DataPart,
    ModelCapabilities,
    TextPart,
    ToolResultPart,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 30
BLIND = fake_model("blind", capabilities=ModelCapabilities(image_input=False, tool_calling=True))
SEEING = fake_model("seeing", capabilities=ModelCapabilities(image_input=True, tool_calling=True))


# --------------------------------------------------------------------------- images


def test_images_become_placeholders_for_a_model_without_image_input() -> None:
    messages = [
        ChatMessage.user([TextPart("look"), DataPart.image(PNG, "image/png")]),
        ChatMessage.user(
            [ToolResultPart("c1", [DataPart.image(PNG, "image/jpeg"), TextPart("t")])]
        ),
    ]
    fitted = fit_to_model(messages, BLIND)
    assert fitted[0].content == [
        TextPart("look"),
        TextPart(f"[image omitted: image/png, {len(PNG)} bytes]"),
    ]
    result = fitted[1].content[0]
    assert isinstance(result, ToolResultPart)
    assert result.content == [
        TextPart(f"[image omitted: image/jpeg, {len(PNG)} bytes]"),
        TextPart("t"),
    ]
    # models that take images, or that did not say, get them as they are
    assert fit_to_model(messages, SEEING) == messages
    assert fit_to_model(messages, fake_model("unknown")) == messages


def test_capabilities_travel_on_the_wire() -> None:
    assert ChatModel.from_wire(BLIND.to_wire()) == BLIND
    assert ChatModel.from_wire(fake_model("x").to_wire()).capabilities is None
    assert not BLIND.image_input and fake_model("x").image_input


# --------------------------------------------------------------------------- context


def test_context_guard_refuses_only_what_is_certainly_over_and_names_the_numbers() -> None:
    small = fake_model("small", family="claude-sonnet-4", max_input_tokens=100)
    short = [ChatMessage.user("hello")]
    assert 0 < check_context(small, short) <= 100
    long = [ChatMessage.user("word " * 400)]
    with pytest.raises(PromptTooLongError) as info:
        check_context(small, long)
    err = info.value
    assert err.limit == 100 and err.tokens == estimate_input_tokens(small, long) > 110
    assert str(err).startswith(f"prompt is too long: {err.tokens} tokens > 100 maximum")
    # a model without a stated limit is not checked
    check_context(fake_model("nolimit", max_input_tokens=0), long)


def test_a_request_within_the_estimate_error_of_the_limit_is_sent() -> None:
    model = fake_model("m", family="gpt-4o", max_input_tokens=1000)
    text = "some ordinary English text "
    per = estimate_input_tokens(model, [ChatMessage.user(text * 100)]) / 100
    for share in (0.99, 1.05):  # at 99 % of the limit, and over it by less than the error
        messages = [ChatMessage.user(text * round(1000 * share / per))]
        tokens = check_context(model, messages)  # no refusal
        assert abs(tokens - 1000 * share) < 20, (share, tokens)
    over = [ChatMessage.user(text * round(1000 * (1 + CONTEXT_MARGIN + 0.03) / per))]
    with pytest.raises(PromptTooLongError):
        check_context(model, over)


def test_the_estimate_has_no_margin() -> None:
    model = fake_model("m", family="gpt-4o")
    text = [ChatMessage.user("some ordinary English text " * 50)]
    from lmbridge.tokens import TokenEstimator

    plain = TokenEstimator("gpt-4o", model_id="m").count_request(text)
    assert estimate_input_tokens(model, text) == plain


@pytest.mark.parametrize(
    ("said", "tokens", "limit"),
    [
        (  # lmbridge's host, refusing before sending
            "the conversation is too long for up/m: about 3,145 tokens (estimated for the "
            "messages, tools and system prompt) against its input limit of 2,000, 1,145 tokens "
            "over; nothing was sent",
            3145,
            2000,
        ),
        (  # lmbridge's host, after the upstream refused it
            "the conversation is too long for up/m: the model's service refused it (HTTP 400: "
            "This model's maximum context length is 2500 tokens. However, your messages "
            "resulted in 2690 tokens.)",
            2690,
            2500,
        ),
        ("prompt is too long: 210000 tokens > 200000 maximum", 210000, 200000),
        ("prompt token count of 130123 exceeds the limit of 128000", 130123, 128000),
        ("Request too large: input is too long for the model", 0, 0),
    ],
)
def test_a_refusal_as_too_long_is_read_back_with_its_numbers(
    said: str, tokens: int, limit: int
) -> None:
    error = as_prompt_too_long(ChatRequestError(ErrorKind.INTERNAL, said), "m")
    assert error is not None
    assert (error.tokens, error.limit, error.detail) == (tokens, limit, said)
    assert str(error).startswith("prompt is too long")


def test_other_failures_are_not_read_as_too_long() -> None:
    assert as_prompt_too_long(ChatRequestError(ErrorKind.INTERNAL, "Server error 503")) is None
    rate = ChatRequestError(ErrorKind.RATE_LIMITED, "too many tokens per minute")
    assert as_prompt_too_long(rate) is None


# --------------------------------------------------------------------------- retry


def err(kind: ErrorKind, detail: str) -> ChatRequestError:
    return ChatRequestError(kind, detail)


def test_retry_policy_decisions() -> None:
    policy = RetryPolicy(retries=2, base_delay=1.0, max_delay=10.0)
    rate = err(ErrorKind.RATE_LIMITED, "429 Too Many Requests")
    assert [policy.delay(n, rate) for n in (1, 2, 3)] == [1.0, 2.0, None]
    assert policy.delay(1, err(ErrorKind.INTERNAL, "Server error 503")) == 1.0
    assert policy.delay(1, err(ErrorKind.INTERNAL, "the model is overloaded")) == 1.0
    # the request's own fault is never retried
    assert policy.delay(1, err(ErrorKind.INTERNAL, "invalid schema for tool f")) is None
    assert policy.delay(1, err(ErrorKind.NOT_SIGNED_IN, "sign in")) is None
    # a wait the error names is kept, unless it is too long to wait for here
    assert policy.delay(1, err(ErrorKind.RATE_LIMITED, "Please retry after 3 seconds")) == 3.0
    assert policy.delay(1, err(ErrorKind.RATE_LIMITED, "try again in 2 minutes")) is None
    assert NO_RETRY.delay(1, rate) is None


@pytest.mark.parametrize(
    ("detail", "seconds"),
    [
        ("Retry-After: 20", 20.0),
        ("rate limited, retry after 1500ms", 1.5),
        ("Please try again in 3s.", 3.0),
        ("quota exceeded", None),
    ],
)
def test_retry_after_is_read_from_the_error(detail: str, seconds: float | None) -> None:
    assert retry_after_seconds(err(ErrorKind.RATE_LIMITED, detail)) == seconds


def test_retry_after_header() -> None:
    assert RetryPolicy.retry_after_header(err(ErrorKind.RATE_LIMITED, "retry after 2.5s")) == "3"
    assert RetryPolicy.retry_after_header(err(ErrorKind.RATE_LIMITED, "quota")) == "1"
    assert RetryPolicy.retry_after_header(err(ErrorKind.NOT_SIGNED_IN, "x")) is None


# --------------------------------------------------------------------------- the client uses them


FAST = RetryPolicy(retries=2, base_delay=0.01, max_delay=1.0)


async def test_client_retries_a_rate_limit_before_the_first_part() -> None:
    bridge = FakeBridge([SEEING])
    calls = 0

    def respond(*_: object) -> list[object]:
        nonlocal calls
        calls += 1
        return [LanguageModelError("rate limit", "Blocked")] if calls < 3 else [TextPart("ok")]

    bridge.script("seeing", respond)  # type: ignore[arg-type]
    client = LanguageModelClient(bridge, selector="vscodelm/test", retry=FAST)
    response = await client.send_request([ChatMessage.user("hi")])
    assert await response.text() == "ok"
    assert calls == 3 and bridge.active_streams == 0
    assert all(r.cancelled for r in bridge.requests[:2]) and bridge.requests[2].finished


async def test_client_gives_up_after_the_retries_and_never_retries_mid_stream() -> None:
    bridge = FakeBridge([SEEING])
    bridge.script("seeing", [LanguageModelError("rate limit", "Blocked")])
    client = LanguageModelClient(bridge, selector="vscodelm/test", retry=FAST)
    response = await client.send_request([ChatMessage.user("hi")])
    with pytest.raises(ChatRequestError) as info:
        await response.text()
    assert info.value.kind is ErrorKind.RATE_LIMITED and len(bridge.requests) == 3

    bridge.script("seeing", [TextPart("partial"), LanguageModelError("rate limit", "Blocked")])
    response = await client.send_request([ChatMessage.user("hi")])
    with pytest.raises(ChatRequestError):
        await response.text()
    assert len(bridge.requests) == 4  # what was streamed cannot be taken back


async def test_client_retry_wait_ends_on_cancel() -> None:
    bridge = FakeBridge([SEEING])
    bridge.script("seeing", [LanguageModelError("rate limit", "Blocked")])
    client = LanguageModelClient(
        bridge, selector="vscodelm/test", retry=RetryPolicy(retries=1, base_delay=30)
    )
    cancel = asyncio.Event()
    response = await client.send_request([ChatMessage.user("hi")], cancel=cancel)
    task = asyncio.ensure_future(response.text())
    await asyncio.sleep(0.05)
    cancel.set()
    with pytest.raises(ChatRequestError):
        await asyncio.wait_for(task, 2)


async def test_client_context_guard_and_image_fit() -> None:
    small = fake_model(
        "small", max_input_tokens=50, capabilities=ModelCapabilities(image_input=False)
    )
    bridge = FakeBridge([small])
    client = LanguageModelClient(bridge, selector="vscodelm/test")
    with pytest.raises(PromptTooLongError):
        await client.send_request([ChatMessage.user("word " * 200)])
    assert bridge.requests == []
    response = await client.send_request([ChatMessage.user([DataPart.image(PNG, "image/png")])])
    await response.text()
    assert bridge.requests[0].messages[0].content == [
        TextPart(f"[image omitted: image/png, {len(PNG)} bytes]")
    ]
    off = LanguageModelClient(bridge, selector="vscodelm/test", context_guard=False)
    await (await off.send_request([ChatMessage.user("word " * 200)])).text()
    assert len(bridge.requests) == 2


# --------------------------------------------------------------------------- model names


COPILOT = [
    fake_model("gpt-4o", vendor="copilot", family="gpt-4o"),
    fake_model("claude-sonnet-4.5", vendor="copilot", family="claude-sonnet-4.5"),
    fake_model("claude-haiku-4.5", vendor="copilot", family="claude-haiku-4.5"),
    fake_model("openai/gpt-5", vendor="lmbridge", family="gpt-5"),
]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("openai/gpt-5", "openai/gpt-5"),  # an id, with its slash
        ("vscodelm/copilot/gpt-4o", "gpt-4o"),  # a selector
        ("copilot/claude-haiku-4.5", "claude-haiku-4.5"),  # Cline's selector form
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4.5"),  # the same family, dated
        ("claude-haiku-4-5", "claude-haiku-4.5"),
        ("gpt-5", "openai/gpt-5"),
        ("claude-opus-4-1", "gpt-4o"),  # no such family here: the default map, the first
        ("o3-mini", "gpt-4o"),
        ("auto", "gpt-4o"),
        ("", "gpt-4o"),
        ("llama-3", None),  # no rule for it
    ],
)
def test_pick_model(name: str, expected: str | None) -> None:
    picked = pick_model(name, COPILOT)
    assert (picked.id if picked else None) == expected


def test_user_patterns_come_first() -> None:
    names, problems = ModelNameMap.from_setting(
        {
            "claude-*haiku*": "vscodelm/copilot/gpt-4o",
            "llama*": "vscodelm/lmbridge",
            "*": "copilot/claude-sonnet-4.5",
        }
    )
    assert problems == []
    assert pick_model("claude-3-5-haiku-latest", COPILOT, names).id == "gpt-4o"  # type: ignore[union-attr]
    assert pick_model("llama-3", COPILOT, names).id == "openai/gpt-5"  # type: ignore[union-attr]
    assert pick_model("anything", COPILOT, names).id == "claude-sonnet-4.5"  # type: ignore[union-attr]
    # a pattern whose selector matches nothing falls through to the next
    names, _ = ModelNameMap.from_setting({"gpt-*": "vscodelm/nobody"})
    assert pick_model("gpt-9", COPILOT, names).id == "gpt-4o"  # type: ignore[union-attr]
    assert pick_model("x", [], names) is None


def test_model_name_patterns_match_whatever_the_case() -> None:
    # (the default map would send these names to the first model, gpt-4o: not this one)
    names, problems = ModelNameMap.from_setting({"Claude-*HAIKU*": "vscodelm/lmbridge"})
    assert problems == []
    for name in ("claude-3-5-haiku-latest", "CLAUDE-3-5-HAIKU-LATEST", "Claude-3-Haiku"):
        assert pick_model(name, COPILOT, names).id == "openai/gpt-5"  # type: ignore[union-attr]
    only_own = [COPILOT[3]]  # no family named like these: the default map's patterns decide
    for name in ("GPT-9", "Claude-Opus-9", "O3-MINI"):
        assert pick_model(name, only_own).id == "openai/gpt-5"  # type: ignore[union-attr]
    assert pick_model("LLAMA-3", only_own) is None


def test_bad_setting_entries_are_reported_and_skipped() -> None:
    names, problems = ModelNameMap.from_setting(
        {"ok": "vscodelm/copilot", "": "vscodelm/auto", "bad": 5, "worse": "vscodelm/"}
    )
    assert [p for p, _ in names.entries] == ["ok"]
    assert len(problems) == 3 and any("'bad'" in p for p in problems)
    assert ModelNameMap.from_setting([1])[1] and ModelNameMap.from_setting(None) == (
        ModelNameMap(),
        [],
    )


def test_normalize_model_name() -> None:
    assert normalize_model_name("Claude-Sonnet-4.5-20250929") == "claude-sonnet-4-5"
    assert normalize_model_name("gpt-4.1-2025-04-14") == "gpt-4-1"
