"""The consumer API against an in-process fake bridge: selection, laziness, invalidation,
fallback, usage, errors, cancellation, message formats."""

from __future__ import annotations

import asyncio
import logging
import math

import pytest

from lmbridge.client.api import (
    FALLBACK_MODEL,
    LanguageModelClient,
    messages_for_request,
    select_chat_models,
    tools_from,
)
from lmbridge.client.classify import ChatRequestError, ErrorKind
from lmbridge.client.selectors import ModelSelector
from lmbridge.client.testing import FakeBridge, fake_model
from lmbridge.errors import ConversionError, LanguageModelError
from lmbridge.parts import (
    ChatMessage,
    ChatRole,
    ChatTool,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolMode,
    ToolResultPart,
)

GPT = fake_model("gpt-4o-id", vendor="copilot", family="gpt-4o", version="2024-11")
CLAUDE = fake_model("claude-id", vendor="copilot", family="claude-sonnet", version="4")
OWN = fake_model("openai/gpt-4o", vendor="lmbridge", family="gpt-4o")


def bridge() -> FakeBridge:
    return FakeBridge([GPT, CLAUDE, OWN])


USER = [ChatMessage.user("hello there")]


# --------------------------------------------------------------------------- selection


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("vscodelm/auto", GPT),
        ("", GPT),
        (None, GPT),
        ("vscodelm/copilot/claude-sonnet", CLAUDE),
        ("vscodelm/lmbridge/gpt-4o/openai/gpt-4o", OWN),
        ("copilot/claude-sonnet/4", CLAUDE),
        ("copilot/claude-sonnet/4/claude-id", CLAUDE),
        ({"vendor": "lmbridge"}, OWN),
        (ModelSelector(family="claude-sonnet"), CLAUDE),
    ],
)
async def test_selection_by_each_selector_form(selector: object, expected: object) -> None:
    b = bridge()
    client = LanguageModelClient(b, selector=selector)  # type: ignore[arg-type]
    response = await client.send_request(USER)
    assert response.model == expected
    assert await response.text() == "hello there"
    assert not response.degraded


async def test_module_level_select_chat_models() -> None:
    b = bridge()
    models = await select_chat_models("vscodelm/copilot", transport=b)
    assert models == [GPT, CLAUDE]
    assert b.selections == [ModelSelector(vendor="copilot")]
    assert models[0].to_wire() == {
        "id": "gpt-4o-id",
        "name": "gpt-4o-id",
        "vendor": "copilot",
        "family": "gpt-4o",
        "version": "2024-11",
        "maxInputTokens": 8000,
    }


async def test_lazy_nothing_selected_until_first_request_then_cached() -> None:
    b = bridge()
    client = LanguageModelClient(b)
    assert b.selections == [] and client.current_model is None
    await (await client.send_request(USER)).text()
    await (await client.send_request(USER)).text()
    assert len(b.selections) == 1
    assert client.current_model == GPT


async def test_model_change_event_invalidates_debounced() -> None:
    b = bridge()
    client = LanguageModelClient(b, debounce=0.05)
    await client.model()
    for _ in range(5):  # a burst of events
        b.fire_models_changed()
    b.models = [CLAUDE]
    assert client.current_model is None
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await client.model() == CLAUDE
    assert loop.time() - start >= 0.04  # waited for the burst to be quiet
    assert len(b.selections) == 2  # one selection for the whole burst


async def test_relevant_config_change_invalidates_irrelevant_does_not() -> None:
    b = bridge()
    client = LanguageModelClient(b, debounce=0, config_sections=("myapp", "lm"))
    await client.model()
    b.fire_config_changed("editor.fontSize")
    await client.model()
    assert len(b.selections) == 1
    b.fire_config_changed("lm")
    await client.model()
    assert len(b.selections) == 2
    b.fire_config_changed("myapp.model")
    await client.model()
    assert len(b.selections) == 3


async def test_switching_the_model_setting_takes_effect_without_reload() -> None:
    b = bridge()
    setting = {"model": "vscodelm/auto"}
    client = LanguageModelClient(b, selector=lambda: setting["model"])
    assert (await client.send_request(USER)).model == GPT
    setting["model"] = "vscodelm/copilot/claude-sonnet"  # no event needed
    assert (await client.send_request(USER)).model == CLAUDE
    client.set_selector("vscodelm/lmbridge")
    assert (await client.send_request(USER)).model == OWN
    assert client.selector == ModelSelector(vendor="lmbridge")


