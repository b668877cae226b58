"""The Anthropic Messages API (``POST /v1/messages``) over VS Code's models.

``POST /v1/messages`` (also with Claude Code's ``?beta=true``), ``POST
/v1/messages/count_tokens``, and ``GET /v1/models`` in Anthropic's shape for clients that send
``anthropic-version``. Written against ``anthropic-version: 2023-06-01`` and what Claude Code
sends. The request is read by :func:`parse_messages_request`, the VS Code parts streamed
through a :class:`MessagesStream` (which also builds the non-streamed message), failures
answered with :func:`error_body` / :func:`error_for`: all sans-IO; :func:`routes` serves them
through :func:`~._base.serve_chat`.

Requests are taken as Claude Code sends them: ``system`` as text or blocks (``cache_control``
ignored), a ``"role": "system"`` message inside ``messages`` (not allowed by the public API;
Claude Code sends it for models that are not Claude's), ``thinking`` (``enabled`` with a
budget, ``adaptive``), ``context_management``, ``output_config``, ``metadata``, tools with
``defer_loading`` or ``cache_control``, and any unknown field, ignored. Server tools
(``web_search_...``, ``bash_...``, ``text_editor_...``), which VS Code's models cannot run,
are left out with one log line. ``max_tokens``, ``temperature``, ``top_p``, ``top_k``,
``stop_sequences``, ``thinking`` and ``context_management`` go to VS Code as model options
(a provider that knows them uses them; others ignore them).

Responses: text in ``text`` blocks, reasoning in ``thinking`` blocks (with a
``signature_delta`` when the part carries an Anthropic signature; ``redacted_thinking`` for
redacted reasoning), tool calls in ``tool_use`` blocks whose input streams as one
``input_json_delta``. ``stop_reason`` is ``tool_use`` after a tool call, else ``end_turn``
(VS Code does not report why a model stopped; Claude Code treats ``max_tokens`` as an error).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ....convert import from_anthropic
from ....errors import ConversionError
from ....parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolMode,
)
from ...api import tools_from
from ...classify import ChatRequestError, ErrorKind
from ...guard import PromptTooLongError, estimate_input_tokens, fit_to_model, is_overloaded
from ...transport import ChatModel
from .._http import Api, ErrorInfo, Exchange, Request, Route
from .._stream import sse_event
from ._base import ApiContext, ChatShape, describer, serve_chat

__all__ = [
    "ANTHROPIC_API",
    "API",
    "AnthropicEvent",
    "MessagesRequest",
    "MessagesStream",
    "count_tokens_body",
    "error_body",
    "error_for",
    "is_anthropic",
    "model_entry",
    "models_list",
    "parse_messages_request",
    "routes",
]

_log = logging.getLogger("lmbridge.client.anthropic")

AnthropicEvent = tuple[str, dict[str, Any]]
"""One server-sent event: its name (``message_start`` ...) and its JSON data."""

# Request fields passed on to VS Code as model options (see the module docstring).
_MODEL_OPTIONS = (
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "thinking",
    "context_management",
)


@dataclass(slots=True)
class MessagesRequest:
    """A Messages request as VS Code takes it."""

    model: str
    """The model name the client asked for."""
    messages: list[ChatMessage]
    """The conversation, the system prompt first."""
    options: ChatRequestOptions
    """Tools, tool mode and model options."""
    stream: bool = False
    """Whether the client wants server-sent events."""
    left_out_tools: list[str] = field(default_factory=list)
    """Names of the tools VS Code's models cannot run (server tools)."""


def _invalid(message: str) -> ConversionError:
    return ConversionError(message)


