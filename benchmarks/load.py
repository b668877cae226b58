"""Load through the real path: agents on the loopback endpoint of a real VS Code, and VS Code
chat requests through the host, against local upstreams.

One run (about 15 minutes with the defaults on a busy 2-core machine; not part of the test
suite)::

    .venv/bin/python benchmarks/load.py                 # writes docs/benchmarks/load.md
    .venv/bin/python benchmarks/load.py --requests 60 --no-write   # a smoke pass

What runs:

- upstreams: :class:`ReplayServer` (``tests/support/replay_server.py``) on 127.0.0.1 streams
  recorded Chat Completions, Anthropic Messages and Responses answers (text, or a tool call
  when the request offers tools), one SSE event per chunk with ``--delay`` seconds between
  chunks (a model generating);
- VS Code: code-server + headless Chromium as in the end-to-end tests (``tests/e2e/run.js``,
  cache from ``scripts/e2e-setup``), lmbridge with one provider per format on those upstreams
  (``cc/m``, ``an/m``, ``rs/m``) and the loopback endpoint on;
- agents: asyncio + httpx on the endpoint, ``--concurrency`` requests at once, ``--requests``
  in all, cycling through ``/v1/chat/completions``, ``/v1/messages`` and ``/v1/responses`` on
  the model of the same format, one in three with tools (the upstream answers a tool call),
  one in ``--cancel-every`` closed after its first chunk. So each request goes agent ->
  endpoint (host) -> VS Code's ``vscode.lm`` (extension host) -> lmbridge's provider (host) ->
  upstream and back;
- overhead: the same request sent sequentially straight to the upstream and through the
  endpoint, ``--rounds`` rounds of ``--per-round`` each; the medians per round, then the median
  of the rounds: time to first byte and total time, and the difference (what lmbridge adds);
- provider side: a Python client (:class:`lmbridge.host.client.HostClient`, the extension's
  protocol) drives a host process of its own with the same providers at the same concurrency
  (``chat/response`` on ``cc/m``, ``an/m``, ``rs/m``, tools and cancellations as above). It
  stands in for VS Code's chat requests: through VS Code each would also cross the workbench,
  which the endpoint figures above already include;
- memory: the resident set of the host and of the extension host (found below the run's
  process) at the start of the load, its peak (sampled every 0.2 s) and after it; for the
  provider-side host the same.

Figures go to docs/benchmarks/load.md (``--no-write``: print only) and the raw numbers to
``e2e-out/load/result.json``. ``--overhead-only`` measures the overhead and stops (no load, no
provider side, nothing written to docs/).

Where the time goes (``--hops``, which implies ``--overhead-only``)::

    .venv/bin/python benchmarks/load.py --hops          # writes docs/benchmarks/hops.md

runs VS Code with ``LMBRIDGE_TIMING`` set (:mod:`lmbridge.timing`: the host and the extension
host each log a line with a monotonic timestamp at every hop of a request), sends
``--hop-requests`` sequential requests per API through the endpoint after the overhead rounds,
and reads the log back: for each request the first time each event happened, as milliseconds
after the agent sent it (the upstream's arrival is taken in this process), then the median per
event and per API, and the time between consecutive events (what each hop costs).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.replay_server import RecordedRequest, ReplayServer, Reply  # noqa: E402
from support.vscode_run import wait_for_endpoint_file  # noqa: E402

OUT = ROOT / "docs" / "benchmarks" / "load.md"
HOPS_OUT = ROOT / "docs" / "benchmarks" / "hops.md"
TIMING_ENV = "LMBRIDGE_TIMING"  # lmbridge.timing.ENV
RUN_DIR = ROOT / "e2e-out" / "load"
CACHE = Path(os.environ.get("LMBRIDGE_E2E_CACHE") or Path.home() / ".cache/lmbridge-e2e")

# format -> (provider name, upstream path, endpoint path, text fixture, tool fixture)
APIS: dict[str, tuple[str, str, str, str, str]] = {
    "chat-completions": (
        "cc",
        "/cc/v1/chat/completions",
        "/v1/chat/completions",
        "openai-chat/openai-text.chunks.txt",
        "groq/groq-tool-call.chunks.txt",
    ),
    "anthropic": (
        "an",
        "/an/v1/messages",
        "/v1/messages",
        "anthropic/anthropic-text.chunks.txt",
        "anthropic/anthropic-json-tool.1.chunks.txt",
    ),
    "responses": (
        "rs",
        "/rs/v1/responses",
        "/v1/responses",
        "llama-cpp/responses-text.chunks.txt",
        "open-responses/lmstudio-tool-call.1.chunks.txt",
    ),
}
TOOL = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def request_body(fmt: str, model: str, tools: bool, stream: bool = True) -> dict[str, Any]:
    """An agent's request in the API of ``fmt``."""
    text = "What is the weather in Paris? Answer in one sentence."
    if fmt == "chat-completions":
        body: dict[str, Any] = {"model": model, "stream": stream, "messages": [{"role": "user", "content": text}]}
        if tools:
            body["tools"] = [{"type": "function", "function": {"name": "weather", "parameters": TOOL}}]
        return body
    if fmt == "anthropic":
        body = {"model": model, "max_tokens": 256, "stream": stream, "messages": [{"role": "user", "content": text}]}
        if tools:
            body["tools"] = [{"name": "weather", "description": "Weather", "input_schema": TOOL}]
        return body
    body = {"model": model, "stream": stream, "input": text}
    if tools:
        body["tools"] = [{"type": "function", "name": "weather", "parameters": TOOL}]
    return body


