"""TokenEstimator: part costs, family choice, calibration and the per-message cache."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest

from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    DataPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from lmbridge.tokens import (
    FAMILIES,
    Calibration,
    TokenEstimator,
    family_costs,
    family_for,
    image_tokens,
    weight_set_for,
)

IMAGES = Path(__file__).parent / "data" / "images"
PROSE = (
    "The licenses for most software are designed to take away your freedom to share and "
    "change it. By contrast, the GNU General Public License is intended to guarantee your "
    "freedom to share and change free software."
)


# --------------------------------------------------------------------------- families


@pytest.mark.parametrize(
    ("model_id", "family", "expected"),
    [
        ("gpt-4o", None, "openai"),
        ("o3-mini", None, "openai"),
        ("openai/o4-mini", None, "openai"),
        ("gpt-oss-120b", None, "openai"),
        ("anthropic/claude-opus-4", None, "anthropic"),
        ("x", "claude-sonnet-4", "anthropic"),
        ("gemini-2.5-pro", None, "google"),
        ("meta-llama/Llama-3.1-8B-Instruct", None, "llama"),
        ("Qwen/Qwen3-32B", None, "qwen"),
        ("mistral-large-latest", None, "mistral"),
        ("codestral-2501", None, "mistral"),
        ("deepseek-chat", None, "deepseek"),
        ("some-model", None, "unknown"),
        ("", None, "unknown"),
        ("gpt-4o", "anthropic", "anthropic"),  # an explicit family wins
    ],
)
def test_family_for(model_id: str, family: str | None, expected: str) -> None:
    assert family_for(model_id, family) == expected


def test_every_family_has_weights() -> None:
    for family in FAMILIES:
        est = TokenEstimator(family)
        assert est.family == family
        assert est.count_text(PROSE) > 0


def test_gpt4_uses_cl100k_and_gpt4o_o200k() -> None:
    assert weight_set_for("openai", "gpt-4-turbo") == "cl100k"
    assert weight_set_for("openai", "gpt-3.5-turbo") == "cl100k"
    assert weight_set_for("openai", "gpt-4o-mini") == "o200k"
    assert weight_set_for("openai", "gpt-4.1") == "o200k"


# --------------------------------------------------------------------------- part costs


@pytest.fixture
def est() -> TokenEstimator:
    return TokenEstimator("openai")


def test_text_and_thinking_cost_their_text(est: TokenEstimator) -> None:
    assert est.raw_part(TextPart(PROSE)) == est.raw_text(PROSE) > 0
    assert est.raw_part(ThinkingPart([PROSE[:50], PROSE[50:]])) == pytest.approx(
        est.raw_text(PROSE)
    )
    assert est.raw_part(TextPart("")) == 0


def test_tool_call_costs_name_json_input_and_overhead(est: TokenEstimator) -> None:
    part = ToolCallPart("call_1", "read_file", {"path": "src/app.py", "lines": [1, 20]})
    expected = (
        family_costs("openai").tool_call
        + est.raw_text("read_file")
        + est.raw_text('{"lines":[1,20],"path":"src/app.py"}')
    )
    assert est.raw_part(part) == pytest.approx(expected)


def test_tool_result_costs_its_content_and_overhead(est: TokenEstimator) -> None:
    part = ToolResultPart("call_1", [TextPart(PROSE), TextPart("done")])
    expected = family_costs("openai").tool_result + est.raw_text(PROSE) + est.raw_text("done")
    assert est.raw_part(part) == pytest.approx(expected)


def test_data_part_costs(est: TokenEstimator) -> None:
    png = (IMAGES / "wide-3000x1000.png").read_bytes()
    assert est.raw_part(DataPart.image(png, "image/png")) == image_tokens("openai", png)
    assert est.raw_part(DataPart.json({"a": PROSE})) == est.raw_text(
        json.dumps({"a": PROSE}, separators=(",", ":"))
    )
    assert est.raw_part(DataPart.text(PROSE)) == est.raw_text(PROSE)
    assert est.raw_part(DataPart(bytes(4000), "application/pdf")) == 1000  # 1 per 4 bytes
    assert est.raw_part(DataPart(b"ephemeral", "cache_control")) == 0  # a VS Code marker
    # an image inside a tool result costs the image
    result = ToolResultPart("c", [DataPart.image(png, "image/png")])
    assert est.raw_part(result) == family_costs("openai").tool_result + image_tokens("openai", png)


def test_same_image_costs_differ_by_family() -> None:
    png = (IMAGES / "wide-3000x1000.png").read_bytes()
    part = DataPart.image(png, "image/png")
    assert TokenEstimator("anthropic").raw_part(part) == image_tokens("anthropic", png)
    assert TokenEstimator("anthropic").raw_part(part) != TokenEstimator("openai").raw_part(part)


def test_message_and_request_overheads(est: TokenEstimator) -> None:
    costs = family_costs("openai")
    msg = ChatMessage.user(PROSE)
    assert est.raw_message(msg) == pytest.approx(costs.message + est.raw_text(PROSE))
    named = ChatMessage.user(PROSE, name="alice")
    assert est.raw_message(named) == pytest.approx(est.raw_message(msg) + costs.name)
    msgs = [ChatMessage.system("Be brief."), msg]
    total = costs.request + sum(est.raw_message(m) for m in msgs)
    assert est.count_request(msgs) == math.ceil(total)


def test_tool_definitions_count(est: TokenEstimator) -> None:
    costs = family_costs("openai")
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    tools = [ChatTool("read_file", "Read a file from the workspace.", schema), ChatTool("now")]
    expected = (
        costs.tools
        + 2 * costs.tool_definition
        + est.raw_text("read_file")
        + est.raw_text("Read a file from the workspace.")
        + est.raw_text(json.dumps(schema, separators=(",", ":"), sort_keys=True))
        + est.raw_text("now")
    )
    assert est.raw_tools(tools) == pytest.approx(expected)
    msgs = [ChatMessage.user("hi")]
    with_tools = est.count_request(msgs, ChatRequestOptions(tools=tools))
    assert with_tools == math.ceil(est.count_request(msgs) - 0.5 + expected) or (
        with_tools - est.count_request(msgs) >= math.floor(expected)
    )
    # Anthropic's tool-use system prompt makes tools dearer there
    assert TokenEstimator("anthropic").raw_tools(tools) > est.raw_tools(tools) + 300


def test_margin_inflates_counts() -> None:
    plain = TokenEstimator("openai").count_text(PROSE * 10)
    padded = TokenEstimator("openai", margin=0.2).count_text(PROSE * 10)
    assert padded == math.ceil(TokenEstimator("openai").raw_text(PROSE * 10) * 1.2 - 1e-9)
    assert padded > plain
    with pytest.raises(ValueError, match="margin"):
        TokenEstimator("openai", margin=-0.1)


# --------------------------------------------------------------------------- calibration


def test_calibration_converges_on_a_stream_of_usages() -> None:
    """The upstream counts 30 % more than the raw estimate: the factor learns it."""
    est = TokenEstimator("anthropic", model_id="claude-test")
    errors = []
    for turn in range(12):
        # every turn is a new conversation, so nothing is cached
        msgs = [ChatMessage.user(f"{PROSE} (turn {turn}) " * (3 + turn % 4))]
        raw = est.costs.request + est.raw_message(msgs[0])
        actual = round(raw * 1.3)
        errors.append(abs(est.count_request(msgs) - actual) / actual)
        est.observe(msgs, None, actual)
    assert errors[0] > 0.2
    assert max(errors[-4:]) < 0.03
    assert est.factor == pytest.approx(1.3, rel=0.03)


def test_calibration_ignores_outliers_and_tiny_samples() -> None:
    cal = Calibration()
    cal.observe(1000, 1200)
    after_one = cal.factor
    cal.observe(1000, 100_000)  # a wild ratio is clipped
    assert cal.factor <= 2.0
    cal2 = Calibration(factor=1.0, observations=20, weight=10.0)
    cal2.observe(10, 20)  # a 10-token message barely moves a settled factor
    assert cal2.factor < 1.02
    assert 1.0 < after_one <= 1.2
    cal.observe(0, 10)  # nothing estimated: nothing learnt
    assert cal.observations == 2


@pytest.mark.parametrize(("wild", "bound"), [(100_000, 2000), (1, 500)])
def test_a_wild_observation_moves_the_factor_no_further_than_a_ratio_of_2_does(
    wild: int, bound: int
) -> None:
    """From a settled factor, where the band of factors is far: a ratio of 100 (or 1/1000)
    moves it exactly as far as the clip's ratio of 2 (or 1/2), not to the band's edge."""
    settled = {"factor": 1.0, "observations": 20, "weight": 1.0 / 0.3}
    outlier, clipped = Calibration(**settled), Calibration(**settled)
    outlier.observe(1000, wild)
    clipped.observe(1000, bound)
    assert outlier.factor == clipped.factor
    assert 0.5 < outlier.factor < 2.0  # inside the band: the clip did it, not the band


def test_calibration_is_per_model(tmp_path: Path) -> None:
    from lmbridge.tokens import TokenStore

    store = TokenStore.open(tmp_path / "t.db")
    a = TokenEstimator("openai", model_id="gpt-a", store=store)
    msgs = [ChatMessage.user(PROSE * 5)]
    a.observe(msgs, None, round(a.count_request(msgs) * 1.5))
    assert a.factor > 1.1
    assert TokenEstimator("openai", model_id="gpt-b", store=store).factor == 1.0
    assert TokenEstimator("openai", model_id="gpt-a", store=store).factor == a.factor
    store.close()


def test_a_change_of_the_calibration_factor_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    est = TokenEstimator("openai", model_id="gpt-log")
    msgs = [ChatMessage.user(PROSE * 5)]
    with caplog.at_level(logging.DEBUG, logger="lmbridge.tokens"):
        est.observe(msgs, None, round(est.count_request(msgs) * 1.5))
    (record,) = [r for r in caplog.records if r.name == "lmbridge.tokens"]
    assert record.levelno == logging.INFO
    assert record.getMessage() == (
        f"calibration for gpt-log: factor 1.000 -> {est.factor:.3f} (1 observations)"
    )
    assert PROSE[:20] not in caplog.text


def test_message_keys_differ_by_name_and_by_how_the_text_is_split_into_parts() -> None:
    from lmbridge.tokens.estimator import message_key

    ns = b"n" * 16
    text = ChatMessage.user("hello world")
    keys = [
        message_key(ns, text),
        message_key(ns, ChatMessage.user("hello world", name="alice")),
        message_key(ns, ChatMessage.user("hello world", name="bob")),
        message_key(ns, ChatMessage.user([TextPart("hello "), TextPart("world")])),
        message_key(ns, ChatMessage.user([TextPart("hello"), TextPart(" world")])),
        message_key(ns, ChatMessage.user([TextPart("hello world"), TextPart("")])),
        message_key(ns, ChatMessage.user([TextPart("aTb")])),  # the part tag inside a text
        message_key(ns, ChatMessage.user([TextPart("a"), TextPart("b")])),
        message_key(ns, ChatMessage.assistant("hello world")),
        message_key(b"m" * 16, text),
    ]
    assert len(set(keys)) == len(keys)
    assert message_key(ns, ChatMessage.user("hello world")) == keys[0]  # stable
    # a stored count follows its exact message: the name or a split is another message
    est = TokenEstimator("openai", model_id="gpt-4o")
    est.observe([ChatMessage.user("hello world", name="alice")], None, 50)
    assert est.estimate_request([ChatMessage.user("hello world", name="alice")]).cached == [True]
    assert est.estimate_request([ChatMessage.user("hello world", name="bob")]).cached == [False]
    split = ChatMessage.user([TextPart("hello "), TextPart("world")], name="alice")
    assert est.estimate_request([split]).cached == [False]
