"""The user's pace (``lmbridge.pace``): concurrency and requests per minute, queued with a
bounded wait, then refused as a rate limit with its retry-after; and through the real host and
endpoint, concurrent clients queued and then answered 429 with ``Retry-After``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from lmbridge.client.classify import ChatRequestError, ErrorKind
from lmbridge.client.guard import RetryPolicy
from lmbridge.client.pace import PACE_CODE, Pace, PaceLimits, Pacer
from lmbridge.parts import TextPart
from test_host_apps import GPT, Rig, rig, wait_for

__all__ = ["rig"]  # the host fixture of test_host_apps

WAIT = 10.0


class Clock:
    """A clock the test moves (the per-minute windows); waits still run on the event loop."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pace(**kw: Any) -> Pace:
    return Pace.from_setting(kw)[0]


async def test_off_by_default_costs_a_check() -> None:
    pacer = Pacer()
    assert not pacer.pace
    async with pacer.slot("m"):
        pass
    assert pacer._models == {}  # nothing was counted


async def test_concurrent_requests_queue_in_order_then_start() -> None:
    bites: list[dict[str, Any]] = []
    pacer = Pacer(pace(maxConcurrent=1, maxWait=WAIT), on_bite=bites.append)
    order: list[str] = []
    release = asyncio.Event()

    async def request(name: str) -> None:
        async with pacer.slot("m"):
            order.append(f"{name} start")
            if name == "a":
                await release.wait()
            order.append(f"{name} end")

    first = asyncio.ensure_future(request("a"))
    await asyncio.sleep(0)
    queued = [asyncio.ensure_future(request(n)) for n in ("b", "c")]
    await asyncio.sleep(0.05)
    assert order == ["a start"]  # b and c wait in line
    release.set()
    await asyncio.wait_for(asyncio.gather(first, *queued), WAIT)
    assert order == ["a start", "a end", "b start", "b end", "c start", "c end"]
    assert [(b["scope"], b["limit"], b["refused"]) for b in bites] == [
        ("overall", "maxConcurrent=1", False),
        ("overall", "maxConcurrent=1", False),
    ]


async def test_a_request_that_would_wait_too_long_is_refused_as_a_rate_limit() -> None:
    bites: list[dict[str, Any]] = []
    pacer = Pacer(pace(maxConcurrent=1, maxWait=0.05), on_bite=bites.append)
    async with pacer.slot("m"):
        with pytest.raises(ChatRequestError) as refused:
            async with pacer.slot("m"):
                pass
    error = refused.value
    assert error.kind is ErrorKind.RATE_LIMITED and error.raw_code == PACE_CODE
    assert "lmbridge.pace" in str(error) and "maxConcurrent=1" in str(error)
    assert RetryPolicy.retry_after_header(error) == "1"
    assert RetryPolicy().delay(1, error) is None  # the endpoint's retries leave it alone
    assert bites[-1]["refused"] is True
    # the refused request held nothing: the next one starts at once
    async with pacer.slot("m"):
        pass


async def test_per_minute_refuses_at_once_with_the_time_until_a_slot_frees() -> None:
    clock = Clock()
    pacer = Pacer(pace(perMinute=2, maxWait=5), clock=clock)
    for _ in range(2):
        async with pacer.slot("m"):
            pass
    clock.now += 20
    with pytest.raises(ChatRequestError) as refused:
        async with pacer.slot("m"):
            pass
    # the first start leaves the window 40 s from now: longer than maxWait, so no wait at all
    assert RetryPolicy.retry_after_header(refused.value) == "40"
    clock.now += 40
    async with pacer.slot("m"):
        pass


async def test_per_minute_waits_when_the_slot_frees_within_max_wait() -> None:
    clock = Clock()
    pacer = Pacer(pace(perMinute=1, maxWait=30), clock=clock)
    async with pacer.slot("m"):
        pass
    clock.now += 59.95  # the window frees in 50 ms of the event loop's time
    started = asyncio.Event()

    async def second() -> None:
        async with pacer.slot("m"):
            started.set()

    task = asyncio.ensure_future(second())
    await asyncio.sleep(0)
    assert not started.is_set()
    clock.now += 0.05
    await asyncio.wait_for(task, WAIT)
    assert started.is_set()


async def test_per_model_limits_leave_other_models_alone() -> None:
    pacer = Pacer(pace(perModel={"maxConcurrent": 1}, maxWait=0.05))
    async with pacer.slot("a"), pacer.slot("b"):
        with pytest.raises(ChatRequestError) as refused:
            async with pacer.slot("a"):
                pass
    assert "model maxConcurrent=1" in str(refused.value) and "for a;" in str(refused.value)