def now_ms() -> float:
    """The monotonic clock lmbridge's timing log uses (:mod:`lmbridge.timing`), in ms."""
    return time.monotonic_ns() / 1e6


def start_upstream(delay: float, arrivals: list[float] | None = None) -> ReplayServer:
    """The three upstreams: a tool call when the request offers tools, else text.
    ``arrivals`` gets the time (:func:`now_ms`) each request arrived."""
    upstream = ReplayServer().start()
    for _fmt, (_name, path, _ep, text, tool) in APIS.items():
        text_reply = Reply.fixture(text, delay=delay)
        tool_reply = Reply.fixture(tool, delay=delay)

        def check(rec: RecordedRequest, tool_reply: Reply = tool_reply) -> Reply | None:
            if arrivals is not None:
                arrivals.append(now_ms())
            return tool_reply if b'"tools"' in rec.body else None

        upstream.route("POST", path, text_reply, check=check)
    return upstream


def provider_entries(url: str) -> list[dict[str, Any]]:
    return [
        {"name": name, "format": fmt, "baseUrl": f"{url}/{name}/v1", "models": ["m"]}
        for fmt, (name, *_rest) in APIS.items()
    ]


# --------------------------------------------------------------------------- processes, memory


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def rss_mb(pid: int) -> float | None:
    """Resident set size in MiB (``None`` once the process is gone)."""
    try:
        for line in (Path("/proc") / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def open_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def find_processes(root: int) -> dict[str, int]:
    """The extension host and lmbridge's host among ``root``'s descendants."""
    tree = _children()
    found: dict[str, int] = {}
    stack = [root]
    while stack:
        pid = stack.pop()
        stack.extend(tree.get(pid, []))
        cmd = _cmdline(pid)
        if "extensionHost" in cmd and "node" in cmd.split(" ", 1)[0]:
            found.setdefault("extension host", pid)
        elif "python" in cmd.split(" ", 1)[0] and "lmbridge" in cmd:
            found.setdefault("host", pid)
    return found


class MemorySampler:
    """Samples the RSS of some processes every ``every`` seconds in a thread."""

    def __init__(self, pids: dict[str, int], every: float = 0.2) -> None:
        self.pids = pids
        self.every = every
        self.samples: dict[str, list[float]] = {name: [] for name in pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def sample(self) -> dict[str, float]:
        now = {}
        for name, pid in self.pids.items():
            value = rss_mb(pid)
            if value is not None:
                self.samples[name].append(value)
                now[name] = value
        return now

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def peak(self, name: str) -> float:
        return max(self.samples[name], default=0.0)


# --------------------------------------------------------------------------- the agents


@dataclass
class Outcome:
    """One request's figures."""

    api: str
    tools: bool
    cancelled: bool
    ttfb: float | None = None
    total: float | None = None
    error: str | None = None
    events: int = 0


@dataclass
class LoadResult:
    outcomes: list[Outcome] = field(default_factory=list)
    wall: float = 0.0

    def errors(self) -> list[str]:
        return [f"{o.api}: {o.error}" for o in self.outcomes if o.error]

    def summary(self) -> dict[str, Any]:
        done = [o for o in self.outcomes if not o.error]
        ttfb = sorted(o.ttfb for o in done if o.ttfb is not None)
        total = sorted(o.total for o in done if o.total is not None and not o.cancelled)
        return {
            "requests": len(self.outcomes),
            "errors": len(self.outcomes) - len(done),
            "cancelled": sum(o.cancelled for o in self.outcomes),
            "tools": sum(o.tools for o in self.outcomes),
            "wall_s": round(self.wall, 2),
            "requests_per_s": round(len(self.outcomes) / self.wall, 1) if self.wall else 0,
            "ttfb_p50_ms": round(pct(ttfb, 50) * 1000, 1),
            "ttfb_p99_ms": round(pct(ttfb, 99) * 1000, 1),
            "total_p50_ms": round(pct(total, 50) * 1000, 1),
            "total_p99_ms": round(pct(total, 99) * 1000, 1),
            "by_api": {api: sum(o.api == api for o in self.outcomes) for api in APIS},
        }


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, round(p / 100 * len(values) + 0.5) - 1))
    return values[k]


