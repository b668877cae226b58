"""Claude Code and Codex on VS Code's models, through the loopback endpoint of a real VS Code.

A separate, short code-server run (``tests/e2e/run.js``): lmbridge serves one scripted model
(``agent_provider_e2e.AgentScriptProvider``: a tool call, then text after the tool result),
the endpoint is on, and ``lmbridge.endpoint.models`` sends every client model name to it. While
VS Code runs, the real CLIs, installed at pinned versions by ``scripts/agents-setup``, do one
task each that needs a tool round (read a file in a temp folder, then answer):

- Claude Code in print mode (``claude -p --output-format json``), on ``/v1/messages``, with
  ``ANTHROPIC_BASE_URL`` at the endpoint and the token as its key;
- Codex (``codex exec --json``) through a custom provider on ``/v1/responses``;
- the Gemini CLI (``gemini -p --output-format json``) on ``/v1beta/models/...`` with
  ``GOOGLE_GEMINI_BASE_URL`` at the endpoint and the token as its API key;
- and, from Python, the google-genai SDK: a streamed function-call round trip on the Gemini
  API, and its errors in Gemini's shape.

VS Code's tools: the driver extension registers two tools, the user's ``lmbridge.endpoint.tools``
lists one of them, the workspace's settings try ``["*"]``. Claude Code (``--mcp-config``) and
Codex (``[mcp_servers]`` with ``bearer_token_env_var``) list and call the allowed tool through
the endpoint's MCP server and its result reaches the model;
a Python tool loop (``lmbridge.client.tools.run_tool_loop`` over ``HttpTransport``) does the
same; the other tool is neither listed nor callable, whatever the workspace says.

The tests fail if a client's request is not understood (its error, or no tool round).
Skipped unless ``LMBRIDGE_E2E=1``; the CLIs' versions are printed and kept in the report.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from support.vscode_run import CACHE, E2E_MARKS, REPO, wait_for_endpoint_file

pytestmark = E2E_MARKS

HERE = Path(__file__).resolve().parent
RUN_DIR = REPO / "e2e-out" / "agents"
SECRET = "the secret is 4711"
CLI_TIMEOUT = 120


def _agents_bin() -> Path:
    try:
        out = subprocess.run([str(REPO / "scripts" / "agents-setup")], capture_output=True, text=True, timeout=600, check=True)
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"scripts/agents-setup failed:\n{exc.stderr[-2000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def _clean_env(home: Path) -> dict[str, str]:
    """The CLIs' environment: a home of their own, no keys or endpoints of the machine's."""
    drop = ("ANTHROPIC_", "OPENAI_", "CLAUDE_", "CODEX_", "GEMINI_", "GOOGLE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update({"HOME": str(home), "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "NO_COLOR": "1"})
    return env


def _run_cli(args: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    t0 = time.monotonic()
    try:
        proc = subprocess.run(args, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        return {"exit": None, "error": f"timed out after {CLI_TIMEOUT}s", "stdout": str(exc.stdout)[-4000:]}
    return {"exit": proc.returncode, "stdout": proc.stdout[-20000:], "stderr": proc.stderr[-4000:], "seconds": round(time.monotonic() - t0, 1)}


def _drive_agents(out: dict[str, Any], bin_dir: Path, done: Path) -> None:
    """Find the endpoint file, run each CLI once against it, then let the driver finish."""
    try:
        endpoint_file, info = wait_for_endpoint_file(RUN_DIR, 150)
        url, token = info["url"], info["token"]
        import httpx

        listed = httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {token}"}, trust_env=False, timeout=30)
        out["models"] = listed.json().get("data", [])
        work = RUN_DIR / "work"
        work.mkdir(exist_ok=True)
        (work / "notes.txt").write_text(SECRET + "\n")
        prompt = f"read <<{work / 'notes.txt'}>> and tell me what it says"
        home = RUN_DIR / "cli-home"
        home.mkdir(exist_ok=True)
        env = _clean_env(home)
        for name, args in (("claude", ["--version"]), ("codex", ["--version"])):
            out[f"{name}Version"] = subprocess.run([str(bin_dir / name), *args], env=env, capture_output=True, text=True, timeout=60, check=False).stdout.strip()

        claude_env = dict(env, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=token)
        out["claude"] = _run_cli(
            [str(bin_dir / "claude"), "-p", prompt, "--output-format", "json", "--model", "claude-sonnet-4-5", "--allowedTools", "Read"],
            claude_env,
            work,
        )

        codex_home = RUN_DIR / "codex-home"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model = "gpt-5"\nmodel_provider = "lmbridge"\n\n[model_providers.lmbridge]\n'
            f'name = "lmbridge"\nbase_url = "{url}/v1"\nenv_key = "LMBRIDGE_TOKEN"\nwire_api = "responses"\n'
        )
        codex_env = dict(env, CODEX_HOME=str(codex_home), LMBRIDGE_TOKEN=token)
        out["codex"] = _run_cli(
            [str(bin_dir / "codex"), "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", prompt],
            codex_env,
            work,
        )

        # the same two CLIs started by `lmbridge run`, which reads the endpoint file and gives
        # each its environment (Codex its provider options too): no variable or config of ours
        run = [sys.executable, "-m", "lmbridge", "run", "--endpoint-file", str(endpoint_file), "--"]
        out["claudeRun"] = _run_cli(
            [*run, str(bin_dir / "claude"), "-p", prompt, "--output-format", "json", "--model", "claude-sonnet-4-5", "--allowedTools", "Read"],
            env,
            work,
        )
        codex_run_home = RUN_DIR / "codex-run-home"
        codex_run_home.mkdir(exist_ok=True)
        out["codexRun"] = _run_cli(
            [*run, str(bin_dir / "codex"), "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", prompt],
            dict(env, CODEX_HOME=str(codex_run_home)),
            work,
        )

        # a chat from the terminal on VS Code's model, and the environment printed for an agent
        lmbridge = [sys.executable, "-m", "lmbridge"]
        out["chatVscode"] = _run_cli([*lmbridge, "chat", "--model", "vscodelm/lmbridge/agent-script", "--endpoint-file", str(endpoint_file), "hello from a terminal"], env, work)
        out["agentEnv"] = _run_cli([*lmbridge, "agent-env", "claude-code", "--endpoint-file", str(endpoint_file), "--shell", "json"], env, work)
        out["endpoint"] = {"url": url, "token": token}

        gemini = bin_dir.parents[1] / "gemini-cli" / "node_modules" / ".bin" / "gemini"
        gemini_home = RUN_DIR / "gemini-home"
        (gemini_home / ".gemini").mkdir(parents=True, exist_ok=True)
        # the API-key login, and nothing that would go out to the network on its own
        (gemini_home / ".gemini" / "settings.json").write_text(json.dumps(GEMINI_CLI_SETTINGS))
        gemini_env = dict(env, HOME=str(gemini_home), GEMINI_API_KEY=token, GOOGLE_GEMINI_BASE_URL=url)
        out["geminiVersion"] = subprocess.run([str(gemini), "--version"], env=gemini_env, capture_output=True, text=True, timeout=60, check=False).stdout.strip()
        out["gemini"] = _run_cli([str(gemini), "-p", prompt, "--output-format", "json", "-m", "gemini-2.5-pro", "--yolo"], gemini_env, work)
        out["genai"] = _genai_round(url, token, work / "notes.txt")

        mcp_config = RUN_DIR / "mcp.json"
        mcp_config.write_text(json.dumps({"mcpServers": {"vscode": {"type": "http", "url": f"{url}/mcp", "headers": {"Authorization": f"Bearer {token}"}}}}))
        out["claudeMcp"] = _run_cli(
            [str(bin_dir / "claude"), "-p", f"use the tool <<{TOOL}>> with <<claude>>", "--output-format", "json", "--model", "claude-sonnet-4-5",
             "--mcp-config", str(mcp_config), "--strict-mcp-config", "--allowedTools", f"mcp__vscode__{TOOL}"],
            # MCP tools listed with the others (Claude Code defers them behind its ToolSearch tool
            # otherwise, which the scripted model does not call)
            dict(claude_env, ENABLE_TOOL_SEARCH="false"),
            work,
        )
        codex_mcp_home = RUN_DIR / "codex-mcp-home"
        codex_mcp_home.mkdir(exist_ok=True)
        (codex_mcp_home / "config.toml").write_text(
            (codex_home / "config.toml").read_text()
            + f'\n[mcp_servers.vscode]\nurl = "{url}/mcp"\nbearer_token_env_var = "LMBRIDGE_TOKEN"\n'
        )
        out["codexMcp"] = _run_cli(
            [str(bin_dir / "codex"), "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
             f"use the tool <<{TOOL}>> with <<codex>>"],
            dict(codex_env, CODEX_HOME=str(codex_mcp_home)),
            work,
        )
        out["python"] = asyncio.run(_python_tools(url, token))
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        done.write_text(json.dumps({"done": True}))


TOOL, HIDDEN = "lmbridge_e2e_secret", "lmbridge_e2e_hidden"


async def _python_tools(url: str, token: str) -> dict[str, Any]:
    """VS Code's tools from a Python app outside VS Code: list, a tool loop, the hidden tool."""
    import httpx

    from lmbridge.client import HttpTransport, LanguageModelClient
    from lmbridge.client.tools import ToolBox, ToolError, run_tool_loop

    out: dict[str, Any] = {}
    async with HttpTransport(url, token) as transport:
        box = ToolBox(transport)
        out["listed"] = [t.name for t in await box.list()]
        client = LanguageModelClient(transport=transport, selector="vscodelm/lmbridge/agent-script")
        result = await run_tool_loop(client, f"use the tool <<{TOOL}>> with <<python>>", box)
        out["loop"] = {"text": result.text, "calls": [c.name for c, _ in result.calls]}
        try:
            await transport.invoke_tool(HIDDEN, {"word": "x"})
            out["hiddenInvoke"] = "ran"
        except ToolError as exc:
            out["hiddenInvoke"] = exc.reason
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, trust_env=False) as http:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": HIDDEN, "arguments": {"word": "x"}}}
        out["hiddenMcp"] = (await http.post("/mcp", json=call)).json()
    return out


