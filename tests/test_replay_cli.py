"""`lmbridge replay`: recordings of every shape, format detection, the verdict, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lmbridge.cli import main
from lmbridge.contract import Violation
from lmbridge.replay import (
    RecordingError,
    bundled_recordings,
    detect_format,
    load_recording,
    parse_recording,
    replay,
)
from lmbridge.sse import ServerSentEvent

FIXTURES = Path(__file__).parent / "fixtures"


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    code = main(["replay", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", sorted(bundled_recordings()))
def test_every_bundled_recording_replays_and_keeps_the_contract(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, rep = run_json(capsys, name)
    assert code == 0
    assert rep["violations"] == [] and rep["error"] is None
    assert rep["parts"], "a bundled recording produces parts"
    assert set(rep) == {"format", "parts", "usage", "finishReason", "error", "violations"}


def test_json_output_carries_the_streams_content(capsys: pytest.CaptureFixture[str]) -> None:
    # what the recording says, read with plain json
    text, _ = load_recording("chat-completions-tool")
    chunks = [json.loads(line) for line in text.splitlines() if line.strip()]
    raw_calls = [
        call["function"]
        for c in chunks
        for ch in c.get("choices", [])
        for call in ch.get("delta", {}).get("tool_calls") or []
    ]
    usage = next(c["x_groq"]["usage"] for c in chunks if "usage" in c.get("x_groq", {}))

    code, rep = run_json(capsys, "chat-completions-tool")
    assert code == 0 and rep["format"] == "chat-completions"
    calls = [p for p in rep["parts"] if p["kind"] == "toolCall"]  # type: ignore[union-attr, index]
    assert [(c["name"], c["input"]) for c in calls] == [
        (f["name"], json.loads(f["arguments"])) for f in raw_calls
    ]
    assert rep["finishReason"] == "tool-calls"
    assert rep["usage"]["inputTokens"] == usage["prompt_tokens"]  # type: ignore[index]
    assert rep["usage"]["outputTokens"] == usage["completion_tokens"]  # type: ignore[index]


def test_adjacent_text_is_merged_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    text, _ = load_recording("chat-completions-text")
    expected = "".join(
        c["choices"][0]["delta"].get("content") or ""
        for c in map(json.loads, text.splitlines())
        if c.get("choices")
    )
    _, rep = run_json(capsys, "chat-completions-text")
    texts = [p for p in rep["parts"] if p["kind"] == "text"]  # type: ignore[union-attr, index]
    assert len(texts) == 1 and texts[0]["value"] == expected


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        ("openai-chat/openai-text.chunks.txt", "chat-completions"),
        ("openai-responses/openai-phase.1.chunks.txt", "responses"),
        ("open-responses/lmstudio-basic.1.chunks.txt", "responses"),
        ("anthropic/anthropic-text.chunks.txt", "anthropic"),
        ("ai-sdk/fullstream/text-deltas.jsonl", "ai-sdk"),
        ("ai-sdk/provider-parts/anthropic-text-json-output.jsonl", "ai-sdk"),
        ("ai-sdk/ui-message-stream/files.sse", "ai-sdk"),
    ],
)
def test_the_format_is_detected_for_every_shape(path: str, fmt: str) -> None:
    text, name = load_recording(str(FIXTURES / path))
    recording = parse_recording(text, name)
    assert detect_format(recording.events) == fmt
    assert replay(recording).violations == []


def test_raw_sse_is_read_as_sse_and_keeps_event_names() -> None:
    body = 'event: message_start\ndata: {"type":"message_start","message":{"id":"m"}}\n\n'
    rec = parse_recording(body, "x.sse")
    assert rec.shape == "sse" and rec.events[0].event == "message_start"


def test_a_payload_with_u2028_stays_one_event() -> None:
    line = json.dumps({"choices": [{"index": 0, "delta": {"content": "a\u2028b"}}]}, ensure_ascii=False)
    rec = parse_recording(line + "\n", "x.chunks.txt")
    assert len(rec.events) == 1
    assert replay(rec).result.parts[0].value == "a\u2028b"  # type: ignore[union-attr]


def test_unknown_streams_are_named_not_guessed() -> None:
    with pytest.raises(RecordingError, match="--format"):
        detect_format([ServerSentEvent('{"hello": 1}')])


def test_bad_input_exits_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(tmp_path / "missing.txt")]) == 2
    assert "cannot read" in capsys.readouterr().err
    empty = tmp_path / "empty.chunks.txt"
    empty.write_text("\n")
    assert main(["replay", str(empty)]) == 2
    assert "empty" in capsys.readouterr().err


def test_a_broken_stream_is_reported_not_crashed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "cut.chunks.txt"
    f.write_text('{"choices":[{"index":0,"delta":{"content":"kept"}}]}\n{"choices":[{"ind\n')
    code, rep = run_json(capsys, str(f), "--format", "chat-completions")
    assert code == 1  # what decoded is shown, and the stream that does not decode fails the command
    assert rep["parts"] == [{"kind": "text", "value": "kept"}]
    assert "not valid JSON" in rep["error"]["message"]  # type: ignore[index]


def test_violations_exit_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import lmbridge.commands.replay as cmd

    real = cmd.replay

    def with_violation(*args: object, **kwargs: object) -> object:
        report = real(*args, **kwargs)  # type: ignore[arg-type]
        report.violations.append(Violation(0, "empty-text", "injected"))
        return report

    monkeypatch.setattr(cmd, "replay", with_violation)
    assert main(["replay", "anthropic-tool"]) == 1
    assert "contract: VIOLATED" in capsys.readouterr().out


def test_the_installed_command_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lmbridge", "replay", "anthropic-tool"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "contract: kept" in out and "toolCall" in out


def test_a_format_that_does_not_fit_the_events_is_warned_about(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["replay", "anthropic-tool", "--format", "chat-completions"])
    captured = capsys.readouterr()
    assert code == 0
    assert "look like anthropic, decoding them as chat-completions" in captured.err


def test_merging_a_long_text_run_is_linear() -> None:
    from lmbridge.parts import TextPart, ToolCallPart
    from lmbridge.replay import merge_text

    parts = [TextPart("ab")] * 200_000 + [ToolCallPart("c", "t", {})] + [TextPart("z")]
    merged = merge_text(parts)  # quadratic joining would take minutes here
    assert merged == [TextPart("ab" * 200_000), ToolCallPart("c", "t", {}), TextPart("z")]


GOOGLE = sorted((Path(__file__).parent / "fixtures" / "google").glob("*.chunks.txt"))


@pytest.mark.parametrize("path", GOOGLE, ids=lambda p: p.name)
def test_every_gemini_recording_replays_from_the_command_line(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objs = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    usage = objs[-1]["usageMetadata"]
    for recording in (path, tmp_path / "array.json"):
        if recording.suffix == ".json":
            recording.write_text("[" + ",\n".join(json.dumps(o) for o in objs) + "]", "utf-8")
        code, rep = run_json(capsys, str(recording))
        assert code == 0 and rep["format"] == "gemini"
        assert rep["violations"] == [] and rep["error"] is None
        assert rep["usage"]["inputTokens"] == usage["promptTokenCount"]  # type: ignore[index]
        assert rep["usage"]["reasoningTokens"] == usage["thoughtsTokenCount"]  # type: ignore[index]
        calls = [p for p in rep["parts"] if p["kind"] == "toolCall"]  # type: ignore[union-attr, index]
        assert rep["finishReason"] == ("tool-calls" if calls else "stop")


def test_a_broken_gemini_array_recording_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cut.json"
    path.write_text('[{"candidates": [{"content": {"parts": [{"text": "cut', "utf-8")
    assert main(["replay", str(path)]) == 2
    assert "cut inside an element" in capsys.readouterr().err
