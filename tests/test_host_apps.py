"""The consumer side of the host: apps from ``lmbridge.apps``, the loopback endpoint per
``lmbridge.endpoint.enabled`` and the ``lmbridge.consumer.model`` setting, over the real
JSON-RPC peer with a Python stand-in for the extension's ``lm/*`` handlers."""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from lmbridge.client import api as client_api
from lmbridge.client.api import LanguageModelClient, select_chat_models
from lmbridge.client.testing import FakeBridge, fake_model, serve_bridge_over_rpc
from lmbridge.client.tools import VSCodeTool
from lmbridge.client.transport import HttpTransport, default_transport
from lmbridge.errors import ConfigError
from lmbridge.host.apps import ConsumerSettings, load_app, parse_consumer_settings
from lmbridge.host.jsonrpc import JsonRpcConnection
from lmbridge.host.server import HostConnection, HostServer
from lmbridge.parts import TextPart

GPT = fake_model("gpt-4o-id", vendor="copilot", family="gpt-4o")
CLAUDE = fake_model("claude-id", vendor="copilot", family="claude-sonnet")

# An app as a user writes one: no transport argument needed for the client, the host's
# transport is the default; the model comes from lmbridge.consumer.model.
APP = """
import asyncio, json
from pathlib import Path
from lmbridge.client import LanguageModelClient

async def main(transport):
    client = LanguageModelClient()
    response = await client.send_request([{"role": 1, "content": [{"kind": "text", "value": "hi from the app"}], "name": None}])
    text = await response.text()
    Path(__file__).with_suffix(".out.json").write_text(json.dumps(
        {"model": response.model.id, "text": text, "same_transport": client.transport is transport}))
"""

WAITER = """
import asyncio
from pathlib import Path

async def main(transport):
    out = Path(__file__).with_suffix(".out.txt")
    out.write_text("started")
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        out.write_text("cancelled")
        raise
"""

FAILING = """
async def main(transport):
    raise RuntimeError("the app broke")
"""

# Uses its transport from its own loop and thread: a stream cancelled by its event and one
# closed early (each must cancel VS Code's request), a listener (called on the app's thread),
# tools.
CROSSING = """
import asyncio, json, threading
from pathlib import Path
from lmbridge import ChatRequestError
from lmbridge.client.selectors import ModelSelector
from lmbridge.parts import ChatMessage, ChatRequestOptions

async def main(transport):
    me, out = Path(__file__), {"thread": threading.current_thread().name}
    [model] = await transport.select_chat_models(ModelSelector(id="gpt-4o-id"))
    cancel = asyncio.Event()
    stream = transport.send_request(model, [ChatMessage.user("a")], ChatRequestOptions(), cancel)
    out["first"] = (await stream.__anext__()).value
    cancel.set()
    try:
        await stream.__anext__()
    except ChatRequestError as exc:
        out["cancelled"] = exc.kind.value
    closed = transport.send_request(model, [ChatMessage.user("b")], ChatRequestOptions())
    await closed.__anext__()
    await closed.aclose()
    out["tools"] = [t.name for t in await transport.list_tools()]
    out["tool"] = [p.value for p in await transport.invoke_tool("weather", {})]
    changed = asyncio.Event()
    def heard():
        out["listener_thread"] = threading.current_thread().name
        changed.set()
    transport.on_models_changed(heard)
    me.with_suffix(".listening").write_text("yes")
    await changed.wait()
    me.with_suffix(".out.json").write_text(json.dumps(out))
"""


