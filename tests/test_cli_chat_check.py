"""``lmbridge chat``, ``lmbridge check`` and the strict ``lmbridge host --config``, run as a user
runs them: the installed command in a subprocess, in a folder of the test's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

TIMEOUT = 60

SHOUT = '''
from lmbridge.parts import TextPart
from lmbridge.provider import chat_model


@chat_model("shout", max_input_tokens=8000)
async def shout(messages, options, token):
    yield TextPart(messages[-1].text.upper())
'''

BAD = {
    "providers": [
        {"name": "good", "provider": "lmbridge.providers.echo:EchoProvider"},
        {"name": "fmt", "format": "nope", "baseUrl": "https://x.invalid"},
        {"name": "mod", "provider": "no_such_module_here:P"},
        {"name": "refused", "format": "chat-completions", "baseUrl": "https://x.invalid", "apiKey": "sk-1"},
    ]
}


def lmbridge(*args: str, cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m lmbridge ARGS`` with no terminal, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "lmbridge", *args],
        cwd=cwd,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env or _env(),
        check=False,
    )


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LMBRIDGE_")}
    env["NO_COLOR"] = "1"
    return env


def one_clear_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


# --------------------------------------------------------------------------- chat


def test_chat_answers_a_prompt_on_the_echo_model_with_no_configuration(tmp_path: Path) -> None:
    r = lmbridge("chat", "Hello", "there", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "You said: Hello there\n"  # only the answer's text on stdout
    assert "[thinking]" in r.stderr
    usage = [line for line in r.stderr.splitlines() if line.startswith("[usage]")]
    assert len(usage) == 1 and "echo/echo" in usage[0] and "finish stop" in usage[0], r.stderr


def test_chat_reads_the_prompt_from_standard_input(tmp_path: Path) -> None:
    r = lmbridge("chat", "--no-thinking", cwd=tmp_path, stdin="from a pipe\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "You said: from a pipe\n"
    assert "[thinking]" not in r.stderr


def test_chat_shows_a_tool_call_and_does_not_answer_it_without_a_result(tmp_path: Path) -> None:
    tools = [{"name": "get_weather", "description": "Weather", "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    r = lmbridge("chat", "--tools", "tools.json", "call get_weather for Paris", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert '[tool call] get_weather {"city": "Paris"}' in r.stderr
    assert "[tool call not answered: get_weather" in r.stderr
    assert "finish tool-calls" in r.stderr
    assert "Tool result" not in r.stdout


def test_chat_answers_a_tool_call_from_the_tools_file(tmp_path: Path) -> None:
    tools = [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}},
            "result": "18 C, sunny",
        }
    ]
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    r = lmbridge("chat", "--tools", "tools.json", "call get_weather for Paris", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "[tool result] get_weather: 18 C, sunny" in r.stderr
    # the model's second answer used the result
    assert r.stdout == "Tool result for call_1_get_weather: 18 C, sunny\n"
    assert r.stderr.count("[usage]") == 2


def test_chat_finds_a_provider_module_in_the_current_folder(tmp_path: Path) -> None:
    (tmp_path / "shout_mod.py").write_text(SHOUT)
    (tmp_path / "mine.toml").write_text('[[providers]]\nname = "mine"\nprovider = "shout_mod:shout"\n')
    r = lmbridge("chat", "--config", "mine.toml", "--model", "shout", "hello you", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "HELLO YOU\n"


def test_chat_refuses_a_configuration_that_cannot_load(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps(BAD))
    r = lmbridge("chat", "--config", "bad.json", "hi", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stdout == ""
    assert "provider 'fmt'" in r.stderr and "unknown format 'nope'" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("args", "stdin", "expected"),
    [
        (["--model", "nope", "hi"], None, "--model nope is not a model of this configuration; the models: echo/echo"),
        (["--config", "missing.json", "hi"], None, "cannot read the configuration file missing.json: No such file or directory"),
        (["--tools", "missing.json", "hi"], None, "cannot read missing.json: No such file or directory"),
        ([], "  \n", "no prompt: give one as arguments"),
        (["--config", "-"], "[]", "standard input holds the configuration: give the PROMPT as arguments"),
        (["--max-rounds", "-1", "hi"], None, "--max-rounds takes a number of rounds"),
        (["--endpoint-file", "x", "hi"], None, "--endpoint-file goes with --vscode"),
    ],
)
def test_chat_bad_input_is_one_clear_line(tmp_path: Path, args: list[str], stdin: str | None, expected: str) -> None:
    r = lmbridge("chat", *args, cwd=tmp_path, stdin=stdin)
    assert r.returncode in (1, 2)
    assert expected in one_clear_line(r.stderr)
    assert "Errno" not in r.stderr


def test_chat_with_vscode_says_where_the_endpoint_file_was_looked_for(tmp_path: Path) -> None:
    env = dict(_env(), HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    r = lmbridge("chat", "--vscode", "hi", cwd=tmp_path, env=env)
    assert r.returncode == 1
    line = one_clear_line(r.stderr)
    assert str(tmp_path / "cache" / "lmbridge" / "endpoint.json") in line
    assert "lmbridge.endpoint.enabled" in line


class Terminal:
    """``lmbridge ARGS`` on a pseudo-terminal of its own (its controlling terminal, so a
    Ctrl-C typed there is a SIGINT to its foreground process group, as for a user)."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        import fcntl
        import pty
        import termios

        self.main, child = pty.openpty()

        def take_terminal() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lmbridge", *args],
            cwd=tmp_path,
            stdin=child,
            stdout=child,
            stderr=child,
            env=_env(),
            close_fds=True,
            preexec_fn=take_terminal,
        )
        os.close(child)
        self.seen = b""
        self._cursor = 0  # markers are looked for after the last one found

    def read_until(self, marker: bytes) -> None:
        deadline = time.monotonic() + TIMEOUT
        while marker not in self.seen[self._cursor :]:
            left = deadline - time.monotonic()
            assert left > 0, self.seen.decode(errors="replace")
            import select

            ready, _, _ = select.select([self.main], [], [], left)
            if ready:
                try:
                    self.seen += os.read(self.main, 4096)
                except OSError:
                    break
        self._cursor = self.seen.index(marker, self._cursor) + len(marker)

    def type(self, text: bytes) -> None:
        os.write(self.main, text)

    def close(self) -> int:
        try:
            return self.proc.wait(TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            os.close(self.main)

    @property
    def text(self) -> str:
        return self.seen.decode(errors="replace")


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")
def test_chat_is_interactive_on_a_terminal_and_keeps_the_conversation(tmp_path: Path) -> None:
    term = Terminal(tmp_path, "chat", "--no-thinking")
    try:
        term.read_until(b"> ")
        assert b"lmbridge chat with echo/echo" in term.seen
        term.type(b"first question\n")
        term.read_until(b"You said: first question")
        term.read_until(b"> ")
        term.type(b"second\n")
        term.read_until(b"You said: second")
        term.read_until(b"> ")
        term.type(b"/exit\n")
    finally:
        assert term.close() == 0
    inputs = [int(line.split(" input ")[1].split()[0]) for line in term.text.splitlines() if "[usage]" in line]
    # the second question went with the first and its answer
    assert len(inputs) == 2 and inputs[1] > inputs[0] + 5, term.text
    assert "Traceback" not in term.text


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX pseudo-terminal")
def test_ctrl_c_stops_the_answer_and_the_chat_goes_on(tmp_path: Path) -> None:
    slow = [{"name": "slow", "provider": "lmbridge.providers.echo:EchoProvider", "delay": 0.5}]
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    term = Terminal(tmp_path, "chat", "--config", "slow.json", "--no-thinking")
    try:
        term.read_until(b"> ")
        term.type(b"one two three four five six seven eight nine ten\n")
        term.read_until(b"You said: ")  # the answer is being written, a word every 0.5 s
        term.type(b"\x03")
        term.read_until(b"[stopped]")
        term.read_until(b"> ")
        term.type(b"again\n")  # the host is still there
        term.read_until(b"You said: again")
        term.read_until(b"> ")
        term.type(b"\x04")
    finally:
        assert term.close() == 0
    stopped = term.text.split("You said: ", 1)[1].split("[stopped]")[0]
    assert "ten" not in stopped, term.text  # the rest of the answer never came
    assert term.text.count("[usage]") == 1 and "Traceback" not in term.text


# --------------------------------------------------------------------------- check


def test_check_lists_the_models_and_says_what_is_wrong_per_provider(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps(BAD))
    r = lmbridge("check", "--config", "bad.json", cwd=tmp_path)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    failed = {line.split()[1]: line for line in lines if line.startswith("FAILED")}
    assert set(failed) == {"fmt", "mod", "refused"}, r.stdout
    assert "unknown format 'nope'" in failed["fmt"]
    assert "cannot import 'no_such_module_here'" in failed["mod"] and "current folder" in failed["mod"]
    assert "'apiKey' is not allowed" in failed["refused"] and "sk-1" not in r.stdout
    assert any(line.startswith("ok") and "good" in line for line in lines)
    assert any(line.strip().startswith("good/echo") for line in lines)
    assert "1 of 4 providers ok; 3 failed" in r.stderr
    assert "Traceback" not in r.stdout + r.stderr


def test_check_passes_a_good_configuration_read_from_standard_input(tmp_path: Path) -> None:
    (tmp_path / "shout_mod.py").write_text(SHOUT)
    r = lmbridge("check", "--config", "-", cwd=tmp_path, stdin='[[providers]]\nname = "mine"\nprovider = "shout_mod:shout"\n')
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0].split() == ["ok", "mine", "1", "model"]
    assert "mine/shout" in r.stdout


