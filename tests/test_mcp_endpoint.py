"""VS Code's tools on the loopback endpoint: the MCP server at ``/mcp`` driven by the official
MCP Python SDK's Streamable HTTP client, the ``/lm/tools`` routes through
:class:`HttpTransport`, the input check and the Python tool loop, with the test double of
VS Code behind a real HTTP endpoint on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from lmbridge.client import HttpTransport, LanguageModelClient
from lmbridge.client.endpoint import EndpointServer
from lmbridge.client.testing import FakeBridge, fake_model
from lmbridge.client.tools import (
    ToolAllowlist,
    ToolBox,
    ToolError,
    VSCodeTool,
    run_tool_loop,
    validate_input,
)
from lmbridge.parts import DataPart, TextPart, ToolCallPart, ToolResultPart

GPT = fake_model("gpt-4o", vendor="copilot", family="gpt-4o")
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 8
WEATHER = VSCodeTool(
    "weather",
    "Weather in a city",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
        "required": ["city"],
        "additionalProperties": False,
    },
    ("forecast",),
)
SECRET_TOOL = VSCodeTool("copilot_runInTerminal", "Runs a command", {"type": "object"})
SLOW = VSCodeTool("slow", "Takes its time", None)
WAIT = 10.0


class Slow:
    """A tool that runs until it is cancelled, and says when it started and stopped."""

    def __init__(self) -> None:
        self.started: asyncio.Queue[None] = asyncio.Queue()
        self.stopped: asyncio.Queue[None] = asyncio.Queue()

    async def __call__(self, _: dict[str, Any]) -> list[TextPart]:
        self.started.put_nowait(None)
        try:
            await asyncio.sleep(60)
        finally:
            self.stopped.put_nowait(None)
        return [TextPart("late")]


@pytest.fixture
def slow() -> Slow:
    return Slow()


@pytest.fixture
def bridge(slow: Slow) -> FakeBridge:
    bridge = FakeBridge([GPT])
    bridge.add_tool(
        WEATHER,
        lambda input: [
            TextPart(f"sunny in {input['city']}"),
            DataPart.image(PNG, "image/png"),
            DataPart.json({"temp": 21}),
        ],
    )
    bridge.add_tool(SECRET_TOOL, [TextPart("ran")])

    bridge.add_tool(SLOW, slow)
    return bridge


async def started(bridge: FakeBridge, tools: list[str] | None) -> EndpointServer:
    allow = ToolAllowlist.from_setting(tools)[0]
    server = EndpointServer(bridge, endpoint_file=False, tools=allow)
    await server.start()
    return server


@pytest.fixture
async def server(bridge: FakeBridge) -> AsyncIterator[EndpointServer]:
    srv = await started(bridge, ["weather", "sl*"])
    try:
        yield srv
    finally:
        await srv.aclose()


@asynccontextmanager
async def mcp_session(
    server: EndpointServer, token: str | None = None
) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token or server.token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=WAIT, trust_env=False) as http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_official_client_lists_and_calls_the_allowed_tools(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    async with mcp_session(server) as session:
        listed = await session.list_tools()
        assert [t.name for t in listed.tools] == ["weather", "slow"]  # not the terminal tool
        weather = listed.tools[0]
        assert weather.description == "Weather in a city"
        assert weather.input_schema["required"] == ["city"]
        assert listed.tools[1].input_schema == {"type": "object", "properties": {}}

        result = await session.call_tool("weather", {"city": "Paris"})
        assert result.is_error is False
        kinds = [c.type for c in result.content]
        assert kinds == ["text", "image", "text"]
        assert result.content[0].text == "sunny in Paris"  # type: ignore[union-attr]
        assert base64.b64decode(result.content[1].data) == PNG  # type: ignore[union-attr]
        assert json.loads(result.content[2].text) == {"temp": 21}  # type: ignore[union-attr]
        assert bridge.tool_calls == [("weather", {"city": "Paris"})]
        await session.send_ping()


async def test_a_tool_outside_the_allowlist_is_not_callable(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    async with mcp_session(server) as session:
        for name in ("copilot_runInTerminal", "no_such_tool"):
            with pytest.raises(Exception, match="Unknown tool") as refused:
                await session.call_tool(name, {"command": "rm -rf /"})
            assert name in str(refused.value)
    assert bridge.tool_calls == []


async def test_bad_input_is_checked_before_the_tool_runs(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    async with mcp_session(server) as session:
        result = await session.call_tool("weather", {"city": 7, "days": 0, "extra": True})
    assert result.is_error is True
    text = result.content[0].text  # type: ignore[union-attr]
    assert "input.city: expected string, got a number" in text
    assert "input.days: expected at least 1, got 0" in text
    assert "input.extra: not a property" in text
    assert bridge.tool_calls == []  # VS Code never saw it


async def test_a_failing_tool_is_an_error_result(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    def declined(_: dict[str, Any]) -> list[TextPart]:
        raise ToolError("failed", "the user declined to run the tool")

    bridge.add_tool(VSCodeTool("slower", "refused", None), declined)
    async with mcp_session(server) as session:
        result = await session.call_tool("slower", {})
    assert result.is_error is True
    assert "declined" in result.content[0].text  # type: ignore[union-attr]


async def test_cancellation_reaches_the_tool(
    server: EndpointServer, bridge: FakeBridge, slow: Slow
) -> None:
    # the client's notifications/cancelled
    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, trust_env=False
    ) as http:
        init = await http.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
        )
        assert init.json()["result"]["protocolVersion"] == "2025-06-18"
        session = {"mcp-session-id": init.headers["mcp-session-id"]}
        call = asyncio.ensure_future(
            http.post(
                "/mcp",
                headers=session,
                json={
                    "jsonrpc": "2.0",
                    "id": "c1",
                    "method": "tools/call",
                    "params": {"name": "slow", "arguments": {}},
                },
            )
        )
        await asyncio.wait_for(slow.started.get(), WAIT)
        note = await http.post(
            "/mcp",
            headers=session,
            json={
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": "c1", "reason": "user"},
            },
        )
        assert note.status_code == 202 and note.content == b""
        answer = await asyncio.wait_for(call, WAIT)
        assert answer.json()["error"]["code"] == -32800
        await asyncio.wait_for(slow.stopped.get(), WAIT)
        assert bridge.cancelled_tools == ["slow"]

        # the client going away cancels it too
        call = asyncio.ensure_future(
            http.post(
                "/mcp",
                headers=session,
                json={
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "slow", "arguments": {}},
                },
            )
        )
        await asyncio.wait_for(slow.started.get(), WAIT)
        call.cancel()
        await asyncio.wait_for(slow.stopped.get(), WAIT)
        assert bridge.cancelled_tools == ["slow", "slow"]

        # GET is not served (no server-initiated stream); DELETE ends the session
        assert (await http.get("/mcp", headers=session)).status_code == 405
        assert (await http.delete("/mcp", headers=session)).status_code == 204
        gone = await http.post(
            "/mcp", headers=session, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
        )
        assert gone.status_code == 404


async def test_off_by_default_and_the_endpoints_defences(bridge: FakeBridge) -> None:
    off = await started(bridge, None)
    try:
        async with httpx.AsyncClient(base_url=off.url, trust_env=False) as http:
            auth = {"Authorization": f"Bearer {off.token}"}
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            r = await http.post("/mcp", headers=auth, json=body)
            assert (
                r.status_code == 403 and "lmbridge.endpoint.tools" in r.json()["error"]["message"]
            )
            assert (await http.post("/lm/tools", headers=auth)).json() == {"tools": []}
    finally:
        await off.aclose()
    on = await started(bridge, ["*"])
    try:
        async with httpx.AsyncClient(base_url=on.url, trust_env=False) as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            # no token, the token as x-api-key (bearer only here), a web page, a foreign Host
            for headers, status in [
                ({}, 401),
                ({"x-api-key": on.token}, 401),
                ({"Authorization": f"Bearer {on.token}", "Origin": "http://evil.example"}, 403),
                ({"Authorization": f"Bearer {on.token}", "Host": "evil.example"}, 403),
            ]:
                r = await http.post("/mcp", headers=headers, json=body)
                assert r.status_code == status, (headers, r.text)
            assert bridge.tool_calls == []
            r = await http.post("/mcp", json=body)
            assert r.json()["error"]["code"] == -32600  # a JSON-RPC error, once the route is known
            r = await http.post("/mcp", headers={"Authorization": f"Bearer {on.token}"}, json=body)
            assert [t["name"] for t in r.json()["result"]["tools"]] == [
                "weather",
                "copilot_runInTerminal",
                "slow",
            ]
    finally:
        await on.aclose()


async def test_unusual_messages_get_json_rpc_answers(server: EndpointServer) -> None:
    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, trust_env=False
    ) as http:
        r = await http.post("/mcp", content=b"{not json")
        assert r.status_code == 400 and r.json()["error"]["code"] == -32700
        r = await http.post("/mcp", json=[1, 2])
        assert r.status_code == 400 and r.json()["error"]["code"] == -32600
        r = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 5, "method": "resources/list"})
        assert r.json() == {
            "jsonrpc": "2.0",
            "id": 5,
            "error": {"code": -32601, "message": "method not found: 'resources/list'"},
        }
        # a batch (2025-03-26) is answered as one
        r = await http.post(
            "/mcp",
            json=[
                {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "weather", "arguments": "Paris"},
                },
            ],
        )
        assert [a["id"] for a in r.json()] == [1, 2]
        assert r.json()[1]["error"]["code"] == -32602
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        r = await http.post("/mcp", json=[ping] * 65)
        assert r.status_code == 400 and "64 messages at most" in r.json()["error"]["message"]
        r = await http.post(
            "/mcp",
            headers={"mcp-protocol-version": "1999-01-01"},
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        )
        assert r.status_code == 400 and "2025-06-18" in r.json()["error"]["message"]


async def test_http_transport_lists_and_invokes(
    server: EndpointServer, bridge: FakeBridge, slow: Slow
) -> None:
    async with HttpTransport(server.url, server.token) as transport:
        box = ToolBox(transport)
        assert [t.name for t in await box.list()] == ["weather", "slow"]
        content = await box.invoke("weather", {"city": "Rome"})
        assert content[0] == TextPart("sunny in Rome") and content[1] == DataPart(PNG, "image/png")
        with pytest.raises(ToolError) as hidden:
            await transport.invoke_tool("copilot_runInTerminal", {})
        assert hidden.value.reason == "not_found"
        with pytest.raises(ToolError) as bad:
            await transport.invoke_tool("weather", {"city": ["Rome"]})
        assert bad.value.reason == "invalid_input" and "input.city" in str(bad.value)
        # a cancel event ends the call and the endpoint cancels the tool
        cancel = asyncio.Event()
        call = asyncio.ensure_future(transport.invoke_tool("slow", {}, cancel))
        await asyncio.wait_for(slow.started.get(), WAIT)
        cancel.set()
        with pytest.raises(ToolError) as cancelled:
            await asyncio.wait_for(call, WAIT)
        assert cancelled.value.reason == "cancelled"
        await asyncio.wait_for(slow.stopped.get(), WAIT)
        assert bridge.cancelled_tools == ["slow"]
    assert ("copilot_runInTerminal", {}) not in bridge.tool_calls


async def test_tool_loop_on_vscodes_model_and_tools(
    server: EndpointServer, bridge: FakeBridge
) -> None:
    """An agent on VS Code's model and tools, through the endpoint, as an app would write it."""

    def model(_model: Any, messages: Any, options: Any) -> list[Any]:
        results = [p for p in messages[-1].content if isinstance(p, ToolResultPart)]
        if results:
            seen = " | ".join(
                t.value for r in results for t in r.content if isinstance(t, TextPart)
            )
            return [TextPart(f"Done: {seen}")]
        assert [t.name for t in options.tools] == ["weather", "slow"]
        return [
            ToolCallPart("c1", "weather", {"city": 3}),  # a bad call first: the model is told
            ToolCallPart("c2", "weather", {"city": "Oslo"}),
        ]

    bridge.script(GPT.id, model)
    async with HttpTransport(server.url, server.token) as transport:
        client = LanguageModelClient(transport=transport, selector="vscodelm/copilot/gpt-4o")
        result = await run_tool_loop(client, "Weather in Oslo?", ToolBox(transport))
    assert result.text.startswith("Done: error: the input of tool 'weather'")
    assert "sunny in Oslo" in result.text
    assert [c.call_id for c, _ in result.calls] == ["c1", "c2"]
    assert isinstance(result.calls[0][1], ToolError)
    assert bridge.tool_calls == [("weather", {"city": "Oslo"})]
    assert len(result.messages) == 4  # user, calls, results, answer


