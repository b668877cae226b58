"""The Gemini API (``/v1beta/models/...``) over VS Code's models.

Routes, as the Gemini API (``v1beta``) names them, so that the google-genai SDK and the Gemini
CLI run on VS Code's models with a base URL of the endpoint:

==============================================  =============================================
``POST /v1beta/models/{model}:generateContent``  one ``GenerateContentResponse``
``POST .../{model}:streamGenerateContent``       SSE with ``?alt=sse`` (one ``data:`` event
                                                 per response object), else one JSON array
                                                 sent piece by piece
``POST .../{model}:countTokens``                 ``{"totalTokens"}`` (the context guard's
                                                 estimate)
``GET /v1beta/models``, ``/v1beta/models/{m}``   the model list, Gemini's shape
==============================================  =============================================

The token comes as ``x-goog-api-key`` (what Gemini's SDKs send), ``?key=`` or ``Authorization:
Bearer``, checked on the request head like every route's. ``{model}`` is any name the other
APIs take (:meth:`~._base.ApiContext.resolve`: ids, selectors, families, the user's
``lmbridge.endpoint.models``), ``models/`` prefix or not; unknown ``gemini-*`` names get the
first model VS Code offers (:data:`~...model_names.DEFAULT_MODEL_MAP`).

Requests (sans-IO, :func:`parse_generate_request`): ``contents`` and ``systemInstruction``
through :func:`~lmbridge.convert.from_gemini` (the converter the provider side's tests check
against :func:`~lmbridge.convert.to_gemini`: function calls and responses, thought signatures,
inline data); ``tools[].functionDeclarations`` with ``parameters`` (Gemini's OpenAPI schema,
types lower-cased into JSON Schema) or ``parametersJsonSchema``; other tools
(``googleSearch``, ``codeExecution`` ...), which VS Code's models cannot run, are left out with
one log line; ``toolConfig.functionCallingConfig`` (``AUTO``, ``ANY`` with
``allowedFunctionNames``, ``NONE``, ``VALIDATED`` as ``AUTO``); ``generationConfig``:
``temperature``, ``topP``, ``topK``, ``maxOutputTokens``, ``stopSequences``, ``seed``,
``presencePenalty``, ``frequencyPenalty``, ``thinkingConfig`` go to VS Code as model options
(``top_p``, ``max_tokens``, ``stop`` ... as every other API names them),
``responseMimeType: application/json`` with ``responseSchema`` / ``responseJsonSchema``
becomes an instruction as in Chat Completions (VS Code's models have no JSON mode);
``candidateCount`` other than 1 is refused. Field names in snake case are read too.

Answers (:class:`GeminiStream`): text as ``text`` parts; reasoning as ``thought: true`` parts
when ``thinkingConfig.includeThoughts`` asks for them; Gemini thought signatures (the
``thoughtSignature`` metadata :mod:`lmbridge.upstream.gemini` reports) back on the part they
came with, or on the next part when the thought itself is not shown; tool calls as
``functionCall`` parts with the call's ``id``; ``finishReason`` ``STOP`` and
``usageMetadata`` (``promptTokenCount``: the guard's estimate, ``candidatesTokenCount``,
``totalTokenCount``) in the last object. Errors are Gemini's ``{"error": {"code", "message",
"status"}}`` (``INVALID_ARGUMENT``, ``UNAUTHENTICATED``, ``RESOURCE_EXHAUSTED`` with a
``RetryInfo`` detail ...), and an error after ``200`` is one more object in the stream, which
the SDK raises.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ....convert import from_gemini
from ....errors import ConversionError
from ....parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatRole,
    ChatTool,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolMode,
)
from ...classify import ChatRequestError, ErrorKind
from ...guard import PromptTooLongError, estimate_input_tokens, fit_to_model, is_overloaded
from ...transport import ChatModel
from .._http import Api, ErrorInfo, Exchange, HTTPError, Request, Route
from ._base import ApiContext, ChatShape, EventEncoder, EventStream, describer, serve_chat
from .openai_chat import _format_instruction, _with_instruction

__all__ = [
    "API",
    "GEMINI_API",
    "GeminiStream",
    "GenerateRequest",
    "count_tokens_body",
    "error_body",
    "error_for",
    "model_entry",
    "parse_generate_request",
    "routes",
]

_log = logging.getLogger("lmbridge.client.gemini")

GeminiEvent = tuple[None, dict[str, Any]]
"""One response object of the stream (SSE events of the Gemini API have no name)."""

# generationConfig field -> the model option every other API sends it as
_MODEL_OPTIONS = {
    "temperature": "temperature",
    "topP": "top_p",
    "topK": "top_k",
    "maxOutputTokens": "max_tokens",
    "stopSequences": "stop",
    "seed": "seed",
    "presencePenalty": "presence_penalty",
    "frequencyPenalty": "frequency_penalty",
    "thinkingConfig": "thinkingConfig",
}
_SCHEMA_KEYS = ("properties", "items", "anyOf")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _camel_keys(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Top-level keys in camel case (Google's JSON mapping takes both spellings)."""
    return {_camel(k) if "_" in k else k: v for k, v in obj.items()}


