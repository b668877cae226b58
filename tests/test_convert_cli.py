"""``lmbridge convert``: request bodies, the consumer direction, and clear errors."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lmbridge import formats
from lmbridge.cli import main
from lmbridge.convert import to_anthropic, to_chat_completions
from lmbridge.parts import (
    ChatMessage,
    TextPart,
    ToolResultPart,
    messages_from_wire,
    options_from_wire,
)

DATA = Path(__file__).parent / "data" / "convert"
SEED = str(DATA / "seed_weather.json")


def run(capsys, *argv):
    code = main(["convert", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_to_chat_completions_matches_the_library(capsys):
    code, out, err = run(capsys, "--to", "chat-completions", SEED)
    assert code == 0 and err == ""
    data = json.loads(Path(SEED).read_text())
    expected = to_chat_completions(
        messages_from_wire(data["messages"]),
        options_from_wire(data["options"]),
        model="gpt-4o-mini",
    )
    assert json.loads(out) == expected


CONVERSATION_KEY = {"responses": "input", "gemini": "contents"}


@pytest.mark.parametrize("target", formats.names())
def test_every_target(capsys, target):
    code, out, _ = run(capsys, "--to", target, "--model", "x", SEED)
    assert code == 0
    body = json.loads(out)
    assert body[CONVERSATION_KEY.get(target, "messages")]


def test_from_gemini_to_vscode(capsys, tmp_path):
    path = tmp_path / "g.json"
    path.write_text(
        json.dumps(
            {
                "system": "terse",
                "messages": [
                    {"role": "user", "parts": [{"text": "q"}]},
                    {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"a": 1}, "id": "c"}}]},
                    {"role": "user", "parts": [{"functionResponse": {"name": "f", "id": "c", "response": {"output": "r"}}}]},
                ],
            }
        )
    )
    code, out, err = run(capsys, "--from", "gemini", "--to", "vscode", str(path))
    assert code == 0, err
    kinds = [[p["kind"] for p in m["content"]] for m in json.loads(out)["messages"]]
    assert kinds == [["text"], ["text"], ["toolCall"], ["toolResult"]]


def test_anthropic_max_tokens_and_policy_flags(capsys, tmp_path):
    conv = {
        "messages": [
            {"role": 1, "content": "q"},
            {"role": 2, "content": [{"kind": "toolCall", "callId": "a", "name": "t", "input": {}}]},
            {"role": 1, "content": "next"},
        ],
        "options": {"tools": [], "toolMode": 1, "modelOptions": {}},
    }
    path = tmp_path / "c.json"
    path.write_text(json.dumps(conv))
    code, out, _ = run(
        capsys,
        "--to",
        "anthropic",
        "--max-tokens",
        "77",
        "--missing-tool-result",
        "drop",
        str(path),
    )
    assert code == 0
    expected = to_anthropic(
        messages_from_wire(conv["messages"]),
        None,
        model="model",
        max_tokens=77,
        missing_tool_result="drop",
    )
    assert json.loads(out) == expected
    assert expected["messages"] == [
        {
            "role": "user",
            # Two user messages in one turn: a blank line keeps them apart.
            "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "\n\nnext"}],
        }
    ]


def test_from_anthropic_to_vscode(capsys):
    code, out, _ = run(
        capsys,
        "--from",
        "anthropic",
        "--to",
        "vscode",
        "--system-as",
        "system",
        str(DATA / "cline_history.json"),
    )
    assert code == 0
    msgs = messages_from_wire(json.loads(out)["messages"])
    assert msgs[0] == ChatMessage.system("You are Cline, a coding agent.")
    assert msgs[3].content[0] == ToolResultPart("toolu_01", [TextPart("a.py\nb.py")])


def test_from_chat_completions_to_vscode_from_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO((DATA / "openai_history.json").read_text()))
    code, out, _ = run(
        capsys, "--from", "chat-completions", "--to", "vscode", "--no-image-input", "-"
    )
    assert code == 0
    msgs = messages_from_wire(json.loads(out)["messages"])
    assert msgs[0] == ChatMessage.assistant("You are terse.")
    assert msgs[3].content[-1] == TextPart("[image: image/png not supported here]")


@pytest.mark.parametrize(
    ("argv", "content", "message"),
    [
        (["--to", "vscode"], "{}", "--to vscode needs --from"),
        (["--from", "anthropic", "--to", "responses"], "{}", "use --to vscode"),
        (["--to", "anthropic"], "{not json", "is not valid JSON"),
        (["--to", "anthropic"], "[]", "expected a JSON object"),
        (["--to", "anthropic"], "{}", 'has no "messages"'),
        (
            ["--to", "anthropic"],
            '{"messages": [{"role": 7}]}',
            r"messages[0].role: expected 1 (user)",
        ),
        (
            ["--to", "anthropic"],
            '{"messages": [{"role": 1, "content": [{"kind": "sparkle"}]}]}',
            "unknown part kind 'sparkle'",
        ),
        (
            ["--to", "chat-completions"],
            '{"messages": [{"role": 1, "content": [{"kind": "data", "mimeType": "png", "data": "AA=="}]}]}',
            "messages[0].content[0]: malformed MIME type 'png'",
        ),
        (
            ["--to", "chat-completions", "--orphan-tool-result", "error"],
            '{"messages": [{"role": 1, "content": [{"kind": "toolResult", "callId": "x", "content": []}]}]}',
            "tool result for call 'x'",
        ),
        (
            ["--from", "anthropic", "--to", "vscode"],
            '{"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "[1]"}]}]}',
            "must be a JSON object",
        ),
        (
            ["--to", "anthropic", "--max-tokens", "0"],
            '{"messages": []}',
            "--max-tokens must be a positive integer",
        ),
    ],
)
def test_errors_are_one_clear_line(capsys, tmp_path, argv, content, message):
    path = tmp_path / "in.json"
    path.write_text(content)
    code, out, err = run(capsys, *argv, str(path))
    assert code == 1
    assert out == ""
    assert err.startswith("lmbridge convert: ") and message in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_missing_file(capsys, tmp_path):
    code, _, err = run(capsys, "--to", "ai-sdk", str(tmp_path / "nope.json"))
    assert code == 1 and "cannot read" in err and "No such file" in err


def test_subprocess_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "lmbridge", "convert", "--to", "responses", SEED],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["input"][0] == {
        "role": "developer",
        "content": "You are a weather assistant.",
    }
    bad = subprocess.run(
        [sys.executable, "-m", "lmbridge", "convert", "--to", "responses", "/nonexistent/x.json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1 and "Traceback" not in bad.stderr


# --------------------------------------------------------------------------- deep JSON, lone surrogates


def test_json_nested_too_deeply_is_one_clear_line(capsys, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, out, err = run(capsys, "--to", "anthropic", str(path))
    assert code == 1 and out == ""
    assert err.startswith("lmbridge convert: ") and "nested too deeply" in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_deep_but_parseable_tool_input_is_converted(capsys, tmp_path):
    # Deep enough to be near the parser's limit: the converters and the output must not
    # add recursion of their own on top.
    deep = "[" * 900 + "]" * 900
    path = tmp_path / "deep.json"
    path.write_text(
        '{"messages": [{"role": 1, "content": "q"}, {"role": 2, "content": [{"kind": "toolCall",'
        f' "callId": "a", "name": "f", "input": {{"x": {deep}}}}}]}}, {{"role": 1, "content": "ok"}}]}}'
    )
    for target in formats.names():
        code, out, err = run(capsys, "--to", target, str(path))
        assert code == 0, err
        assert "x" in out


@pytest.mark.parametrize(
    ("argv", "content"),
    [
        (
            ["--to", "anthropic"],
            r'{"messages": [{"role": 1, "content": [{"kind": "text", "value": "bad \ud800 end"}]}]}',
        ),
        (["--to", "chat-completions"], r'{"messages": [{"role": 1, "content": "a \udc00\ud83d"}]}'),
        (
            ["--from", "chat-completions", "--to", "vscode"],
            r'{"messages": [{"role": "user", "content": "bad \ud800"}]}',
        ),
        (
            ["--from", "anthropic", "--to", "vscode"],
            r'{"messages": [{"role": "user", "content": "bad \ud800"}]}',
        ),
    ],
)
def test_lone_surrogates_print_as_replacement_characters(capsys, tmp_path, argv, content):
    path = tmp_path / "sur.json"
    path.write_text(content)
    code, out, err = run(capsys, *argv, str(path))
    assert code == 0, err
    out.encode("utf-8")  # strict: valid UTF-8 throughout
    assert "\ufffd" in out
    assert not any("\ud800" <= ch <= "\udfff" for ch in out)


def test_lone_surrogates_subprocess_exit_0():
    sur = Path(__file__).parent / "data" / "convert" / "lone_surrogate.json"
    proc = subprocess.run(
        [sys.executable, "-m", "lmbridge", "convert", "--to", "anthropic", str(sur)],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    body = json.loads(proc.stdout.decode("utf-8"))
    assert body["messages"][0]["content"][0]["text"] == "a \ufffd b \U0001f600 c \ufffd"