async def test_concurrent_first_requests_select_once() -> None:
    b = bridge()
    client = LanguageModelClient(b)
    models = await asyncio.gather(*(client.model() for _ in range(5)))
    assert set(models) == {GPT}
    assert len(b.selections) == 1


# --------------------------------------------------------------------------- fallback


async def test_fallback_when_nothing_matches_lists_available_models(
    caplog: pytest.LogCaptureFixture,
) -> None:
    b = bridge()
    client = LanguageModelClient(b, selector="vscodelm/copilot/gpt-9")
    caplog.set_level(logging.WARNING, "lmbridge.client")
    response = await client.send_request(USER)
    parts = [p async for p in response]
    assert response.degraded and response.model == FALLBACK_MODEL
    assert len(parts) == 1 and isinstance(parts[0], TextPart)
    assert "vscodelm/copilot/gpt-9" in parts[0].value
    assert "gpt-4o-id" in parts[0].value  # says what is available
    assert b.requests == []  # the fallback never calls the bridge
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "no model matches" in warnings[0].getMessage()
    assert response.usage.input_tokens == math.ceil(len("hello there") / 4)
    assert response.usage.output_tokens > 0


async def test_fallback_when_no_model_at_all_names_copilot_sign_in() -> None:
    client = LanguageModelClient(FakeBridge([]))
    text = await (await client.send_request(USER)).text()
    assert "sign in to GitHub Copilot" in text


async def test_fallback_when_selection_fails_is_not_cached_and_recovers() -> None:
    b = bridge()
    b.select_error = LanguageModelError("You are not signed in to GitHub", "NoPermissions")
    client = LanguageModelClient(b)
    response = await client.send_request(USER)
    text = await response.text()
    assert response.degraded and "sign in to GitHub Copilot" in text
    assert len(b.selections) == 1  # no recursion: one attempt per request
    b.select_error = None
    response = await client.send_request(USER)
    assert not response.degraded and await response.text() == "hello there"


async def test_invalid_setting_degrades_with_the_reason() -> None:
    client = LanguageModelClient(bridge(), selector="vscodelm/auto/extra")
    text = await (await client.send_request(USER)).text()
    assert "model setting is invalid" in text and "takes no further fields" in text


async def test_without_fallback_errors_are_raised() -> None:
    client = LanguageModelClient(bridge(), selector="vscodelm/nobody", fallback=False)
    with pytest.raises(ChatRequestError) as info:
        await client.send_request(USER)
    assert info.value.kind is ErrorKind.MODEL_NOT_FOUND
    with pytest.raises(ChatRequestError):
        await client.model()


# --------------------------------------------------------------------------- streaming and usage


async def test_streams_text_thinking_and_tool_calls_with_usage() -> None:
    b = bridge()
    call = ToolCallPart("call_1", "get_weather", {"city": "Paris"})
    b.script(GPT.id, [ThinkingPart("hmm"), TextPart("Let me "), TextPart("check."), call])
    client = LanguageModelClient(b)
    tools = [
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    ]
    response = await client.send_request(USER, tools=tools, tool_mode=ToolMode.REQUIRED)
    parts = [p async for p in response]
    assert parts == [ThinkingPart("hmm"), TextPart("Let me "), TextPart("check."), call]
    assert response.tool_calls == [call]
    assert await response.text() == "Let me check."
    sent = b.requests[0]
    assert sent.options.tools == [ChatTool("get_weather", "", {"type": "object"})]
    assert sent.options.tool_mode is ToolMode.REQUIRED
    assert sent.justification and GPT.name in sent.justification
    usage = response.usage
    tool_json = (
        '{"type": "tool_call", "name": "get_weather", "arguments": {"city": "Paris"}, '
        '"callId": "call_1"}'
    )
    assert usage.output_tokens == math.ceil((3 + len("Let me check.") + len(tool_json)) / 4)
    assert usage.input_tokens == math.ceil(len("hello there") / 4) + 8