GEMINI_CLI_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
}


def _genai_round(url: str, token: str, notes: Path) -> dict[str, Any]:
    """The google-genai SDK on the endpoint's Gemini API: a streamed function call, its
    response sent back, the streamed answer; then two errors in Gemini's shape."""
    from google import genai
    from google.genai import errors, types

    def client(key: str) -> genai.Client:
        options = types.HttpOptions(base_url=url, api_version="v1beta", retry_options=types.HttpRetryOptions(attempts=1))
        return genai.Client(api_key=key, http_options=options)

    read = types.FunctionDeclaration(
        name="read_file",
        description="Read a file",
        parameters=types.Schema(type=types.Type.OBJECT, properties={"file_path": types.Schema(type=types.Type.STRING)}, required=["file_path"]),
    )
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[read])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    sdk = client(token)
    history = [types.Content(role="user", parts=[types.Part(text=f"read <<{notes}>> and tell me what it says")])]
    first: list[types.Part] = []
    for chunk in sdk.models.generate_content_stream(model="gemini-2.5-pro", contents=history, config=config):
        first += chunk.candidates[0].content.parts or [] if chunk.candidates and chunk.candidates[0].content else []
    calls = [p.function_call for p in first if p.function_call]
    out: dict[str, Any] = {"calls": [{"name": c.name, "args": c.args, "id": c.id} for c in calls]}
    if calls:
        path = str((calls[0].args or {}).get("file_path"))
        history += [
            types.Content(role="model", parts=first),
            types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(id=calls[0].id, name=calls[0].name, response={"output": Path(path).read_text()}))]),
        ]
        out["answer"] = "".join(c.text or "" for c in sdk.models.generate_content_stream(model="gemini-2.5-pro", contents=history, config=config))
    for name, key, extra in (("badKey", "wrong-key", {}), ("badRequest", token, {"candidate_count": 2})):
        other = client(key)  # kept: a genai.Client closes its HTTP client when collected
        try:
            other.models.generate_content(model="gemini-2.5-pro", contents="x", config=types.GenerateContentConfig(**extra))
        except errors.APIError as exc:
            out[name] = {"code": exc.code, "status": exc.status, "message": exc.message}
    return out