@dataclass(slots=True)
class GenerateRequest:
    """A ``generateContent`` request as VS Code takes it."""

    model: str
    """The model name from the path."""
    messages: list[ChatMessage]
    """The conversation, the system instruction first."""
    options: ChatRequestOptions
    """Tools, tool mode and model options."""
    stream: bool = False
    """Whether the path asked for ``streamGenerateContent``."""
    include_thoughts: bool = False
    """``thinkingConfig.includeThoughts``: reasoning is answered as thought parts."""
    left_out_tools: list[str] = field(default_factory=list)
    """Tools VS Code's models cannot run (Google's own: search, code execution ...)."""


def _json_schema(schema: Any) -> Any:
    """Gemini's OpenAPI schema as JSON Schema: upper-case ``type`` names lower-cased."""
    if isinstance(schema, list):
        return [_json_schema(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out[key] = value.lower()
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {k: _json_schema(v) for k, v in value.items()}
        elif key in _SCHEMA_KEYS:
            out[key] = _json_schema(value)
        else:
            out[key] = value
    return out


def _tools(raw: Any) -> tuple[list[ChatTool], list[str]]:
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        raise ConversionError("tools: expected a list")
    tools: list[ChatTool] = []
    left_out: list[str] = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, Mapping):
            raise ConversionError(f"tools[{i}]: expected an object")
        tool = _camel_keys(tool)
        for key in tool:
            if key != "functionDeclarations":
                left_out.append(key)
        decls = tool.get("functionDeclarations") or []
        if not isinstance(decls, list):
            raise ConversionError(f"tools[{i}].functionDeclarations: expected a list")
        for j, decl in enumerate(decls):
            where = f"tools[{i}].functionDeclarations[{j}]"
            if not isinstance(decl, Mapping):
                raise ConversionError(f"{where}: expected an object")
            decl = _camel_keys(decl)
            name = decl.get("name")
            if not isinstance(name, str) or not name:
                raise ConversionError(f"{where}.name: expected a non-empty string")
            description = decl.get("description") or ""
            if not isinstance(description, str):
                raise ConversionError(f"{where}.description: expected a string")
            schema = decl.get("parametersJsonSchema")
            if schema is None and decl.get("parameters") is not None:
                schema = _json_schema(decl["parameters"])
            if schema is not None and not isinstance(schema, dict):
                raise ConversionError(f"{where}.parameters: expected an object")
            tools.append(ChatTool(name, description, schema))
    return tools, left_out


def _tool_config(config: Any, tools: list[ChatTool]) -> tuple[list[ChatTool], ToolMode]:
    if config is None:
        return tools, ToolMode.AUTO
    if not isinstance(config, Mapping):
        raise ConversionError("toolConfig: expected an object")
    calling = _camel_keys(config).get("functionCallingConfig")
    if calling is None:
        return tools, ToolMode.AUTO
    if not isinstance(calling, Mapping):
        raise ConversionError("toolConfig.functionCallingConfig: expected an object")
    calling = _camel_keys(calling)
    mode = calling.get("mode") or "AUTO"
    allowed = calling.get("allowedFunctionNames")
    if allowed is not None:
        if not isinstance(allowed, list) or not all(isinstance(n, str) for n in allowed):
            raise ConversionError(
                "toolConfig.functionCallingConfig.allowedFunctionNames: expected a list of names"
            )
        missing = [n for n in allowed if n not in {t.name for t in tools}]
        if missing:
            raise ConversionError(
                "toolConfig.functionCallingConfig.allowedFunctionNames: no function named "
                f"{missing[0]!r} in tools"
            )
    mode = mode.upper() if isinstance(mode, str) else mode
    if mode == "NONE":
        return [], ToolMode.AUTO
    if mode == "ANY":
        chosen = [t for t in tools if allowed is None or t.name in allowed]
        return chosen, ToolMode.REQUIRED if chosen else ToolMode.AUTO
    if mode in ("AUTO", "VALIDATED", "MODE_UNSPECIFIED"):
        return tools, ToolMode.AUTO
    raise ConversionError(
        "toolConfig.functionCallingConfig.mode: expected 'AUTO', 'ANY', 'NONE' or 'VALIDATED', "
        f"got {mode!r}"
    )


def _generation(config: Any) -> tuple[dict[str, Any], bool, dict[str, Any] | None]:
    """Model options, ``includeThoughts``, and a ``response_format`` for a JSON answer."""
    if config is None:
        return {}, False, None
    if not isinstance(config, Mapping):
        raise ConversionError("generationConfig: expected an object")
    config = _camel_keys(config)
    count = config.get("candidateCount")
    if count is not None and (count != 1 or isinstance(count, bool)):
        raise ConversionError(
            f"generationConfig.candidateCount: {count!r} candidates were asked for, but VS "
            "Code's models answer one per request: leave it out or set it to 1"
        )
    options = {
        name: config[key] for key, name in _MODEL_OPTIONS.items() if config.get(key) is not None
    }
    thinking = config.get("thinkingConfig")
    thoughts = isinstance(thinking, Mapping) and bool(_camel_keys(thinking).get("includeThoughts"))
    response_format: dict[str, Any] | None = None
    if config.get("responseMimeType") == "application/json":
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if schema is None:
            response_format = {"type": "json_object"}
        else:
            response_format = {
                "type": "json_schema",
                "json_schema": {"schema": _json_schema(schema)},
            }
    return options, thoughts, response_format


def parse_generate_request(
    body: Mapping[str, Any], *, model: str = "", stream: bool = False, count_only: bool = False
) -> GenerateRequest:
    """The VS Code request for a ``generateContent`` body (``model`` and ``stream`` come from
    the path). Raises :class:`~lmbridge.errors.ConversionError` naming what is wrong."""
    body = _camel_keys(body)
    if count_only and "generateContentRequest" in body:
        inner = body["generateContentRequest"]
        if not isinstance(inner, Mapping):
            raise ConversionError("generateContentRequest: expected an object")
        body = _camel_keys(inner)
    contents = body.get("contents")
    if not isinstance(contents, list):
        raise ConversionError("contents: expected a list of Content objects")
    system = body.get("systemInstruction")
    if system is not None and not isinstance(system, (str, Mapping, list)):
        raise ConversionError("systemInstruction: expected a Content object")
    messages = from_gemini(contents, system)
    if not count_only and all(m.role is ChatRole.ASSISTANT for m in messages):
        raise ConversionError("contents: at least one user turn is needed")
    tools, left_out = _tools(body.get("tools"))
    tools, mode = _tool_config(body.get("toolConfig"), tools)
    model_options, thoughts, response_format = _generation(body.get("generationConfig"))
    if left_out:
        _log.info(
            "Gemini request: left out tools VS Code's models cannot run: %s",
            ", ".join(sorted(set(left_out))),
        )
    instruction = _format_instruction(response_format)
    if instruction is not None and messages:
        messages = _with_instruction(messages, instruction)
    return GenerateRequest(
        model=model,
        messages=messages,
        options=ChatRequestOptions(tools=tools, tool_mode=mode, model_options=model_options),
        stream=stream,
        include_thoughts=thoughts,
        left_out_tools=left_out,
    )


# --------------------------------------------------------------------------- answers


class GeminiStream:
    """VS Code response parts -> ``GenerateContentResponse`` objects, and the whole answer.

    ::

        stream = GeminiStream(model="gemini-2.5-pro", input_tokens=1200)
        events = stream.start()                  # nothing: Gemini has no opening object
        events += stream.feed(part)              # one object per part that shows
        events += stream.finish(output_tokens)   # finishReason and usageMetadata
        body = stream.body()                     # the non-streamed answer
    """

    def __init__(
        self,
        *,
        model: str,
        input_tokens: int = 0,
        include_thoughts: bool = False,
        response_id: str | None = None,
    ) -> None:
        self.model = model
        self.id = response_id or uuid.uuid4().hex[:24]
        self.input_tokens = input_tokens
        self.include_thoughts = include_thoughts
        self.parts: list[dict[str, Any]] = []
        """Every part shown so far, as the non-streamed answer holds them."""
        self.output_tokens = 0
        self._pending: dict[str, str] = {}  # signed kind ("text", "functionCall", "any") -> sig
        self._done = False

    def _object(self, parts: list[dict[str, Any]], finish: bool = False) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        obj: dict[str, Any] = {"candidates": [candidate]}
        if finish:
            candidate["finishReason"] = "STOP"
            obj["usageMetadata"] = self._usage()
        obj["modelVersion"] = self.model
        obj["responseId"] = self.id
        return obj

    def _usage(self) -> dict[str, Any]:
        return {
            "promptTokenCount": self.input_tokens,
            "candidatesTokenCount": self.output_tokens,
            "totalTokenCount": self.input_tokens + self.output_tokens,
        }

    def start(self) -> list[GeminiEvent]:
        """Nothing: a Gemini stream starts with its first content."""
        return []

    def _signed(self, part: dict[str, Any], kind: str) -> dict[str, Any]:
        signature = self._pending.pop(kind, None) or self._pending.pop("any", None)
        if signature:
            part["thoughtSignature"] = signature
        return part

    def feed(self, part: ResponsePart) -> list[GeminiEvent]:
        """The object for one part (none for a part Gemini has no field for)."""
        shown: dict[str, Any] | None = None
        if isinstance(part, TextPart):
            if part.value:
                shown = self._signed({"text": part.value}, "text")
        elif isinstance(part, ThinkingPart):
            shown = self._thinking(part)
        elif isinstance(part, ToolCallPart):
            call = {"name": part.name, "args": part.input, "id": part.call_id}
            shown = self._signed({"functionCall": call}, "functionCall")
        else:
            _log.debug("Gemini stream: a %s part has no Gemini field; left out", part.kind)
        if shown is None:
            return []
        self.parts.append(shown)
        return [(None, self._object([shown]))]

    def _thinking(self, part: ThinkingPart) -> dict[str, Any] | None:
        meta = part.metadata or {}
        signature = meta.get("thoughtSignature")
        signature = signature if isinstance(signature, str) and signature else None
        signed = meta.get("signedPart")
        if signature and isinstance(signed, str):
            # the signature of the next part of that kind (lmbridge.upstream.gemini)
            self._pending[signed] = signature
            signature = None
        if self.include_thoughts and (part.text or signature):
            shown: dict[str, Any] = {"text": part.text, "thought": True}
            if signature:
                shown["thoughtSignature"] = signature
            return shown
        if signature:
            self._pending["any"] = signature
        return None

    def finish(self, output_tokens: int = 0) -> list[GeminiEvent]:
        """The last object: a signature no part took, ``finishReason``, ``usageMetadata``."""
        if self._done:
            return []
        self._done = True
        self.output_tokens = max(0, output_tokens)
        last: list[dict[str, Any]] = [
            {"text": "", "thoughtSignature": sig} for sig in self._pending.values()
        ]
        self._pending.clear()
        self.parts.extend(last)
        return [(None, self._object(last or [{"text": ""}], finish=True))]

    def fail(self, error: BaseException) -> list[GeminiEvent]:
        """The error as one more object (the google-genai SDK raises it)."""
        self._done = True
        _, body = error_for(error)
        return [(None, body)]

    def body(self) -> dict[str, Any]:
        """The non-streamed answer: every part (adjacent texts joined), finish and usage."""
        merged: list[dict[str, Any]] = []
        for part in self.parts:
            prev = merged[-1] if merged else None
            if (
                prev is not None
                and "text" in part
                and "text" in prev
                and bool(prev.get("thought")) == bool(part.get("thought"))
                and "thoughtSignature" not in prev
            ):
                prev["text"] += part["text"]
                if "thoughtSignature" in part:
                    prev["thoughtSignature"] = part["thoughtSignature"]
                continue
            if part == {"text": ""}:
                continue
            merged.append(dict(part))
        return self._object(merged or [{"text": ""}], finish=True)


# --------------------------------------------------------------------------- other answers


def count_tokens_body(tokens: int) -> dict[str, Any]:
    """The answer of ``:countTokens``."""
    return {"totalTokens": tokens}


def model_entry(model: ChatModel, name: str | None = None) -> dict[str, Any]:
    """One model in the shape of ``GET /v1beta/models``."""
    ident = name or model.id
    return {
        "name": f"models/{ident}",
        "baseModelId": ident,
        "version": model.version or "",
        "displayName": model.name,
        "description": f"{model.name} ({model.vendor}) in VS Code, through lmbridge",
        "inputTokenLimit": model.max_input_tokens,
        "outputTokenLimit": 0,
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
    }


_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "INVALID_ARGUMENT",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_BY_KIND = {
    ErrorKind.NOT_SIGNED_IN: 403,
    ErrorKind.NO_PERMISSION: 403,
    ErrorKind.RATE_LIMITED: 429,
    ErrorKind.MODEL_NOT_FOUND: 404,
    ErrorKind.CANCELLED: 499,
    ErrorKind.INTERNAL: 500,
}


def error_body(
    code: int, message: str, status: str | None = None, retry_after: str | None = None
) -> dict[str, Any]:
    """An error in Gemini's shape: ``{"error": {"code", "message", "status", "details"?}}``;
    ``retry_after`` (seconds) adds the ``RetryInfo`` detail Gemini's clients read."""
    error: dict[str, Any] = {
        "code": code,
        "message": message,
        "status": status or _STATUS_NAMES.get(code, "UNKNOWN"),
    }
    if retry_after is not None:
        error["details"] = [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_after}s"}
        ]
    return {"error": error}