async def test_input_tokens_from_count_tokens_and_chars_over_four_when_it_fails() -> None:
    b = bridge()
    b.count = lambda _m, _t: 100
    client = LanguageModelClient(b)
    msgs = [ChatMessage.user("a" * 40), ChatMessage.assistant("b" * 8)]
    response = await client.send_request(msgs)
    await response.text()
    assert response.usage.input_tokens == 200

    def broken(_m: object, _t: object) -> int:
        raise RuntimeError("countTokens failed")

    b.count = broken
    response = await client.send_request(msgs)
    await response.text()
    assert response.usage.input_tokens == 10 + 2


@pytest.mark.parametrize("odd", [float("nan"), float("inf"), -3, True, "12", None])
async def test_usage_is_never_nan(odd: object) -> None:
    b = bridge()
    b.count = lambda _m, _t: odd
    client = LanguageModelClient(b)
    response = await client.send_request([ChatMessage.user("x" * 8)])
    await response.text()
    assert response.usage.input_tokens == 2
    assert isinstance(response.usage.output_tokens, int)
    assert await client.count_tokens("y" * 12) == 3


async def test_slow_count_tokens_falls_back_to_the_estimate() -> None:
    b = bridge()
    slow = asyncio.Event()

    async def slow_count(model: object, text: object) -> int:
        await slow.wait()
        return 1

    b.count_tokens = slow_count  # type: ignore[method-assign]
    client = LanguageModelClient(b, count_timeout=0.05)
    response = await client.send_request([ChatMessage.user("z" * 16)])
    assert await response.text() == "z" * 16
    assert response.usage.input_tokens == 4


async def test_usage_listener_fires_once_at_the_end() -> None:
    client = LanguageModelClient(bridge())
    response = await client.send_request(USER)
    seen = []
    response.on_usage(seen.append)
    await response.text()
    await response.text()
    assert seen == [response.usage]


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("error", "kind", "code"),
    [
        (
            LanguageModelError("Not signed in to GitHub Copilot", "NoPermissions"),
            ErrorKind.NOT_SIGNED_IN,
            "NoPermissions",
        ),
        (
            LanguageModelError("User did not consent", "NoPermissions"),
            ErrorKind.NO_PERMISSION,
            "NoPermissions",
        ),
        (LanguageModelError("quota exceeded", "Blocked"), ErrorKind.RATE_LIMITED, "Blocked"),
        (LanguageModelError("gone", "NotFound"), ErrorKind.MODEL_NOT_FOUND, "NotFound"),
        (RuntimeError("Server error 500"), ErrorKind.INTERNAL, "Unknown"),
        (
            ChatRequestError(ErrorKind.RATE_LIMITED, "429 Too Many Requests", code="rate_limited"),
            ErrorKind.RATE_LIMITED,
            "rate_limited",
        ),
    ],
)
async def test_errors_are_classified_and_keep_parts_and_usage(
    error: BaseException, kind: ErrorKind, code: str
) -> None:
    b = bridge()
    b.script(GPT.id, [TextPart("partial"), error])
    client = LanguageModelClient(b)
    response = await client.send_request(USER)
    got = []
    with pytest.raises(ChatRequestError) as info:
        async for part in response:
            got.append(part)
    assert got == [TextPart("partial")]
    err = info.value
    assert err.kind is kind
    assert err.raw_code == code
    assert isinstance(err, LanguageModelError)
    assert err.user_message in str(err)
    assert response.error is err and response.finished
    assert response.usage.output_tokens == 2  # "partial" = 7 chars


async def test_bad_messages_raise_before_anything_is_sent() -> None:
    b = bridge()
    client = LanguageModelClient(b)
    with pytest.raises(ConversionError, match=r"messages\[0\]"):
        await client.send_request(
            [{"role": "robot", "content": "x"}], format="chat-completions"
        )
    with pytest.raises(ConversionError, match=r"messages\[0\]\.role"):
        await client.send_request([{"role": 9, "content": []}])
    assert b.selections == [] and b.requests == []


# --------------------------------------------------------------------------- cancellation


