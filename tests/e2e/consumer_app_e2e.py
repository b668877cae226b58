"""The Python side of the consumer e2e: an ``lmbridge.apps`` app the host runs inside VS Code.

The driver extension puts this file into ``lmbridge.apps`` after its own cases; the host then
runs ``main(transport)``, which uses VS Code's models (the driver's ``lmbridge-e2e`` test
provider and lmbridge's own echo model) through the client API and writes a record to
``plan["consumer"]["out"]`` (the plan is ``$LMBRIDGE_E2E_PLAN``) that test_vscode_e2e.py reads.

For the model-setting case the app asks the driver to change ``lmbridge.consumer.model`` by
adding ``{"key", "value"}`` to the record's ``settingRequests``, then waits until the new value
arrives over ``lm/configChanged``. Outside the harness (no plan) it does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lmbridge.client import (
    ChatRequestError,
    HostTransport,
    LanguageModelClient,
    ModelSelector,
    format_selector,
    select_chat_models,
)
from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    TextPart,
    ToolMode,
    part_to_wire,
)

__all__ = ["main"]

WEATHER = ChatTool(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ALPHA = "vscodelm/lmbridge-e2e/fam-a"
BETA = "vscodelm/lmbridge-e2e/fam-b"
ECHO = "vscodelm/lmbridge/echo/echo/echo"  # lmbridge's own ids contain '/'


class Record:
    """The app's record, rewritten atomically after every case."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {
            "pid": os.getpid(),
            "cases": {},
            "settingRequests": [],
            "final": False,
        }

    def write(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)

    async def case(self, name: str, run: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        start = time.monotonic()
        try:
            result = {"ok": True, **(await asyncio.wait_for(run(), 60))}
        except Exception as exc:  # recorded; the other cases still run
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        result["ms"] = round((time.monotonic() - start) * 1000)
        self.data["cases"][name] = result
        self.write()


def _read_json(path: str) -> Any:
    return json.loads(Path(path).read_text())


def user(text: str) -> ChatMessage:
    return ChatMessage.user(text)


async def main(transport: HostTransport) -> None:
    """Run every consumer case through ``transport`` (the host's) and write the record."""
    plan_file = os.environ.get("LMBRIDGE_E2E_PLAN")
    if not plan_file:
        return
    plan = _read_json(plan_file)
    record = Record(Path(plan["consumer"]["out"]))
    record.write()

    async def models() -> dict[str, Any]:
        found = await select_chat_models(None)  # the default transport: the host's
        return {"models": [m.to_wire() for m in found]}

    await record.case("models", models)

    async def selectors() -> dict[str, Any]:
        everything = await select_chat_models(None, transport=transport)
        beta = next(m for m in everything if m.id == "e2e-beta")
        forms = {
            "auto": "vscodelm/auto",
            "empty": "",
            "vscodelmVendorFamily": ALPHA,
            "vscodelmFull": f"vscodelm/{beta.vendor}/{beta.family}/{beta.id}",
            "cline": format_selector(
                ModelSelector(beta.vendor, beta.family, beta.version, beta.id), "cline"
            ),
            "slashId": ECHO,
        }
        chosen = {}
        for name, text in forms.items():
            model = await LanguageModelClient(transport, selector=text).model()
            chosen[name] = {"selector": text, "id": model.id, "vendor": model.vendor}
        return {"first": everything[0].id, "chosen": chosen}

    await record.case("selectors", selectors)

    async def stream(selector: str, text: str) -> dict[str, Any]:
        client = LanguageModelClient(transport, selector=selector)
        response = await client.send_request([user(text)], system="Be brief.")
        parts = [part_to_wire(p) async for p in response]
        usage = response.usage
        return {
            "model": response.model.id,
            "degraded": response.degraded,
            "parts": parts,
            "text": "".join(p.value for p in response.parts if isinstance(p, TextPart)),
            "usage": {"input": usage.input_tokens, "output": usage.output_tokens},
        }

    await record.case("streamAlpha", lambda: stream(ALPHA, "hello from python"))
    await record.case("streamEcho", lambda: stream(ECHO, "hello through two bridges"))

    async def tool_call(selector: str) -> dict[str, Any]:
        client = LanguageModelClient(transport, selector=selector)
        response = await client.send_request(
            [user("call get_weather for Paris")],
            ChatRequestOptions(tools=[WEATHER], tool_mode=ToolMode.REQUIRED),
        )
        await response.text()
        return {
            "model": response.model.id,
            "calls": [
                {"name": c.name, "input": c.input, "callId": c.call_id} for c in response.tool_calls
            ],
            "outputTokens": response.usage.output_tokens,
        }

    await record.case("toolAlpha", lambda: tool_call(ALPHA))
    await record.case("toolEcho", lambda: tool_call(ECHO))

    async def cancel_by_event() -> dict[str, Any]:
        abort = asyncio.Event()
        client = LanguageModelClient(transport, selector=ALPHA)
        response = await client.send_request([user("/slow cancel-event")], cancel=abort)
        seen = 0
        kind = None
        cancelled_at = time.monotonic()
        try:
            async for _ in response:
                seen += 1
                if seen == 2:
                    abort.set()
                    cancelled_at = time.monotonic()
        except ChatRequestError as exc:
            kind = exc.kind.value
        return {
            "partsSeen": seen,
            "kind": kind,
            "endedAfterCancelMs": round((time.monotonic() - cancelled_at) * 1000),
            "finished": response.finished,
            "usage": {"input": response.usage.input_tokens, "output": response.usage.output_tokens},
        }

    async def cancel_by_task() -> dict[str, Any]:
        client = LanguageModelClient(transport, selector=ALPHA)
        seen = asyncio.Event()
        count = 0

        async def read() -> None:
            nonlocal count
            response = await client.send_request([user("/slow cancel-task")])
            async for _ in response:
                count += 1
                if count == 2:
                    seen.set()

        task = asyncio.ensure_future(read())
        await seen.wait()
        task.cancel()
        start = time.monotonic()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return {
            "partsSeen": count,
            "cancelled": task.cancelled(),
            "endedAfterCancelMs": round((time.monotonic() - start) * 1000),
        }

    await record.case("cancelEvent", cancel_by_event)
    await record.case("cancelTask", cancel_by_task)

    async def fallback() -> dict[str, Any]:
        client = LanguageModelClient(transport, selector="vscodelm/no-such-vendor/no-such-family")
        response = await client.send_request([user("hello")])
        text = await response.text()
        return {
            "degraded": response.degraded,
            "model": response.model.id,
            "text": text,
            "selections": client.selections,
        }

    await record.case("fallback", fallback)

    async def error(selector: str, text: str) -> dict[str, Any]:
        client = LanguageModelClient(transport, selector=selector)
        response = await client.send_request([user(text)])
        try:
            await response.text()
        except ChatRequestError as exc:
            return {
                "kind": exc.kind.value,
                "code": exc.raw_code,
                "name": exc.name,
                "userMessage": exc.user_message,
                "detail": exc.detail,
                "usageFinal": response.finished,
            }
        raise AssertionError("the request succeeded")

    await record.case("errorBlocked", lambda: error(ALPHA, "/throw Blocked"))
    await record.case("errorNoPermissions", lambda: error(ALPHA, "/throw NoPermissions"))
    await record.case("errorEchoNotFound", lambda: error(ECHO, "/error NotFound e2e gone"))

    async def count_tokens() -> dict[str, Any]:
        client = LanguageModelClient(transport, selector=ALPHA)
        return {"tokens": await client.count_tokens("hello world")}

    await record.case("countTokens", count_tokens)

    async def model_setting() -> dict[str, Any]:
        # no selector and no transport: the default transport and lmbridge.consumer.model
        client = LanguageModelClient(debounce=0.1)
        before = await (await client.send_request([user("which model?")])).text()
        setting_before = transport.model_setting
        record.data["settingRequests"].append({"key": "lmbridge.consumer.model", "value": BETA})
        record.write()
        asked = time.monotonic()
        while transport.model_setting != BETA:
            if time.monotonic() - asked > 30:
                raise AssertionError(
                    f"the setting did not arrive (still {transport.model_setting!r})"
                )
            await asyncio.sleep(0.02)
        arrived_ms = round((time.monotonic() - asked) * 1000)
        after = await (await client.send_request([user("which model now?")])).text()
        return {
            "settingBefore": setting_before,
            "settingAfter": transport.model_setting,
            "before": before,
            "after": after,
            "arrivedMs": arrived_ms,
            "selections": client.selections,
            "pidAfter": os.getpid(),
        }

    await record.case("modelSetting", model_setting)
    record.data["final"] = True
    record.write()