def test_validate_input() -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "name": {"type": ["string", "null"], "minLength": 2, "pattern": "^[a-z]+$"},
            "n": {"type": "number", "exclusiveMaximum": 10},
            "either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
        },
        "required": ["mode"],
    }
    assert validate_input(schema, {"mode": "a", "tags": ["x"], "name": None, "n": 9.5}) == []
    assert validate_input(schema, {"mode": "a", "either": 3.0}) == []  # 3.0 is an integer
    problems = validate_input(schema, {"tags": ["x", 1, "z"], "name": "B", "n": 10, "either": "no"})
    assert problems == [
        "input.mode: required",
        "input.tags[1]: expected string, got a number",
        "input.tags: at most 2 items, got 3",
        "input.name: at least 2 characters, got 1",
        "input.name: does not match the pattern '^[a-z]+$'",
        "input.n: expected less than 10, got 10",
        "input.either: fits none of the 2 allowed shapes (anyOf)",
    ]
    assert validate_input({"type": "object"}, [1]) == ["input: expected object, got an array"]
    assert validate_input(None, "anything") == []
    allow = ToolAllowlist.from_setting(["mcp_github_*", "weather"])[0]
    assert allow.allows("mcp_github_search") and allow.allows("weather")
    assert not allow.allows("Weather") and not allow.allows("copilot_runInTerminal")
    assert not ToolAllowlist() and ToolAllowlist.from_setting("*")[1]