def test_check_without_a_configuration_checks_the_echo_model(tmp_path: Path) -> None:
    r = lmbridge("check", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "echo/echo" in r.stdout


def test_check_gives_each_provider_its_own_deadline(tmp_path: Path) -> None:
    (tmp_path / "slow_mod.py").write_text(
        "import asyncio\n"
        "from lmbridge.providers.echo import EchoProvider\n"
        "class Slow(EchoProvider):\n"
        "    async def provide_language_model_chat_information(self, options, token):\n"
        "        await asyncio.Event().wait()\n"
    )
    config = [
        {"name": "slow", "provider": "slow_mod:Slow"},
        {"name": "fast", "provider": "lmbridge.providers.echo:EchoProvider"},
    ]
    (tmp_path / "c.json").write_text(json.dumps(config))
    r = lmbridge("check", "--config", "c.json", "--timeout", "1", cwd=tmp_path)
    assert r.returncode == 1
    assert "no model list within 1 s" in next(line for line in r.stdout.splitlines() if "slow" in line)
    assert "fast/echo" in r.stdout


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ('{"provider": []}', "c.json", "c.json: unknown top-level key 'provider': did you mean 'providers'?"),
        ('{"models": []}', "c.json", "c.json: unknown top-level key 'models': the file holds 'providers' only"),
        ("{nope", "c.json", "c.json: not valid JSON"),
        ("x: 1", "c.yaml", "'.yaml' files are not read"),
    ],
)
def test_check_refuses_a_bad_file_in_one_line(tmp_path: Path, text: str, name: str, expected: str) -> None:
    (tmp_path / name).write_text(text)
    r = lmbridge("check", "--config", name, cwd=tmp_path)
    assert r.returncode == 2
    assert expected in one_clear_line(r.stderr)


