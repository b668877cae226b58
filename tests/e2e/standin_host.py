"""A stand-in for ``python -m lmbridge host``: the bridge protocol over stdio, an echo model.

Used by the end-to-end harness with ``LMBRIDGE_E2E_HOST=standin`` to check the extension and
the harness on their own. It answers like the built-in echo provider for what the e2e plan uses
(``modelOptions.script`` / ``delay``, ``/error <Code>``, tool calls when a tool is named, tool
results, thinking) and ignores its command line (the extension appends ``-c <host bootstrap>``).
Standard library plus ``lmbridge.parts`` only.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import threading
from typing import Any

__all__ = ["main"]

_out_lock = threading.Lock()


def _send(msg: dict[str, Any]) -> None:
    body = json.dumps(msg, ensure_ascii=False).encode("utf-8")
    with _out_lock:
        sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        sys.stdout.buffer.flush()


def _reader(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
    stdin = sys.stdin.buffer
    while True:
        length = None
        while True:
            line = stdin.readline()
            if not line:
                loop.call_soon_threadsafe(queue.put_nowait, None)
                return
            line = line.strip()
            if not line:
                break
            name, _, value = line.decode("ascii").partition(":")
            if name.lower() == "content-length":
                length = int(value)
        if length is None:
            continue
        msg = json.loads(stdin.read(length))
        loop.call_soon_threadsafe(queue.put_nowait, msg)


MODELS = [
    {
        "id": f"echo/{i}",
        "name": f"Echo ({i})",
        "family": "echo",
        "version": "1",
        "maxInputTokens": 32000,
        "maxOutputTokens": 4096,
        "detail": "echo",
        "capabilities": {"imageInput": True, "toolCalling": True},
    }
    for i in ("echo",)
]


class LMError(Exception):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


async def _chat(req_id: Any, params: dict[str, Any]) -> dict[str, Any]:
    mo = (params.get("options") or {}).get("modelOptions") or {}
    tools = (params.get("options") or {}).get("tools") or []
    tool_mode = (params.get("options") or {}).get("toolMode") or 1
    delay = float(mo.get("delay", 0.015))
    messages = params.get("messages") or []
    if params.get("modelId") not in {m["id"] for m in MODELS}:
        raise LMError(f"no model {params.get('modelId')!r}", "NotFound")

    def emit(*parts: dict[str, Any]) -> None:
        _send({"jsonrpc": "2.0", "method": "chat/parts", "params": {"requestId": req_id, "parts": list(parts)}})

    if "script" in mo:
        for p in mo["script"]:
            await asyncio.sleep(delay)
            emit(p)
        return {"usage": {}, "finishReason": "stop"}
    last = messages[-1] if messages else {"content": []}
    text = "".join(p.get("value", "") for p in last["content"] if p.get("kind") == "text").strip()
    m = re.match(r"/error\s+(\w+)\s*(.*)", text)
    if m:
        raise LMError(m.group(2) or f"asked to fail ({m.group(1)})", m.group(1))
    results = [p for p in last["content"] if p.get("kind") == "toolResult"]
    if results:
        answer = " ".join(
            f"Tool result for {r['callId']}: "
            + "".join(c.get("value", "") for c in r["content"] if c.get("kind") == "text")
            for r in results
        )
    else:
        tool = next((t for t in tools if re.search(rf"\b{re.escape(t['name'])}\b", text)), None)
        if tool is None and tool_mode == 2 and tools:
            tool = tools[0]
        if tool is not None:
            emit({"kind": "thinking", "value": f"calling {tool['name']}", "id": "t0"})
            props = (tool.get("inputSchema") or {}).get("properties") or {}
            emit({"kind": "toolCall", "callId": f"call_{len(messages)}_{tool['name']}", "name": tool["name"], "input": dict.fromkeys(props, text)})
            return {"usage": {}, "finishReason": "tool-calls"}
        answer = "You said: " + (text or "(nothing)")
    emit({"kind": "thinking", "value": f"Echoing {len(text)} characters.", "id": "t0"})
    for word in re.findall(r"\S+\s*", answer):
        await asyncio.sleep(delay)
        emit({"kind": "text", "value": word})
    return {"usage": {}, "finishReason": "stop"}


async def _handle(msg: dict[str, Any], tasks: dict[Any, asyncio.Task[Any]]) -> None:
    method, req_id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    try:
        if method == "initialize" or method == "configure":
            result: Any = {"serverVersion": "standin", "vendor": "lmbridge", "providers": [{"name": "echo", "ok": True}]}
            if method == "configure":
                _send({"jsonrpc": "2.0", "method": "models/changed", "params": {}})
        elif method == "models/list":
            result = {"models": MODELS}
        elif method == "chat/response":
            result = await _chat(req_id, params)
        elif method == "tokens/count":
            t = params.get("text")
            s = t if isinstance(t, str) else json.dumps(t)
            result = {"tokens": max(1, len(s) // 4)}
        elif method == "shutdown":
            result = None
        else:
            _send({"jsonrpc": "2.0", "id": req_id, "error": {"code": -32601, "message": f"unknown method {method}"}})
            return
        _send({"jsonrpc": "2.0", "id": req_id, "result": result})
    except asyncio.CancelledError:
        _send({"jsonrpc": "2.0", "id": req_id, "error": {"code": -32800, "message": "cancelled"}})
    except LMError as e:
        _send({"jsonrpc": "2.0", "id": req_id, "error": {"code": -32000, "message": str(e), "data": {"languageModelError": e.code}}})
    finally:
        tasks.pop(req_id, None)


async def _main() -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    threading.Thread(target=_reader, args=(loop, queue), daemon=True).start()
    tasks: dict[Any, asyncio.Task[Any]] = {}
    print(f"standin host pid {os.getpid()}", file=sys.stderr, flush=True)
    while (msg := await queue.get()) is not None:
        method = msg.get("method")
        if method == "exit":
            break
        if method == "$/cancelRequest":
            task = tasks.get((msg.get("params") or {}).get("id"))
            if task:
                task.cancel()
            continue
        if "id" in msg and method:
            tasks[msg["id"]] = asyncio.create_task(_handle(msg, tasks))


def main() -> None:
    """Serve until stdin closes or ``exit`` arrives."""
    asyncio.run(_main())


if __name__ == "__main__":
    main()
