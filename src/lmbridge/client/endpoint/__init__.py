"""The loopback endpoint: VS Code's models for processes VS Code did not start.

The host runs it when the user enables it (off by default). It listens on 127.0.0.1 only, on a
random port, and wants the token on every request (401 otherwise); the token is random per
start and written with the URL to the endpoint file (mode 0600 in a 0700 folder, see
:mod:`..discovery`), where :class:`~..transport.HttpTransport` finds it.

Routes (JSON bodies; ``NDJSON`` is one JSON object per line):

====================================  =======================================================
``POST /lm/selectChatModels``         ``{"selector": object | text}`` -> ``{"models": [...]}``
``POST /lm/sendRequest``              ``{"model", "messages", "options", "justification"?}``
                                      -> NDJSON ``{"parts": [wire parts]}`` ... then
                                      ``{"done": true}`` or ``{"error": {...}}``
``POST /lm/countTokens``              ``{"model", "text"}`` -> ``{"tokens": int}``
``GET /lm/events``                    NDJSON ``{"event": "modelsChanged"}``,
                                      ``{"event": "configChanged", "section"}``
``GET /v1/models``                    model list (``/v1/models/{id}`` for one), Anthropic's
                                      shape for clients that send ``anthropic-version``
``POST /v1/chat/completions``         OpenAI Chat Completions, streaming (SSE) or not, tools
``POST /v1/responses``                OpenAI Responses, streaming (SSE) or not (Codex)
``POST /v1/messages``                 Anthropic Messages, streaming (SSE) or not (Claude
                                      Code, also ``?beta=true``); ``/count_tokens``
``POST /v1beta/models/{m}:{method}``  the Gemini API: ``generateContent``,
                                      ``streamGenerateContent`` (SSE with ``alt=sse``, else a
                                      JSON array), ``countTokens``; ``GET /v1beta/models``
====================================  =======================================================

What every request meets (:mod:`._http`, limits in :class:`Limits`): the ``Host`` header must
name this listener and a request with an ``Origin`` header (a web page) is refused, both with
403; the token is checked as soon as the head arrives, before any body byte is read; a body
over ``max_body`` (32 MiB) gets 413 unread; the head, the body and an idle kept-alive
connection each have a deadline; at most ``max_connections`` connections are open. A client
that disconnects cancels its VS Code request. HTTP is parsed by h11 over asyncio streams: no
framework, no hand-written parsing.

Adding an API
-------------
Every API is one module in :mod:`.apis` (parse the request, stream the answer, shape the
errors: :mod:`.apis._base`) and one line in :data:`.apis.APIS`; none needs a change to the
core:

1. an :class:`Api` names the API, the headers its clients send the token in
   (``("authorization",)`` is ``Authorization: Bearer``, never ``Basic``; add ``"x-api-key"``
   for Anthropic's clients) and ``render_error``, which turns an :class:`ErrorInfo` (status,
   type, message, code, param, cause, headers) into the JSON body of an error in the API's
   shape; ``describe_error`` (optional) reads the API's own failures first (its statuses,
   ``retry-after``, a context-length error) where :func:`error_info`'s defaults do not fit;
2. handlers ``async def handler(request: Request, out: Exchange) -> None`` read
   ``request.json()`` / ``request.query`` / ``request.params`` and answer with
   ``out.json(status, body)``, or stream with :func:`stream_parts` and a
   :class:`PartEncoder` (start, feed(part), finish, fail(error), ping: bytes) and the
   ``api``, which gives the first-part wait, keep-alive pings, error events after 200 and
   cancellation on disconnect;
3. anything a handler raises before the answer started (:class:`HTTPError`,
   :class:`~lmbridge.errors.ConversionError` as 400, a failed VS Code request classified by
   :func:`~..classify.classify_error`) is answered with ``render_error``: raise, do not answer
   errors by hand;
4. the module's ``routes(context)`` returns its :class:`Route` list (method, path with an
   optional trailing ``{name}`` placeholder, handler, api, optional ``when`` header
   condition), which the server adds with ``add_route(route)``; ``replace=True`` takes over
   an existing route, and a route with ``when`` (e.g. ``lambda h: "anthropic-version" in h``)
   answers the same path for some clients only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._http import (
        MAX_BODY,
        Api,
        ErrorInfo,
        Exchange,
        Handler,
        HttpCore,
        HTTPError,
        Limits,
        Request,
        Route,
        error_body,
        error_info,
    )
    from ._server import EndpointServer
    from ._stream import PartEncoder, ndjson_line, sse_event, stream_parts
    from .apis import APIS, ApiContext, Registration
    from .apis.anthropic import ANTHROPIC_API
    from .apis.lm import LM_API, LmRoutes
    from .apis.openai_chat import OPENAI_API, openai_model
    from .apis.responses import RESPONSES_API

# Loaded on first use (see lmbridge._lazy): importing the package costs nothing more.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    globals(),
    {
        "._http": (
            "MAX_BODY",
            "Api",
            "ErrorInfo",
            "Exchange",
            "Handler",
            "HttpCore",
            "HTTPError",
            "Limits",
            "Request",
            "Route",
            "error_body",
            "error_info",
        ),
        "._server": ("EndpointServer",),
        "._stream": ("PartEncoder", "ndjson_line", "sse_event", "stream_parts"),
        ".apis": ("APIS", "ApiContext", "Registration"),
        ".apis.anthropic": ("ANTHROPIC_API",),
        ".apis.lm": ("LM_API", "LmRoutes"),
        ".apis.openai_chat": ("OPENAI_API", "openai_model"),
        ".apis.responses": ("RESPONSES_API",),
    },
)

__all__ = [
    "ANTHROPIC_API",
    "APIS",
    "LM_API",
    "MAX_BODY",
    "OPENAI_API",
    "RESPONSES_API",
    "Api",
    "ApiContext",
    "EndpointServer",
    "ErrorInfo",
    "Exchange",
    "HTTPError",
    "Handler",
    "HttpCore",
    "Limits",
    "LmRoutes",
    "PartEncoder",
    "Registration",
    "Request",
    "Route",
    "error_body",
    "error_info",
    "ndjson_line",
    "openai_model",
    "sse_event",
    "stream_parts",
]
