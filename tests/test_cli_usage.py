"""The command line behaves the same in every command: ``-`` is standard input wherever a file is
read, a bad input or usage is one clear line on stderr with a non-zero exit (what to type, no
``[Errno N]``, no traceback, none of a binary file's bytes), and nothing is dropped unseen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT = 60
BINARY = b"\x00\x9f\x92\x96 \x1b[31mEVIL-BYTES\x1b[0m \xff\xfe" * 20


def lmbridge(tmp_path: Path, *args: str, stdin: bytes | str = b"") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LMBRIDGE_")}
    data = stdin.encode() if isinstance(stdin, str) else stdin
    r = subprocess.run([sys.executable, "-m", "lmbridge", *args], cwd=tmp_path, input=data, capture_output=True, timeout=TIMEOUT, env=env, check=False)
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace"))


def one_clear_line(r: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and "Errno" not in r.stderr
    return lines[0]


# --------------------------------------------------------------------------- standard input

CONVERSATION = {"messages": [{"role": 1, "content": [{"kind": "text", "value": "hello world"}]}]}


def test_every_command_that_reads_a_file_reads_standard_input_for_dash(tmp_path: Path) -> None:
    tokens = lmbridge(tmp_path, "tokens", "--family", "openai", "--exact", "--json", "-", stdin="hello world")
    assert tokens.returncode == 0, tokens.stderr
    assert json.loads(tokens.stdout) == {"file": "-", "tokens": 2, "family": "openai", "kind": "text", "exact": True}
    convert = lmbridge(tmp_path, "convert", "--to", "chat-completions", "-", stdin=json.dumps(CONVERSATION))
    assert convert.returncode == 0 and json.loads(convert.stdout)["messages"][0]["content"] == "hello world"
    chunks = '{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n'
    replay = lmbridge(tmp_path, "replay", "--format", "chat-completions", "-", stdin=chunks)
    assert replay.returncode == 0, replay.stderr
    assert "text      'hi'" in replay.stdout
    check = lmbridge(tmp_path, "check", "--config", "-", stdin='[{"name": "e", "provider": "lmbridge.providers.echo:EchoProvider"}]')
    assert check.returncode == 0 and "e/echo" in check.stdout
    tools = '[{"name": "t", "description": "d", "inputSchema": {"type": "object"}}]'
    chat = lmbridge(tmp_path, "chat", "--tools", "-", "call t", stdin=tools)
    assert chat.returncode == 0 and "[tool call] t " in chat.stderr


# --------------------------------------------------------------------------- replay


def test_replay_refuses_a_binary_file_without_printing_its_bytes(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(BINARY)
    for args in (["blob.bin"], ["--format", "chat-completions", "blob.bin"], ["--json", "-"]):
        r = lmbridge(tmp_path, "replay", *args, stdin=BINARY)
        assert r.returncode == 2, r
        assert "is not UTF-8 text" in one_clear_line(r) and "binary file" in r.stderr
        assert "EVIL" not in r.stdout + r.stderr and "\x1b" not in r.stdout + r.stderr


def test_replay_exits_non_zero_when_the_events_do_not_decode(tmp_path: Path) -> None:
    (tmp_path / "text.txt").write_text("this is not a stream\nat all\n")
    r = lmbridge(tmp_path, "replay", "--format", "anthropic", "text.txt")
    assert r.returncode == 1
    assert "finish: error" in r.stdout
    assert "not a anthropic stream that decodes" in one_clear_line(r) or "decodes" in r.stderr


# --------------------------------------------------------------------------- tokens


def test_tokens_exact_without_a_family_says_what_to_add(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello")
    r = lmbridge(tmp_path, "tokens", "--exact", "a.txt")
    assert r.returncode == 2
    assert "add --family openai" in one_clear_line(r)
    assert r.stdout == ""


def test_tokens_unknown_family_is_an_error_like_an_unknown_format(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello")
    r = lmbridge(tmp_path, "tokens", "--family", "gtp-4", "a.txt")
    assert r.returncode == 2 and r.stdout == ""
    line = one_clear_line(r)
    assert "unknown --family 'gtp-4'" in line and "openai" in line and "claude-sonnet-4" in line
    # a model family still names a family
    assert lmbridge(tmp_path, "tokens", "--family", "claude-sonnet-4", "a.txt").returncode == 0


def test_tokens_says_why_a_file_cannot_be_read(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(BINARY)
    r = lmbridge(tmp_path, "tokens", "missing.txt", "blob.bin", ".")
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert lines == [
        "lmbridge tokens: cannot read missing.txt: No such file or directory",
        "lmbridge tokens: blob.bin is not UTF-8 text (byte 1: invalid start byte); is it a binary file?",
        "lmbridge tokens: . is a folder, not a file",
    ]


# --------------------------------------------------------------------------- convert


def test_convert_to_vscode_keeps_the_tools_and_they_convert_back(tmp_path: Path) -> None:
    history = {
        "messages": [{"role": "user", "content": "weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    }
    (tmp_path / "h.json").write_text(json.dumps(history))
    r = lmbridge(tmp_path, "convert", "--from", "chat-completions", "--to", "vscode", "h.json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["options"]["tools"] == [{"name": "get_weather", "description": "Weather.", "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    back = lmbridge(tmp_path, "convert", "--to", "anthropic", "-", stdin=r.stdout)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["tools"][0]["name"] == "get_weather"
    anthropic = {"messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "t", "input_schema": {"type": "object"}}]}
    r = lmbridge(tmp_path, "convert", "--from", "anthropic", "--to", "vscode", "-", stdin=json.dumps(anthropic))
    assert json.loads(r.stdout)["options"]["tools"][0]["name"] == "t"


def test_convert_to_vscode_refuses_tools_it_cannot_keep(tmp_path: Path) -> None:
    gemini = {"messages": [{"role": "user", "parts": [{"text": "hi"}]}], "tools": [{"functionDeclarations": [{"name": "t"}]}]}
    r = lmbridge(tmp_path, "convert", "--from", "gemini", "--to", "vscode", "-", stdin=json.dumps(gemini))
    assert r.returncode == 1 and r.stdout == ""
    assert '"tools" (functionDeclarations) are not converted' in one_clear_line(r)
    bad = {"messages": [], "tools": [{"type": "function", "function": {"description": "no name"}}]}
    r = lmbridge(tmp_path, "convert", "--from", "chat-completions", "--to", "vscode", "-", stdin=json.dumps(bad))
    assert r.returncode == 1 and "tools: tools[0].function.name" in one_clear_line(r)


# --------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["tokens"], "lmbridge tokens: the following arguments are required: FILE (see 'lmbridge tokens --help')"),
        (["replay", "--format", "sse", "x"], "argument --format: invalid choice: 'sse'"),
        (["convert", "--to", "yaml", "x"], "argument --to: invalid choice: 'yaml'"),
        (["convert", "--to", "vscode", "x.json"], "--to vscode needs --from"),
        (["nosuchcommand"], "lmbridge: argument COMMAND: invalid choice: 'nosuchcommand'"),
        (["chat", "--max-rounds", "many"], "argument --max-rounds: invalid int value: 'many'"),
        (["check", "--timeout", "0"], "--timeout takes a positive number of seconds"),
        (["host", "--keep-going"], "--keep-going goes with --config FILE"),
    ],
)
def test_usage_errors_are_one_line_that_says_what_to_type(tmp_path: Path, args: list[str], expected: str) -> None:
    r = lmbridge(tmp_path, *args)
    assert r.returncode == (1 if args[0] == "convert" and "vscode" in args else 2)  # convert: 1
    assert expected in one_clear_line(r)


@pytest.mark.parametrize(
    "args",
    [
        ["tokens", "missing.txt"],
        ["convert", "--to", "anthropic", "missing.json"],
        ["replay", "missing.txt"],
        ["check", "--config", "missing.json"],
        ["chat", "--config", "missing.json", "hi"],
        ["host", "--config", "missing.json"],
    ],
)
def test_a_missing_file_is_named_in_words(tmp_path: Path, args: list[str]) -> None:
    r = lmbridge(tmp_path, *args)
    assert r.returncode in (1, 2)
    line = one_clear_line(r)
    assert "missing." in line and "No such file or directory" in line