async def test_cancelling_the_task_cancels_the_request_and_cleans_up() -> None:
    b = bridge()
    b.script(GPT.id, [TextPart("one"), 10.0, TextPart("never")])
    client = LanguageModelClient(b)
    response = await client.send_request(USER)
    got: list[object] = []
    first = asyncio.Event()

    async def read() -> None:
        async for part in response:
            got.append(part)
            first.set()

    task = asyncio.create_task(read())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert b.requests[0].cancelled and b.active_streams == 0
    assert response.finished and response.error is not None
    assert response.error.kind is ErrorKind.CANCELLED
    assert response.usage.output_tokens == 1


async def test_abort_event_cancels_the_request() -> None:
    b = bridge()
    b.script(GPT.id, [TextPart("one"), 10.0, TextPart("never")])
    client = LanguageModelClient(b)
    abort = asyncio.Event()
    response = await client.send_request(USER, cancel=abort)
    got = []
    with pytest.raises(ChatRequestError) as info:
        async for part in response:
            got.append(part)
            abort.set()
    assert info.value.kind is ErrorKind.CANCELLED
    assert got == [TextPart("one")]
    assert b.requests[0].cancelled and b.active_streams == 0


async def test_abort_before_sending_sends_nothing() -> None:
    b = bridge()
    abort = asyncio.Event()
    abort.set()
    response = await LanguageModelClient(b).send_request(USER, cancel=abort)
    with pytest.raises(ChatRequestError, match="cancelled"):
        await response.text()
    assert b.requests == []


async def test_aclose_and_context_manager_cancel() -> None:
    b = bridge()
    b.script(GPT.id, [TextPart("one"), 10.0, TextPart("never")])
    client = LanguageModelClient(b)
    async with await client.send_request(USER) as response:
        async for _ in response:
            break
    assert b.requests[0].cancelled and b.active_streams == 0
    assert response.error is not None and response.error.kind is ErrorKind.CANCELLED


# --------------------------------------------------------------------------- message formats


def test_vscode_messages_and_wire_form_with_system() -> None:
    out = messages_for_request(
        [ChatMessage.user("hi"), {"role": 2, "content": [{"kind": "text", "value": "yo"}]}],
        system="Be brief.",
    )
    assert [m.role for m in out] == [ChatRole.ASSISTANT, ChatRole.USER, ChatRole.ASSISTANT]
    assert out[0].text == "Be brief."


def test_anthropic_history_with_tools() -> None:
    out = messages_for_request(
        [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "w", "input": {"c": "P"}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}],
            },
        ],
        system="sys",
        format="anthropic",
    )
    assert out[0] == ChatMessage.assistant("sys")
    assert out[2].content == [ToolCallPart("t1", "w", {"c": "P"})]
    assert out[3].content == [ToolResultPart("t1", [TextPart("sunny")])]


def test_chat_completions_history() -> None:
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    out = messages_for_request(history, format="chat-completions")
    assert [(m.role, m.text) for m in out] == [(ChatRole.ASSISTANT, "s"), (ChatRole.USER, "u")]
    with pytest.warns(DeprecationWarning, match="chat-completions"):
        assert messages_for_request(history, format="openai") == out


def test_gemini_history() -> None:
    contents = [{"role": "user", "parts": [{"text": "u"}]}, {"role": "model", "parts": [{"text": "m"}]}]
    out = messages_for_request(contents, system=[{"text": "s"}], format="gemini")
    assert [(m.role, m.text) for m in out] == [
        (ChatRole.ASSISTANT, "s"),
        (ChatRole.USER, "u"),
        (ChatRole.ASSISTANT, "m"),
    ]
    with pytest.raises(ConversionError, match="format"):
        messages_for_request([], format="xml")  # type: ignore[arg-type]


def test_tools_from_every_shape() -> None:
    schema = {"type": "object"}
    assert tools_from(
        [
            ChatTool("a"),
            {
                "type": "function",
                "function": {"name": "b", "description": "d", "parameters": schema},
            },
            {"name": "c", "input_schema": schema},
            {"name": "d", "inputSchema": schema},
        ]
    ) == [
        ChatTool("a"),
        ChatTool("b", "d", schema),
        ChatTool("c", "", schema),
        ChatTool("d", "", schema),
    ]
    with pytest.raises(ConversionError, match=r"tools\[0\]\.function\.name"):
        tools_from([{"type": "function", "function": {}}])


# --------------------------------------------------------------------------- classification