def _stream_error(fmt: str, line: bytes) -> str | None:
    """An error event in an answer that started with 200."""
    if fmt == "chat-completions" and line.startswith(b'data: {"error"'):
        return line.decode(errors="replace")[:200]
    if line.startswith(b"event: error") or line.startswith(b'data: {"type":"error"'):
        return line.decode(errors="replace")[:200]
    if fmt == "responses" and b'"type":"response.failed"' in line:
        return line.decode(errors="replace")[:200]
    return None


async def one_request(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], fmt: str, body: dict[str, Any], cancel: bool
) -> Outcome:
    out = Outcome(fmt, "tools" in body, cancel)
    t0 = time.perf_counter()
    try:
        async with client.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                out.error = f"HTTP {response.status_code}: {response.text[:200]}"
                return out
            async for line in response.aiter_lines():
                if out.ttfb is None and line:
                    out.ttfb = time.perf_counter() - t0
                    if cancel:
                        break  # the client goes away after the first chunk
                problem = _stream_error(fmt, line.encode())
                if problem:
                    out.error = problem
                out.events += line.startswith("data:")
        out.total = time.perf_counter() - t0
        if not cancel and out.events == 0 and out.error is None:
            out.error = "an empty stream"
    except (httpx.HTTPError, OSError) as exc:
        out.error = f"{type(exc).__name__}: {exc}"
    return out


def headers_for(fmt: str, token: str) -> dict[str, str]:
    if fmt == "anthropic":
        return {"x-api-key": token, "anthropic-version": "2023-06-01"}
    return {"authorization": f"Bearer {token}"}


async def load(
    base: str, token: str, requests: int, concurrency: int, cancel_every: int
) -> LoadResult:
    """``requests`` streamed requests on the endpoint, ``concurrency`` at once."""
    result = LoadResult()
    formats = list(APIS)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=120, limits=limits, trust_env=False) as client:
        counter = iter(range(requests))

        async def worker() -> None:
            for i in counter:
                fmt = formats[i % 3]
                name, _up, ep, _t, _tool = APIS[fmt]
                body = request_body(fmt, f"{name}/m", tools=(i // 3) % 3 == 0)
                cancel = cancel_every > 0 and i % cancel_every == cancel_every - 1
                result.outcomes.append(await one_request(client, base + ep, headers_for(fmt, token), fmt, body, cancel))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        result.wall = time.perf_counter() - t0
    return result


async def overhead(base: str, token: str, upstream: str, rounds: int, per_round: int) -> dict[str, Any]:
    """Sequential requests, straight to the upstream and through the endpoint, per format."""
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
        for fmt, (name, up_path, ep_path, _t, _tool) in APIS.items():
            rows: dict[str, list[tuple[float, float]]] = {"direct": [], "lmbridge": []}
            for _ in range(rounds):
                for which in ("direct", "lmbridge"):
                    ttfbs, totals = [], []
                    for _ in range(per_round):
                        if which == "direct":
                            r = await one_request(client, upstream + up_path, {}, fmt, request_body(fmt, "m", False), False)
                        else:
                            r = await one_request(client, base + ep_path, headers_for(fmt, token), fmt, request_body(fmt, f"{name}/m", False), False)
                        if r.error or r.ttfb is None or r.total is None:
                            raise RuntimeError(f"{which} {fmt}: {r.error}")
                        ttfbs.append(r.ttfb)
                        totals.append(r.total)
                    rows[which].append((statistics.median(ttfbs), statistics.median(totals)))
            med = {k: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v)) for k, v in rows.items()}
            out[fmt] = {
                "direct_ttfb_ms": round(med["direct"][0] * 1000, 2),
                "direct_total_ms": round(med["direct"][1] * 1000, 2),
                "lmbridge_ttfb_ms": round(med["lmbridge"][0] * 1000, 2),
                "lmbridge_total_ms": round(med["lmbridge"][1] * 1000, 2),
                "added_ttfb_ms": round((med["lmbridge"][0] - med["direct"][0]) * 1000, 2),
                "added_total_ms": round((med["lmbridge"][1] - med["direct"][1]) * 1000, 2),
            }
    return out


# --------------------------------------------------------------------------- hops