def error_for(error: BaseException) -> tuple[int, dict[str, Any]]:
    """The HTTP status and Gemini error body for a failure.

    Context length: 400 ``INVALID_ARGUMENT`` "The input token count (N) exceeds the maximum
    number of tokens allowed (M)." as Gemini words it; bad requests: 400; VS Code's errors by
    kind (rate limits 429 ``RESOURCE_EXHAUSTED``); a failing service 503 ``UNAVAILABLE``.
    """
    if isinstance(error, PromptTooLongError):
        return 400, error_body(
            400,
            f"The input token count ({error.tokens}) exceeds the maximum number of tokens "
            f"allowed ({error.limit}).",
        )
    if isinstance(error, ConversionError):
        return 400, error_body(400, str(error))
    if isinstance(error, ChatRequestError):
        status = 503 if is_overloaded(error) else _BY_KIND[error.kind]
        return status, error_body(status, str(error))
    return 500, error_body(500, f"internal error: {type(error).__name__}: {error}")


# --------------------------------------------------------------------------- routes


def _render(info: ErrorInfo) -> dict[str, Any]:
    status = info.type if info.type in _STATUS_NAMES.values() else None
    retry = next((v for k, v in info.headers if k.lower() == "retry-after"), None)
    return error_body(info.status, info.message, status, retry)


