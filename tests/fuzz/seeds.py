"""Write the seed inputs of every fuzz target into ``tests/fuzz/corpus/<target>/seed-*``.

    python tests/fuzz/seeds.py

The seeds are the recorded streams of ``tests/fixtures`` (cut to a few KiB, libFuzzer's usual
input size) and small hand-made inputs of each kind. Inputs the fuzzer found (``crash-*``,
``timeout-*``, named after what they broke) sit beside them and are not touched.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
TESTS = HERE.parent
MAX = 4096


def _frame(obj: object) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _fixture_bodies() -> dict[str, list[bytes]]:
    sys.path.insert(0, str(TESTS))
    from support.streams import CHAT_FOLDERS, RESPONSES_FOLDERS, fixture_body, fixture_files

    by_format = {
        "chat-completions": [*CHAT_FOLDERS, "llama-cpp"],
        "responses": RESPONSES_FOLDERS,
        "anthropic": ("anthropic",),
        "gemini": ("google",),
    }
    out: dict[str, list[bytes]] = {}
    for fmt, folders in by_format.items():
        files = fixture_files(folders) + fixture_files(folders, "*.sse")
        if fmt == "chat-completions":
            files = [f for f in files if "llama-cpp/" not in f or "chat-completions" in f]
        out[fmt] = [fixture_body(f) for f in files]
    ai_sdk = TESTS / "fixtures" / "ai-sdk"
    out["ai-sdk"] = [p.read_bytes() for p in sorted(ai_sdk.rglob("*.sse"))]
    out["ai-sdk"] += [
        b"".join(b"data: " + line + b"\n\n" for line in p.read_bytes().splitlines() if line)
        for p in sorted(ai_sdk.rglob("*.jsonl"))
    ]
    google = TESTS / "fixtures" / "google"
    out["gemini-array"] = [
        b"[" + b",\r\n".join(line for line in p.read_bytes().splitlines() if line.strip()) + b"]"
        for p in sorted(google.glob("*.chunks.txt"))
    ]
    return out


def _http(method: str, path: str, body: object = None, **headers: str) -> bytes:
    head = [f"{method} {path}"] + [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    data = b"" if body is None else json.dumps(body).encode()
    return "\n".join(head).encode() + b"\n\n" + data


_TOOL = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _endpoint() -> list[bytes]:
    chat = {"role": "user", "content": "Weather in Paris?"}
    return [
        _http("GET", "/v1/models"),
        _http("GET", "/v1/models", anthropic_version="2023-06-01"),
        _http("GET", "/v1/models/gpt-4o"),
        _http(
            "POST",
            "/v1/chat/completions",
            {
                "model": "gpt-4o",
                "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "system", "content": "Be brief."}, chat],
                "tools": [
                    {"type": "function", "function": {"name": "weather", "parameters": _TOOL}}
                ],
                "tool_choice": "auto",
                "response_format": {"type": "json_object"},
            },
        ),
        _http(
            "POST",
            "/v1/chat/completions",
            {
                "model": "vscodelm/copilot/gpt-4o",
                "messages": [
                    chat,
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                ],
            },
        ),
        _http(
            "POST",
            "/v1/responses",
            {
                "model": "gpt-4o",
                "stream": True,
                "instructions": "Be brief.",
                "input": [
                    {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
                    {"type": "function_call", "call_id": "c1", "name": "weather",
                     "arguments": '{"city":"Paris"}'},
                    {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
                ],
                "tools": [{"type": "function", "name": "weather", "parameters": _TOOL}],
                "tool_choice": {"type": "allowed_tools", "mode": "required",
                                "tools": [{"type": "function", "name": "weather"}]},
            },
        ),
        _http("POST", "/v1/responses", {"model": "gpt-4o", "input": "Hello"}),
        _http(
            "POST",
            "/v1/messages",
            {
                "model": "claude-sonnet-4-6",
                "max_tokens": 100,
                "stream": True,
                "system": [{"type": "text", "text": "Sys", "cache_control": {"type": "ephemeral"}}],
                "messages": [
                    {"role": "user", "content": "Weather?"},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "t", "signature": "s"},
                        {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "P"}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"},
                    ]},
                ],
                "tools": [{"name": "weather", "input_schema": _TOOL}],
                "tool_choice": {"type": "any"},
                "thinking": {"type": "enabled", "budget_tokens": 1024},
            },
            anthropic_version="2023-06-01",
        ),
        _http(
            "POST",
            "/v1/messages/count_tokens",
            {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "Hi"}],
             "tools": [{"name": "weather", "input_schema": _TOOL}]},
            x_api_key="{token}",
        ),
        _http("POST", "/lm/selectChatModels", {"selector": {"vendor": "copilot"}}),
        _http(
            "POST",
            "/lm/sendRequest",
            {
                "model": {"id": "gpt-4o"},
                "messages": [{"role": 1, "content": [{"kind": "text", "value": "Hi"}]}],
                "options": {"tools": [{"name": "w", "description": "", "inputSchema": _TOOL}]},
            },
        ),
        _http("POST", "/lm/countTokens", {"model": {"id": "gpt-4o"}, "text": "Hello there"}),
    ]


def _convert() -> list[bytes]:
    wire = {
        "messages": [
            {"role": 3, "content": [{"kind": "text", "value": "System"}]},
            {"role": 1, "content": [
                {"kind": "text", "value": "Look"},
                {"kind": "data", "mimeType": "image/png", "data": "iVBORw0KGgo="},
                {"kind": "data", "mimeType": "cache_control", "data": "ZXBoZW1lcmFs"},
            ]},
            {"role": 2, "content": [
                {"kind": "thinking", "value": "hm", "id": "r1", "metadata": {"signature": "S"}},
                {"kind": "toolCall", "callId": "c1", "name": "weather", "input": {"city": "P"}},
            ]},
            {"role": 1, "content": [
                {"kind": "toolResult", "callId": "c1", "content": [{"kind": "text", "value": "ok"}]},
            ]},
        ],
        "options": {"tools": [{"name": "weather", "description": "d", "inputSchema": _TOOL}],
                    "toolMode": 2, "modelOptions": {"temperature": 0.5, "max_tokens": 10}},
    }
    out = [json.dumps(wire).encode()]
    data = TESTS / "data" / "convert"
    for name, key in (("openai_history.json", "chat"), ("cline_history.json", "anthropic")):
        path = data / name
        if path.exists():
            doc = json.loads(path.read_text())
            messages = doc.get("messages", doc) if isinstance(doc, dict) else doc
            out.append(json.dumps({key: messages}).encode())
    out.append(json.dumps({
        "gemini": [
            {"role": "user", "parts": [{"text": "Hi"},
                                       {"inlineData": {"mimeType": "image/png", "data": "iVBO"}}]},
            {"role": "model", "parts": [{"text": "t", "thought": True, "thoughtSignature": "s"},
                                        {"functionCall": {"name": "w", "args": {"a": 1}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "w", "response": {"r": 1}}}]},
        ],
        "system": {"parts": [{"text": "Sys"}]},
    }).encode())
    return [o for o in out if len(o) <= MAX * 4]


def _catalog() -> list[bytes]:
    return [
        json.dumps({"object": "list", "data": [
            {"id": "gpt-4o", "object": "model", "context_window": 128000,
             "max_output_tokens": 16384, "capabilities": {"vision": True, "tool_calls": True}},
            {"id": "text-embedding-3", "object": "model"},
        ]}).encode(),
        json.dumps({"models": [
            {"name": "models/gemini-2.5-pro", "displayName": "Gemini", "inputTokenLimit": 1048576,
             "outputTokenLimit": 65536, "supportedGenerationMethods": ["generateContent"],
             "thinking": True},
        ]}).encode(),
        json.dumps(["llama", {"id": "m", "name": "M", "contextWindow": 8192, "maxOutputTokens": 1024,
                              "capabilities": {"toolCalling": True, "imageInput": False}}]).encode(),
    ]


def _config() -> list[bytes]:
    entry = {"name": "local", "format": "chat-completions", "baseUrl": "http://127.0.0.1:8080/v1",
             "models": ["llama", {"id": "m", "contextWindow": 4096}], "apiKeyEnv": "LOCAL_KEY"}
    return [
        json.dumps([entry]).encode(),
        json.dumps({"providers": [entry, {"name": "x", "target": "pkg.mod:factory"}],
                    "secrets": {"local": {"key": "k", "origin": "http://127.0.0.1:8080"}}}).encode(),
        b'[[providers]]\nname = "local"\nformat = "anthropic"\nbaseUrl = "http://127.0.0.1:9/v1"\n'
        b'models = ["claude"]\n',
    ]


def _jsonrpc() -> list[bytes]:
    return [
        _frame({"jsonrpc": "2.0", "id": 7, "method": "echo", "params": {"a": [1, 2]}})
        + _frame({"jsonrpc": "2.0", "method": "note", "params": {}})
        + _frame({"jsonrpc": "2.0", "id": "s", "method": "fail", "params": None}),
        _frame({"jsonrpc": "2.0", "id": 9, "method": "wait"})
        + _frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 9}}),
        _frame({"jsonrpc": "2.0", "id": 1, "result": {"ok": True}})
        + _frame({"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "no"}})
        + b"Content-Length: 5\r\n\r\n{bad}",
        _frame([{"jsonrpc": "2.0", "id": 1, "method": "echo"}]),
    ]


def _sse() -> list[bytes]:
    return [
        b'data: {"a":1}\n\n',
        b"\xef\xbb\xbfevent: x\r\ndata: a\r\ndata: b\r\n\r\n: comment\rid: 7\rretry: 100\r\rdata:c",
        b"event:named\ndata:no space\n\nid: \x00\ndata: x\n\nfield\ndata\n\n",
        "data: caf\u00e9 \u2028 \U0001f600\n\n".encode(),
    ]


def _framing() -> list[bytes]:
    return [
        _frame({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"x": "\u00e9"}})
        + _frame({"jsonrpc": "2.0", "method": "n"}),
        b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
        b"garbage\r\n\r\nContent-Length: 4\r\n\r\nnull",
    ]


def seeds() -> dict[str, list[bytes]]:
    """Seed inputs by target name."""
    bodies = _fixture_bodies()
    out: dict[str, list[bytes]] = {
        "sse": _sse() + [b[:MAX] for b in bodies["chat-completions"][:3]],
        "framing": _framing(),
        "jsonrpc": _jsonrpc(),
        "endpoint": _endpoint(),
        "convert": _convert(),
        "catalog": _catalog(),
        "config": _config(),
    }
    for fmt in ("chat-completions", "responses", "anthropic", "ai-sdk", "gemini"):
        out[f"decode-{fmt}"] = [b[:MAX] for b in bodies[fmt]]
    out["decode-gemini-array"] = [b[:MAX] for b in bodies["gemini-array"]]
    return out


def main() -> None:
    for name, inputs in seeds().items():
        folder = CORPUS / name
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("seed-*"):
            old.unlink()
        for data in inputs:
            (folder / f"seed-{hashlib.sha1(data).hexdigest()[:12]}").write_bytes(data)
        print(f"{name}: {len(inputs)} seeds")


if __name__ == "__main__":
    main()