@pytest.mark.parametrize(
    ("code", "message", "data", "kind"),
    [
        (-32800, "cancelled", None, ErrorKind.CANCELLED),
        (
            -32000,
            "Canceled",
            {"languageModelError": "Unknown", "name": "Canceled"},
            ErrorKind.CANCELLED,
        ),
        (
            -32000,
            "x",
            {"languageModelError": "NoPermissions", "name": "LanguageModelError"},
            ErrorKind.NO_PERMISSION,
        ),
        (
            -32000,
            "GitHub login required",
            {"languageModelError": "NoPermissions"},
            ErrorKind.NOT_SIGNED_IN,
        ),
        (-32000, "Request Failed: 429", {"languageModelError": "Unknown"}, ErrorKind.RATE_LIMITED),
        (-32000, "y", {"languageModelError": "NotFound"}, ErrorKind.MODEL_NOT_FOUND),
        (-32603, "TypeError: boom", None, ErrorKind.INTERNAL),
    ],
)
def test_rpc_errors_are_classified(code: int, message: str, data: object, kind: ErrorKind) -> None:
    from lmbridge.client.classify import error_from_rpc

    err = error_from_rpc(code, message, data)
    assert err.kind is kind
    assert err.detail == message
    wire = err.to_wire()
    again = ChatRequestError.from_wire(wire)
    assert (again.kind, again.raw_code, again.detail, str(again)) == (
        err.kind,
        err.raw_code,
        err.detail,
        str(err),
    )


# What lmbridge's own host answers (src/lmbridge/gateway/_errors.py, config.py), and others.
KEY_REJECTED = (
    "p rejected the API key (HTTP 401: Unauthorized); set the API key with the command "
    "'lmbridge: Set API Key', or name an environment variable holding it with 'apiKeyEnv'"
)
KEY_MISSING = (
    "provider 'p': no API key: the environment variable P_KEY (apiKeyEnv) is not set for the "
    "host; set it and restart, or store a key with the command 'lmbridge: Set API Key'"
)


@pytest.mark.parametrize(
    ("detail", "code", "kind", "says"),
    [
        (KEY_REJECTED, "NoPermissions", ErrorKind.NO_PERMISSION, "'lmbridge: Set API Key'"),
        (KEY_MISSING, "NoPermissions", ErrorKind.NO_PERMISSION, "'lmbridge: Set API Key'"),
        (KEY_REJECTED, None, ErrorKind.NO_PERMISSION, "'lmbridge: Set API Key'"),
        (KEY_MISSING, "Unknown", ErrorKind.NO_PERMISSION, "'lmbridge: Set API Key'"),
        ("Not signed in to GitHub Copilot", "NoPermissions", ErrorKind.NOT_SIGNED_IN, "sign in"),
        ("Unauthorized", "NoPermissions", ErrorKind.NOT_SIGNED_IN, "sign in"),
        ("User did not consent", "NoPermissions", ErrorKind.NO_PERMISSION, "access prompt"),
        # the code wins over words that would suggest another kind
        ("Please sign in again (rate limit reset)", "Blocked", ErrorKind.RATE_LIMITED, "wait"),
        ("unauthorized: model not found", "NotFound", ErrorKind.MODEL_NOT_FOUND, "model setting"),
        ("Rate limit reached for API key k-1", None, ErrorKind.RATE_LIMITED, "wait"),
    ],
)
def test_the_code_decides_and_the_message_fits_the_cause(
    detail: str, code: str | None, kind: ErrorKind, says: str
) -> None:
    from lmbridge.client.classify import classify_error, error_from_rpc

    err = classify_error(LanguageModelError(detail, code) if code else detail, code=code)
    assert err.kind is kind
    assert says in err.user_message
    if says != "sign in":
        assert "sign in" not in err.user_message.lower() and "Copilot" not in err.user_message
    if says == "'lmbridge: Set API Key'":
        assert "access prompt" not in err.user_message
    rpc = error_from_rpc(-32803, detail, {"languageModelError": code} if code else None)
    assert (rpc.kind, rpc.user_message) == (err.kind, err.user_message)
    again = ChatRequestError.from_wire(rpc.to_wire())
    assert (again.kind, again.user_message, str(again)) == (rpc.kind, rpc.user_message, str(rpc))


