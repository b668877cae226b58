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

The request is read by :func:`parse_chat_request` and answered through a
:class:`ChatCompletionsStream` (both sans-IO) by :func:`~._base.serve_chat`, the path every
agents' API takes: a request longer than the model's input limit gets OpenAI's 400
``context_length_exceeded`` before VS Code sees it, rate limits before the first part are
retried, terminal output in tool results is cleaned, and ``usage.prompt_tokens`` is the
context guard's estimate (no VS Code ``countTokens`` round trip per message). Errors keep the
endpoint's own shape (:func:`~.._http.error_body`), which OpenAI's clients and
:class:`~...transport.HttpTransport` both read.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
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
)
from ...api import tools_from
from .._http import Api, ErrorInfo, Exchange, HTTPError, Request, Route, error_body, error_info
from ._base import ApiContext, ChatShape, Event, EventEncoder, serve_chat
from .responses import model_entry

__all__ = [
    "API",
    "OPENAI_API",
    "ChatCompletionsRequest",
    "ChatCompletionsStream",
    "openai_model",
    "parse_chat_request",
    "routes",
]

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


@dataclass(frozen=True)
class ChatCompletionsRequest:
    """A Chat Completions body as VS Code takes it (:class:`~._base.ChatRequest`)."""

    model: str
    messages: list[ChatMessage]
    options: ChatRequestOptions
    stream: bool
    include_usage: bool = False
    """``stream_options.include_usage``: a last chunk with ``usage`` and no choices."""


def parse_chat_request(body: Mapping[str, Any]) -> ChatCompletionsRequest:
    """The VS Code request for a Chat Completions body (sans-IO).

    Raises :class:`~lmbridge.errors.ConversionError` or :class:`~.._http.HTTPError` (with
    OpenAI's ``param``) naming what is wrong; the route answers either as a 400.
    """
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
    model = body.get("model")
    if not isinstance(model, str):
        raise HTTPError(400, "model: expected a string", param="model")
    stream_options = body.get("stream_options")
    return ChatCompletionsRequest(
        model=model,
        messages=messages,
        options=options,
        stream=bool(body.get("stream")),
        include_usage=isinstance(stream_options, Mapping)
        and bool(stream_options.get("include_usage")),
    )


class ChatCompletionsStream:
    """VS Code parts -> ``chat.completion.chunk`` events, and the non-streamed completion
    (an :class:`~._base.EventStream`). ``model`` is the id of the VS Code model that answers,
    as OpenAI names the model that answered rather than the alias asked for."""

    def __init__(self, model: str, input_tokens: int, include_usage: bool = False) -> None:
        self._model = model
        self._input_tokens = input_tokens
        self._include_usage = include_usage
        self._ident = f"chatcmpl-{uuid.uuid4().hex}"
        self._created = int(time.time())
        self._calls = 0
        self._parts: list[ResponsePart] = []
        self._output_tokens = 0

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> Event:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return None, self._head("chat.completion.chunk", choices=[choice])

    def _head(self, kind: str, **rest: Any) -> dict[str, Any]:
        return {
            "id": self._ident,
            "object": kind,
            "created": self._created,
            "model": self._model,
            **rest,
        }

    def _usage(self) -> dict[str, int]:
        prompt, completion = self._input_tokens, self._output_tokens
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def start(self) -> list[Event]:
        """The first chunk: the assistant's role."""
        return [self._chunk({"role": "assistant", "content": ""})]

    def feed(self, part: ResponsePart) -> list[Event]:
        """One chunk for a text, reasoning or tool-call part."""
        self._parts.append(part)
        if isinstance(part, TextPart):
            return [self._chunk({"content": part.value})]
        if isinstance(part, ThinkingPart):
            return [self._chunk({"reasoning_content": part.text})]
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
            return [self._chunk({"tool_calls": [call]})]
        return []

    def _finish_reason(self) -> str:
        return "tool_calls" if self._calls else "stop"

    def finish(self, output_tokens: int = 0) -> list[Event]:
        """The finish chunk, then the usage chunk when the client asked for it."""
        self._output_tokens = output_tokens
        events = [self._chunk({}, self._finish_reason())]
        if self._include_usage:
            events.append(
                (None, self._head("chat.completion.chunk", choices=[], usage=self._usage()))
            )
        return events

    def fail(self, error: BaseException) -> list[Event]:
        """An ``error`` event: OpenAI's clients raise an APIError for it."""
        return [(None, error_body(error_info(error)))]

    def body(self) -> dict[str, Any]:
        """The ``chat.completion`` object of the parts fed."""
        message = to_chat_completions_message(self._parts)
        thinking = "".join(p.text for p in self._parts if isinstance(p, ThinkingPart))
        if thinking:
            message["reasoning_content"] = thinking
        choice = {
            "index": 0,
            "message": message,
            "finish_reason": self._finish_reason(),
            "logprobs": None,
        }
        return self._head("chat.completion", choices=[choice], usage=self._usage())


class _ChunkEncoder(EventEncoder):
    """The chunks as SSE, ``data: [DONE]`` after the last one, and the endpoint's own error
    shape (which :class:`~...transport.HttpTransport` and OpenAI's clients both read)."""

    def finish(self) -> bytes:
        return super().finish() + b"data: [DONE]\n\n"

    def fail(self, error: ErrorInfo) -> bytes:
        return self._frames([(None, error_body(error))])


_SHAPE = ChatShape(
    api=OPENAI_API,
    parse=parse_chat_request,
    events=lambda request, tokens, model: ChatCompletionsStream(
        model.id, tokens, request.include_usage
    ),
    ping=b": keep-alive\n\n",
    encoder=_ChunkEncoder,
)


openai_model = model_entry
"""A VS Code model in OpenAI's model shape (:func:`.responses.model_entry`)."""


def routes(context: ApiContext) -> list[Route]:
    """``POST /v1/chat/completions`` (through :func:`~._base.serve_chat`, as every agents'
    API) and the model list in OpenAI's shape (every client that does not send
    ``anthropic-version``): VS Code's models by id, then the names of
    ``lmbridge.endpoint.models`` (:meth:`~._base.ApiContext.model_entries`)."""

    async def chat(request: Request, out: Exchange) -> None:
        """``POST /v1/chat/completions`` (what is taken how: the module docstring)."""
        await serve_chat(context, request, out, _SHAPE)

    async def models(request: Request, out: Exchange) -> None:
        entries = await context.model_entries()
        await out.json(200, {"object": "list", "data": [model_entry(m, n) for n, m in entries]})

    async def model(request: Request, out: Exchange) -> None:
        name = request.params["model"]
        await out.json(200, model_entry(await context.resolve(name), name))

    return [
        Route("POST", "/v1/chat/completions", chat, OPENAI_API),
        Route("GET", "/v1/models", models, OPENAI_API),
        Route("GET", "/v1/models/{model}", model, OPENAI_API),
    ]


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