def _read(body: dict[str, Any]) -> tuple[str, str, str | None, str | None]:
    error = body["error"]
    return error["status"], error["message"], None, None


GEMINI_API = Api(
    "gemini",
    _render,
    token_headers=("x-goog-api-key", "authorization"),
    token_query=("key",),
    describe_error=describer(error_for, _read),
)
"""Gemini's error shape; the token as ``x-goog-api-key``, ``?key=`` or a bearer token."""
API = GEMINI_API


class _ArrayEncoder(EventEncoder):
    """A stream without ``alt=sse``: one JSON array, an element per response object."""

    media_type = "application/json"

    def __init__(self, events: EventStream, usage: Callable[[], int], ping: bytes) -> None:
        super().__init__(events, usage, ping)
        self._first = True

    def _frames(self, events: list[Any]) -> bytes:
        out = b""
        for _, data in events:
            out += b"[" if self._first else b",\r\n"
            out += json.dumps(data, ensure_ascii=False).encode()
            self._first = False
        return out

    def _closed(self, data: bytes) -> bytes:
        return data + (b"[]" if self._first else b"]")

    def finish(self) -> bytes:
        return self._closed(super().finish())

    def fail(self, error: ErrorInfo) -> bytes:
        return self._closed(super().fail(error))

    def ping(self) -> bytes:
        # whitespace between elements; before the first one the array has not begun
        return b"" if self._first else b"\n"


