"""Draw docs/diagram.svg, the README's picture of lmbridge's two directions, from the code.

The upstream formats come from :func:`lmbridge.formats.names` and the loopback endpoint's APIs
from :data:`lmbridge.client.endpoint.apis.APIS`, so a new format or endpoint API changes the
picture; ``tests/test_diagram.py`` fails while the committed file differs from what this
command draws.

    python tools/make_diagram.py           # write docs/diagram.svg
    python tools/make_diagram.py --check   # exit 1 if it is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "diagram.svg"

FORMAT_LABELS = {
    "chat-completions": "OpenAI-compatible Chat Completions",
    "responses": "OpenAI Responses / OpenResponses",
    "anthropic": "Anthropic Messages",
    "ai-sdk": "Vercel AI SDK streams",
    "gemini": "Google Gemini / Vertex AI",
}
API_LABELS = {
    "lm": "lmbridge's Python client",
    "openai": "OpenAI Chat Completions",
    "responses": "OpenAI Responses",
    "anthropic": "Anthropic Messages",
    "gemini": "Gemini generateContent",
    "mcp": "MCP (VS Code's tools)",
}

WIDTH, HEIGHT = 980, 470
FONT = "font-family=\"-apple-system,Segoe UI,Helvetica,Arial,sans-serif\""
BLUE, GREEN, GREY, INK = "#e8f0fe", "#e6f4ea", "#f1f3f4", "#202124"


def formats() -> list[str]:
    from lmbridge import formats as registry

    return [FORMAT_LABELS.get(name, name) for name in registry.names()]


def endpoint_apis() -> list[str]:
    from lmbridge.client.endpoint.apis import APIS

    return [API_LABELS.get(r.api.name, r.api.name) for r in APIS]


def box(x: int, y: int, w: int, h: int, fill: str, title: str, lines: list[str]) -> str:
    out = [
        f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="8" fill="{fill}" '
        f'stroke="#5f6368" stroke-width="1.2"/>',
        f'<text x="{x + w // 2}" y="{y + 22}" text-anchor="middle" font-size="14" '
        f'font-weight="600" fill="{INK}">{escape(title)}</text>',
    ]
    for i, line in enumerate(lines):
        out.append(
            f'<text x="{x + w // 2}" y="{y + 42 + 16 * i}" text-anchor="middle" '
            f'font-size="12" fill="{INK}">{escape(line)}</text>'
        )
    return "\n".join(out)


def arrow(x1: int, y1: int, x2: int, y2: int, label: str = "", both: bool = False) -> str:
    start = ' marker-start="url(#head)"' if both else ""
    out = [
        f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{INK}" stroke-width="1.6" '
        f'marker-end="url(#head)"{start}/>'
    ]
    if label:
        out.append(
            f'<text x="{(x1 + x2) // 2}" y="{min(y1, y2) - 7}" text-anchor="middle" '
            f'font-size="11" fill="#5f6368">{escape(label)}</text>'
        )
    return "\n".join(out)


def render() -> str:
    """The SVG text (deterministic: the same code draws the same bytes)."""
    upstreams = formats()
    apis = endpoint_apis()
    lane1, lane2 = 40, 255
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" {FONT}>',
        "<title>lmbridge: Python models in VS Code, and VS Code's models in Python</title>",
        '<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        f'fill="{INK}"/></marker></defs>',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        # provider side
        f'<text x="20" y="{lane1 - 14}" font-size="15" font-weight="700" fill="{INK}">'
        "Provider side: Python serves models to VS Code</text>",
        box(20, lane1, 250, 36 + 16 * len(upstreams) + 8, GREY, "Upstream LLM APIs", upstreams),
        box(20, lane1 + 150, 250, 50, GREY, "Your Python provider", ["a @chat_model function or class"]),
        box(360, lane1 + 40, 200, 110, GREEN, "lmbridge host (Python)",
            ["decodes every stream into", "VS Code parts: text, thinking,", "tool calls, data, usage"]),
        box(670, lane1 + 40, 130, 110, BLUE, "lmbridge", ["extension", "(thin TypeScript)"]),
        box(840, lane1 + 40, 120, 110, BLUE, "VS Code", ["model picker,", "Copilot Chat,", "vscode.lm users"]),
        arrow(270, lane1 + 70, 360, lane1 + 80, "HTTP + SSE"),
        arrow(270, lane1 + 175, 360, lane1 + 130, "in process"),
        arrow(560, lane1 + 95, 670, lane1 + 95, "JSON-RPC, stdio", both=True),
        arrow(800, lane1 + 95, 840, lane1 + 95),
        # consumer side
        f'<text x="20" y="{lane2 + 12}" font-size="15" font-weight="700" fill="{INK}">'
        "Consumer side: Python and agents use VS Code's models</text>",
        box(20, lane2 + 40, 170, 110, BLUE, "VS Code's models", ["Copilot and every", "installed provider"]),
        box(225, lane2 + 40, 120, 110, BLUE, "lmbridge", ["extension"]),
        box(425, lane2 + 40, 200, 110, GREEN, "loopback endpoint",
            ["in the host: 127.0.0.1 only,", "a token in a file", "only you can read"]),
        box(680, lane2 + 25, 280, 36 + 16 * len(apis) + 8 + 30, GREY, "Python apps, agents, SDKs",
            ["LanguageModelClient (async, sync)", "Claude Code, Codex, Gemini CLI,", "openai / anthropic SDKs:"]
            + [f"  {a}" for a in apis[1:]]),
        arrow(190, lane2 + 95, 225, lane2 + 95, both=True),
        arrow(345, lane2 + 95, 425, lane2 + 95, "JSON-RPC", both=True),
        arrow(625, lane2 + 95, 680, lane2 + 95, "HTTP", both=True),
        "</svg>",
    ]
    return "\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not OUT.is_file() or OUT.read_text("utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is out of date: run python tools/make_diagram.py",
                  file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, "utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
