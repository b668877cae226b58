"""A real llama.cpp ``llama-server`` on 127.0.0.1 for the tests (built by ``scripts/llama-setup``).

:func:`llama_env` reads what the setup wrote (``$LMBRIDGE_LLAMA_CACHE/env.json``, default
``~/.cache/lmbridge-llama``); :class:`LlamaServer` starts the server with the settings the README's
local-model recipe gives, and :func:`provider_entries` are that recipe's three providers.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx

__all__ = [
    "FORMATS",
    "MODEL_ALIAS",
    "README",
    "SEED",
    "LlamaServer",
    "llama_env",
    "provider_entries",
    "recipe_providers",
    "record_streams",
    "run_llama_server",
    "server_args",
]

MODEL_ALIAS = "smollm2"
"""The model id the server reports (``--alias``)."""
SEED = 42
"""The fixed sampling seed (with temperature 0 the answer is greedy anyway)."""
README = Path(__file__).resolve().parents[2] / "README.md"
RECIPE_URL = "http://127.0.0.1:8080"
"""Where the README's recipe has llama-server listen (the tests use a free port instead)."""


def recipe_providers() -> list[dict[str, Any]]:
    """The providers of the README's local-model recipe (its ``jsonc`` block), as written."""
    section = README.read_text(encoding="utf-8").split("### Local models", 1)[1]
    block = section.split("```jsonc", 1)[1].split("```", 1)[0]
    providers: list[dict[str, Any]] = json.loads("{" + block.strip() + "}")["lmbridge.providers"]
    return providers


FORMATS = {entry["name"]: entry["format"] for entry in recipe_providers()}
"""Provider name -> the wire format it uses against the same server (from the README)."""


def llama_env() -> dict[str, str] | None:
    """What ``scripts/llama-setup`` built (server, model, tool template), or ``None`` if not run."""
    cache = Path(
        os.environ.get("LMBRIDGE_LLAMA_CACHE") or Path.home() / ".cache" / "lmbridge-llama"
    )
    path = cache / "env.json"
    if not path.is_file():
        return None
    env: dict[str, str] = json.loads(path.read_text(encoding="utf-8"))
    if not all(Path(env[k]).is_file() for k in ("server", "model", "toolTemplate")):
        return None
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """A running ``llama-server``: its base URL and small HTTP helpers for its own endpoints."""

    def __init__(self, process: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.process = process
        self.url = url
        """``http://127.0.0.1:<port>``; the OpenAI and Anthropic APIs are under ``/v1``."""
        self.log = log

    def get(self, path: str) -> Any:
        """``GET path`` as JSON."""
        response = httpx.get(self.url + path, timeout=30)
        response.raise_for_status()
        return response.json()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """``POST path`` (not streamed) as JSON. A long answer on a loaded machine can take
        minutes (the cancellation tests' reference is 900 tokens), hence the long timeout."""
        response = httpx.post(self.url + path, json=body, timeout=600)
        response.raise_for_status()
        return response.json()

    def decode_calls(self) -> int:
        """``llama_decode()`` calls so far (``/metrics``): one per generated token, and a few
        for each prompt."""
        response = httpx.get(self.url + "/metrics", timeout=30)
        response.raise_for_status()
        for line in response.text.splitlines():
            if line.startswith("llamacpp:n_decode_total "):
                return int(float(line.split()[1]))
        raise ValueError("llama-server's /metrics has no llamacpp:n_decode_total")

    def busy_slots(self) -> int:
        """How many of the server's slots are working on a request."""
        return sum(1 for slot in self.get("/slots") if slot.get("is_processing"))

    def wait_idle(self, timeout: float = 10.0) -> float:
        """Poll ``/slots`` until no slot is busy; return the seconds it took (raise on timeout)."""
        start = time.monotonic()
        while self.busy_slots():
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"llama-server still busy after {timeout} s")
            time.sleep(0.05)
        return time.monotonic() - start


def server_args(env: dict[str, str], port: int) -> list[str]:
    """The README recipe's command line, plus what makes tests repeatable and light: one slot,
    a small context, 2 threads, a fixed seed, no prompt cache."""
    return [
        env["server"],
        "--model", env["model"],
        "--alias", MODEL_ALIAS,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--jinja",
        "--chat-template-file", env["toolTemplate"],
        "--ctx-size", "1024",
        "--parallel", "1",
        "--threads", "2",
        "--seed", str(SEED),
        "--slots",
        "--metrics",
        # a prompt partly served from the cache is computed in other batches, which can flip a
        # greedy choice of this small model: every request starts afresh, so answers compare
        "--no-cache-prompt",
        "--no-webui",
    ]  # fmt: skip


@contextmanager
def run_llama_server(env: dict[str, str], log_dir: Path) -> Iterator[LlamaServer]:
    """Start ``llama-server`` on a free port, wait for ``/health``, stop it afterwards."""
    port = _free_port()
    log = log_dir / "llama-server.log"
    out: IO[bytes] = log.open("wb")
    process = subprocess.Popen(server_args(env, port), stdout=out, stderr=subprocess.STDOUT)
    server = LlamaServer(process, f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"llama-server exited ({process.returncode}): {log.read_text()[-2000:]}"
                )
            try:
                if httpx.get(server.url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"llama-server not healthy after 120 s: {log.read_text()[-2000:]}"
                )
            time.sleep(0.2)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        out.close()


def provider_entries(server_url: str) -> list[dict[str, Any]]:
    """The README recipe's providers, pointed at ``server_url`` instead of port 8080."""
    return [
        {**entry, "baseUrl": entry["baseUrl"].replace(RECIPE_URL, server_url)}
        for entry in recipe_providers()
    ]


RECORD_PROMPT = "Write one sentence about the sea."
"""The prompt of the recordings in ``tests/fixtures/llama-cpp``."""
_RECORD_REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "chat-completions": (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": RECORD_PROMPT}], "max_tokens": 24,
         "stream_options": {"include_usage": True}},
    ),
    "responses": ("/v1/responses", {"input": RECORD_PROMPT, "max_output_tokens": 24}),
    "anthropic": (
        "/v1/messages",
        {"messages": [{"role": "user", "content": RECORD_PROMPT}], "max_tokens": 24},
    ),
}  # fmt: skip


def record_streams(server: LlamaServer, out_dir: Path) -> list[Path]:
    """Record one streamed answer per format as ``<format>-text.chunks.txt`` (the fixtures'
    format: one SSE ``data:`` payload per line, no ``event:`` lines, no ``[DONE]``)."""
    written = []
    for fmt, (path, extra) in _RECORD_REQUESTS.items():
        body = {"model": MODEL_ALIAS, "temperature": 0, "seed": SEED, "stream": True, **extra}
        lines: list[str] = []
        with httpx.stream("POST", server.url + path, json=body, timeout=120) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                payload = line[5:].strip() if line.startswith("data:") else ""
                if payload and payload != "[DONE]":
                    lines.append(payload)  # as sent (the server writes one JSON line)
        target = out_dir / f"{fmt}-text.chunks.txt"
        target.write_text("\n".join(lines) + "\n", encoding="utf-8")
        written.append(target)
    return written


if __name__ == "__main__":  # python tests/support/llama_server.py OUT_DIR: re-record the fixtures
    import sys
    import tempfile

    found = llama_env()
    if found is None:
        sys.exit("run scripts/llama-setup first")
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as logs, run_llama_server(found, Path(logs)) as running:
        for written_path in record_streams(running, out):
            print(written_path, written_path.stat().st_size)
        print(found.get("serverVersion", ""))
