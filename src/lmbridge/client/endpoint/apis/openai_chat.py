"""OpenAI Chat Completions over VS Code's models.

``POST /v1/chat/completions``, streaming (SSE) or not, with tools. ``model`` is resolved by
``resolve`` (every API's resolver, :meth:`~._base.ApiContext.resolve`: a model id, any
selector text such as ``vscodelm/auto`` or ``copilot/gpt-4o``, a family, or a name of
``lmbridge.endpoint.models``). ``GET /v1/models`` lists them in OpenAI's shape. The token
comes as ``Authorization: Bearer`` or ``x-api-key``; errors are in OpenAI's shape
(:func:`~.._http.error_body`).

Chat Completions fields:

- ``messages``, ``tools``, ``tool_choice`` (``auto``, ``none``, ``required``, one function);
- ``stream`` with ``stream_options.include_usage`` (a last chunk with ``usage`` and no choices);
- ``parallel_tool_calls`` accepted (VS Code's models decide themselves);
- ``response_format``: ``json_object`` and ``json_schema`` become an instruction in the system
  prompt, since VS Code's models have no JSON mode. Best effort: the model is asked, not
  forced, and the answer is not validated against the schema;
- ``max_completion_tokens`` is passed as ``max_tokens``; every other field (``temperature``,
  ``max_tokens``, ``stop`` ...) goes to the model as a model option;
- ``n`` other than 1 is refused with 400 (``param: "n"``): one request, one choice.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ....convert import from_chat_completions, to_chat_completions_message
from ....errors import ConversionError
from ....parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatRole,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolMode,
    usage_to_wire,
)
from ...api import ChatResponse, start_response, tools_from
from ...transport import BridgeTransport, ChatModel
from .._http import Api, ErrorInfo, Exchange, HTTPError, Request, Route, error_body
from .._stream import sse_event, stream_parts
from ._base import ApiContext
from .responses import model_entry

__all__ = ["API", "OPENAI_API", "OpenAIChatRoutes", "openai_model", "routes"]

OPENAI_API = Api("openai", error_body, token_headers=("authorization", "x-api-key"))
"""OpenAI's error shape; the token as a bearer token or ``x-api-key`` (Anthropic's clients list
models with it)."""
API = OPENAI_API

# Chat Completions fields that shape the request; the rest go to VS Code as model options.
_STRUCTURAL = frozenset(
    {"model", "messages", "stream", "stream_options", "tools", "tool_choice", "n", "user",
     "parallel_tool_calls", "functions", "function_call", "response_format",
     "max_completion_tokens"}
)  # fmt: skip


class _ChunkEvents:
    """Parts as ``chat.completion.chunk`` SSE events, then the finish chunk and ``[DONE]``."""

    media_type = "text/event-stream"

    def __init__(self, response: ChatResponse, ident: str, created: int, usage: bool) -> None:
        self._response = response
        self._ident = ident
        self._created = created
        self._usage = usage
        self._calls = 0

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse_event(
            {
                "id": self._ident,
                "object": "chat.completion.chunk",
                "created": self._created,
                "model": self._response.model.id,
                "choices": [
                    {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
                ],
            }
        )

    def start(self) -> bytes:
        return self._chunk({"role": "assistant", "content": ""})

    def feed(self, part: ResponsePart) -> bytes:
        if isinstance(part, TextPart):
            return self._chunk({"content": part.value})
        if isinstance(part, ThinkingPart):
            return self._chunk({"reasoning_content": part.text})
        if isinstance(part, ToolCallPart):
            call = {
                "index": self._calls,
                "id": part.call_id,
                "type": "function",
                "function": {
                    "name": part.name,
                    "arguments": json.dumps(part.input, ensure_ascii=False),
                },
            }
            self._calls += 1
            return self._chunk({"tool_calls": [call]})
        return b""

    def finish(self) -> bytes:
        out = self._chunk({}, "tool_calls" if self._calls else "stop")
        if self._usage:
            out += sse_event(
                {
                    "id": self._ident,
                    "object": "chat.completion.chunk",
                    "created": self._created,
                    "model": self._response.model.id,
                    "choices": [],
                    "usage": _usage(self._response),
                }
            )
        return out + b"data: [DONE]\n\n"

    def fail(self, error: ErrorInfo) -> bytes:
        # OpenAI's clients raise an APIError for an "error" event in the stream.
        return sse_event(error_body(error))

    def ping(self) -> bytes:
        return b": keep-alive\n\n"


class OpenAIChatRoutes:
    """The OpenAI-compatible routes over ``bridge`` (module docstring)."""

    def __init__(
        self,
        bridge: BridgeTransport,
        *,
        count_timeout: float = 2.0,
        keepalive: float = 15.0,
        first_part_wait: float = 10.0,
        resolve: Callable[[Any], Awaitable[ChatModel]],
    ) -> None:
        self.bridge = bridge
        self._resolve = resolve
        self._count_timeout = count_timeout
        self._keepalive = keepalive
        self._first_part_wait = first_part_wait

    def routes(self) -> list[Route]:
        """The routes to add to the server."""
        return [Route("POST", "/v1/chat/completions", self.chat, OPENAI_API)]

    async def chat(self, request: Request, out: Exchange) -> None:
        """``POST /v1/chat/completions`` (what is taken how: the module docstring)."""
        body = request.json()
        n = body.get("n")
        if n is not None and (n != 1 or isinstance(n, bool)):
            raise HTTPError(
                400,
                f"n: {n!r} choices were asked for, but VS Code's models answer one choice per "
                "request: leave n out or set it to 1, and send several requests for several "
                "answers",
                param="n",
                code="unsupported_value",
            )
        messages = from_chat_completions(body.get("messages"))  # type: ignore[arg-type]
        options = _options(body)
        if not messages:
            raise HTTPError(400, "messages: at least one message is needed", param="messages")
        instruction = _format_instruction(body.get("response_format"))
        if instruction is not None:
            messages = _with_instruction(messages, instruction)
        model = await self._resolve(body.get("model"))
        response = start_response(
            self.bridge, model, messages, options, count_timeout=self._count_timeout
        )
        ident = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            await stream_parts(
                out,
                response,
                _ChunkEvents(response, ident, created, include_usage),
                first_part_wait=self._first_part_wait,
                keepalive=self._keepalive,
                api=OPENAI_API,
            )
            return
        try:
            parts = [p async for p in response]
        finally:
            await response.aclose()
        message = to_chat_completions_message(parts)
        thinking = "".join(p.text for p in parts if isinstance(p, ThinkingPart))
        if thinking:
            message["reasoning_content"] = thinking
        await out.json(
            200,
            {
                "id": ident,
                "object": "chat.completion",
                "created": created,
                "model": model.id,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if response.tool_calls else "stop",
                        "logprobs": None,
                    }
                ],
                "usage": _usage(response),
            },
        )


openai_model = model_entry
"""A VS Code model in OpenAI's model shape (:func:`.responses.model_entry`)."""


