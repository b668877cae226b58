"""Terminal output in prompts (``lmbridge.terminal``) and the consumer client's default."""

from __future__ import annotations

import pytest

from lmbridge.client.api import LanguageModelClient
from lmbridge.client.testing import FakeBridge, fake_model
from lmbridge.errors import ConversionError
from lmbridge.parts import ChatMessage, DataPart, TextPart, ToolResultPart
from lmbridge.terminal import clean_terminal_scope, clean_terminal_text

GPT = fake_model("gpt-4o-id", vendor="copilot", family="gpt-4o")
BUILD = "\x1b[33mwarning\x1b[0m: x\r\n\x1b[2K50%\r100%\x07"


def history() -> list[ChatMessage]:
    return [
        ChatMessage.user("\x1b[1mbold\x1b[0m question"),
        ChatMessage.user([ToolResultPart("c1", [TextPart(BUILD), DataPart(b"\x1b", "text/plain")])]),
    ]


def test_tool_results_only_all_or_off() -> None:
    messages = history()
    tools = clean_terminal_text(messages, "tool-results")
    assert tools[0] is messages[0]  # nothing to clean there: the same object
    result = tools[1].content[0]
    assert isinstance(result, ToolResultPart)
    assert result.content == [TextPart("warning: x\n100%"), DataPart(b"\x1b", "text/plain")]
    assert messages[1].content[0].content[0] == TextPart(BUILD)  # type: ignore[union-attr]
    everything = clean_terminal_text(messages, "all")
    assert everything[0].text == "bold question"
    assert clean_terminal_text(messages, "off") == messages


@pytest.mark.parametrize(("value", "scope"), [(True, "all"), (False, "off"), ("all", "all")])
def test_scopes_and_booleans(value: object, scope: str) -> None:
    assert clean_terminal_scope(value) == scope


@pytest.mark.parametrize("value", ["ALL", "yes", 1, None, ["all"]])
def test_a_scope_it_cannot_take_names_the_option(value: object) -> None:
    with pytest.raises(ConversionError, match="clean_terminal: expected 'tool-results'"):
        clean_terminal_scope(value)


async def test_the_client_cleans_tool_results_by_default_and_per_request() -> None:
    bridge = FakeBridge([GPT])
    client = LanguageModelClient(bridge)
    await (await client.send_request(history())).text()
    await (await client.send_request(history(), clean_terminal="all")).text()
    await (await LanguageModelClient(bridge, clean_terminal=False).send_request(history())).text()
    default, everything, off = (r.messages for r in bridge.requests)
    assert default[0].text == "\x1b[1mbold\x1b[0m question"
    assert default[1].content[0].content[0] == TextPart("warning: x\n100%")  # type: ignore[union-attr]
    assert everything[0].text == "bold question"
    assert off[1].content[0].content[0] == TextPart(BUILD)  # type: ignore[union-attr]
    with pytest.raises(ConversionError):
        LanguageModelClient(bridge, clean_terminal="sometimes")  # type: ignore[arg-type]
