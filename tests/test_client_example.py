"""The consumer example app runs every scenario green against its scripted stand-in, through a
real loopback endpoint (so the example the e2e run uses cannot go stale)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

EXAMPLE = Path(__file__).parent.parent / "examples" / "consumer_app.py"


async def test_consumer_app_demo_is_all_green() -> None:
    spec = importlib.util.spec_from_file_location("consumer_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    report = await module._demo()
    scenarios = {k: v for k, v in report.items() if k != "models"}
    assert set(scenarios) == {
        "selectors",
        "stream_text",
        "tool_call",
        "cancellation",
        "fallback",
        "setting_switch",
        "error_classified",
    }
    failed = {k: v for k, v in scenarios.items() if not v["ok"]}
    assert not failed
    assert report["cancellation"]["parts_before_cancel"] == 1
    assert report["error_classified"]["kind"] == "model-not-found"
