"""Selector text: the vscodelm/ form, Cline's form, the empty selector, round trips, errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lmbridge.client.selectors import (
    AUTO,
    ModelSelector,
    SelectorError,
    format_selector,
    parse_selector,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ModelSelector()),
        ("   ", ModelSelector()),
        (AUTO, ModelSelector()),
        ("vscodelm/copilot", ModelSelector(vendor="copilot")),
        ("vscodelm/copilot/gpt-4o", ModelSelector(vendor="copilot", family="gpt-4o")),
        (
            "vscodelm/copilot/gpt-4o/gpt-4o-2024-11-20",
            ModelSelector(vendor="copilot", family="gpt-4o", id="gpt-4o-2024-11-20"),
        ),
        # lmbridge's own ids contain '/': everything after the family is the id
        (
            "vscodelm/lmbridge/gpt-4o/openai/gpt-4o",
            ModelSelector(vendor="lmbridge", family="gpt-4o", id="openai/gpt-4o"),
        ),
        ("vscodelm//gpt-4o", ModelSelector(family="gpt-4o")),
        ("vscodelm/copilot//my-id", ModelSelector(vendor="copilot", id="my-id")),
        # Cline: vendor/family/version/id
        ("copilot", ModelSelector(vendor="copilot")),
        ("copilot/gpt-4o", ModelSelector(vendor="copilot", family="gpt-4o")),
        (
            "azure-openai/gpt-4/turbo",
            ModelSelector(vendor="azure-openai", family="gpt-4", version="turbo"),
        ),
        (
            "copilot/gpt-4o/2024-11-20/gpt-4o-x",
            ModelSelector(vendor="copilot", family="gpt-4o", version="2024-11-20", id="gpt-4o-x"),
        ),
        ("copilot//v1", ModelSelector(vendor="copilot", version="v1")),
        ('{"vendor": "copilot", "version": "1"}', ModelSelector(vendor="copilot", version="1")),
    ],
)
def test_parse(text: str, expected: ModelSelector) -> None:
    assert parse_selector(text) == expected


def test_parse_objects_and_none() -> None:
    assert parse_selector(None) == ModelSelector()
    assert parse_selector({"vendor": "copilot", "family": ""}) == ModelSelector(vendor="copilot")
    sel = ModelSelector(id="x")
    assert parse_selector(sel) is sel


def test_to_wire_only_has_set_fields() -> None:
    assert ModelSelector().to_wire() == {}
    assert parse_selector("vscodelm/copilot/gpt-4o").to_wire() == {
        "vendor": "copilot",
        "family": "gpt-4o",
    }
    assert ModelSelector.from_wire({"id": "a/b"}).to_wire() == {"id": "a/b"}


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        (ModelSelector(), AUTO),
        (ModelSelector(vendor="copilot", family="gpt-4o"), "vscodelm/copilot/gpt-4o"),
        (ModelSelector(vendor="copilot", id="x"), "vscodelm/copilot//x"),
        (ModelSelector(vendor="copilot", version="2"), "copilot//2"),
        (ModelSelector(vendor="auto"), "auto"),
        (
            ModelSelector(vendor="vscodelm", family="f", version="v"),
            '{"vendor":"vscodelm","family":"f","version":"v"}',
        ),
    ],
)
def test_format_default_style(selector: ModelSelector, text: str) -> None:
    assert format_selector(selector) == text == str(selector)
    assert parse_selector(text) == selector


def test_format_cline_style_matches_cline_for_prefix_filled_selectors() -> None:
    sel = ModelSelector(vendor="copilot", family="gpt-4o", version="1")
    assert format_selector(sel, "cline") == "copilot/gpt-4o/1"
    assert format_selector(ModelSelector(), "cline") == ""


def test_format_style_that_cannot_express_the_selector() -> None:
    with pytest.raises(SelectorError, match="cannot express a version"):
        format_selector(ModelSelector(version="1"), "vscodelm")
    with pytest.raises(SelectorError, match="would read as"):
        format_selector(ModelSelector(vendor="vscodelm"), "cline")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("vscodelm", "expected vscodelm/auto"),
        ("vscodelm/", "ends with '/'"),
        ("copilot/gpt-4o/", "ends with '/'"),
        ("vscodelm/auto/gpt-4o", "takes no further fields"),
        ('{"vendor": 1}', "selector.vendor: expected a string"),
        ('{"familly": "gpt-4o"}', "unknown field"),
        ("{not json", "invalid JSON"),
        ("copilot/ gpt-4o", "surrounding spaces"),
        ("cop\tilot", "control characters"),
    ],
)
def test_malformed_selectors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(SelectorError, match=message) as info:
        parse_selector(text)
    if not text.startswith("{"):
        assert repr(text) in str(info.value)


def test_selector_error_is_a_config_error() -> None:
    from lmbridge.errors import ConfigError

    with pytest.raises(ConfigError):
        parse_selector(42)  # type: ignore[arg-type]
    with pytest.raises(SelectorError, match="only the id may contain"):
        ModelSelector(vendor="a/b")
    with pytest.raises(SelectorError, match="empty"):
        ModelSelector(family="")


def test_matches() -> None:
    sel = parse_selector("vscodelm/copilot/gpt-4o")
    assert sel.matches(vendor="copilot", family="gpt-4o", version="1", id="x")
    assert not sel.matches(vendor="copilot", family="o1", version="1", id="x")
    assert ModelSelector().matches(vendor="a", family="b", version="c", id="d")


_segment = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zs"), blacklist_characters="/"),
    min_size=1,
    max_size=8,
).filter(lambda s: s == s.strip())
_ids = st.lists(_segment, min_size=1, max_size=3).map("/".join)
_selectors = st.builds(
    ModelSelector,
    vendor=st.none() | _segment | st.sampled_from(["auto", "vscodelm", "{x"]),
    family=st.none() | _segment,
    version=st.none() | _segment,
    id=st.none() | _ids,
)


@given(_selectors)
def test_round_trip(selector: ModelSelector) -> None:
    assert parse_selector(format_selector(selector)) == selector
    for style in ("vscodelm", "cline"):
        try:
            text = format_selector(selector, style)  # type: ignore[arg-type]
        except SelectorError:
            continue
        assert parse_selector(text) == selector
    assert ModelSelector.from_wire(selector.to_wire()) == selector