# --------------------------------------------------------------------------- host --config


def test_host_refuses_a_configuration_that_cannot_load(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps(BAD))
    r = lmbridge("host", "--config", "bad.json", cwd=tmp_path, stdin="")
    assert r.returncode == 2
    assert r.stdout == ""  # nothing on the protocol's stream
    assert "ready" not in r.stderr
    for name in ("fmt", "mod", "refused"):
        assert f"lmbridge host: bad.json: provider '{name}':" in r.stderr
    assert "not started: 3 provider(s) in bad.json cannot load" in r.stderr


def test_host_refuses_a_misspelled_top_level_key(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text('{"provider": [{"name": "x", "provider": "m:P"}]}')
    r = lmbridge("host", "--config", "c.json", cwd=tmp_path)
    assert r.returncode == 2
    assert "unknown top-level key 'provider': did you mean 'providers'?" in one_clear_line(r.stderr)


def test_host_config_cannot_be_standard_input(tmp_path: Path) -> None:
    r = lmbridge("host", "--config", "-", cwd=tmp_path)
    assert r.returncode == 2
    assert "standard input carries the protocol" in one_clear_line(r.stderr)


def test_the_host_vscode_starts_does_not_import_from_its_folder(tmp_path: Path) -> None:
    """Without --config (as the extension starts it) a module in the folder is not found, and
    the providers that load are served beside the one that does not."""
    (tmp_path / "shout_mod.py").write_text(SHOUT)
    script = (
        "import asyncio, json\n"
        "from lmbridge.host.client import HostClient\n"
        "async def main():\n"
        "    async with HostClient.start() as host:\n"
        "        init = await host.initialize(providers=[{'name': 'mine', 'provider': 'shout_mod:shout'},\n"
        "                                                {'name': 'good', 'provider': 'lmbridge.providers.echo:EchoProvider'}], secrets={})\n"
        "        models = await host.request('models/list', {'silent': True})\n"
        "        print(json.dumps([init['providers'], [m['id'] for m in models['models']]]))\n"
        "asyncio.run(main())\n"
    )
    r = subprocess.run([sys.executable, "-I", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, env=_env(), check=False)
    assert r.returncode == 0, r.stderr
    (mine, good), models = json.loads(r.stdout.splitlines()[-1])
    assert mine["ok"] is False and "cannot import 'shout_mod'" in mine["error"]
    # not strict: the good provider is served, the broken one reported
    assert good == {"name": "good", "ok": True} and models == ["good/echo"]
