"""``lmbridge agent-env``, ``lmbridge run`` and ``lmbridge chat --vscode`` against a real loopback
endpoint (in front of a fake VS Code, ``tests/support/fake_endpoint.py``), and the checks of
the endpoint file they rely on: its owner and mode, and its host process alive, the user's
own and older than the file (a pid reused by another process is not trusted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

SUPPORT = Path(__file__).resolve().parent / "support"
TIMEOUT = 60


def _env(tmp_path: Path) -> dict[str, str]:
    """No endpoint of the machine's: a home of the test's own, no endpoint or SDK variables."""
    drop = ("LMBRIDGE_", "OPENAI_", "ANTHROPIC_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "cache"), XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "share"), NO_COLOR="1")
    return env


def lmbridge(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lmbridge", *args], cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT, env=_env(tmp_path), check=False)


def one_clear_line(r: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


class Endpoint:
    """A running endpoint process and its endpoint file."""

    def __init__(self, file: Path, env: dict[str, str]) -> None:
        self.file = file
        self.proc = subprocess.Popen([sys.executable, str(SUPPORT / "fake_endpoint.py"), str(file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("ready "), line
        self.url = line.split()[1]
        self.token = json.loads(file.read_text())["token"]

    def stop(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(TIMEOUT)
        self.proc.stdout.close()


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[Endpoint]:
    folder = tmp_path / "ep"
    folder.mkdir(mode=0o700)
    ep = Endpoint(folder / "endpoint.json", _env(tmp_path))
    try:
        yield ep
    finally:
        if ep.proc.poll() is None:
            ep.stop()


def _exports(text: str) -> tuple[dict[str, str], list[str]]:
    import shlex

    sets: dict[str, str] = {}
    unsets: list[str] = []
    for line in text.splitlines():
        if line.startswith("export "):
            name, _, value = line[len("export ") :].partition("=")
            sets[name] = shlex.split(value)[0]
        elif line.startswith("unset "):
            unsets.append(line.split()[1])
    return sets, unsets


# --------------------------------------------------------------------------- agent-env


def test_agent_env_for_claude_code(tmp_path: Path, endpoint: Endpoint) -> None:
    r = lmbridge(tmp_path, "agent-env", "claude-code", "--endpoint-file", str(endpoint.file))
    assert r.returncode == 0, r.stderr
    sets, unsets = _exports(r.stdout)
    assert sets == {"ANTHROPIC_BASE_URL": endpoint.url, "ANTHROPIC_AUTH_TOKEN": endpoint.token}
    assert unsets == ["ANTHROPIC_API_KEY"]
    assert str(endpoint.file) in r.stdout  # says where it came from
    assert "gpt-4o" in r.stdout  # the models, as hints


def test_agent_env_for_the_sdks_and_codex(tmp_path: Path, endpoint: Endpoint) -> None:
    wanted = {
        "openai": {"OPENAI_BASE_URL": f"{endpoint.url}/v1", "OPENAI_API_KEY": endpoint.token},
        "anthropic": {"ANTHROPIC_BASE_URL": endpoint.url, "ANTHROPIC_API_KEY": endpoint.token},
        "codex": {"LMBRIDGE_ENDPOINT_URL": endpoint.url, "LMBRIDGE_ENDPOINT_TOKEN": endpoint.token},
    }
    for client, env in wanted.items():
        r = lmbridge(tmp_path, "agent-env", client, "--endpoint-file", str(endpoint.file))
        assert r.returncode == 0, r.stderr
        assert _exports(r.stdout)[0] == env, r.stdout
    codex = lmbridge(tmp_path, "agent-env", "codex", "--endpoint-file", str(endpoint.file), "--shell", "json")
    setup = json.loads(codex.stdout)
    assert setup["args"][:3] == ["-c", "model_provider=lmbridge", "-c"]
    assert f'base_url="{endpoint.url}/v1"' in setup["args"][3] and 'wire_api="responses"' in setup["args"][3]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX owners, modes and shells")
def test_agent_env_output_works_in_a_shell_and_the_endpoint_takes_it(tmp_path: Path, endpoint: Endpoint) -> None:
    script = f'eval "$({sys.executable} -m lmbridge agent-env openai --endpoint-file {endpoint.file})" && echo "$OPENAI_BASE_URL $OPENAI_API_KEY"'
    r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=TIMEOUT, env=_env(tmp_path), check=False)
    assert r.returncode == 0, r.stderr
    base, key = r.stdout.split()
    models = httpx.get(f"{base}/models", headers={"Authorization": f"Bearer {key}"}, trust_env=False, timeout=10)
    assert models.status_code == 200 and models.json()["data"][0]["id"] == "gpt-4o"


@pytest.mark.parametrize(("shell", "line"), [("fish", "set -gx OPENAI_API_KEY "), ("powershell", "$env:OPENAI_API_KEY = '")])
def test_agent_env_speaks_other_shells(tmp_path: Path, endpoint: Endpoint, shell: str, line: str) -> None:
    r = lmbridge(tmp_path, "agent-env", "openai", "--endpoint-file", str(endpoint.file), "--shell", shell)
    assert r.returncode == 0 and any(x.startswith(line) for x in r.stdout.splitlines()), r.stdout


# --------------------------------------------------------------------------- run

PRINT_ENV = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith(('OPENAI_', 'ANTHROPIC_', 'LMBRIDGE_'))}))"


def test_run_reads_the_endpoint_file_afresh_at_every_start(tmp_path: Path, endpoint: Endpoint) -> None:
    r = lmbridge(tmp_path, "run", "--endpoint-file", str(endpoint.file), "--", sys.executable, "-c", PRINT_ENV)
    assert r.returncode == 0, r.stderr
    first = json.loads(r.stdout)
    assert first["OPENAI_BASE_URL"] == f"{endpoint.url}/v1" and first["ANTHROPIC_BASE_URL"] == endpoint.url
    assert first["OPENAI_API_KEY"] == first["ANTHROPIC_API_KEY"] == first["LMBRIDGE_ENDPOINT_TOKEN"] == endpoint.token
    # VS Code restarts: a new port and token; the same command line follows them
    endpoint.stop()
    assert not endpoint.file.exists()
    again = Endpoint(endpoint.file, _env(tmp_path))
    try:
        assert (again.url, again.token) != (endpoint.url, endpoint.token)
        r = lmbridge(tmp_path, "run", "--endpoint-file", str(endpoint.file), "--", sys.executable, "-c", PRINT_ENV)
        assert r.returncode == 0, r.stderr
        second = json.loads(r.stdout)
        assert second["OPENAI_BASE_URL"] == f"{again.url}/v1" and second["OPENAI_API_KEY"] == again.token
    finally:
        again.stop()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX owners, modes and shells")
def test_run_gives_claude_and_codex_their_own_setup(tmp_path: Path, endpoint: Endpoint) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("claude", "codex"):
        program = bin_dir / name
        program.write_text(f"#!{sys.executable}\nimport json, os, sys\nprint(json.dumps({{'argv': sys.argv[1:], 'env': {{k: v for k, v in os.environ.items() if k.startswith(('OPENAI_', 'ANTHROPIC_', 'LMBRIDGE_'))}}}}))\n")
        program.chmod(0o755)
    claude = json.loads(lmbridge(tmp_path, "run", "--endpoint-file", str(endpoint.file), "--", str(bin_dir / "claude"), "-p", "hi").stdout)
    assert claude["argv"] == ["-p", "hi"]
    assert claude["env"] == {"ANTHROPIC_BASE_URL": endpoint.url, "ANTHROPIC_AUTH_TOKEN": endpoint.token}
    codex = json.loads(lmbridge(tmp_path, "run", "--endpoint-file", str(endpoint.file), "--", str(bin_dir / "codex"), "exec", "hi").stdout)
    assert codex["argv"][:3] == ["-c", "model_provider=lmbridge", "-c"] and codex["argv"][-2:] == ["exec", "hi"]
    # Codex offers tools only for model names it knows: one is named unless its config has one
    assert codex["argv"][4:6] == ["-c", "model=gpt-5"]
    assert codex["env"]["LMBRIDGE_ENDPOINT_TOKEN"] == endpoint.token
    (tmp_path / "home" / ".codex").mkdir(parents=True)
    (tmp_path / "home" / ".codex" / "config.toml").write_text('model = "o3"\n')
    codex = json.loads(lmbridge(tmp_path, "run", "--endpoint-file", str(endpoint.file), "--", str(bin_dir / "codex"), "exec", "hi").stdout)
    assert not any(a.startswith("model=") for a in codex["argv"]), codex["argv"]


def test_run_passes_the_programs_exit_status(tmp_path: Path, endpoint: Endpoint) -> None:
    r = lmbridge(tmp_path, "run", "--endpoint-file", str(endpoint.file), "--", sys.executable, "-c", "raise SystemExit(7)")
    assert r.returncode == 7


# --------------------------------------------------------------------------- chat --vscode


def test_chat_talks_to_vscodes_models_through_the_endpoint(tmp_path: Path, endpoint: Endpoint) -> None:
    r = lmbridge(tmp_path, "chat", "--vscode", "--endpoint-file", str(endpoint.file), "hello VS Code")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello VS Code\n"  # the fake VS Code's model echoes
    assert "[usage] answer from copilot/gpt-4o" in r.stderr and "Task was destroyed" not in r.stderr
    # a model named as VS Code's is the same
    r = lmbridge(tmp_path, "chat", "--model", "vscodelm/copilot/gpt-4o", "--endpoint-file", str(endpoint.file), "again")
    assert r.returncode == 0 and r.stdout == "again\n", r.stderr
    r = lmbridge(tmp_path, "chat", "--model", "vscodelm/nobody/none", "--endpoint-file", str(endpoint.file), "x")
    assert r.returncode == 1 and "No language model in VS Code matches" in one_clear_line(r)


# --------------------------------------------------------------------------- a file not to trust


def _write(file: Path, url: str, pid: int, mode: int = 0o600) -> None:
    file.parent.mkdir(mode=0o700, exist_ok=True)
    file.write_text(json.dumps({"url": url, "token": "t0ken", "pid": pid}))
    file.chmod(mode)


@pytest.mark.parametrize("command", [["agent-env", "claude-code"], ["run", "--", "true"], ["chat", "--vscode", "hi"]])
def test_no_endpoint_says_where_the_file_was_looked_for(tmp_path: Path, command: list[str]) -> None:
    r = lmbridge(tmp_path, *command)
    assert r.returncode == 1
    line = one_clear_line(r)
    assert str(tmp_path / "cache" / "lmbridge" / "endpoint.json") in line
    assert "lmbridge.endpoint.enabled" in line


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX owners, modes and shells")
def test_a_file_whose_process_ended_is_stale(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    file = tmp_path / "ep" / "endpoint.json"
    _write(file, "http://127.0.0.1:9", gone.pid)
    r = lmbridge(tmp_path, "agent-env", "openai", "--endpoint-file", str(file))
    assert r.returncode == 1
    assert f"is stale (process {gone.pid} is not running)" in one_clear_line(r)


@pytest.mark.skipif(sys.platform != "linux", reason="start times from /proc")
def test_a_pid_reused_by_a_newer_process_is_not_trusted(tmp_path: Path) -> None:
    file = tmp_path / "ep" / "endpoint.json"
    newer = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        _write(file, "http://127.0.0.1:9", newer.pid)
        past = time.time() - 3600  # the file was written an hour before this process started
        os.utime(file, (past, past))
        r = lmbridge(tmp_path, "run", "--endpoint-file", str(file), "--", "true")
        assert r.returncode == 1
        assert "started after the file was written: its pid was reused" in one_clear_line(r)
    finally:
        newer.communicate("")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX owners, modes and shells")
def test_a_pid_of_another_user_is_not_trusted(tmp_path: Path) -> None:
    if os.getuid() == 0:
        other = subprocess.Popen(["sleep", "60"], user=65534)  # nobody's process
        pid = other.pid
    else:
        other = None
        pid = 1  # init: root's
    file = tmp_path / "ep" / "endpoint.json"
    try:
        _write(file, "http://127.0.0.1:9", pid)
        r = lmbridge(tmp_path, "agent-env", "codex", "--endpoint-file", str(file))
        assert r.returncode == 1
        assert "belongs to another user: its pid was reused" in one_clear_line(r)
    finally:
        if other is not None:
            other.kill()
            other.wait()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX owners, modes and shells")
def test_a_file_others_can_read_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "ep" / "endpoint.json"
    _write(file, "http://127.0.0.1:9", os.getpid(), mode=0o644)
    r = lmbridge(tmp_path, "agent-env", "openai", "--endpoint-file", str(file))
    assert r.returncode == 1 and "is readable by other users" in one_clear_line(r)


def test_an_endpoint_that_does_not_answer_or_refuses_the_token(tmp_path: Path, endpoint: Endpoint) -> None:
    file = tmp_path / "ep2" / "endpoint.json"
    _write(file, "http://127.0.0.1:9", os.getpid())
    r = lmbridge(tmp_path, "run", "--endpoint-file", str(file), "--", "true")
    assert r.returncode == 1 and "which does not answer" in one_clear_line(r)
    _write(file, endpoint.url, os.getpid())  # the right port, an old token
    r = lmbridge(tmp_path, "agent-env", "openai", "--endpoint-file", str(file))
    assert r.returncode == 1 and "refused the token" in one_clear_line(r)


@pytest.mark.parametrize(
    ("args", "status", "expected"),
    [
        (["run"], 2, "name the program to start: lmbridge run -- claude"),
        (["run", "--", "no-such-program-here"], 127, "no-such-program-here: no such program on PATH"),
        (["agent-env", "cursor"], 2, "argument CLIENT: invalid choice: 'cursor'"),
        (["agent-env"], 2, "the following arguments are required: CLIENT"),
    ],
)
def test_usage_errors_are_one_line(tmp_path: Path, args: list[str], status: int, expected: str) -> None:
    r = lmbridge(tmp_path, *args)
    assert r.returncode == status
    assert expected in one_clear_line(r)