@pytest.fixture(scope="module")
def agents_run() -> dict[str, Any]:
    env_file = CACHE / "env.json"
    if not env_file.is_file():
        pytest.fail(f"{env_file} is missing: run scripts/e2e-setup first")
    node = json.loads(env_file.read_text())["node"]
    bin_dir = _agents_bin()
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    RUN_DIR.mkdir(parents=True)
    app_out, done, provider_log = RUN_DIR / "app.json", RUN_DIR / "agents-done.json", RUN_DIR / "provider.jsonl"
    # no app runs in this run: its record is final from the start, the driver waits for `done`
    app_out.write_text(json.dumps({"final": True}))
    plan = {
        "selector": {"vendor": "lmbridge"},
        "waitForHostMs": 20000,
        "waitForModels": ["agent/agent"],
        "cases": [],
        "consumer": {"model": "vscodelm/auto", "apps": [], "out": str(app_out), "endpointDone": str(done), "timeoutMs": 6 * CLI_TIMEOUT * 1000 + 60000},
    }
    settings = {
        "lmbridge.pythonCommand": sys.executable,
        "lmbridge.logLevel": "debug",
        "lmbridge.providers": [{"name": "agent", "provider": "agent_provider_e2e:AgentScriptProvider"}],
        "lmbridge.endpoint.models": {"*": "vscodelm/lmbridge/agent-script"},
        "lmbridge.endpoint.tools": [TOOL],
    }
    # the workspace tries to offer every tool: ignored (machine scope), and the user is told
    (RUN_DIR / "workspace-settings.json").write_text(json.dumps({"lmbridge.endpoint.tools": ["*"]}))
    (RUN_DIR / "plan.json").write_text(json.dumps(plan, indent=1))
    (RUN_DIR / "settings.in.json").write_text(json.dumps(settings, indent=1))
    agents: dict[str, Any] = {}
    thread = threading.Thread(target=_drive_agents, args=(agents, bin_dir, done), daemon=True)
    thread.start()
    # the host imports the scripted provider from here, and logs each request it answers
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])), LMBRIDGE_AGENT_LOG=str(provider_log))
    env["LMBRIDGE_E2E_TIMEOUT_MS"] = str(6 * CLI_TIMEOUT * 1000 + 120000)
    proc = subprocess.run(
        [node, str(HERE / "run.js"), "--run-dir", str(RUN_DIR), "--plan", str(RUN_DIR / "plan.json"), "--settings", str(RUN_DIR / "settings.in.json"),
         "--workspace-settings", str(RUN_DIR / "workspace-settings.json")],
        capture_output=True,
        text=True,
        timeout=6 * CLI_TIMEOUT + 280,
        env=env,
        check=False,
    )
    thread.join(10)
    record_file = RUN_DIR / "record.json"
    record = json.loads(record_file.read_text()) if record_file.is_file() else None
    if record is None or not record.get("final"):
        pytest.fail(f"the run did not finish (exit {proc.returncode}); see {RUN_DIR}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    requests = [json.loads(line) for line in provider_log.read_text().splitlines()] if provider_log.is_file() else []
    logs = list((RUN_DIR / "data" / "logs").rglob("lmbridge.log"))
    report_file = RUN_DIR / "report.json"
    result = {"record": record, "report": json.loads(report_file.read_text()) if report_file.is_file() else {}, "agents": agents, "provider": requests, "log": "\n".join(p.read_text(errors="replace") for p in logs)}
    (RUN_DIR / "agents.json").write_text(json.dumps({k: v for k, v in result.items() if k != "log"}, indent=1))
    print(f"\nagent CLIs: {agents.get('claudeVersion')}; {agents.get('codexVersion')}; gemini {agents.get('geminiVersion')}")
    return result


def _diagnose(run: dict[str, Any], name: str) -> str:
    cli = run["agents"].get(name, {})
    return f"{name}: {json.dumps(cli)[-3000:]}\nthread: {run['agents'].get('error')}\nprovider: {run['provider']}\nlog: {run['log'][-3000:]}"


def test_the_clients_versions_are_recorded(agents_run: dict[str, Any]) -> None:
    agents = agents_run["agents"]
    assert "Claude Code" in agents.get("claudeVersion", ""), agents
    assert "codex" in agents.get("codexVersion", ""), agents
    assert agents.get("geminiVersion"), agents


def test_claude_code_does_a_tool_round_on_vscodes_model(agents_run: dict[str, Any]) -> None:
    claude = agents_run["agents"].get("claude") or {}
    assert claude.get("exit") == 0, _diagnose(agents_run, "claude")
    result = json.loads(claude["stdout"])
    assert result["is_error"] is False and result["num_turns"] >= 2, _diagnose(agents_run, "claude")
    # the Read tool ran (the file's text came back through the tool result) and the scripted
    # answer after the result is Claude Code's final result
    assert result["result"].startswith("AGENT-DONE:") and SECRET in result["result"], result
    calls = [r for r in agents_run["provider"] if r["answer"] == "call Read"]
    assert calls and "Read" in calls[0]["tools"], agents_run["provider"]


def test_claude_code_started_by_lmbridge_run_does_a_tool_round(agents_run: dict[str, Any]) -> None:
    run = agents_run["agents"].get("claudeRun") or {}
    assert run.get("exit") == 0, _diagnose(agents_run, "claudeRun")
    result = json.loads(run["stdout"])
    assert result["is_error"] is False and result["num_turns"] >= 2, _diagnose(agents_run, "claudeRun")
    assert result["result"].startswith("AGENT-DONE:") and SECRET in result["result"], result


def test_lmbridge_chat_and_agent_env_reach_vscodes_model(agents_run: dict[str, Any]) -> None:
    chat = agents_run["agents"].get("chatVscode") or {}
    assert chat.get("exit") == 0, _diagnose(agents_run, "chatVscode")
    # the scripted model answers a request without tools so; the usage line goes to stderr
    assert chat["stdout"].startswith("AGENT-IDLE"), chat
    assert "[usage] answer from lmbridge/" in chat["stderr"], chat
    printed = agents_run["agents"].get("agentEnv") or {}
    assert printed.get("exit") == 0, _diagnose(agents_run, "agentEnv")
    setup = json.loads(printed["stdout"])
    endpoint = agents_run["agents"]["endpoint"]
    assert setup["env"] == {"ANTHROPIC_BASE_URL": endpoint["url"], "ANTHROPIC_AUTH_TOKEN": endpoint["token"]}
    assert "agent/agent" in setup["models"], setup


@pytest.mark.parametrize("name", ["codex", "codexRun"])
def test_codex_does_a_tool_round_on_vscodes_model(agents_run: dict[str, Any], name: str) -> None:
    """Configured by hand (a config.toml), and started by `lmbridge run` with nothing set up."""
    codex = agents_run["agents"].get(name) or {}
    assert codex.get("exit") == 0, _diagnose(agents_run, name)
    events = [json.loads(line) for line in codex["stdout"].splitlines() if line.startswith("{")]
    items = [e["item"] for e in events if e.get("type") == "item.completed"]
    commands = [i for i in items if i.get("type") == "command_execution"]
    assert commands and SECRET in commands[0]["aggregated_output"], _diagnose(agents_run, name)
    messages = [i["text"] for i in items if i.get("type") == "agent_message"]
    assert messages and messages[-1].startswith("AGENT-DONE:") and SECRET in messages[-1], messages
    assert any(e.get("type") == "turn.completed" for e in events)
    assert not [e for e in events if e.get("type") in ("error", "turn.failed")], events


def test_gemini_cli_does_a_tool_round_on_vscodes_model(agents_run: dict[str, Any]) -> None:
    gemini = agents_run["agents"].get("gemini") or {}
    assert gemini.get("exit") == 0, _diagnose(agents_run, "gemini")
    result = json.loads(gemini["stdout"][gemini["stdout"].index("{") :])
    assert result["response"].startswith("AGENT-DONE:") and SECRET in result["response"], result
    assert result["stats"]["tools"]["totalSuccess"] >= 1, result["stats"]["tools"]
    calls = [r for r in agents_run["provider"] if r["answer"] == "call read_file"]
    assert calls and "run_shell_command" in calls[0]["tools"], agents_run["provider"]


def test_genai_sdk_streams_a_function_call_round_on_vscodes_model(agents_run: dict[str, Any]) -> None:
    genai = agents_run["agents"].get("genai") or {}
    assert genai.get("calls") and genai["calls"][0]["name"] == "read_file", _diagnose(agents_run, "genai")
    assert genai["calls"][0]["id"], genai  # the call's id, for its response to answer
    assert genai.get("answer", "").startswith("AGENT-DONE:") and SECRET in genai["answer"], genai
    # errors in Gemini's shape, as the SDK reads them
    assert (genai["badKey"]["code"], genai["badKey"]["status"]) == (401, "UNAUTHENTICATED"), genai
    assert (genai["badRequest"]["code"], genai["badRequest"]["status"]) == (400, "INVALID_ARGUMENT"), genai
    assert "candidateCount" in genai["badRequest"]["message"], genai


def test_claude_code_calls_a_vscode_tool_through_mcp(agents_run: dict[str, Any]) -> None:
    claude = agents_run["agents"].get("claudeMcp") or {}
    assert claude.get("exit") == 0, _diagnose(agents_run, "claudeMcp")
    result = json.loads(claude["stdout"])
    # the tool ran in VS Code and its result reached the model, whose answer is Claude's result
    assert result["is_error"] is False and result["num_turns"] >= 2, result
    assert result["result"].startswith("AGENT-DONE:") and f"TOOL-SECRET-claude-7391 from {TOOL}" in result["result"], result
    calls = [r for r in agents_run["provider"] if r["answer"] == f"call mcp__vscode__{TOOL}"]
    assert calls, agents_run["provider"]
    # Claude Code listed the allowed tool only
    offered = calls[0]["tools"]
    assert f"mcp__vscode__{TOOL}" in offered and not any(HIDDEN in t for t in offered), offered


def test_codex_calls_a_vscode_tool_through_mcp(agents_run: dict[str, Any]) -> None:
    codex = agents_run["agents"].get("codexMcp") or {}
    assert codex.get("exit") == 0, _diagnose(agents_run, "codexMcp")
    events = [json.loads(line) for line in codex["stdout"].splitlines() if line.startswith("{")]
    items = [e["item"] for e in events if e.get("type") == "item.completed"]
    calls = [i for i in items if i.get("type") == "mcp_tool_call"]
    assert calls and (calls[0]["server"], calls[0]["tool"], calls[0]["status"]) == ("vscode", TOOL, "completed"), items
    texts = [c["text"] for c in calls[0]["result"]["content"]]
    assert texts == [f"TOOL-SECRET-codex-7391 from {TOOL}"], calls
    messages = [i["text"] for i in items if i.get("type") == "agent_message"]
    assert messages and messages[-1].startswith("AGENT-DONE:") and "TOOL-SECRET-codex-7391" in messages[-1], messages


def test_a_python_tool_loop_runs_on_vscodes_model_and_tool(agents_run: dict[str, Any]) -> None:
    python = agents_run["agents"].get("python") or {}
    assert python.get("listed") == [TOOL], _diagnose(agents_run, "python")
    assert python["loop"]["calls"] == [TOOL], python
    assert python["loop"]["text"].startswith("AGENT-DONE:") and f"TOOL-SECRET-python-7391 from {TOOL}" in python["loop"]["text"], python


def test_a_tool_outside_the_allowlist_is_neither_listed_nor_callable(agents_run: dict[str, Any]) -> None:
    python = agents_run["agents"].get("python") or {}
    assert python.get("hiddenInvoke") == "not_found", python
    assert python["hiddenMcp"]["error"]["code"] == -32602, python
    # in VS Code: the allowed tool ran twice (Claude Code, Python), the other never
    calls = agents_run["record"]["toolCalls"]
    assert sorted(c["input"]["word"] for c in calls) == ["claude", "codex", "python"], calls
    assert {c["name"] for c in calls} == {TOOL}, calls


def test_the_workspace_cannot_widen_the_tools(agents_run: dict[str, Any]) -> None:
    notes = [n["message"] for n in agents_run["report"].get("notifications", []) if "lmbridge" in n.get("source", "")]
    assert any("lmbridge.endpoint.tools" in n for n in notes), agents_run["report"].get("notifications")
    # and what the host got is the user's list only: the hidden tool stayed hidden above


def test_model_capabilities_come_from_vscode(agents_run: dict[str, Any]) -> None:
    models = {m["id"]: m for m in agents_run["agents"].get("models", [])}
    # lmbridge's scripted model takes images; the driver's models say only toolCalling
    assert models["agent/agent"]["capabilities"] == {"vision": True, "tool_calling": True}, models
    assert models["e2e-alpha"]["capabilities"] == {"vision": False, "tool_calling": True}, models


def test_the_endpoint_served_every_api_without_errors(agents_run: dict[str, Any]) -> None:
    log = agents_run["log"]
    assert agents_run["record"]["errors"] == [], agents_run["record"]["errors"]
    assert "loopback endpoint listening" in log
    assert "[error]" not in log, log[-3000:]
    answered = [r["answer"] for r in agents_run["provider"]]
    assert answered.count("done") >= 4, answered