@dataclass
class Rig:
    bridge: FakeBridge
    server: HostServer
    extension: JsonRpcConnection
    logs: list[dict[str, Any]] = field(default_factory=list)

    async def initialize(self, **settings: Any) -> Any:
        return await self.extension.request(
            "initialize",
            {"clientName": "test", "providers": [], "secrets": {}, "settings": settings,
             "storagePath": settings.pop("storage", None)},
        )  # fmt: skip

    async def configure(self, **settings: Any) -> Any:
        return await self.extension.request(
            "configure",
            {"providers": [], "secrets": {}, "settings": settings,
             "storagePath": settings.pop("storage", None)},
        )  # fmt: skip

    def messages(self, level: str | None = None) -> list[str]:
        return [m["message"] for m in self.logs if level is None or m["level"] == level]


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    loop = asyncio.get_running_loop()
    host: HostConnection
    extension: JsonRpcConnection
    host = HostConnection(lambda data: loop.call_soon(extension.feed, data), name="extension")
    extension = JsonRpcConnection(lambda data: loop.call_soon(host.feed, data), name="host")
    bridge = FakeBridge([GPT, CLAUDE])
    serve_bridge_over_rpc(extension, bridge)
    server = HostServer(host)
    r = Rig(bridge, server, extension)
    extension.on_notification("log", r.logs.append)
    extension.on_notification("models/changed", lambda _p: None)
    yield r
    await server.aclose()
    host.connection_lost()
    extension.connection_lost()


async def wait_for(check: Callable[[], Any], timeout: float = 5.0) -> Any:
    end = asyncio.get_running_loop().time() + timeout
    while True:
        value = check()
        if value:
            return value
        if asyncio.get_running_loop().time() > end:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.01)


def write(path: Path, text: str) -> str:
    path.write_text(textwrap.dedent(text))
    return str(path)


# ---------------------------------------------------------------------------- settings


def test_consumer_settings_defaults_and_problems() -> None:
    assert parse_consumer_settings({}) == (ConsumerSettings(), [])
    settings, problems = parse_consumer_settings(
        {"apps": ["a.b", "", 3, "a.b"], "endpointEnabled": "yes", "consumerModel": "vscodelm/"}
    )
    assert settings == ConsumerSettings(("a.b",), False, "vscodelm/")
    assert len(problems) == 3
    assert "lmbridge.apps" in problems[0] and "lmbridge.endpoint.enabled" in problems[1]
    assert problems[2].startswith("lmbridge.consumer.model: selector 'vscodelm/'")
    assert parse_consumer_settings({"apps": "x.py"})[1] == [
        "lmbridge.apps: expected a list, got str"
    ]


def test_load_app_forms_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_e2e_app_pkg.py").write_text(
        "async def main(t): return 'main'\nasync def other(t): return 'other'\ndef sync(t): pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_app("my_e2e_app_pkg").__name__ == "main"
    assert load_app("my_e2e_app_pkg:other").__name__ == "other"
    assert load_app(str(tmp_path / "my_e2e_app_pkg.py")).__name__ == "main"
    cases = {
        "my_e2e_app_pkg:sync": "sync must be an async function",
        "my_e2e_app_pkg:nothing": "the module has no 'nothing'",
        "no_such_module_for_lmbridge_apps": "importing 'no_such_module_for_lmbridge_apps' failed",
        "bad name!": "expected 'package.module'",
        str(tmp_path / "missing.py"): "no such file",
    }
    for spec, message in cases.items():
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_app(spec)
    (tmp_path / "broken.py").write_text("raise ValueError('at import')\n")
    with pytest.raises(ConfigError, match=r"importing .*broken\.py failed: ValueError: at import"):
        load_app(str(tmp_path / "broken.py"))


# ---------------------------------------------------------------------------- apps


async def test_app_runs_with_the_host_transport_and_the_model_setting(
    rig: Rig, tmp_path: Path
) -> None:
    app = write(tmp_path / "app.py", APP)
    await rig.initialize(apps=[app], consumerModel="vscodelm/copilot/claude-sonnet")
    out = Path(app).with_suffix(".out.json")
    await wait_for(out.exists)
    assert json.loads(out.read_text()) == {
        "model": CLAUDE.id,
        "text": "hi from the app",
        "same_transport": True,
    }
    await wait_for(lambda: f"app {app!r} finished" in rig.messages("info"))
    assert client_api.get_default_transport() is rig.server.consumer.transport