def _shape(array: bool) -> ChatShape:
    shape = ChatShape(
        api=GEMINI_API,
        parse=parse_generate_request,
        events=lambda request, tokens, _model: GeminiStream(
            model=request.model, input_tokens=tokens, include_thoughts=request.include_thoughts
        ),
        # the google-genai SDK reads any line but data: and blank ones as JSON: no comments
        ping=b"\n",
    )
    return dataclasses.replace(shape, encoder=_ArrayEncoder) if array else shape


_SSE = _shape(array=False)
_ARRAY = _shape(array=True)
_METHODS = ("generateContent", "streamGenerateContent", "countTokens")


def _split(target: str) -> tuple[str, str]:
    """``{model}:{method}`` of a path; 404 for any other method."""
    name, sep, method = target.rpartition(":")
    if not sep or method not in _METHODS:
        raise HTTPError(
            404,
            f"no such method: models/{target} (the endpoint serves "
            + ", ".join(f":{m}" for m in _METHODS)
            + ")",
        )
    return name.removeprefix("models/"), method


def routes(context: ApiContext) -> list[Route]:
    """``/v1beta/models``, one model, and its three methods."""

    async def call(request: Request, out: Exchange) -> None:
        name, method = _split(request.params["target"])
        if method == "countTokens":
            body = parse_generate_request(request.json(), model=name, count_only=True)
            model = await context.resolve(name)
            messages = fit_to_model(body.messages, model)
            tokens = estimate_input_tokens(model, messages, body.options)
            await out.json(200, count_tokens_body(tokens))
            return
        shape = _SSE if request.query.get("alt", [""])[-1] == "sse" else _ARRAY
        streams = method == "streamGenerateContent"
        shape = dataclasses.replace(
            shape, parse=lambda b: parse_generate_request(b, model=name, stream=streams)
        )
        await serve_chat(context, request, out, shape)

    async def models(request: Request, out: Exchange) -> None:
        entries = await context.model_entries()
        await out.json(200, {"models": [model_entry(m, n) for n, m in entries]})

    async def model(request: Request, out: Exchange) -> None:
        name = request.params["model"].removeprefix("models/")
        await out.json(200, model_entry(await context.resolve(name), name))

    return [
        Route("POST", "/v1beta/models/{target}", call, GEMINI_API),
        Route("GET", "/v1beta/models", models, GEMINI_API),
        Route("GET", "/v1beta/models/{model}", model, GEMINI_API),
    ]