def _system_text(content: Any, where: str) -> str:
    """The text of a ``role: system`` message inside ``messages``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _invalid(f"{where}.content: expected a string or a list of text blocks")
    texts = []
    for j, block in enumerate(content):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            raise _invalid(f"{where}.content[{j}]: expected a text block in a system message")
        text = block.get("text")
        if not isinstance(text, str):
            raise _invalid(f"{where}.content[{j}].text: expected a string")
        texts.append(text)
    return "\n\n".join(texts)


def _split_system(
    messages: list[Any], system: Any
) -> tuple[list[Any], str | list[Any] | None, list[tuple[int, str]]]:
    """Take ``role: system`` messages out of ``messages``.

    Leading ones join the system prompt; a later one stays where it was, as user text (a
    turn of the conversation cannot be a system prompt), returned as ``(index, text)``.
    """
    rest: list[Any] = []
    leading: list[str] = []
    later: list[tuple[int, str]] = []
    for i, msg in enumerate(messages):
        if isinstance(msg, Mapping) and msg.get("role") == "system":
            text = _system_text(msg.get("content"), f"messages[{i}]")
            if rest:
                later.append((len(rest), text))
            else:
                leading.append(text)
        else:
            rest.append(msg)
    if not leading:
        return rest, system, later
    if system is None or system == "":
        return rest, "\n\n".join(leading), later
    if isinstance(system, str):
        return rest, "\n\n".join([system, *leading]), later
    if isinstance(system, list):
        return rest, [*system, *({"type": "text", "text": t} for t in leading)], later
    return rest, system, later


_BLOCKS = frozenset(
    {"text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"}
)


# Blocks only Anthropic's servers make (their tools' calls and results, uploads).
_SERVER_BLOCKS = (
    "server_tool",
    "mcp_tool",
    "web_search",
    "web_fetch",
    "code_execution",
    "bash_code_execution",
    "text_editor_code_execution",
    "container_upload",
)


def _result_block(block: Any) -> Any:
    """A block inside a tool result that the converter does not know, as text."""
    if not isinstance(block, Mapping) or block.get("type") in ("text", "image", "document"):
        return block
    kind = block.get("type")
    if kind == "tool_reference":  # what Claude Code's ToolSearch returns
        return {"type": "text", "text": f"[tool {block.get('tool_name')} is available]"}
    if kind == "search_result":
        inner = block.get("content")
        texts = (
            [b.get("text") for b in inner or [] if isinstance(b, Mapping)]
            if isinstance(inner, list)
            else []
        )
        text = "\n".join(t for t in texts if isinstance(t, str))
        return {
            "type": "text",
            "text": f"{block.get('title') or block.get('source') or ''}\n{text}".strip(),
        }
    return {"type": "text", "text": f"[{kind} block]"}


def _tolerated(messages: list[Any]) -> list[Any]:
    """``messages`` without the blocks of Anthropic's server features, which only its own
    servers produce (server tool calls and results, container uploads ...): they are left
    out (with one log line); search results, tool references and unknown blocks inside tool
    results become text."""
    out: list[Any] = []
    dropped: set[str] = set()
    for msg in messages:
        content = msg.get("content") if isinstance(msg, Mapping) else None
        if not isinstance(content, list):
            out.append(msg)
            continue
        blocks = []
        for block in content:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind in ("search_result", "tool_reference"):
                blocks.append(_result_block(block))
                continue
            if isinstance(kind, str) and kind not in _BLOCKS and kind.startswith(_SERVER_BLOCKS):
                dropped.add(kind)
                continue
            if kind == "tool_result" and isinstance(block.get("content"), list):
                block = {**block, "content": [_result_block(b) for b in block["content"]]}
            blocks.append(block)
        out.append({**msg, "content": blocks})
    if dropped:
        _log.info(
            "Messages request: left out blocks of Anthropic's server features: %s",
            ", ".join(sorted(dropped)),
        )
    return out


def _tools(raw: Any) -> tuple[list[ChatTool], list[str]]:
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        raise _invalid("tools: expected a list")
    custom: list[Any] = []
    left_out: list[str] = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, Mapping):
            raise _invalid(f"tools[{i}]: expected an object")
        kind = tool.get("type")
        if kind in (None, "custom") or "input_schema" in tool:
            custom.append({k: v for k, v in tool.items() if k != "type"})
        else:
            left_out.append(str(tool.get("name") or kind))
    return tools_from(custom), left_out


def _tool_choice(choice: Any, tools: list[ChatTool]) -> tuple[list[ChatTool], ToolMode]:
    if choice is None:
        return tools, ToolMode.AUTO
    if not isinstance(choice, Mapping):
        raise _invalid("tool_choice: expected an object such as {'type': 'auto'}")
    kind = choice.get("type")
    if kind == "auto":
        return tools, ToolMode.AUTO
    if kind == "none":
        return [], ToolMode.AUTO
    if kind == "any":
        return tools, ToolMode.REQUIRED if tools else ToolMode.AUTO
    if kind == "tool":
        name = choice.get("name")
        chosen = [t for t in tools if t.name == name]
        if not chosen:
            raise _invalid(f"tool_choice: no tool named {name!r} in tools")
        return chosen, ToolMode.REQUIRED
    raise _invalid(f"tool_choice.type: expected 'auto', 'any', 'tool' or 'none', got {kind!r}")


def parse_messages_request(body: Mapping[str, Any], *, count_only: bool = False) -> MessagesRequest:
    """The VS Code request for a Messages (or ``count_tokens``) body.

    Raises :class:`~lmbridge.errors.ConversionError` naming what is wrong (the route answers
    it as ``invalid_request_error``).
    """
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("model: expected a non-empty string")
    raw = body.get("messages")
    if not isinstance(raw, list):
        raise _invalid("messages: expected a list")
    max_tokens = body.get("max_tokens")
    if (
        not count_only
        and max_tokens is not None
        and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1)
    ):
        raise _invalid(f"max_tokens: expected a positive integer, got {max_tokens!r}")
    rest, system, later = _split_system(_tolerated(raw), body.get("system"))
    if system is not None and not isinstance(system, (str, list)):
        raise _invalid("system: expected a string or a list of text blocks")
    if not rest:
        raise _invalid("messages: at least one user or assistant message is needed")
    messages = _with_later_system(rest, system, later) if later else from_anthropic(rest, system)
    tools, left_out = _tools(body.get("tools"))
    tools, mode = _tool_choice(body.get("tool_choice"), tools)
    if left_out:
        _log.info(
            "Messages request: left out tools VS Code's models cannot run: %s",
            ", ".join(left_out),
        )
    model_options = {k: body[k] for k in _MODEL_OPTIONS if body.get(k) is not None}
    return MessagesRequest(
        model=model,
        messages=messages,
        options=ChatRequestOptions(tools=tools, tool_mode=mode, model_options=model_options),
        stream=body.get("stream") is True,
        left_out_tools=left_out,
    )


def _with_later_system(
    rest: list[Any], system: Any, later: list[tuple[int, str]]
) -> list[ChatMessage]:
    """Convert in pieces so that each later system text lands where it was, as user text."""
    out: list[ChatMessage] = []
    start = 0
    for index, text in [*later, (len(rest), "")]:
        out.extend(from_anthropic(rest[start:index], system if start == 0 else None))
        if text:
            out.append(ChatMessage.user(text))
        start = index
    return out


# --------------------------------------------------------------------------- responses


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


class MessagesStream:
    """VS Code response parts -> the Messages event sequence, and the whole message.

    ::

        stream = MessagesStream(model="claude-sonnet-4-5", input_tokens=1200)
        events = stream.start()                  # message_start
        events += stream.feed(part)              # content blocks, for each part
        events += stream.finish(output_tokens)   # last block's stop, message_delta, message_stop
        body = stream.message()                  # the non-streamed answer

    Every sequence is well formed: blocks open before their deltas and close once, indices
    count from 0, ``message_stop`` comes last. :meth:`fail` ends a stream with an ``error``
    event instead (what was sent stays valid).
    """

    def __init__(
        self,
        *,
        model: str,
        input_tokens: int = 0,
        message_id: str | None = None,
        new_id: Callable[[str], str] = _new_id,
    ) -> None:
        self.model = model
        self.id = message_id or new_id("msg")
        self.input_tokens = input_tokens
        self.content: list[dict[str, Any]] = []
        """The blocks so far, as the non-streamed message holds them."""
        self.stop_reason: str | None = None
        self.output_tokens = 0
        self._open: str | None = None  # "text" or "thinking": the block that takes more
        self._thinking_id: str | None = None
        self._started = False
        self._done = False

    def _usage(self, output_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": output_tokens,
        }

    def start(self) -> list[AnthropicEvent]:
        """``message_start``."""
        self._started = True
        message: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self._usage(0),
        }
        return [("message_start", {"type": "message_start", "message": message})]

    @staticmethod
    def ping() -> list[AnthropicEvent]:
        """A ``ping`` (sent while waiting, so clients and proxies see the stream is alive)."""
        return [("ping", {"type": "ping"})]

    def _close(self) -> list[AnthropicEvent]:
        if self._open is None:
            return []
        self._open = None
        self._thinking_id = None
        index = len(self.content) - 1
        return [("content_block_stop", {"type": "content_block_stop", "index": index})]

    def _begin(self, block: dict[str, Any], initial: dict[str, Any]) -> list[AnthropicEvent]:
        self.content.append(block)
        return [
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": len(self.content) - 1,
                    "content_block": initial,
                },
            )
        ]

    def _delta(self, delta: dict[str, Any]) -> AnthropicEvent:
        return (
            "content_block_delta",
            {"type": "content_block_delta", "index": len(self.content) - 1, "delta": delta},
        )

    def feed(self, part: ResponsePart) -> list[AnthropicEvent]:
        """The events for one part (none for data parts, which the API has no block for)."""
        if not self._started or self._done:
            raise RuntimeError("feed() needs start() first and no finish() yet")
        events: list[AnthropicEvent] = []
        if isinstance(part, TextPart):
            if not part.value:
                return events
            if self._open != "text":
                events += self._close()
                events += self._begin({"type": "text", "text": ""}, {"type": "text", "text": ""})
                self._open = "text"
            self.content[-1]["text"] += part.value
            events.append(self._delta({"type": "text_delta", "text": part.value}))
        elif isinstance(part, ThinkingPart):
            events += self._thinking(part)
        elif isinstance(part, ToolCallPart):
            events += self._close()
            events += self._begin(
                {"type": "tool_use", "id": part.call_id, "name": part.name, "input": part.input},
                {"type": "tool_use", "id": part.call_id, "name": part.name, "input": {}},
            )
            arguments = json.dumps(part.input, ensure_ascii=False)
            events.append(self._delta({"type": "input_json_delta", "partial_json": arguments}))
            self._open = "tool_use"
            events += self._close()
            self.stop_reason = "tool_use"
        else:
            _log.debug("Messages stream: a %s part has no Anthropic block; left out", part.kind)
        return events

    def _thinking(self, part: ThinkingPart) -> list[AnthropicEvent]:
        meta = part.metadata or {}
        redacted = meta.get("redactedData")
        if isinstance(redacted, str) and redacted:
            events = self._close()
            block = {"type": "redacted_thinking", "data": redacted}
            events += self._begin(block, dict(block))
            self._open = "redacted_thinking"
            return events + self._close()
        events = []
        if self._open != "thinking" or (part.id is not None and part.id != self._thinking_id):
            events += self._close()
            events += self._begin(
                {"type": "thinking", "thinking": "", "signature": ""},
                {"type": "thinking", "thinking": "", "signature": ""},
            )
            self._open = "thinking"
            self._thinking_id = part.id
        text = part.text
        if text:
            self.content[-1]["thinking"] += text
            events.append(self._delta({"type": "thinking_delta", "thinking": text}))
        signature = meta.get("signature")
        if isinstance(signature, str) and signature:
            self.content[-1]["signature"] = signature
            events.append(self._delta({"type": "signature_delta", "signature": signature}))
            # a signature closes its block: the next reasoning is another block
            events += self._close()
        return events

    def finish(self, output_tokens: int = 0) -> list[AnthropicEvent]:
        """Close the open block; ``message_delta`` with the stop reason and usage;
        ``message_stop``."""
        if self._done:
            return []
        events = self._close()
        self._done = True
        self.output_tokens = max(0, output_tokens)
        self.stop_reason = self.stop_reason or "end_turn"
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": self.stop_reason, "stop_sequence": None},
                    "usage": self._usage(self.output_tokens),
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    def fail(self, error: BaseException) -> list[AnthropicEvent]:
        """End the stream with an ``error`` event (Anthropic's SDKs raise it)."""
        self._done = True
        _, body = error_for(error)
        return [("error", body)]

    def body(self) -> dict[str, Any]:
        """The non-streamed answer (:meth:`message`)."""
        return self.message()

    def message(self) -> dict[str, Any]:
        """The non-streamed answer: the whole message with its blocks, stop reason and usage."""
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [dict(b) for b in self.content],
            "stop_reason": self.stop_reason or "end_turn",
            "stop_sequence": None,
            "usage": self._usage(self.output_tokens),
        }


