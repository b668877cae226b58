"""Endurance: mixed traffic with periodic faults for a given time, then whether the host's
memory, open files, asyncio tasks and connections come back to where they started.

    .venv/bin/python benchmarks/endurance.py --minutes 60      # the long run
    .venv/bin/python benchmarks/endurance.py --minutes 1       # a quick pass

The host runs in this process (``HostServer`` over an in-memory JSON-RPC pair, as the host
tests do), so its tasks can be counted; the "extension" side answers VS Code's part from a
scripted model (:class:`lmbridge.client.testing.FakeBridge`). Upstreams are
:class:`ReplayServer` routes on 127.0.0.1, the Chat Completions one keeping connections alive
for the next request, the Anthropic one closing each after its response. Traffic,
``--concurrency`` at once, until the time is up:

- provider side: ``chat/response`` on ``cc/m`` (Chat Completions) and ``an/m`` (Anthropic)
  whose upstream answers, in turn: a whole stream; an HTTP 500; a stream cut before its end
  (no ``[DONE]`` / ``message_stop``); garbage instead of events; a stream that stalls (no byte
  for longer than the client waits, then closed by cancelling the request); and every
  seventh request is cancelled up to ``--cancel-within`` seconds after it was sent (before
  its connection, during it, or after its first parts);
- endpoint side: streamed Chat Completions, Anthropic Messages and Responses requests on the
  loopback endpoint, one in ten closed by the client after its first chunk.

Before the traffic (after a warm-up) and after it (once the last request ended and the host
had two seconds to settle) it records: resident memory of this process, open file
descriptors, sockets among them, asyncio tasks, the endpoint's open connections, and in the
HTTP pools the connections that are not idle and the requests not yet released. A figure
that stays above its baseline by more than the bound printed next to it is reported as a
leak and the exit status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpcore
import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from load import headers_for, one_request, request_body  # noqa: E402

from lmbridge.client.testing import FakeBridge, fake_model, serve_bridge_over_rpc  # noqa: E402
from lmbridge.host.jsonrpc import JsonRpcConnection, RemoteError  # noqa: E402
from lmbridge.host.server import HostConnection, HostServer  # noqa: E402
from lmbridge.parts import (  # noqa: E402
    ChatMessage,
    ChatRequestOptions,
    TextPart,
    message_to_wire,
    options_to_wire,
)
from support.replay_server import ReplayServer, Reply  # noqa: E402
from support.streams import fixture_body  # noqa: E402

FIXTURES = {
    "cc": ("/cc/v1/chat/completions", "openai-chat/openai-text.chunks.txt", True),
    "an": ("/an/v1/messages", "anthropic/anthropic-text.chunks.txt", False),
}
"""Per upstream: its route, its stream, whether it keeps connections alive (most real
upstreams do; a proxy or a server under load may close each one, which takes the client
through a connection's whole life every request)."""
BOUNDS = {
    "rss_mb": 10.0,
    "tasks": 0,
    "files_not_sockets": 0,
    "upstream_connections": 40,
    "pool_connections_not_idle": 0,
    "pool_requests": 0,
    "endpoint_connections": 0,
    "other_sockets": 0,
}
"""How far above the baseline a figure may end: memory moves with the allocator's pools and
caches filled once (1 MiB after 2 minutes here; a leak of a few hundred bytes per request
passes 10 MiB within the hour's run); each upstream's HTTP pool keeps up to 20 idle
connections (httpx's default; two upstreams), reused by the next request, so the sockets to
the upstreams may stay above their baseline, while the connections the pools hold that are
not idle, and the requests in them, come back to none; everything else comes back exactly."""


def faulty_replies(fixture: str, stall: float, keep_alive: bool) -> list[Reply]:
    body = fixture_body(fixture)
    events = body.split(b"\n\n")
    cut = b"\n\n".join(events[: max(1, len(events) // 2)]) + b"\n\n"
    replies = [
        Reply.fixture(fixture, delay=0.001),
        Reply.error(500),
        Reply.sse(cut, delay=0.001),  # ends before its end event
        Reply.sse(b"data: {not json\n\ndata: \x00\xff\n\n"),
        Reply.sse(events[0] + b"\n\n", hang=True, hang_timeout=stall),  # stalls
    ]
    for reply in replies:
        reply.keep_alive = keep_alive
    return replies


class Cycle:
    """Replies in turn, for ever (ReplayServer repeats the last one)."""

    def __init__(self, upstream: ReplayServer, path: str, replies: list[Reply]) -> None:
        self.replies = replies
        self.n = 0
        upstream.route("POST", path, replies[0], check=self.next)

    def next(self, _rec: Any) -> Reply:
        reply = self.replies[self.n % len(self.replies)]
        self.n += 1
        return reply


def _socket_ports() -> dict[str, tuple[int, int]]:
    """socket inode -> (local port, remote port), for this process's TCP sockets."""
    out = {}
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            local, remote, inode = cols[1], cols[2], cols[9]
            out[inode] = (int(local.rsplit(":", 1)[1], 16), int(remote.rsplit(":", 1)[1], 16))
    return out


def forget(upstream: ReplayServer, bridge: FakeBridge) -> None:
    """Drop what the test doubles record of each request (they live in this process too, and
    would grow with the run as a leak would)."""
    with upstream._lock:
        upstream.requests.clear()
    bridge.requests.clear()
    bridge.selections.clear()


def _pools() -> list[httpcore.AsyncConnectionPool]:
    """Every HTTP connection pool in this process (the host's providers' clients among them)."""
    return [o for o in gc.get_objects() if isinstance(o, httpcore.AsyncConnectionPool)]


def snapshot(upstream_port: int, endpoint_port: int) -> dict[str, float]:
    """This process's figures; the upstream runs in it too, so its sockets are told apart:
    the host's connections to the upstream (its pool) and the endpoint's accepted ones. The
    pools' own figures say what the sockets cannot: a connection counted in use, or a request
    never released, even when its socket is closed."""
    gc.collect()
    pools = _pools()
    fds = os.listdir("/proc/self/fd")
    ports = _socket_ports()
    to_upstream = accepted = other = 0
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if not target.startswith("socket:"):
            continue
        local, remote = ports.get(target[8:-1], (0, 0))
        if remote == upstream_port:
            to_upstream += 1
        elif local == endpoint_port and remote != 0:
            accepted += 1
        elif local != upstream_port:
            other += 1
    rss = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return {
        "rss_mb": round(rss, 1),
        "tasks": len(asyncio.all_tasks()),
        "files_not_sockets": len(fds) - sum(
            1 for fd in fds if _readlink(fd).startswith("socket:")
        ),
        "upstream_connections": to_upstream,
        "pool_connections_not_idle": sum(
            1 for pool in pools for c in pool.connections if not (c.is_idle() or c.is_closed())
        ),
        "pool_requests": sum(len(pool._requests) for pool in pools),
        "endpoint_connections": accepted,
        "other_sockets": other,
    }


def error_kind(message: str) -> str:
    """An error message without its figures (ids, ports, sizes), so that errors of one kind
    are counted together."""
    return re.sub(r"\d+", "N", re.split(r"[:(]", message, maxsplit=1)[0]).strip()


def _readlink(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


async def main(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    upstream = ReplayServer().start()
    for path, fixture, keep_alive in FIXTURES.values():
        Cycle(upstream, path, faulty_replies(fixture, args.stall, keep_alive))
    host: HostConnection
    extension: JsonRpcConnection
    host = HostConnection(lambda data: loop.call_soon(extension.feed, data), name="extension")
    extension = JsonRpcConnection(lambda data: loop.call_soon(host.feed, data), name="host")
    bridge = FakeBridge([fake_model("gpt-4o", vendor="copilot", family="gpt-4o", max_input_tokens=100_000)])
    bridge.script("gpt-4o", lambda _m, _msgs, _o: [TextPart("one "), 0.002, TextPart("two "), 0.002, TextPart("three")])
    serve_bridge_over_rpc(extension, bridge)
    server = HostServer(host)
    extension.on_notification("log", lambda _p: None)
    extension.on_notification("models/changed", lambda _p: None)
    extension.on_notification("chat/parts", lambda _p: None)
    providers = [
        {"name": name, "format": fmt, "baseUrl": f"{upstream.url}/{name}/v1", "models": ["m"],
         "timeout": args.stall / 2}
        for name, fmt in (("cc", "chat-completions"), ("an", "anthropic"))
    ]  # fmt: skip
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as storage:
        await extension.request("initialize", {"clientName": "endurance", "clientVersion": "0"})
        await extension.request(
            "configure",
            {"providers": providers, "secrets": {}, "storagePath": storage,
             "settings": {"endpointEnabled": True, "consumerModel": "vscodelm/auto"}},
        )  # fmt: skip
        await extension.request("models/list", {"silent": True})
        info: dict[str, Any] | None = None
        for _ in range(500):
            files = list(Path(storage).rglob("endpoint.json"))  # noqa: ASYNC240 - a small folder
            if files:
                info = json.loads(files[0].read_text())
                break
            await asyncio.sleep(0.01)
        if info is None:
            print("the endpoint did not start", file=sys.stderr)
            return 2
        base, token = info["url"], info["token"]
        endpoint_port = int(base.rsplit(":", 1)[1])

        async def provider_request(i: int) -> str:
            model = ("cc/m", "an/m")[i // 2 % 2]
            params = {
                "modelId": model,
                "messages": [message_to_wire(ChatMessage.user("hello"))],
                "options": options_to_wire(ChatRequestOptions()),
            }
            ident, fut = extension.send_request("chat/response", params)
            try:
                if i % 7 == 6:
                    # anywhere from before the connection to well into the stream
                    await asyncio.sleep(random.Random(i).uniform(0, args.cancel_within))
                    extension.cancel_request(ident)
                await asyncio.wait_for(asyncio.shield(fut), args.stall * 3)
                return "ok"
            except asyncio.TimeoutError:
                extension.cancel_request(ident)
                return "stalled"
            except RemoteError as exc:
                return f"error {exc.code} {error_kind(exc.message)}"
            except Exception as exc:
                return type(exc).__name__

        async def endpoint_request(client: httpx.AsyncClient, i: int) -> str:
            fmt = ("chat-completions", "anthropic", "responses")[i % 3]
            path = {"chat-completions": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}[fmt]
            out = await one_request(client, base + path, headers_for(fmt, token), fmt, request_body(fmt, "gpt-4o", False), i % 10 == 9)
            return "ok" if out.error is None else f"error {error_kind(out.error)}"

        async def traffic(seconds: float) -> None:
            end = time.monotonic() + seconds
            counter = iter(range(10**9))
            async with httpx.AsyncClient(timeout=60, trust_env=False) as client:

                async def worker() -> None:
                    for i in counter:
                        if time.monotonic() > end:
                            return
                        kind = await (provider_request(i) if i % 2 else endpoint_request(client, i))
                        key = f"{'provider' if i % 2 else 'endpoint'} {kind}"
                        counts[key] = counts.get(key, 0) + 1

                await asyncio.gather(*(worker() for _ in range(args.concurrency)))

        await traffic(min(10.0, args.minutes * 60 / 10))  # warm-up: caches, pools, imports
        await asyncio.sleep(2)
        forget(upstream, bridge)
        before = snapshot(upstream.port, endpoint_port)
        counts.clear()
        t0 = time.monotonic()
        samples = []
        sampler_stop = asyncio.Event()

        async def sample() -> None:
            while not sampler_stop.is_set():
                forget(upstream, bridge)
                samples.append(snapshot(upstream.port, endpoint_port))
                if args.samples:
                    line = {"t": round(time.monotonic() - t0), **samples[-1], **counts}
                    with open(args.samples, "a") as out:  # noqa: ASYNC230 - a line every 10 s
                        out.write(json.dumps(line) + "\n")
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(sampler_stop.wait(), 10)

        sampling = asyncio.ensure_future(sample())
        await traffic(args.minutes * 60)
        sampler_stop.set()
        await sampling
        await asyncio.sleep(2)
        forget(upstream, bridge)
        after = snapshot(upstream.port, endpoint_port)
        wall = time.monotonic() - t0
        await server.aclose()
    host.connection_lost()
    extension.connection_lost()
    upstream.close()
    peak = {k: max(s[k] for s in samples) for k in before} if samples else after
    print(f"{sum(counts.values())} requests in {wall:.0f} s: {json.dumps(dict(sorted(counts.items())))}")
    print(f"{'figure':26} {'baseline':>10} {'peak':>10} {'after':>10} {'bound':>7}")
    leaks = []
    for key in before:
        print(f"{key:26} {before[key]:>10} {peak[key]:>10} {after[key]:>10} {BOUNDS[key]:>7}")
        if after[key] > before[key] + BOUNDS[key]:
            leaks.append(key)
    print("back to baseline" if not leaks else f"NOT back to baseline: {', '.join(leaks)}")
    if args.result:
        result = {"seconds": round(wall), "counts": counts, "before": before, "peak": peak,
                  "after": after, "bounds": BOUNDS, "leaks": leaks}  # fmt: skip
        Path(args.result).write_text(json.dumps(result, indent=1))  # noqa: ASYNC240 - once, at the end
    return 1 if leaks else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--stall", type=float, default=4.0, help="seconds a stalled upstream hangs")
    parser.add_argument(
        "--cancel-within",
        type=float,
        default=0.03,
        help="every seventh chat request is cancelled this many seconds after it was sent, at "
        "most (a delay drawn from the request's number)",
    )
    parser.add_argument("--result", help="write the figures and counts to this file (JSON)")
    parser.add_argument("--samples", help="append each 10 s sample to this file (a JSON line)")
    sys.exit(asyncio.run(main(parser.parse_args())))
