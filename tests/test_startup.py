"""What the host loads when: each VS Code start and window reload waits for ``import
lmbridge.host``, ``initialize`` and the first ``models/list``, so the consumer side's endpoint,
the HTTP gateway with its converters and the token estimator's weights load when a request
first needs them, not before. Checked in a fresh interpreter (``sys.modules``); the times are
in benchmarks/bench_startup.py (docs/benchmarks/startup.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import lmbridge.client
import lmbridge.client.endpoint
import lmbridge.convert
import lmbridge.gateway
import lmbridge.tokens

NOT_AT_START = [
    "lmbridge.client.endpoint._server",
    "lmbridge.client.endpoint._http",
    "lmbridge.client.endpoint.apis",
    "lmbridge.gateway._provider",
    "lmbridge.gateway._client",
    "lmbridge.convert.anthropic",
    "lmbridge.convert.chat_completions",
    "lmbridge.convert.responses",
    "lmbridge.convert.gemini",
    "lmbridge.tokens.estimator",
    "lmbridge.tokens.text",
    "lmbridge.tokens.weights",
    "lmbridge.upstream",
    "lmbridge.sse",
    "lmbridge.replay",
    "lmbridge.commands.replay",
    "lmbridge.commands.convert",
    "lmbridge.commands.tokens",
    # the consumer side's client API and HTTP transport: the host's own transport is enough
    "lmbridge.client.api",
    "lmbridge.client.guard",
    "lmbridge.convert._common",
    "httpx",
    "httpcore",
    "h11",
    "anyio",
    "certifi",
    # read only when a distribution on sys.path declares an lmbridge.providers entry point
    "importlib.metadata",
]
"""Modules neither ``import lmbridge.host`` nor ``lmbridge host``'s command line nor an
``initialize`` + ``models/list`` with the echo model may load."""

ECHO = {"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider", "delay": 0}


def run_python(script: str) -> dict[str, list[str]]:
    """Run ``script`` in a fresh interpreter; it prints a JSON object of module lists."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def loaded(names: list[str]) -> str:
    return f"[m for m in {names!r} if m in sys.modules]"


def test_importing_the_host_loads_no_endpoint_gateway_converters_or_token_weights() -> None:
    found = run_python(
        f"""
        import json, sys
        import lmbridge.host
        print(json.dumps({{"loaded": {loaded(NOT_AT_START)}}}))
        """
    )
    assert found["loaded"] == []


def test_the_host_command_line_imports_the_host_command_only() -> None:
    found = run_python(
        f"""
        import json, sys
        from lmbridge.cli import build_parser
        args = build_parser("host").parse_args(["host", "--log-level", "debug"])
        assert args.run.__module__ == "lmbridge.commands.host"
        print(json.dumps({{"loaded": {loaded(NOT_AT_START)}}}))
        """
    )
    assert found["loaded"] == []


def test_a_running_host_loads_each_part_when_a_request_first_needs_it() -> None:
    """``initialize`` and ``models/list`` with the echo model load none of them; the first
    chat loads the token estimator (its context check estimates); an upstream entry loads the
    gateway; turning the loopback endpoint on loads the endpoint."""
    found = run_python(
        f"""
        import asyncio, json, sys, tempfile
        from lmbridge.host import HostConnection, HostServer, JsonRpcConnection
        from lmbridge.parts import ChatMessage, message_to_wire

        async def main():
            loop = asyncio.get_running_loop()
            ext = None
            host = HostConnection(lambda d: loop.call_soon(ext.feed, d), name="extension")
            ext = JsonRpcConnection(lambda d: loop.call_soon(host.feed, d), name="host")
            for method in ("log", "chat/parts", "models/changed"):
                ext.on_notification(method, lambda params: None)
            server = HostServer(host)
            seen = {{}}
            with tempfile.TemporaryDirectory() as storage:
                params = {{"providers": [{ECHO!r}], "storagePath": storage}}
                result = await ext.request("initialize", params)
                assert result["serverBuild"] in ("pure Python", "compiled"), result
                models = await ext.request("models/list", {{"silent": True}})
                assert [m["id"] for m in models["models"]] == ["echo/echo"], models
                seen["listed"] = {loaded(NOT_AT_START)}
                message = message_to_wire(ChatMessage.user("hi"))
                chat = {{"modelId": "echo/echo", "messages": [message], "options": {{}}}}
                await ext.request("chat/response", chat)
                seen["chatted"] = {loaded(NOT_AT_START)}
                upstream = {{"name": "up", "format": "chat-completions",
                            "baseUrl": "http://127.0.0.1:9/v1", "models": ["m"]}}
                params["providers"] = [{ECHO!r}, upstream]
                await ext.request("configure", params)
                seen["upstream"] = {loaded(NOT_AT_START)}
                params["settings"] = {{"endpointEnabled": True}}
                await ext.request("configure", params)
                seen["endpoint"] = {loaded(NOT_AT_START)}
                await server.aclose()
            print(json.dumps(seen))

        asyncio.run(main())
        """
    )
    assert found["listed"] == []
    assert "lmbridge.tokens.weights" in found["chatted"]
    assert not [m for m in found["chatted"] if m.startswith(("lmbridge.gateway", "lmbridge.client"))]
    assert "lmbridge.gateway._provider" in found["upstream"]
    assert "lmbridge.client.endpoint._server" not in found["upstream"]
    assert "lmbridge.client.endpoint._server" in found["endpoint"]


@pytest.mark.parametrize("package", [lmbridge.client, lmbridge.client.endpoint, lmbridge.gateway,
                                     lmbridge.convert, lmbridge.tokens])  # fmt: skip
def test_the_lazy_packages_offer_every_public_name(package: object) -> None:
    names = package.__all__  # type: ignore[attr-defined]
    assert set(names) <= set(dir(package))
    for name in names:
        assert getattr(package, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        package.no_such_name  # type: ignore[attr-defined]  # noqa: B018