# --------------------------------------------------------------------------- other answers


def count_tokens_body(tokens: int) -> dict[str, Any]:
    """The answer of ``POST /v1/messages/count_tokens``."""
    return {"input_tokens": tokens}


def _support(value: bool) -> dict[str, bool]:
    return {"supported": value}


def model_entry(model: ChatModel, name: str | None = None) -> dict[str, Any]:
    """One model in the shape of ``GET /v1/models`` (Anthropic), with lmbridge's extras.

    Of the capabilities only image input is known (from VS Code); the features that need
    Anthropic's servers (batch, server tools, code execution ...) are not offered.
    """
    no = _support(False)
    return {
        "type": "model",
        "id": name or model.id,
        "display_name": model.name,
        "created_at": "1970-01-01T00:00:00Z",
        "lifecycle": "active",
        "max_input_tokens": model.max_input_tokens or None,
        "capabilities": {
            "batch": no,
            "citations": no,
            "code_execution": no,
            "context_management": {"supported": False},
            "effort": {"supported": False, "low": no, "medium": no, "high": no, "max": no},
            "image_input": _support(model.image_input),
            "pdf_input": no,
            "server_tools": {"supported": False, "code_execution": no, "web_search": no},
            "structured_outputs": no,
            "thinking": {
                "supported": False,
                "types": {
                    "adaptive": no,
                    "between_tools": no,
                    "disabled": _support(True),
                    "enabled": no,
                },
            },
        },
        "tool_calling": model.tool_calling,
        "vendor": model.vendor,
        "family": model.family,
    }