async def test_a_failing_app_is_reported_and_the_host_stays_up(rig: Rig, tmp_path: Path) -> None:
    bad, good = write(tmp_path / "bad.py", FAILING), write(tmp_path / "good.py", APP)
    missing = str(tmp_path / "missing.py")
    await rig.initialize(apps=[bad, missing, good])
    await wait_for(Path(good).with_suffix(".out.json").exists)
    errors = await wait_for(lambda: [m for m in rig.messages("error") if "bad.py" in m])
    assert errors == [f"app {bad!r} failed: RuntimeError: the app broke (traceback on stderr)"]
    await wait_for(
        lambda: any("no such file" in m and "missing.py" in m for m in rig.messages("error"))
    )
    models = await rig.extension.request("models/list", {"silent": True})
    assert [m["id"] for m in models["models"]] == ["echo/echo"]


async def test_an_app_uses_the_host_from_its_own_thread_and_cancels_across_it(
    rig: Rig, tmp_path: Path
) -> None:
    rig.bridge.script(GPT.id, [TextPart("first"), 3600.0, TextPart("never")])
    rig.bridge.add_tool(VSCodeTool("weather", "Weather", {"type": "object"}), [TextPart("sun")])
    host_listeners = len(rig.server.consumer.transport._models_changed)
    app = write(tmp_path / "crossing.py", CROSSING)
    await rig.initialize(apps=[app])
    await wait_for(Path(app).with_suffix(".listening").exists)
    rig.bridge.fire_models_changed()
    out = json.loads(await wait_for(lambda: _read(Path(app).with_suffix(".out.json"))))
    assert out == {
        "thread": f"lmbridge app {app}",
        "first": "first",
        "cancelled": "cancelled",
        "tools": ["weather"],
        "tool": ["sun"],
        "listener_thread": f"lmbridge app {app}",
    }
    # both streams ended VS Code's request ($/cancelRequest crossed over), not by running out
    await wait_for(lambda: all(r.cancelled for r in rig.bridge.requests))
    assert [r.messages[-1].content[0].value for r in rig.bridge.requests] == ["a", "b"]  # type: ignore[union-attr]
    assert rig.bridge.active_streams == 0
    # once the app ended, its listener is gone from the host's transport
    await wait_for(lambda: f"app {app!r} finished" in rig.messages("info"))
    await wait_for(lambda: len(rig.server.consumer.transport._models_changed) == host_listeners)


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


async def test_changing_the_apps_setting_stops_old_apps_and_starts_new_ones(
    rig: Rig, tmp_path: Path
) -> None:
    waiter, app = write(tmp_path / "waiter.py", WAITER), write(tmp_path / "app.py", APP)
    await rig.initialize(apps=[waiter])
    status = Path(waiter).with_suffix(".out.txt")
    await wait_for(lambda: status.exists() and status.read_text() == "started")
    # the same list again (a providers change re-sends configure): nothing restarts
    await rig.configure(apps=[waiter])
    await asyncio.sleep(0.05)
    assert status.read_text() == "started"
    await rig.configure(apps=[app])
    assert status.read_text() == "cancelled"
    await wait_for(Path(app).with_suffix(".out.json").exists)
    assert list(rig.server.consumer.apps) == [app]


async def test_shutdown_stops_apps_and_resets_the_default_transport(
    rig: Rig, tmp_path: Path
) -> None:
    waiter = write(tmp_path / "waiter.py", WAITER)
    await rig.initialize(apps=[waiter])
    status = Path(waiter).with_suffix(".out.txt")
    await wait_for(status.exists)
    assert await rig.extension.request("shutdown", {}) is None
    assert status.read_text() == "cancelled"
    assert default_transport() is None


# ---------------------------------------------------------------------------- model setting


async def test_model_setting_switches_without_a_new_client(rig: Rig) -> None:
    await rig.initialize(consumerModel="vscodelm/copilot/gpt-4o")
    transport = rig.server.consumer.transport
    client = LanguageModelClient(transport, debounce=0.01)
    assert await client.model() == GPT
    assert await client.model() == GPT
    assert client.selections == 1, "the model is cached while the setting stays"
    rig.extension.notify(
        "lm/configChanged",
        {"section": "lmbridge", "settings": {"consumerModel": "copilot/claude-sonnet"}},
    )
    await wait_for(lambda: transport.model_setting == "copilot/claude-sonnet")
    assert client.current_model is None, "the change dropped the cached model"
    assert await client.model() == CLAUDE
    assert rig.server.consumer.settings.model == "copilot/claude-sonnet"
    # VS Code's own lm section also drops the cache; an explicit selector is kept
    fixed = LanguageModelClient(transport, selector="vscodelm/copilot/gpt-4o", debounce=0.01)
    assert await fixed.model() == GPT
    rig.extension.notify("lm/configChanged", {"section": "lm", "settings": {"consumerModel": ""}})
    await wait_for(lambda: fixed.current_model is None)
    assert await fixed.model() == GPT
    assert await client.model() == GPT, "an empty setting means the first model"


