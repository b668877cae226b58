"""Every command block of the docs runs exactly as written: README.md, extension/README.md,
examples/README.md and docs/**/*.md.

Fenced ``sh``/``bash``/``shell`` blocks run with bash (``set -eo pipefail``), ``console`` blocks
run their ``$ `` lines, ``python`` blocks run as a script; each in a fresh copy of the
repository's tracked files, with this environment's ``lmbridge`` and ``python`` first on PATH,
a home folder of its own, pip without an index, and the network-free defaults: no provider
configured means the built-in echo model, and "VS Code's models" are the test double
(:class:`lmbridge.client.testing.FakeBridge`) behind a real loopback endpoint whose file
``LMBRIDGE_ENDPOINT_FILE`` names, as a running VS Code's would be found.

A block that cannot run here says so where a reader sees it, on the line before the fence::

    <!-- not run: installs from the VS Code Marketplace (network) -->

Such blocks are reported as skipped with their reason and place (``pytest -ra`` lists them), so
none is left out silently; a marker without a reason, or a reason on no block, fails.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[1]
SHELLS = {"sh", "bash", "shell", "console"}
FENCE = re.compile(
    r"^(?P<indent>[ ]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ ]*$",
    re.MULTILINE | re.DOTALL,
)
NOT_RUN = re.compile(r"<!--\s*not run:(?P<reason>[^>]*?)-->\s*$")

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="the blocks are POSIX shell"),
    pytest.mark.skipif(
        not (ROOT / "scripts" / "demo").is_file(), reason="not a checkout (the sdist has no scripts/)"
    ),
]


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "extension" / "README.md", ROOT / "examples" / "README.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    return [f for f in files if f.is_file()]


@dataclass(frozen=True)
class Block:
    """One fenced block of a doc."""

    path: Path
    line: int
    lang: str
    body: str
    not_run: str | None  # the reason, when marked

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def script(self) -> str:
        body = "\n".join(line[len(self.indent) :] for line in self.body.splitlines())
        if self.lang == "console":
            return "\n".join(
                line[2:] for line in body.splitlines() if line.startswith("$ ")
            )
        return body

    @property
    def indent(self) -> str:
        first = self.body.splitlines()[0] if self.body else ""
        return first[: len(first) - len(first.lstrip(" "))]


def blocks() -> list[Block]:
    out = []
    for path in doc_files():
        text = path.read_text("utf-8")
        for m in FENCE.finditer(text):
            lang = m["lang"]
            if lang not in SHELLS and lang != "python":
                continue
            before = text[: m.start()].rstrip("\n").splitlines()
            marker = NOT_RUN.search(before[-1]) if before else None
            out.append(
                Block(
                    path,
                    text[: m.start()].count("\n") + 1,
                    lang,
                    m["body"],
                    marker["reason"].strip() if marker else None,
                )
            )
    return out


BLOCKS = blocks()


# --------------------------------------------------------------------------- the stand-ins


@pytest.fixture(scope="module")
def endpoint_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A loopback endpoint with the test double as VS Code, on a thread of its own, for as long
    as the module runs: what "VS Code's models" are for the docs' commands."""
    from lmbridge.client.endpoint import EndpointServer
    from lmbridge.client.testing import FakeBridge, fake_model
    from lmbridge.parts import ModelCapabilities, TextPart, ToolCallPart

    tools = ModelCapabilities(tool_calling=True, image_input=True)
    bridge = FakeBridge(
        [
            fake_model("gpt-4o", vendor="copilot", family="gpt-4o", capabilities=tools),
            fake_model("claude-sonnet-4.5", vendor="copilot", capabilities=tools),
        ]
    )

    def answer(model: Any, messages: Any, options: Any) -> list[Any]:
        if options.tools:
            return [ToolCallPart("call_1", options.tools[0].name, {"city": "Paris"})]
        return [TextPart(f"{model.id} heard: {messages[-1].text if messages else ''}")]

    for m in bridge.models:
        bridge.script(m.id, answer)
    path = tmp_path_factory.mktemp("endpoint") / "endpoint.json"
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop: asyncio.Event | None = None

    async def serve() -> None:
        nonlocal stop
        stop = asyncio.Event()
        async with EndpointServer(bridge, endpoint_file=path):
            started.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(30), "the stand-in endpoint did not start"
    yield path
    assert stop is not None
    loop.call_soon_threadsafe(stop.set)
    thread.join(30)
    loop.close()


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's tracked files (git's list; else the tree without what is built), with
    this environment as its ``.venv`` (so that scripts/demo finds its set-up done)."""
    dest = tmp_path_factory.mktemp("checkout") / "lmbridge"
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False
    )
    if listed.returncode == 0 and listed.stdout:
        for name in listed.stdout.decode().split("\0"):
            if name and (ROOT / name).is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, dest / name)
    else:
        skip = shutil.ignore_patterns(".venv*", "node_modules", "dist", "__pycache__", ".git")
        shutil.copytree(ROOT, dest, ignore=skip)
    venv = dest / ".venv"
    venv.mkdir()
    prefix = Path(sys.prefix)
    if (prefix / "pyvenv.cfg").is_file():
        # a virtual environment: the same one under this name (its bin, lib, pyvenv.cfg)
        for entry in prefix.iterdir():
            if not entry.name.startswith(".lmbridge"):
                (venv / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    else:
        (venv / "bin").symlink_to(Path(sys.executable).parent, target_is_directory=True)
    stamp = hashlib.sha256(
        (dest / "pyproject.toml").read_bytes() + (dest / "constraints.txt").read_bytes()
    ).hexdigest()
    for name in (".lmbridge-installed", ".lmbridge-runtime"):
        (venv / name).write_text(stamp + "\n")
    return dest


def environment(home: Path, endpoint: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TERM", "TMPDIR")}
    return {
        **keep,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LMBRIDGE_ENDPOINT_FILE": str(endpoint),
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "NO_COLOR": "1",
    }


# --------------------------------------------------------------------------- the tests


def test_the_docs_have_command_blocks_and_every_marker_has_a_reason() -> None:
    assert sum(b.path.name == "README.md" and b.path.parent == ROOT for b in BLOCKS) >= 5
    for b in BLOCKS:
        assert b.not_run is None or len(b.not_run.split()) >= 3, (
            f"{b.where}: say why the block does not run (<!-- not run: reason -->)"
        )
    # a marker must stand right before a block, never alone
    for path in doc_files():
        text = path.read_text("utf-8")
        for m in NOT_RUN.finditer(text):
            rest = text[m.end() :].lstrip("\n")
            assert rest.startswith("```") or re.match(r"^ +```", rest), (
                f"{path.relative_to(ROOT)}: a 'not run' marker with no block right after it"
            )
    # the README opens with the two set-up commands; the first runs here
    readme = [b for b in BLOCKS if b.path == ROOT / "README.md"]
    assert readme[0].script.startswith("scripts/demo") and readme[0].not_run is None
    assert readme[1].script.startswith("scripts/check")


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_the_block_runs_as_written(
    block: Block, checkout: Path, endpoint_file: Path, tmp_path: Path
) -> None:
    if block.not_run is not None:
        pytest.skip(f"not run: {block.not_run} ({block.where})")
    env = environment(tmp_path / "home", endpoint_file)
    (tmp_path / "home").mkdir()
    if block.lang == "python":
        script = tmp_path / "block.py"
        script.write_text(block.script)
        cmd = [sys.executable, str(script)]
    else:
        cmd = ["bash", "-e", "-o", "pipefail", "-c", block.script]
    done = subprocess.run(
        cmd,
        cwd=checkout,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (
        f"{block.where} failed (exit {done.returncode}):\n{block.script}\n"
        f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    )
