"""Every API the endpoint speaks: one module each, of one shape, in one table.

=====================  ====================================================================
:mod:`.lm`             the native ``/lm/*`` routes (:class:`~...transport.HttpTransport`)
:mod:`.openai_chat`    OpenAI Chat Completions, and ``GET /v1/models`` in OpenAI's shape
:mod:`.responses`      OpenAI Responses (Codex)
:mod:`.anthropic`      Anthropic Messages (Claude Code), its model list and token count
:mod:`.gemini`         the Gemini API (google-genai, the Gemini CLI) under ``/v1beta``
:mod:`.mcp`            VS Code's tools as an MCP server at ``/mcp`` (off by default)
=====================  ====================================================================

Each module parses its requests, streams its answers and shapes its errors (the three pieces
of :mod:`._base`), and exports ``API`` (its :class:`~.._http.Api`) and ``routes(context)``.
The next API is one new module and one line in :data:`APIS`.
"""

from __future__ import annotations

from . import anthropic, gemini, lm, mcp, openai_chat, responses
from ._base import ApiContext, ChatShape, EventStream, ModelList, Registration, serve_chat

__all__ = [
    "APIS",
    "ApiContext",
    "ChatShape",
    "EventStream",
    "ModelList",
    "Registration",
    "serve_chat",
]

APIS: tuple[Registration, ...] = (
    Registration(lm.API, lm.routes),
    Registration(openai_chat.API, openai_chat.routes),
    Registration(responses.API, responses.routes),
    Registration(anthropic.API, anthropic.routes),
    Registration(gemini.API, gemini.routes),
    Registration(mcp.API, mcp.routes),
)
"""The endpoint's APIs; :class:`~.._server.EndpointServer` adds every one's routes."""