async def test_a_bad_model_setting_is_reported_and_requests_degrade(rig: Rig) -> None:
    await rig.initialize(consumerModel="vscodelm/")
    await wait_for(lambda: any("lmbridge.consumer.model" in m for m in rig.messages("error")))
    response = await LanguageModelClient(rig.server.consumer.transport).send_request(
        [{"role": 1, "content": [{"kind": "text", "value": "x"}], "name": None}]
    )
    assert "The model setting is invalid" in await response.text()
    assert response.degraded


def test_endpoint_models_setting_is_parsed() -> None:
    settings, problems = parse_consumer_settings(
        {"endpointModels": {"claude-*": "vscodelm/copilot", "bad": "vscodelm/"}}
    )
    assert [p for p, _ in settings.endpoint_models.entries] == ["claude-*"]
    assert len(problems) == 1 and "lmbridge.endpoint.models['bad']" in problems[0]


async def test_endpoint_models_setting_reaches_the_open_endpoint(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LMBRIDGE_ENDPOINT_FILE", raising=False)
    await rig.initialize(endpointEnabled=True, storage=str(tmp_path))
    info = json.loads((tmp_path / "endpoint.json").read_text())
    async with httpx.AsyncClient(base_url=info["url"], trust_env=False) as http:
        auth = {"x-api-key": info["token"], "anthropic-version": "2023-06-01"}
        assert (await http.get("/v1/models/my-name", headers=auth)).status_code == 404
        await rig.configure(
            endpointEnabled=True,
            storage=str(tmp_path),
            endpointModels={"my-name": f"vscodelm/{CLAUDE.vendor}/{CLAUDE.family}"},
        )
        got = await http.get("/v1/models/my-name", headers=auth)
        assert got.status_code == 200 and got.json()["display_name"] == CLAUDE.name
        assert got.json()["type"] == "model"  # Anthropic's shape for an Anthropic client


async def test_endpoint_tools_setting_reaches_the_mcp_route_through_the_extension(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``endpointTools`` turns ``/mcp`` on; tools come from the extension over JSON-RPC."""
    monkeypatch.delenv("LMBRIDGE_ENDPOINT_FILE", raising=False)
    rig.bridge.add_tool(VSCodeTool("weather", "Weather", {"type": "object"}), [TextPart("sun")])
    rig.bridge.add_tool(VSCodeTool("terminal", "Runs commands", None), [TextPart("ran")])
    await rig.initialize(endpointEnabled=True, storage=str(tmp_path))
    info = json.loads((tmp_path / "endpoint.json").read_text())
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "weather"}}
    async with httpx.AsyncClient(base_url=info["url"], trust_env=False) as http:
        auth = {"authorization": f"Bearer {info['token']}"}
        assert (await http.post("/mcp", headers=auth, json=call)).status_code == 403  # off
        await rig.configure(endpointEnabled=True, storage=str(tmp_path), endpointTools=["weath*"])
        listed = await http.post(
            "/mcp", headers=auth, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        )
        assert [t["name"] for t in listed.json()["result"]["tools"]] == ["weather"]
        result = (await http.post("/mcp", headers=auth, json=call)).json()["result"]
        assert result == {"content": [{"type": "text", "text": "sun"}], "isError": False}
        hidden = {**call, "params": {"name": "terminal", "arguments": {}}}
        assert (await http.post("/mcp", headers=auth, json=hidden)).json()["error"][
            "code"
        ] == -32602
    assert rig.bridge.tool_calls == [("weather", {})]


def test_endpoint_tools_setting_is_parsed() -> None:
    settings, problems = parse_consumer_settings({"endpointTools": ["a*", "", 3]})
    assert settings.endpoint_tools.patterns == ("a*",)
    assert len(problems) == 1 and "lmbridge.endpoint.tools" in problems[0]
    assert not parse_consumer_settings({})[0].endpoint_tools


# ---------------------------------------------------------------------------- endpoint


async def test_endpoint_opens_in_the_storage_folder_and_closes_on_configure(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LMBRIDGE_ENDPOINT_FILE", raising=False)
    storage = tmp_path / "storage"
    storage.mkdir()
    await rig.initialize(endpointEnabled=True, storage=str(storage))
    file = storage / "endpoint.json"
    assert rig.server.consumer.endpoint_file == file
    if sys.platform != "win32":
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
    info = json.loads(file.read_text())
    assert info["url"].startswith("http://127.0.0.1:") and info["pid"] == os.getpid()
    shown = [m for m in rig.messages("info") if "loopback endpoint listening" in m]
    assert shown and str(file) in shown[0] and info["token"] not in " ".join(rig.messages())

    async with httpx.AsyncClient(base_url=info["url"], trust_env=False) as http:
        ok = await http.get("/v1/models", headers={"Authorization": f"Bearer {info['token']}"})
        assert ok.status_code == 200
        assert [m["id"] for m in ok.json()["data"]] == [GPT.id, CLAUDE.id]
        assert (await http.get("/v1/models")).status_code == 401
        wrong = await http.get("/v1/models", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        # configure with the same setting keeps the endpoint (and its token)
        await rig.configure(endpointEnabled=True, storage=str(storage))
        assert json.loads(file.read_text())["token"] == info["token"]

        await rig.configure(endpointEnabled=False, storage=str(storage))
        assert not file.exists()
        assert rig.server.consumer.endpoint is None
        with pytest.raises(httpx.ConnectError):
            await http.get("/v1/models", headers={"Authorization": f"Bearer {info['token']}"})
    assert "loopback endpoint closed" in rig.messages("info")


async def test_endpoint_file_is_removed_on_exit(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LMBRIDGE_ENDPOINT_FILE", raising=False)
    await rig.initialize(endpointEnabled=True, storage=str(tmp_path))
    assert (tmp_path / "endpoint.json").exists()
    await rig.server.aclose()
    assert not (tmp_path / "endpoint.json").exists()


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="XDG folders")
async def test_an_external_process_finds_the_endpoint_in_the_editor_storage(
    rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("LMBRIDGE_ENDPOINT_FILE", "LMBRIDGE_ENDPOINT_URL", "LMBRIDGE_ENDPOINT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no default file there
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    storage = tmp_path / "config" / "Code" / "User" / "globalStorage" / "lmbridge.lmbridge"
    storage.mkdir(parents=True)
    await rig.initialize(endpointEnabled=True, storage=str(storage))
    async with HttpTransport.discover() as transport:
        assert transport.url == rig.server.consumer.endpoint.url  # type: ignore[union-attr]
        assert await select_chat_models("vscodelm/copilot/gpt-4o", transport=transport) == [GPT]


# ---------------------------------------------------------------------------- the real process


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
async def test_the_host_process_runs_apps_and_removes_the_endpoint_file_on_sigterm(
    tmp_path: Path,
) -> None:
    from lmbridge.host.client import HostClient

    env = {k: v for k, v in os.environ.items() if k != "LMBRIDGE_ENDPOINT_FILE"}
    waiter = write(tmp_path / "waiter.py", WAITER)
    async with HostClient.start(env=env, stderr=asyncio.subprocess.DEVNULL) as client:
        await client.initialize(
            providers=[], secrets={}, storagePath=str(tmp_path),
            settings={"apps": [waiter], "endpointEnabled": True},
        )  # fmt: skip
        status = Path(waiter).with_suffix(".out.txt")
        await wait_for(lambda: status.exists() and (tmp_path / "endpoint.json").exists(), 10)
        assert json.loads((tmp_path / "endpoint.json").read_text())["pid"] == client.process.pid
        client.process.terminate()
        assert await asyncio.wait_for(client.process.wait(), 10) == 0
        assert status.read_text() == "cancelled"
        assert not (tmp_path / "endpoint.json").exists()