def models_list(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The page of ``GET /v1/models`` (Anthropic): everything in one page."""
    return {
        "data": list(entries),
        "has_more": False,
        "first_id": entries[0]["id"] if entries else None,
        "last_id": entries[-1]["id"] if entries else None,
    }


_BY_KIND = {
    ErrorKind.NOT_SIGNED_IN: (403, "permission_error"),
    ErrorKind.NO_PERMISSION: (403, "permission_error"),
    ErrorKind.RATE_LIMITED: (429, "rate_limit_error"),
    ErrorKind.MODEL_NOT_FOUND: (404, "not_found_error"),
    ErrorKind.CANCELLED: (499, "api_error"),
    ErrorKind.INTERNAL: (500, "api_error"),
}


def error_body(type: str, message: str) -> dict[str, Any]:
    """An error in Anthropic's shape (``{"type": "error", "error": {"type", "message"}}``)."""
    return {"type": "error", "error": {"type": type, "message": message}}


def error_for(error: BaseException) -> tuple[int, dict[str, Any]]:
    """The HTTP status and Anthropic error body for a failure.

    Context length: 400 ``invalid_request_error`` "prompt is too long: N tokens > M maximum"
    (the text Claude Code reacts to by compacting); bad requests: 400
    ``invalid_request_error``; VS Code's errors by kind, a failing service as 529
    ``overloaded_error``.
    """
    if isinstance(error, PromptTooLongError):
        return 400, error_body(
            "invalid_request_error",
            f"prompt is too long: {error.tokens} tokens > {error.limit} maximum",
        )
    if isinstance(error, ConversionError):
        return 400, error_body("invalid_request_error", str(error))
    if isinstance(error, ChatRequestError):
        if is_overloaded(error):
            return 529, error_body("overloaded_error", str(error))
        status, kind = _BY_KIND[error.kind]
        return status, error_body(kind, str(error))
    return 500, error_body("api_error", f"internal error: {type(error).__name__}: {error}")


# --------------------------------------------------------------------------- routes


def is_anthropic(headers: Mapping[str, str]) -> bool:
    """Whether a request comes from an Anthropic client (it sends ``anthropic-version``)."""
    return "anthropic-version" in headers


_TYPES = {"cancelled": "api_error", "timeout_error": "timeout_error"}


def _render(info: ErrorInfo) -> dict[str, Any]:
    return error_body(_TYPES.get(info.type, info.type), info.message)


ANTHROPIC_API = Api(
    "anthropic",
    _render,
    token_headers=("x-api-key", "authorization"),
    describe_error=describer(error_for),
)
"""Anthropic's error shape; the token as ``x-api-key`` or a bearer token (Claude Code's
``ANTHROPIC_AUTH_TOKEN``)."""
API = ANTHROPIC_API

_SHAPE = ChatShape(
    api=ANTHROPIC_API,
    parse=parse_messages_request,
    events=lambda request, tokens, _model: MessagesStream(model=request.model, input_tokens=tokens),
    ping=sse_event({"type": "ping"}, "ping"),
)


def routes(context: ApiContext) -> list[Route]:
    """Messages, its token count, and the model list for Anthropic's clients."""

    async def messages(request: Request, out: Exchange) -> None:
        """``POST /v1/messages``: a Messages request, streamed (SSE) or not."""
        await serve_chat(context, request, out, _SHAPE)

    async def count_tokens(request: Request, out: Exchange) -> None:
        """``POST /v1/messages/count_tokens``: the estimate the context guard uses."""
        body = parse_messages_request(request.json(), count_only=True)
        model = await context.resolve(body.model)
        messages = fit_to_model(body.messages, model)
        tokens = estimate_input_tokens(model, messages, body.options)
        await out.json(200, count_tokens_body(tokens))

    async def models(request: Request, out: Exchange) -> None:
        entries = await context.model_entries()
        await out.json(200, models_list([model_entry(m, n) for n, m in entries]))

    async def model(request: Request, out: Exchange) -> None:
        name = request.params["model"]
        await out.json(200, model_entry(await context.resolve(name), name))

    return [
        Route("POST", "/v1/messages", messages, ANTHROPIC_API),
        Route("POST", "/v1/messages/count_tokens", count_tokens, ANTHROPIC_API),
        Route("GET", "/v1/models", models, ANTHROPIC_API, when=is_anthropic),
        Route("GET", "/v1/models/{model}", model, ANTHROPIC_API, when=is_anthropic),
    ]