# The events of one streamed request in the order it meets them (lmbridge.timing's names; the
# agent's and the upstream's are taken here), each with what the step up to it is.
HOP_EVENTS: list[tuple[str, str]] = [
    ("endpoint.request", "agent -> endpoint: HTTP request read (host)"),
    ("ext.select", "host -> extension host: lm/selectChatModels sent and read"),
    ("ext.selected", "extension host: vscode.lm.selectChatModels"),
    ("endpoint.resolved", "extension host -> host: the model list back, model resolved"),
    ("endpoint.lm_send", "host: guard, conversion, lm/sendRequest sent"),
    ("ext.lm_send", "host -> extension host: lm/sendRequest read"),
    ("ext.model", "extension host: the model found (vscode.lm.selectChatModels by id)"),
    ("ext.provide", "VS Code: model.sendRequest -> workbench -> lmbridge's provider"),
    ("host.chat", "extension host -> host: chat/response read"),
    ("host.respond", "host: provider request prepared (context check, estimate)"),
    ("upstream.request", "host -> upstream: HTTP request arrives"),
    ("host.part", "upstream -> host: first part decoded"),
    ("host.chat_parts", "host: first chat/parts notification sent"),
    ("ext.chat_parts", "host -> extension host: chat/parts read, progress.report"),
    ("ext.lm_parts", "VS Code: progress -> workbench -> the consumer's stream, lm/parts sent"),
    ("endpoint.lm_parts", "extension host -> host: lm/parts read"),
    ("endpoint.first_byte", "host: the endpoint writes the first chunk"),
    ("agent.first_byte", "endpoint -> agent: first chunk read"),
]
# The stream's end: the last of each (the whole answer crossing every hop).
HOP_END_EVENTS: list[tuple[str, str]] = [
    ("host.chat_parts", "host: last chat/parts sent"),
    ("ext.chat_parts", "extension host: last chat/parts read"),
    ("ext.lm_parts", "extension host: last lm/parts sent"),
    ("endpoint.lm_parts", "host: last lm/parts read"),
    ("endpoint.end", "host: the endpoint wrote the end"),
    ("agent.end", "agent: the answer read to its end"),
]


def read_timing(path: Path) -> list[tuple[float, str, dict[str, Any]]]:
    """The timing log's lines as ``(t, event, line)``, in time order."""
    out = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            out.append((float(row["t"]), str(row["at"]), row))
    out.sort(key=lambda r: r[0])
    return out


def hop_figures(
    sent: list[tuple[float, float, float]], events: list[tuple[float, str, dict[str, Any]]]
) -> dict[str, Any]:
    """Per request (``(sent, first byte, end)`` times), each event's first and last time after
    the request was sent, within its window (up to the next request); the medians of those."""
    firsts: dict[str, list[float]] = {}
    lasts: dict[str, list[float]] = {}
    counts: dict[str, list[int]] = {}
    for i, (t0, first_byte, end) in enumerate(sent):
        t1 = sent[i + 1][0] if i + 1 < len(sent) else float("inf")
        seen: dict[str, list[float]] = {"agent.first_byte": [first_byte], "agent.end": [end]}
        for t, at, _row in events:
            if t0 <= t < t1:
                seen.setdefault(at, []).append(t)
        for at, times in seen.items():
            firsts.setdefault(at, []).append(times[0] - t0)
            lasts.setdefault(at, []).append(times[-1] - t0)
            counts.setdefault(at, []).append(len(times))
    med = statistics.median
    return {
        "requests": len(sent),
        "first_ms": {at: round(med(v), 2) for at, v in firsts.items()},
        "last_ms": {at: round(med(v), 2) for at, v in lasts.items()},
        "count": {at: med(v) for at, v in counts.items()},
    }


async def hops(
    base: str, token: str, per_api: int, timing: Path, arrivals: list[float]
) -> dict[str, Any]:
    """``per_api`` sequential streamed requests per API through the endpoint, timed per hop."""
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
        for fmt, (name, _up, ep_path, _t, _tool) in APIS.items():
            sent: list[tuple[float, float, float]] = []
            for _ in range(per_api):
                t0 = now_ms()
                r = await one_request(client, base + ep_path, headers_for(fmt, token), fmt, request_body(fmt, f"{name}/m", False), False)
                if r.error or r.ttfb is None or r.total is None:
                    raise RuntimeError(f"hops {fmt}: {r.error}")
                sent.append((t0, t0 + r.ttfb * 1000, t0 + r.total * 1000))
            await asyncio.sleep(0.5)  # the last lines reach the log
            events = read_timing(timing) + [(t, "upstream.request", {}) for t in arrivals]
            events.sort(key=lambda e: e[0])
            out[fmt] = hop_figures(sent, events)
    return out


# --------------------------------------------------------------------------- provider side