async def test_fallback_names_every_family_when_one_provider_has_many_models() -> None:
    # one vendor's many models come first (VS Code lists them in registration order): the
    # message still names the other vendors' families
    many = [fake_model(f"p{i}/m1", vendor="lmbridge", family="m1") for i in range(9)]
    others = [fake_model("e2e-alpha", vendor="lmbridge-e2e", family="fam-a"),
              fake_model("gpt-4o-id", vendor="copilot", family="gpt-4o")]
    client = LanguageModelClient(FakeBridge([*many, *others]), selector="vscodelm/nobody")
    text = await (await client.send_request(USER)).text()
    assert "lmbridge/m1 (p0/m1, p1/m1, p2/m1, +6 more)" in text
    assert "lmbridge-e2e/fam-a (e2e-alpha)" in text and "copilot/gpt-4o (gpt-4o-id)" in text
    assert "p3/m1" not in text


async def test_fallback_caps_the_families_it_names() -> None:
    models = [fake_model(f"id{i}", vendor="v", family=f"f{i:02}") for i in range(15)]
    client = LanguageModelClient(FakeBridge(models), selector="vscodelm/nobody")
    text = await (await client.send_request(USER)).text()
    assert "v/f11 (id11), and 3 more families" in text and "v/f12" not in text


# --------------------------------------------------------------------------- logs


async def test_each_answer_logs_one_usage_line_with_the_model_and_counts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    b = bridge()
    b.script(GPT.id, [TextPart("x" * 40)])
    client = LanguageModelClient(b)
    with caplog.at_level(logging.INFO, logger="lmbridge.client"):
        response = await client.send_request(USER)
        await response.text()
    lines = [r for r in caplog.records if r.getMessage().startswith("usage for ")]
    assert len(lines) == 1
    assert lines[0].levelno == logging.INFO
    usage = response.usage
    assert lines[0].getMessage() == (
        f"usage for copilot/{GPT.id}: {usage.input_tokens} input, {usage.output_tokens} output tokens"
    )
    assert "hello there" not in caplog.text  # never the content


async def test_a_failed_request_is_logged_at_error_level_and_its_usage_line_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    b = bridge()
    b.script(GPT.id, [TextPart("partial"), RuntimeError("Server error 500")])
    client = LanguageModelClient(b)
    with caplog.at_level(logging.INFO, logger="lmbridge.client"):
        response = await client.send_request(USER)
        with pytest.raises(ChatRequestError):
            await response.text()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == [f"request to {GPT.id} failed: Server error 500"]
    (usage_line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("usage")]
    assert usage_line.endswith("(internal)")


@pytest.mark.parametrize(
    "detail",
    [
        "ENOENT: no such file or directory, open '/models/gpt-5.json'",
        "Error: ENOENT",
        "The model 'gpt-9' does not exist",
    ],
)
def test_a_missing_model_reads_model_not_found(detail: str) -> None:
    from lmbridge.client.classify import classify_error

    err = classify_error(detail)
    assert err.kind is ErrorKind.MODEL_NOT_FOUND
    assert "not found" in err.user_message.lower() or "model setting" in err.user_message
    assert err.detail == detail


async def test_a_workspaces_model_is_chosen_only_by_its_id() -> None:
    """Apps select by lmbridge.consumer.model: a model of a provider a workspace's settings
    added is never the first model, nor one of a family; a selector naming its id gets it."""
    evil = fake_model("evil/gpt-4o", vendor="lmbridge", family="gpt-4o", workspace="http://x:80")
    b = FakeBridge([evil, GPT, OWN])
    for selector, expected in (
        ("vscodelm/auto", GPT),
        ("vscodelm/lmbridge/gpt-4o", OWN),
        ({"family": "gpt-4o"}, GPT),
        ("vscodelm/lmbridge/gpt-4o/evil/gpt-4o", evil),
        ({"id": "evil/gpt-4o"}, evil),
    ):
        response = await LanguageModelClient(b, selector=selector).send_request(USER)  # type: ignore[arg-type]
        assert response.model == expected, selector
        await response.text()
    response = await LanguageModelClient(b, selector={"vendor": "lmbridge", "family": "gpt-5"}).send_request(USER)
    assert response.degraded
