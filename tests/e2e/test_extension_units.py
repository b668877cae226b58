"""The extension's own unit tests (``extension/test``, node's test runner with a fake ``vscode``
module), run with the Node of ``scripts/e2e-setup``: the Host against real processes (restart
after a crash, failed starts told apart), the output routing and the Python decisions; and
ESLint over the extension's sources and tests (``npm run lint``).

Skipped unless ``LMBRIDGE_E2E=1`` (it needs the extension's node_modules from the setup).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get("LMBRIDGE_E2E") != "1", reason="set LMBRIDGE_E2E=1 (after scripts/e2e-setup)"),
]

EXT = Path(__file__).resolve().parents[2] / "extension"
CACHE = Path(os.environ.get("LMBRIDGE_E2E_CACHE") or Path.home() / ".cache/lmbridge-e2e")


def test_extension_unit_tests_pass() -> None:
    node = json.loads((CACHE / "env.json").read_text())["node"]
    subprocess.run([node, "esbuild.mjs", "--tests"], cwd=EXT, check=True, timeout=120, capture_output=True)
    files = sorted(str(p.relative_to(EXT)) for p in (EXT / "out-test").glob("*.test.js"))
    assert len(files) >= 5, files
    proc = subprocess.run(
        [node, "--test", "--test-reporter=spec", *files],
        cwd=EXT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "host.test.js" in " ".join(files) and "fail 0" in proc.stdout, proc.stdout[-2000:]


def test_extension_lint_is_clean() -> None:
    node = json.loads((CACHE / "env.json").read_text())["node"]
    eslint = EXT / "node_modules" / "eslint" / "bin" / "eslint.js"
    proc = subprocess.run([node, str(eslint), "--max-warnings", "0", "."], cwd=EXT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


# Origins the extension records a key for and origins the host checks it against must be the
# same text; a difference would refuse the key (never leak it), but refuse it wrongly.
ORIGIN_URLS = [
    "https://api.openai.com/v1",
    "HTTPS://API.OpenAI.COM:443/v1/",
    "http://Example.com",
    "http://example.com:8080/x?y=1",
    "https://example.com:80",
    "http://127.0.0.1:1234/v1",
    "http://[::1]:8080/v1",
    "https://[2001:DB8::1]/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[::FFFF:1.2.3.4]:8080/",
    "https://bücher.example/",
    "https://example.com./v1",
    "http://example.com:0/",
    "https://example.com:/v1",
    "https://user:pass@api.example.com/v1?key=1#f",
    "https://evil.example@api.example.com/v1",
    "https://api.example.com?x=@evil.example",
    "http://0x7f.1/v1",
    "http://127.1/",
    "http://localhost:11434/v1",
    "  https://api.example.com/v1  ",
    "https://x.example:080/",
    "ftp://x",
    "https://",
    "x",
    "http://h:99999/",
    "http://[::1/v1",
    "https://example.com:8o/",
]


def test_the_extension_writes_origins_as_the_host_does() -> None:
    from lmbridge.config import origin_of

    node = json.loads((CACHE / "env.json").read_text())["node"]
    bundle = EXT / "out-test" / "keys.cjs"
    build = "require('esbuild').buildSync({entryPoints: ['src/keys.ts'], bundle: true, platform: 'node', format: 'cjs', outfile: process.argv[1]})"
    subprocess.run([node, "-e", build, str(bundle)], cwd=EXT, check=True, timeout=120, capture_output=True)
    run = "const k = require(process.argv[1]); console.log(JSON.stringify(JSON.parse(process.argv[2]).map(k.urlOrigin)))"
    proc = subprocess.run([node, "-e", run, str(bundle), json.dumps(ORIGIN_URLS)], capture_output=True, text=True, timeout=60, check=True)
    extension = json.loads(proc.stdout)

    def host(url: str) -> str | None:
        try:
            return origin_of(url)
        except ValueError:
            return None

    assert dict(zip(ORIGIN_URLS, extension, strict=True)) == {u: host(u) for u in ORIGIN_URLS}