def test_setting_is_read_with_clear_problems() -> None:
    good, problems = Pace.from_setting(
        {"maxConcurrent": 4, "perMinute": 30, "perModel": {"perMinute": 10}, "maxWait": 2}
    )
    assert problems == []
    assert good.overall == PaceLimits(4, 30) and good.per_model == PaceLimits(None, 10)
    assert good.max_wait == 2.0 and good
    bad, problems = Pace.from_setting(
        {"maxConcurrent": 0, "perMinute": "9", "perModel": 3, "maxWait": -1, "burst": 1}
    )
    assert not bad
    assert problems == [
        "lmbridge.pace.maxConcurrent: expected a whole number of 1 or more, got 0",
        "lmbridge.pace.perMinute: expected a whole number of 1 or more, got '9'",
        "lmbridge.pace.perModel: expected an object",
        "lmbridge.pace.maxWait: expected seconds from 0 to 600, got -1",
        "lmbridge.pace: unknown fields burst ignored",
    ]
    assert Pace.from_setting(None) == (Pace(), [])
    assert Pace.from_setting([1])[1] == ["lmbridge.pace: expected an object, got list"]


# --------------------------------------------------------------------------- through the host


async def test_concurrent_clients_of_the_endpoint_are_queued_then_refused_with_retry_after(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real host: the endpoint's clients and VS Code (the test double over JSON-RPC)."""
    monkeypatch.delenv("LMBRIDGE_ENDPOINT_FILE", raising=False)
    most = 0

    def slow(_model: Any, _messages: Any, _options: Any) -> list[Any]:
        nonlocal most
        most = max(most, rig.bridge.active_streams)
        return [TextPart("a"), 0.2, TextPart("b")]

    rig.bridge.script(GPT.id, slow)
    bites: list[dict[str, Any]] = []
    rig.extension.on_notification("pace/limited", bites.append)
    await rig.initialize(
        endpointEnabled=True, storage=str(tmp_path), pace={"maxConcurrent": 1, "maxWait": 30}
    )
    info = json.loads((tmp_path / "endpoint.json").read_text())
    chat = {"model": GPT.id, "messages": [{"role": "user", "content": "hi"}]}
    auth = {"authorization": f"Bearer {info['token']}"}
    async with httpx.AsyncClient(
        base_url=info["url"], headers=auth, timeout=WAIT, trust_env=False
    ) as http:
        answers = await asyncio.gather(
            *(http.post("/v1/chat/completions", json=chat) for _ in range(3))
        )
        assert [r.status_code for r in answers] == [200, 200, 200]
        assert most == 1  # one at a time: the others waited in line
        assert bites and not bites[0]["refused"] and bites[0]["limit"] == "maxConcurrent=1"

        # a short wait: one is served, the others get each API's own 429 with Retry-After
        await rig.configure(
            endpointEnabled=True, storage=str(tmp_path), pace={"maxConcurrent": 1, "maxWait": 0}
        )
        claude = {"model": GPT.id, "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
        gemini = {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}
        # the first one holds the only slot (its model is slow) while the others arrive
        rig.bridge.script(GPT.id, [TextPart("a"), 60.0, TextPart("b")])
        first = asyncio.ensure_future(http.post("/v1/chat/completions", json=chat))
        await wait_for(lambda: rig.bridge.active_streams == 1)
        openai_429, anthropic_429, gemini_429 = await asyncio.gather(
            http.post("/v1/chat/completions", json=chat),
            http.post("/v1/messages", json=claude, headers={"anthropic-version": "2023-06-01"}),
            http.post(f"/v1beta/models/{GPT.id}:generateContent", json=gemini),
        )
        first.cancel()  # the client leaves: its VS Code request ends
        await wait_for(lambda: rig.bridge.active_streams == 0)
    for response in (openai_429, anthropic_429, gemini_429):
        assert response.status_code == 429, response.text
        assert response.headers["retry-after"] == "1"
    assert openai_429.json()["error"]["type"] == "rate-limited"
    assert "lmbridge.pace" in openai_429.json()["error"]["message"]
    assert anthropic_429.json()["error"]["type"] == "rate_limit_error"
    assert gemini_429.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert bites[-1]["refused"] is True
    # the refused ones never reached VS Code, and were not retried
    assert len(rig.bridge.requests) == 4