def routes(context: ApiContext) -> list[Route]:
    """``POST /v1/chat/completions`` and the model list in OpenAI's shape (every client that
    does not send ``anthropic-version``): VS Code's models by id, then the names of
    ``lmbridge.endpoint.models`` (:meth:`~._base.ApiContext.model_entries`)."""
    chat = OpenAIChatRoutes(
        context.bridge,
        count_timeout=context.count_timeout,
        keepalive=context.keepalive,
        first_part_wait=context.first_part_wait,
        resolve=context.resolve,
    )

    async def models(request: Request, out: Exchange) -> None:
        entries = await context.model_entries()
        await out.json(200, {"object": "list", "data": [model_entry(m, n) for n, m in entries]})

    async def model(request: Request, out: Exchange) -> None:
        name = request.params["model"]
        await out.json(200, model_entry(await context.resolve(name), name))

    return [
        *chat.routes(),
        Route("GET", "/v1/models", models, OPENAI_API),
        Route("GET", "/v1/models/{model}", model, OPENAI_API),
    ]


def _usage(response: ChatResponse) -> dict[str, int]:
    usage = usage_to_wire(response.usage)
    prompt, completion = usage.get("inputTokens", 0), usage.get("outputTokens", 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _options(body: Mapping[str, Any]) -> ChatRequestOptions:
    tools = tools_from(body.get("tools"))
    choice = body.get("tool_choice")
    mode = ToolMode.AUTO
    if choice == "none":
        tools = []
    elif choice == "required":
        mode = ToolMode.REQUIRED
    elif isinstance(choice, Mapping):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else None
        chosen = [t for t in tools if t.name == name]
        if not chosen:
            raise ConversionError(f"tool_choice: no tool named {name!r} in tools")
        tools, mode = chosen, ToolMode.REQUIRED
    elif choice not in (None, "auto"):
        raise ConversionError(
            f"tool_choice: expected 'auto', 'none', 'required' or a function, got {choice!r}"
        )
    model_options = {k: v for k, v in body.items() if k not in _STRUCTURAL and v is not None}
    if body.get("max_completion_tokens") is not None:
        # the newer name of max_tokens: VS Code's providers know max_tokens
        model_options["max_tokens"] = body["max_completion_tokens"]
    return ChatRequestOptions(tools=tools, tool_mode=mode, model_options=model_options)


def _format_instruction(response_format: Any) -> str | None:
    """``response_format`` as an instruction to the model (VS Code's models have no JSON mode)."""
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, Mapping) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return (
            "Answer with one valid JSON object and nothing else: no prose, no Markdown code fences."
        )
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        if not isinstance(schema, Mapping):
            raise HTTPError(
                400,
                "response_format.json_schema.schema: expected a JSON Schema object",
                param="response_format",
            )
        name = spec.get("name") if isinstance(spec, Mapping) else None
        named = f" named {name!r}" if isinstance(name, str) and name else ""
        return (
            f"Answer with one JSON value that is valid against this JSON Schema{named}, and "
            "nothing else: no prose, no Markdown code fences.\n"
            + json.dumps(schema, ensure_ascii=False)
        )
    raise HTTPError(
        400,
        f"response_format.type: expected 'text', 'json_object' or 'json_schema', got {kind!r}",
        param="response_format",
    )


def _with_instruction(messages: list[ChatMessage], instruction: str) -> list[ChatMessage]:
    """``instruction`` joins the system prompt: the leading Assistant messages, which is where
    :func:`~lmbridge.convert.from_chat_completions` puts system messages."""
    lead = 0
    while lead < len(messages) - 1 and messages[lead].role is ChatRole.ASSISTANT:
        lead += 1
    note = ChatMessage(ChatRole.ASSISTANT, [TextPart(instruction)])
    return [*messages[:lead], note, *messages[lead:]]