async def provider_side(upstream: str, requests: int, concurrency: int, cancel_every: int) -> dict[str, Any]:
    """``chat/response`` requests straight to a host process over JSON-RPC."""
    from lmbridge.host.client import HostClient
    from lmbridge.parts import ChatMessage, ChatRequestOptions, ChatTool

    config = {"providers": provider_entries(upstream)}
    tool = ChatTool("weather", "Weather", TOOL)
    result = LoadResult()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "providers.json"
        path.write_text(json.dumps(config))
        async with HostClient.start(["--config", str(path), "--log-level", "warning"]) as host:
            await host.initialize()
            await host.request("models/list", {"silent": True})
            pid = host.process.pid if hasattr(host, "process") else None
            pids = {"host": pid} if pid else {}
            sampler = MemorySampler(pids)
            start = sampler.sample()
            fds0 = open_fds(pid) if pid else None
            counter = iter(range(requests))
            formats = list(APIS)

            async def worker() -> None:
                for i in counter:
                    fmt = formats[i % 3]
                    name = APIS[fmt][0]
                    tools = (i // 3) % 3 == 0
                    cancel = cancel_every > 0 and i % cancel_every == cancel_every - 1
                    out = Outcome(fmt, tools, cancel)
                    options = ChatRequestOptions(tools=[tool] if tools else [])
                    t0 = time.perf_counter()
                    first: asyncio.Future[float] = asyncio.get_running_loop().create_future()

                    def on_parts(parts: Any, first: asyncio.Future[float] = first) -> None:
                        if not first.done():
                            first.set_result(time.perf_counter())

                    call = host.start_chat(f"{name}/m", [ChatMessage.user("What is the weather?")], options, on_parts)
                    try:
                        if cancel:
                            await asyncio.wait_for(asyncio.shield(first), 60)
                            host.cancel(call)
                            try:
                                await call.result()
                            except Exception as exc:
                                if "cancel" not in str(exc).lower():
                                    out.error = f"{type(exc).__name__}: {exc}"
                        else:
                            await call.result()
                            if not call.parts:
                                out.error = "no parts"
                        out.total = time.perf_counter() - t0
                        if first.done():
                            out.ttfb = first.result() - t0
                    except Exception as exc:
                        out.error = f"{type(exc).__name__}: {exc}"
                    result.outcomes.append(out)

            with sampler:
                t0 = time.perf_counter()
                await asyncio.gather(*(worker() for _ in range(concurrency)))
                result.wall = time.perf_counter() - t0
            await asyncio.sleep(2)
            end = sampler.sample()
            fds1 = open_fds(pid) if pid else None
            peak = sampler.peak("host") if pid else 0.0
    summary = result.summary()
    summary["memory_mb"] = {"host": [round(start.get("host", 0), 1), round(peak, 1), round(end.get("host", 0), 1)]}
    summary["open_files"] = [fds0, fds1]
    summary["error_samples"] = result.errors()[:5]
    return summary


# --------------------------------------------------------------------------- the VS Code run


@contextlib.contextmanager
def vscode_with_endpoint(
    run_dir: Path, upstream: ReplayServer, budget: float, *, timing: Path | None = None, **consumer: Any
) -> Iterator[tuple[int, str, str]]:
    """A real VS Code (``tests/e2e/run.js``) in ``run_dir`` with one provider per format on
    ``upstream`` and the loopback endpoint on, until the block ends: its runner's pid, the
    endpoint's URL and token. ``consumer`` goes into the driver's consumer phase; ``timing``
    turns the timing log on (:mod:`lmbridge.timing`) into that file."""
    env_file = CACHE / "env.json"
    if not env_file.is_file():
        sys.exit(f"{env_file} is missing: run scripts/e2e-setup first")
    node = json.loads(env_file.read_text())["node"]
    import shutil

    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    app_out, done = run_dir / "app.json", run_dir / "load-done.json"
    app_out.write_text(json.dumps({"final": True}))  # no app: the driver waits for `done`
    budget_ms = int(budget * 1000)
    plan = {
        "selector": {"vendor": "lmbridge"},
        "waitForHostMs": 30000,
        "waitForModels": ["cc/m", "an/m", "rs/m"],
        "cases": [],
        "consumer": {"model": "vscodelm/auto", "apps": [], "out": str(app_out), "endpointDone": str(done), "timeoutMs": budget_ms, **consumer},
    }
    settings = {
        "lmbridge.pythonCommand": sys.executable,
        "lmbridge.logLevel": "info",
        "lmbridge.providers": provider_entries(upstream.url),
    }
    (run_dir / "plan.json").write_text(json.dumps(plan, indent=1))
    (run_dir / "settings.in.json").write_text(json.dumps(settings, indent=1))
    env = dict(os.environ, LMBRIDGE_E2E_TIMEOUT_MS=str(budget_ms + 120_000))
    env.pop(TIMING_ENV, None)
    if timing is not None:
        env[TIMING_ENV] = str(timing)
    runner_log = (run_dir / "runner.log").open("wb")
    proc = subprocess.Popen(
        [node, str(ROOT / "tests" / "e2e" / "run.js"), "--run-dir", str(run_dir), "--plan", str(run_dir / "plan.json"), "--settings", str(run_dir / "settings.in.json")],
        stdout=runner_log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        _, info = wait_for_endpoint_file(run_dir, 300)
        yield proc.pid, info["url"], info["token"]
    finally:
        done.write_text(json.dumps({"done": True}))
        try:
            proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        runner_log.close()


def load_average() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages (other work on it shows here)."""
    return [round(x, 1) for x in os.getloadavg()]


def machine_load(result: dict[str, Any]) -> str:
    """What the doc says of the machine's load during the run (when the run noted it)."""
    loads = result.get("load_avg")
    if not loads:
        return ""
    return f" Load average (1 min) at the start and the end of the run: {loads[0][0]} and {loads[1][0]}."


def run(args: argparse.Namespace) -> dict[str, Any]:
    loads = [load_average()]
    arrivals: list[float] = []
    upstream = start_upstream(args.delay, arrivals if args.hops else None)
    timing = RUN_DIR / "timing.jsonl" if args.hops else None
    try:
        with vscode_with_endpoint(RUN_DIR, upstream, args.budget, timing=timing) as (pid, base, token):
            result = drive(pid, base, token, upstream, args, arrivals)
    finally:
        upstream.close()
    if not args.overhead_only:
        result["provider"] = asyncio.run(provider_side_with_upstream(args))
    result["load_avg"] = [*loads, load_average()]
    return result


async def provider_side_with_upstream(args: argparse.Namespace) -> dict[str, Any]:
    upstream = start_upstream(args.delay)
    try:
        return await provider_side(upstream.url, args.requests, args.concurrency, args.cancel_every)
    finally:
        upstream.close()


def drive(
    root_pid: int, base: str, token: str, upstream: ReplayServer, args: argparse.Namespace, arrivals: list[float]
) -> dict[str, Any]:
    print(f"endpoint {base}; warming up", flush=True)
    warm = asyncio.run(load(base, token, 30, 3, 0))
    if warm.errors():
        raise RuntimeError(f"warm-up failed: {warm.errors()[:3]}")
    pids = find_processes(root_pid)
    print(f"processes {pids}; overhead", flush=True)
    over = asyncio.run(overhead(base, token, upstream.url, args.rounds, args.per_round))
    print(json.dumps(over), flush=True)
    if args.hops:
        print(f"hops: {args.hop_requests} requests per API", flush=True)
        arrivals.clear()
        figures = asyncio.run(hops(base, token, args.hop_requests, RUN_DIR / "timing.jsonl", arrivals))
        return {"overhead": over, "hops": figures}
    if args.overhead_only:
        return {"overhead": over}
    sampler = MemorySampler(pids)
    start = sampler.sample()
    fds0 = {name: open_fds(pid) for name, pid in pids.items()}
    print(f"load: {args.requests} requests, {args.concurrency} at once", flush=True)
    with sampler:
        res = asyncio.run(load(base, token, args.requests, args.concurrency, args.cancel_every))
    time.sleep(3)  # the cancelled requests' clean-up
    end = sampler.sample()
    fds1 = {name: open_fds(pid) for name, pid in pids.items()}
    summary = res.summary()
    summary["memory_mb"] = {name: [round(start.get(name, 0), 1), round(sampler.peak(name), 1), round(end.get(name, 0), 1)] for name in pids}
    summary["open_files"] = {name: [fds0[name], fds1[name]] for name in pids}
    summary["error_samples"] = res.errors()[:5]
    summary["upstream_requests"] = len(upstream.requests)
    print(json.dumps(summary), flush=True)
    return {"endpoint": summary, "overhead": over}


def heap_section() -> list[str]:
    """The extension host's heap after a full collection, as ``benchmarks/load_memory.py``
    last wrote it into the memory section (a run of this benchmark keeps it)."""
    begin, end = "<!-- extension-heap:begin", "<!-- extension-heap:end -->"
    doc = OUT.read_text() if OUT.is_file() else ""
    if begin not in doc or end not in doc:
        return []
    return ["", *(begin + doc.split(begin, 1)[1].split(end, 1)[0] + end).splitlines()]


def write_doc(result: dict[str, Any], args: argparse.Namespace) -> str:
    ep, pv, over = result["endpoint"], result["provider"], result["overhead"]
    lines = [
        "# Load through the real path",
        "",
        "Generated by `benchmarks/load.py` (run: `.venv/bin/python benchmarks/load.py`, about 15",
        "minutes; `--requests 60 --no-write` is a smoke pass). The module docstring has the method.",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs shared with other work, Python "
        f"{platform.python_version()}; VS Code is code-server with headless Chromium (the e2e harness)."
        + machine_load(result),
        "",
        f"Upstreams: recorded streams replayed on 127.0.0.1, one SSE event per chunk, {args.delay * 1000:g} ms "
        "between chunks. The agents' mix: Chat Completions, Anthropic Messages and Responses in turn, "
        f"one request in three with a tool (answered with a tool call), one in {args.cancel_every} "
        "closed by the client after its first chunk.",
        "",
        "## Time lmbridge adds (sequential requests, no load)",
        "",
        f"The same request straight to the upstream and through the endpoint (agent -> endpoint -> "
        f"VS Code -> lmbridge's provider -> upstream), {args.rounds} rounds of {args.per_round}; "
        "median per round, then the median of the rounds.",
        "",
        "| API | direct TTFB (ms) | through lmbridge TTFB (ms) | added TTFB (ms) | direct total (ms) | through total (ms) | added total (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for fmt, row in over.items():
        lines.append(
            f"| {fmt} | {row['direct_ttfb_ms']} | {row['lmbridge_ttfb_ms']} | **{row['added_ttfb_ms']}** | "
            f"{row['direct_total_ms']} | {row['lmbridge_total_ms']} | **{row['added_total_ms']}** |"
        )
    lines += baseline_lines(over, args)

    def mem(m: dict[str, list[float]]) -> list[str]:
        return [f"- {name}: {a} MiB at the start, {b} MiB at the peak, {c} MiB after the run" for name, (a, b, c) in m.items()]

    lines += [
        "",
        f"## Agents on the endpoint under load ({args.concurrency} at once)",
        "",
        "| requests | errors | cancelled | with tools | wall (s) | requests/s | TTFB p50 (ms) | TTFB p99 (ms) | total p50 (ms) | total p99 (ms) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {ep['requests']} | {ep['errors']} | {ep['cancelled']} | {ep['tools']} | {ep['wall_s']} | {ep['requests_per_s']} | "
        f"{ep['ttfb_p50_ms']} | {ep['ttfb_p99_ms']} | {ep['total_p50_ms']} | {ep['total_p99_ms']} |",
        "",
        "Memory (resident set):",
        "",
        *mem(ep["memory_mb"]),
        f"- open files (start, end): {ep['open_files']}",
        *heap_section(),
        "",
        f"## Provider side: chat requests straight to a host ({args.concurrency} at once)",
        "",
        "A Python client speaking the extension's protocol to a host process of its own (see the "
        "method); time to the first part and to the answer of `chat/response`.",
        "",
        "| requests | errors | cancelled | with tools | wall (s) | requests/s | first part p50 (ms) | first part p99 (ms) | total p50 (ms) | total p99 (ms) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {pv['requests']} | {pv['errors']} | {pv['cancelled']} | {pv['tools']} | {pv['wall_s']} | {pv['requests_per_s']} | "
        f"{pv['ttfb_p50_ms']} | {pv['ttfb_p99_ms']} | {pv['total_p50_ms']} | {pv['total_p99_ms']} |",
        "",
        *mem(pv["memory_mb"]),
        f"- open files (start, end): {pv['open_files']}",
        "",
        "## Reading the figures",
        "",
        "- Every endpoint request crosses VS Code twice (the endpoint asks `vscode.lm`, which "
        "calls lmbridge's provider) and, in code-server, VS Code's workbench runs in the browser: "
        "each part goes host -> extension host -> workbench -> extension host -> host. The "
        "provider-side figures are the host's own share (the Python client decodes every part "
        "as the extension would); the difference is VS Code's path. "
        "[hops.md](hops.md) (`--hops`) times each hop of one request: what is left is VS Code's "
        "`model.sendRequest` reaching the provider (about 5 ms), the host's upstream request and "
        "the upstream's events before its first text part, and each send of parts through the "
        "workbench (about 7 ms here; the provider asks for one at most every 20 ms after the "
        "first).",
        "- The host's memory stays within a few MiB of its start and its open files come back "
        "(the open files a provider-side host ends with above its start are its HTTP pool's idle "
        "connections to the upstreams, one per provider). The extension host's resident set is read 3 s after the load "
        "without a forced collection: V8 keeps the pages its heap grew to, so the figure bounds "
        "what the process holds and cannot tell garbage from a leak; its heap after a full "
        "collection, round after round, is in \"The extension host's heap after a full collection\" "
        "(`benchmarks/load_memory.py`); `benchmarks/endurance.py` checks the host's figures over a long run.",
        "- The machine's load (other work on the same 2 cores) is in every figure: read the "
        "differences between the columns of one run, not the absolute times.",
        "",
    ]
    return "\n".join(lines)


def read_baseline(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--baseline``: the figures of an earlier version, measured the same way on this machine."""
    if not args.baseline:
        return None
    data: dict[str, Any] = json.loads(Path(args.baseline).read_text())
    return data


def baseline_lines(over: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """The overhead before -> after, when ``--baseline`` names an earlier run's figures."""
    base = read_baseline(args)
    if base is None or "overhead" not in base:
        return []
    lines = [
        "",
        f"Before -> after: {base['what']}, measured the same way ({base['how']}) on this machine "
        f"shortly before; added time, median ms:",
        "",
        "| API | added TTFB before | added TTFB after | added total before | added total after |",
        "|---|---:|---:|---:|---:|",
    ]
    for fmt, row in over.items():
        old = base["overhead"].get(fmt)
        if old is None:
            continue
        lines.append(
            f"| {fmt} | {old['added_ttfb_ms']} | **{row['added_ttfb_ms']}** | "
            f"{old['added_total_ms']} | **{row['added_total_ms']}** |"
        )
    return lines


def write_hops_doc(result: dict[str, Any], args: argparse.Namespace) -> str:
    over, figures = result["overhead"], result["hops"]
    apis = list(figures)
    base = read_baseline(args)
    before: dict[str, Any] = (base or {}).get("hops", {})
    lines = [
        "# Where a request's time goes, hop by hop",
        "",
        "Generated by `benchmarks/load.py --hops` (about 6 minutes; the module docstring has the "
        f"method). Machine: {platform.machine()}, {os.cpu_count()} CPUs shared with other work, "
        f"Python {platform.python_version()}; VS Code is code-server with headless Chromium (the "
        "e2e harness). The upstreams are local (recorded streams, "
        f"{args.delay * 1000:g} ms between chunks)." + machine_load(result),
        "",
        f"{args.hop_requests} sequential streamed requests per API (text, no tools) through the "
        "endpoint, with the timing log on (`LMBRIDGE_TIMING`, `lmbridge/timing.py` and "
        "`extension/src/timing.ts`): the host and the extension host write a line with a "
        "monotonic timestamp at each hop. For each event, the median time after the agent "
        "sent the request (ms), and in brackets the step from the row above (what that hop "
        "costs). `—`: the request did not pass there."
        + (
            f" Each API has two columns: before ({base['what']}, measured the same way on this "
            "machine shortly before) and after."
            if before
            else ""
        ),
        "",
    ]
    # (label, figures) per column: before and after each API when a baseline is given
    columns: list[tuple[str, dict[str, Any]]] = []
    for api in apis:
        if api in before:
            columns.append((f"{api} before", before[api]))
        columns.append((f"{api} after" if api in before else api, figures[api]))
    head = ["| event | step | " + " | ".join(c for c, _ in columns) + " |", "|---|---|" + "---:|" * len(columns)]
    lines += ["## To the first byte", "", *head]

    def rows(events: list[tuple[str, str]], key: str) -> list[str]:
        out = []
        prev: list[float | None] = [None] * len(columns)
        for at, what in events:
            cells = []
            for i, (_label, fig) in enumerate(columns):
                value = fig[key].get(at)
                if value is None:
                    cells.append("—")
                    continue
                last = prev[i]
                step = f" ({value - last:+.2f})" if last is not None else ""
                cells.append(f"{value:.2f}{step}")
                prev[i] = value
            out.append(f"| `{at}` | {what} | " + " | ".join(cells) + " |")
        return out

    lines += rows(HOP_EVENTS, "first_ms")
    lines += [
        "",
        "## To the end of the stream",
        "",
        "The last of each event, ms after the request was sent; the parts notifications per request "
        "in the last rows show how the stream was batched on each side.",
        "",
        *head,
    ]
    lines += rows(HOP_END_EVENTS, "last_ms")
    for at in ("host.chat_parts", "ext.chat_parts", "ext.lm_parts", "endpoint.lm_parts"):
        lines.append(
            f"| `{at}` | notifications per request | "
            + " | ".join(f"{fig['count'].get(at, 0):g}" for _, fig in columns)
            + " |"
        )
    lines += [
        "",
        "## The same requests without the endpoint",
        "",
        "The overhead rounds of the same run (timing log on: its writes are in these figures), "
        "as in [load.md](load.md):",
        "",
        "| API | direct TTFB (ms) | added TTFB (ms) | direct total (ms) | added total (ms) |",
        "|---|---:|---:|---:|---:|",
    ]
    for fmt, row in over.items():
        lines.append(
            f"| {fmt} | {row['direct_ttfb_ms']} | {row['added_ttfb_ms']} | "
            f"{row['direct_total_ms']} | {row['added_total_ms']} |"
        )
    if before:
        lines += [
            "",
            "And before, in its run:",
            "",
            "| API | direct TTFB (ms) | added TTFB (ms) | direct total (ms) | added total (ms) |",
            "|---|---:|---:|---:|---:|",
        ]
        for fmt, row in (base or {}).get("hops_overhead", {}).items():
            lines.append(
                f"| {fmt} | {row['direct_ttfb_ms']} | {row['added_ttfb_ms']} | "
                f"{row['direct_total_ms']} | {row['added_total_ms']} |"
            )
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    # a thread (the upstreams') hands the GIL over within 0.5 ms rather than 5: the agents'
    # timings in this process are then not held up by the replaying thread
    sys.setswitchinterval(0.0005)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--cancel-every", type=int, default=10)
    parser.add_argument("--delay", type=float, default=0.002, help="seconds between upstream chunks")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=20)
    parser.add_argument("--budget", type=float, default=1200, help="seconds VS Code stays up at most")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--overhead-only", action="store_true", help="measure the overhead only")
    parser.add_argument("--hops", action="store_true", help="time each hop (docs/benchmarks/hops.md)")
    parser.add_argument("--hop-requests", type=int, default=30, help="requests per API for --hops")
    parser.add_argument(
        "--baseline",
        help="an earlier version's figures (JSON: what, how, overhead, hops, hops_overhead) "
        "to show before -> after",
    )
    args = parser.parse_args()
    args.overhead_only = args.overhead_only or args.hops
    result = run(args)
    (RUN_DIR / "result.json").write_text(json.dumps(result, indent=1))
    if args.hops:
        doc = write_hops_doc(result, args)
        print(doc)
        if not args.no_write:
            HOPS_OUT.write_text(doc)
        return
    if args.overhead_only:
        print(json.dumps(result["overhead"], indent=1))
        return
    doc = write_doc(result, args)
    print(doc)
    if not args.no_write:
        OUT.write_text(doc)
    bad = result["endpoint"]["errors"] + result["provider"]["errors"]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
