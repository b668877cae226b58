"""The OpenAI Responses API (``POST /v1/responses``) over VS Code's models.

The request is read by :func:`parse_responses_request`, the VS Code parts streamed through a
:class:`ResponsesStream` (which also builds the non-streamed response object), failures
answered with :func:`error_for`: all sans-IO; :func:`routes` serves them through
:func:`~._base.serve_chat`. The model list in OpenAI's shape is :mod:`.openai_chat`'s.

Requests are taken as Codex sends them: ``instructions`` (optional), ``input`` as text or
items (messages with ``developer`` / ``system`` / ``user`` / ``assistant`` roles and
``input_text`` / ``output_text`` / ``input_image`` / ``input_file`` parts, ``function_call``,
``function_call_output``, ``custom_tool_call`` / ``_output``, ``reasoning``), ``tools``
(function and custom tools; ``namespace`` tools flattened into their functions; hosted
tools such as ``web_search``, which VS Code's models cannot run, left out with one log
line), ``tool_choice``, ``parallel_tool_calls``; ``store``, ``include``,
``prompt_cache_key``, ``client_metadata`` and unknown fields accepted and ignored;
``reasoning``, ``temperature``, ``top_p`` and ``max_output_tokens`` go to VS Code as model
options. The endpoint keeps no state: ``previous_response_id``, ``conversation`` and
``item_reference`` items are refused with a 400 that says to send the whole history.

System and developer messages before the conversation's first turn are the system prompt
(the leading Assistant message VS Code's stable API uses); a later one becomes user text in
its place.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ....convert import parse_data_url
from ....convert.from_anthropic import tool_input
from ....errors import ConversionError
from ....mime import data_part
from ....parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatRole,
    ChatTool,
    DataPart,
    Part,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolMode,
    ToolResultPart,
)
from ...classify import ChatRequestError, ErrorKind
from ...guard import PromptTooLongError, is_overloaded
from ...transport import ChatModel
from .._http import Api, ErrorInfo, Exchange, Request, Route
from ._base import ApiContext, ChatShape, describer, serve_chat

__all__ = [
    "API",
    "RESPONSES_API",
    "ResponsesEvent",
    "ResponsesRequest",
    "ResponsesStream",
    "ToolName",
    "error_body",
    "error_for",
    "model_entry",
    "parse_responses_request",
    "routes",
]

_log = logging.getLogger("lmbridge.client.responses")

ResponsesEvent = tuple[str, dict[str, Any]]
"""One server-sent event: its name (``response.created`` ...) and its JSON data."""

_MODEL_OPTIONS = ("max_output_tokens", "temperature", "top_p", "reasoning")
_STATEFUL = ("previous_response_id", "conversation")
_CUSTOM_SCHEMA = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The tool's free-form input."}},
    "required": ["input"],
}


@dataclass(frozen=True, slots=True)
class ToolName:
    """How a tool VS Code sees is named for the client."""

    name: str
    """The client's name for it."""
    namespace: str | None = None
    """The ``namespace`` tool it came from, if any."""
    custom: bool = False
    """A ``custom`` (free-form input) tool: its calls are ``custom_tool_call`` items."""


@dataclass(slots=True)
class ResponsesRequest:
    """A Responses request as VS Code takes it."""

    model: str
    """The model name the client asked for."""
    messages: list[ChatMessage]
    """The conversation, the system prompt first."""
    options: ChatRequestOptions
    """Tools, tool mode and model options."""
    stream: bool = False
    """Whether the client wants server-sent events."""
    tool_names: dict[str, ToolName] = field(default_factory=dict)
    """VS Code tool name -> the client's tool (namespaces and custom tools)."""
    left_out_tools: list[str] = field(default_factory=list)
    """Tools VS Code's models cannot run (hosted tools)."""
    parallel_tool_calls: bool = True
    """Echoed in the response object."""
    tool_choice: Any = "auto"
    """Echoed in the response object."""


def _invalid(message: str) -> ConversionError:
    return ConversionError(message)


# --------------------------------------------------------------------------- tools


def _function_tool(spec: Mapping[str, Any], where: str) -> ChatTool:
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise _invalid(f"{where}.name: expected a non-empty string")
    description = spec.get("description") or ""
    if not isinstance(description, str):
        raise _invalid(f"{where}.description: expected a string")
    schema = spec.get("parameters")
    if schema is not None and not isinstance(schema, dict):
        raise _invalid(f"{where}.parameters: expected an object")
    return ChatTool(name, description, schema)


def _custom_tool(spec: Mapping[str, Any], where: str) -> ChatTool:
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise _invalid(f"{where}.name: expected a non-empty string")
    description = spec.get("description") or ""
    fmt = spec.get("format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "grammar":
        # the model cannot be held to the grammar; it reads it as guidance
        description = (
            f"{description}\n\nInput format ({fmt.get('syntax')}):\n{fmt.get('definition')}"
        )
    return ChatTool(name, str(description), dict(_CUSTOM_SCHEMA))


def _tools(raw: Any) -> tuple[list[ChatTool], dict[str, ToolName], list[str]]:
    if raw is None:
        return [], {}, []
    if not isinstance(raw, list):
        raise _invalid("tools: expected a list")
    found: list[tuple[ChatTool, ToolName]] = []
    left_out: list[str] = []
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(tool, Mapping):
            raise _invalid(f"{where}: expected an object")
        kind = tool.get("type")
        if kind == "function":
            found.append((_function_tool(tool, where), ToolName(str(tool.get("name")))))
        elif kind == "custom":
            found.append((_custom_tool(tool, where), ToolName(str(tool.get("name")), custom=True)))
        elif kind == "namespace":
            namespace = tool.get("name")
            inner = tool.get("tools")
            if not isinstance(namespace, str) or not isinstance(inner, list):
                raise _invalid(f"{where}: a namespace tool needs a name and a list of tools")
            for j, fn in enumerate(inner):
                fwhere = f"{where}.tools[{j}]"
                if not isinstance(fn, Mapping):
                    raise _invalid(f"{fwhere}: expected an object")
                custom = fn.get("type") == "custom"
                chat = _custom_tool(fn, fwhere) if custom else _function_tool(fn, fwhere)
                found.append((chat, ToolName(chat.name, namespace, custom)))
        else:
            left_out.append(str(tool.get("name") or kind))
    # VS Code needs unique names: a name two namespaces share gets its namespace in front
    counts: dict[str, int] = {}
    for chat, _ in found:
        counts[chat.name] = counts.get(chat.name, 0) + 1
    tools: list[ChatTool] = []
    names: dict[str, ToolName] = {}
    for chat, name in found:
        vs_name = chat.name
        if counts[vs_name] > 1 and name.namespace:
            vs_name = f"{name.namespace}__{chat.name}"
        if vs_name in names:
            raise _invalid(f"tools: the tool name {vs_name!r} is given twice")
        names[vs_name] = name
        tools.append(ChatTool(vs_name, chat.description, chat.input_schema))
    return tools, names, left_out


def _vs_name(name: str, namespace: Any, names: Mapping[str, ToolName]) -> str:
    """The VS Code name of the client's tool ``name`` (in ``namespace``)."""
    if isinstance(namespace, str) and namespace:
        for vs_name, known in names.items():
            if known.name == name and known.namespace == namespace:
                return vs_name
    return name


def _tool_choice(
    choice: Any, tools: list[ChatTool], names: Mapping[str, ToolName]
) -> tuple[list[ChatTool], ToolMode]:
    if choice in (None, "auto"):
        return tools, ToolMode.AUTO
    if choice == "none":
        return [], ToolMode.AUTO
    if choice == "required":
        return tools, ToolMode.REQUIRED if tools else ToolMode.AUTO
    if isinstance(choice, Mapping):
        kind = choice.get("type")
        if kind in ("function", "custom"):
            name = _vs_name(str(choice.get("name")), choice.get("namespace"), names)
            chosen = [t for t in tools if t.name == name]
            if not chosen:
                raise _invalid(f"tool_choice: no tool named {choice.get('name')!r} in tools")
            return chosen, ToolMode.REQUIRED
        if kind == "allowed_tools":
            allowed = {
                _vs_name(str(t.get("name")), t.get("namespace"), names)
                for t in choice.get("tools") or []
                if isinstance(t, Mapping)
            }
            mode = ToolMode.REQUIRED if choice.get("mode") == "required" else ToolMode.AUTO
            return [t for t in tools if t.name in allowed], mode
        # a hosted tool (web_search ...) was asked for: it is not here, so the model chooses
        return tools, ToolMode.AUTO
    raise _invalid(
        f"tool_choice: expected 'auto', 'none', 'required' or a tool object, got {choice!r}"
    )


# --------------------------------------------------------------------------- input items


class _History:
    """Builds VS Code messages from input items, merging consecutive turns of one role."""

    def __init__(self, names: Mapping[str, ToolName]) -> None:
        self.names = names
        self.system: list[str] = []
        self.messages: list[ChatMessage] = []

    def add(self, role: ChatRole, parts: list[Part]) -> None:
        if not parts:
            return
        if self.messages and self.messages[-1].role == role:
            last = self.messages[-1]
            if role == ChatRole.USER:
                # tool results answer the calls before anything else is said
                results = [p for p in parts if isinstance(p, ToolResultPart)]
                rest = [p for p in parts if not isinstance(p, ToolResultPart)]
                old_results = [p for p in last.content if isinstance(p, ToolResultPart)]
                old_rest = [p for p in last.content if not isinstance(p, ToolResultPart)]
                merged: list[Part] = [*old_results, *results, *old_rest, *rest]
            else:
                merged = [*last.content, *parts]
            self.messages[-1] = ChatMessage(role, merged)
        else:
            self.messages.append(ChatMessage(role, parts))

    def system_text(self, text: str) -> None:
        if not text:
            return
        if self.messages:
            self.add(ChatRole.USER, [TextPart(text)])
        else:
            self.system.append(text)

    def result(self) -> list[ChatMessage]:
        system = "\n\n".join(self.system)
        return ([ChatMessage.assistant(system)] if system else []) + self.messages


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _invalid(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _image(item: Mapping[str, Any], where: str) -> Part:
    url = item.get("image_url")
    if isinstance(url, Mapping):  # Chat Completions' shape, which some clients send here
        url = url.get("url")
    if isinstance(url, str) and url.startswith("data:"):
        data, mime = parse_data_url(url, f"{where}.image_url")
        return DataPart.image(data, mime)
    if isinstance(url, str):
        return TextPart(f"[image ({url}): not fetched]")
    if isinstance(item.get("file_id"), str):
        return TextPart(f"[image (file {item['file_id']}): not available here]")
    raise _invalid(f"{where}: an input_image needs image_url or file_id")


def _file(item: Mapping[str, Any], where: str) -> Part:
    file_data = item.get("file_data")
    if isinstance(file_data, str) and file_data.startswith("data:"):
        data, mime = parse_data_url(file_data, f"{where}.file_data")
        return data_part(data, mime)
    name = item.get("filename") or item.get("file_id") or item.get("file_url") or ""
    return TextPart(f"[file {name}: not available here]")


def _content(content: Any, where: str) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    if not isinstance(content, list):
        raise _invalid(f"{where}.content: expected a string or a list of parts")
    out: list[Part] = []
    for j, item in enumerate(content):
        pwhere = f"{where}.content[{j}]"
        if not isinstance(item, Mapping):
            raise _invalid(f"{pwhere}: expected an object")
        kind = item.get("type")
        if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
            text = _text(item.get("text"), f"{pwhere}.text")
            if text:
                out.append(TextPart(text))
        elif kind == "refusal":
            text = _text(item.get("refusal"), f"{pwhere}.refusal")
            if text:
                out.append(TextPart(text))
        elif kind == "input_image":
            out.append(_image(item, pwhere))
        elif kind == "input_file":
            out.append(_file(item, pwhere))
        elif kind == "input_audio":
            out.append(TextPart("[audio: not supported here]"))
        else:
            raise _invalid(f"{pwhere}: unsupported content part type {kind!r}")
    return out


def _output(value: Any, where: str) -> list[TextPart | DataPart | ThinkingPart]:
    if value is None:
        return []
    return [p for p in _content(value, where) if isinstance(p, (TextPart, DataPart))]


def _reasoning(item: Mapping[str, Any], where: str) -> ThinkingPart | None:
    texts = []
    for key in ("summary", "content"):
        blocks = item.get(key)
        if isinstance(blocks, list):
            texts += [
                b["text"]
                for b in blocks
                if isinstance(b, Mapping) and isinstance(b.get("text"), str)
            ]
    meta: dict[str, Any] = {}
    if isinstance(item.get("id"), str):
        meta["itemId"] = item["id"]
    if isinstance(item.get("encrypted_content"), str):
        meta["encryptedContent"] = item["encrypted_content"]
    text = "\n\n".join(t for t in texts if t)
    if not text and "encryptedContent" not in meta:
        return None  # nothing any model could read back (Codex sends such items)
    return ThinkingPart(
        text, item.get("id") if isinstance(item.get("id"), str) else None, meta or None
    )


def _call_id(item: Mapping[str, Any], where: str) -> str:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise _invalid(f"{where}.call_id: expected a non-empty string")
    return call_id


def _items(raw: Any, history: _History) -> None:
    if isinstance(raw, str):
        history.add(ChatRole.USER, [TextPart(raw)] if raw else [])
        return
    if not isinstance(raw, list):
        raise _invalid("input: expected a string or a list of items")
    for i, item in enumerate(raw):
        where = f"input[{i}]"
        if not isinstance(item, Mapping):
            raise _invalid(f"{where}: expected an object")
        kind = item.get("type")
        if kind is None and "role" in item:
            kind = "message"
        if kind == "message":
            role = item.get("role")
            if role in ("developer", "system"):
                history.system_text(
                    "".join(
                        p.value
                        for p in _content(item.get("content"), where)
                        if isinstance(p, TextPart)
                    )
                )
            elif role == "user":
                history.add(ChatRole.USER, _content(item.get("content"), where))
            elif role == "assistant":
                history.add(ChatRole.ASSISTANT, _content(item.get("content"), where))
            else:
                raise _invalid(
                    f"{where}.role: expected 'user', 'assistant', 'system' or 'developer', got {role!r}"
                )
        elif kind == "function_call":
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise _invalid(f"{where}.name: expected a non-empty string")
            vs_name = _vs_name(name, item.get("namespace"), history.names)
            arguments = tool_input(item.get("arguments"), f"{where}.arguments", name)
            history.add(
                ChatRole.ASSISTANT, [ToolCallPart(_call_id(item, where), vs_name, arguments)]
            )
        elif kind == "custom_tool_call":
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise _invalid(f"{where}.name: expected a non-empty string")
            vs_name = _vs_name(name, item.get("namespace"), history.names)
            text = _text(item.get("input", ""), f"{where}.input")
            history.add(
                ChatRole.ASSISTANT, [ToolCallPart(_call_id(item, where), vs_name, {"input": text})]
            )
        elif kind in ("function_call_output", "custom_tool_call_output"):
            content = _output(item.get("output"), f"{where}.output")
            history.add(ChatRole.USER, [ToolResultPart(_call_id(item, where), list(content))])
        elif kind == "reasoning":
            part = _reasoning(item, where)
            if part is not None:
                history.add(ChatRole.ASSISTANT, [part])
        elif kind == "item_reference":
            raise _invalid(
                f"{where}: item_reference needs stored responses; this endpoint keeps none, so "
                "send the items themselves"
            )
        else:
            # hosted tools' items (web_search_call ...) and anything newer: nothing to replay
            _log.debug("Responses request: %s item of type %r left out", where, kind)


def parse_responses_request(body: Mapping[str, Any]) -> ResponsesRequest:
    """The VS Code request for a Responses body.

    Raises :class:`~lmbridge.errors.ConversionError` naming what is wrong (the route answers
    it as a 400 ``invalid_request_error``).
    """
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _invalid("model: expected a non-empty string")
    for key in _STATEFUL:
        if body.get(key):
            raise _invalid(
                f"{key}: this endpoint keeps no responses (it is stateless); send the whole "
                "conversation in input instead"
            )
    tools, names, left_out = _tools(body.get("tools"))
    history = _History(names)
    instructions = body.get("instructions")
    if instructions is not None:
        if isinstance(instructions, str):
            history.system_text(instructions)
        else:
            _items(instructions, history)
    raw_input = body.get("input")
    if raw_input is None:
        raise _invalid("input: expected a string or a list of items")
    _items(raw_input, history)
    if not history.messages:
        raise _invalid("input: no message to answer (only instructions)")
    messages = history.result()
    tools, mode = _tool_choice(body.get("tool_choice"), tools, names)
    if left_out:
        _log.info(
            "Responses request: left out tools VS Code's models cannot run: %s", ", ".join(left_out)
        )
    model_options = {k: body[k] for k in _MODEL_OPTIONS if body.get(k) is not None}
    parallel = body.get("parallel_tool_calls")
    return ResponsesRequest(
        model=model,
        messages=messages,
        options=ChatRequestOptions(tools=tools, tool_mode=mode, model_options=model_options),
        stream=body.get("stream") is True,
        tool_names={k: v for k, v in names.items() if v.namespace or v.custom or k != v.name},
        left_out_tools=left_out,
        parallel_tool_calls=parallel if isinstance(parallel, bool) else True,
        tool_choice=body.get("tool_choice") or "auto",
    )


# --------------------------------------------------------------------------- responses


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


class ResponsesStream:
    """VS Code response parts -> the Responses event sequence, and the response object.

    ::

        stream = ResponsesStream(model="gpt-5", input_tokens=900)
        events = stream.start()                 # response.created, response.in_progress
        events += stream.feed(part)             # output items, for each part
        events += stream.finish(output_tokens)  # the open item's done events, response.completed
        body = stream.response()                # the non-streamed answer

    Every sequence is well formed: each item is added, streamed and done in order with
    increasing output indices, content and summary parts open before their deltas, and
    ``sequence_number`` counts from 0. :meth:`fail` ends with ``response.failed`` instead.
    """

    def __init__(
        self,
        *,
        model: str,
        input_tokens: int = 0,
        tool_names: Mapping[str, ToolName] | None = None,
        parallel_tool_calls: bool = True,
        tool_choice: Any = "auto",
        response_id: str | None = None,
        created_at: int | None = None,
        new_id: Callable[[str], str] = _new_id,
    ) -> None:
        self.model = model
        self.input_tokens = input_tokens
        self.output_tokens = 0
        self.id = response_id or new_id("resp")
        self.created_at = created_at if created_at is not None else int(time.time())
        self.output: list[dict[str, Any]] = []
        """The finished output items."""
        self.status = "in_progress"
        self.error: dict[str, Any] | None = None
        self._names = dict(tool_names or {})
        self._parallel = parallel_tool_calls
        self._tool_choice = tool_choice
        self._new_id = new_id
        self._seq = 0
        self._open: dict[str, Any] | None = None  # the item being streamed
        self._open_kind = ""  # "message" or "reasoning"
        self._reasoning_id: str | None = None
        self._started = False
        self._done = False

    # helpers

    def _event(self, kind: str, /, **data: Any) -> ResponsesEvent:
        event = {"type": kind, "sequence_number": self._seq, **data}
        self._seq += 1
        return kind, event

    def _on(self, kind: str, item: Mapping[str, Any], index: int, /, **data: Any) -> ResponsesEvent:
        """An event about the output item ``item`` at ``index``."""
        return self._event(kind, item_id=item["id"], output_index=index, **data)

    def _usage(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.input_tokens + self.output_tokens,
        }

    def body(self) -> dict[str, Any]:
        """The non-streamed answer (:meth:`response`)."""
        return self.response()

    def response(self) -> dict[str, Any]:
        """The response object (also the non-streamed answer once finished)."""
        done = self.status != "in_progress"
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": self.status,
            "error": self.error,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "model": self.model,
            "output": [dict(item) for item in self.output],
            "parallel_tool_calls": self._parallel,
            "temperature": None,
            "tool_choice": self._tool_choice,
            "tools": [],
            "top_p": None,
            "store": False,
            "usage": self._usage() if done else None,
        }

    # lifecycle

    def start(self) -> list[ResponsesEvent]:
        """``response.created`` and ``response.in_progress``."""
        self._started = True
        return [
            self._event("response.created", response=self.response()),
            self._event("response.in_progress", response=self.response()),
        ]

    def _index(self) -> int:
        return len(self.output)

    def _close(self) -> list[ResponsesEvent]:
        item = self._open
        if item is None:
            return []
        self._open = None
        index = self._index()
        events: list[ResponsesEvent] = []
        if self._open_kind == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            events.append(
                self._on(
                    "response.output_text.done",
                    item,
                    index,
                    content_index=0,
                    text=text,
                    logprobs=[],
                )
            )
            events.append(
                self._on(
                    "response.content_part.done",
                    item,
                    index,
                    content_index=0,
                    part=part,
                )
            )
            item["content"] = [part]
        else:
            text = item["summary"][0]["text"] if item["summary"] else ""
            if item["summary"]:
                events.append(
                    self._on(
                        "response.reasoning_summary_text.done",
                        item,
                        index,
                        summary_index=0,
                        text=text,
                    )
                )
                events.append(
                    self._on(
                        "response.reasoning_summary_part.done",
                        item,
                        index,
                        summary_index=0,
                        part={"type": "summary_text", "text": text},
                    )
                )
        item["status"] = "completed"
        if self._open_kind == "reasoning":
            del item["status"]  # reasoning items carry no status when done
        events.append(self._event("response.output_item.done", output_index=index, item=dict(item)))
        self.output.append(item)
        self._reasoning_id = None
        return events

    def feed(self, part: ResponsePart) -> list[ResponsesEvent]:
        """The events for one part (none for data parts, which have no output item)."""
        if not self._started or self._done:
            raise RuntimeError("feed() needs start() first and no finish() yet")
        if isinstance(part, TextPart):
            return self._text(part.value)
        if isinstance(part, ThinkingPart):
            return self._thinking(part)
        if isinstance(part, ToolCallPart):
            return self._call(part)
        _log.debug("Responses stream: a %s part has no output item; left out", part.kind)
        return []

    def _text(self, text: str) -> list[ResponsesEvent]:
        if not text:
            return []
        events: list[ResponsesEvent] = []
        if self._open_kind != "message" or self._open is None:
            events += self._close()
            item: dict[str, Any] = {
                "id": self._new_id("msg"),
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            index = self._index()
            events.append(
                self._event(
                    "response.output_item.added", output_index=index, item=dict(item, content=[])
                )
            )
            part: dict[str, Any] = {
                "type": "output_text",
                "text": "",
                "annotations": [],
                "logprobs": [],
            }
            events.append(
                self._on(
                    "response.content_part.added",
                    item,
                    index,
                    content_index=0,
                    part=part,
                )
            )
            item["content"] = [dict(part)]
            self._open, self._open_kind = item, "message"
        assert self._open is not None
        self._open["content"][0]["text"] += text
        events.append(
            self._on(
                "response.output_text.delta",
                self._open,
                self._index(),
                content_index=0,
                delta=text,
                logprobs=[],
            )
        )
        return events

    def _thinking(self, part: ThinkingPart) -> list[ResponsesEvent]:
        events: list[ResponsesEvent] = []
        meta = part.metadata or {}
        if (
            self._open_kind != "reasoning"
            or self._open is None
            or (part.id is not None and part.id != self._reasoning_id)
        ):
            events += self._close()
            item: dict[str, Any] = {"id": self._new_id("rs"), "type": "reasoning", "summary": []}
            events.append(
                self._event(
                    "response.output_item.added",
                    output_index=self._index(),
                    item=dict(item, summary=[]),
                )
            )
            self._open, self._open_kind, self._reasoning_id = item, "reasoning", part.id
        assert self._open is not None
        item = self._open
        index = self._index()
        text = part.text
        if text:
            if not item["summary"]:
                item["summary"] = [{"type": "summary_text", "text": ""}]
                events.append(
                    self._on(
                        "response.reasoning_summary_part.added",
                        item,
                        index,
                        summary_index=0,
                        part={"type": "summary_text", "text": ""},
                    )
                )
            item["summary"][0]["text"] += text
            events.append(
                self._on(
                    "response.reasoning_summary_text.delta",
                    item,
                    index,
                    summary_index=0,
                    delta=text,
                )
            )
        encrypted = meta.get("encryptedContent")
        if isinstance(encrypted, str):
            item["encrypted_content"] = encrypted
        return events

    def _call(self, part: ToolCallPart) -> list[ResponsesEvent]:
        events = self._close()
        known = self._names.get(part.name, ToolName(part.name))
        index = self._index()
        if known.custom:
            # a custom tool's call carries its free-form input as text
            text = part.input.get("input")
            value = text if isinstance(text, str) else json.dumps(part.input, ensure_ascii=False)
            prefix, kind, field, events_of = (
                "ctc",
                "custom_tool_call",
                "input",
                "custom_tool_call_input",
            )
        else:
            value = json.dumps(part.input, ensure_ascii=False)
            prefix, kind, field, events_of = (
                "fc",
                "function_call",
                "arguments",
                "function_call_arguments",
            )
        item: dict[str, Any] = {
            "id": self._new_id(prefix),
            "type": kind,
            "status": "in_progress",
            "call_id": part.call_id,
            "name": known.name,
            field: "",
        }
        if known.namespace:
            item["namespace"] = known.namespace
        events.append(
            self._event("response.output_item.added", output_index=index, item=dict(item))
        )
        events.append(self._on(f"response.{events_of}.delta", item, index, delta=value))
        done = {field: value} if known.custom else {"name": known.name, field: value}
        events.append(self._on(f"response.{events_of}.done", item, index, **done))
        item[field] = value
        item["status"] = "completed"
        events.append(self._event("response.output_item.done", output_index=index, item=dict(item)))
        self.output.append(item)
        return events

    def finish(self, output_tokens: int = 0) -> list[ResponsesEvent]:
        """Close the open item and send ``response.completed`` with the usage."""
        if self._done:
            return []
        events = self._close()
        self._done = True
        self.output_tokens = max(0, output_tokens)
        self.status = "completed"
        events.append(self._event("response.completed", response=self.response()))
        return events

    def fail(self, error: BaseException, output_tokens: int = 0) -> list[ResponsesEvent]:
        """End with ``response.failed`` carrying the error (what was sent stays valid)."""
        if self._done:
            return []
        events = self._close()
        self._done = True
        self.output_tokens = max(0, output_tokens)
        self.status = "failed"
        _, body = error_for(error)
        self.error = {
            "code": body["error"]["code"] or "server_error",
            "message": body["error"]["message"],
        }
        events.append(self._event("response.failed", response=self.response()))
        return events


# --------------------------------------------------------------------------- other answers


def model_entry(model: ChatModel, name: str | None = None) -> dict[str, Any]:
    """One model in OpenAI's ``GET /v1/models`` shape, with lmbridge's extras."""
    return {
        "id": name or model.id,
        "object": "model",
        "created": 0,
        "owned_by": model.vendor,
        "name": model.name,
        "family": model.family,
        "version": model.version,
        "max_input_tokens": model.max_input_tokens,
        "capabilities": {"vision": model.image_input, "tool_calling": model.tool_calling},
    }


_BY_KIND = {
    ErrorKind.NOT_SIGNED_IN: (403, "permission_error", "not_signed_in"),
    ErrorKind.NO_PERMISSION: (403, "permission_error", "no_permission"),
    ErrorKind.RATE_LIMITED: (429, "rate_limit_error", "rate_limit_exceeded"),
    ErrorKind.MODEL_NOT_FOUND: (404, "invalid_request_error", "model_not_found"),
    ErrorKind.CANCELLED: (499, "server_error", "cancelled"),
    ErrorKind.INTERNAL: (502, "server_error", "server_error"),
}


def error_body(
    message: str, type: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """An error in OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``)."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_for(error: BaseException) -> tuple[int, dict[str, Any]]:
    """The HTTP status and OpenAI error body for a failure.

    Context length: 400 with code ``context_length_exceeded`` (what Codex compacts on); bad
    requests: 400 ``invalid_request_error``; VS Code's errors by kind; a failing service 503.
    """
    if isinstance(error, PromptTooLongError):
        return 400, error_body(
            f"Your input exceeds the context window of this model: {error}",
            "invalid_request_error",
            "context_length_exceeded",
            "input",
        )
    if isinstance(error, ConversionError):
        return 400, error_body(str(error), "invalid_request_error")
    if isinstance(error, ChatRequestError):
        if is_overloaded(error):
            return 503, error_body(str(error), "server_error", "server_is_overloaded")
        status, kind, code = _BY_KIND[error.kind]
        return status, error_body(str(error), kind, code)
    return 500, error_body(
        f"internal error: {type(error).__name__}: {error}", "server_error", "server_error"
    )


# --------------------------------------------------------------------------- routes


def _render(info: ErrorInfo) -> dict[str, Any]:
    return error_body(info.message, info.type, info.code, info.param)


RESPONSES_API = Api(
    "responses",
    _render,
    token_headers=("authorization", "x-api-key"),
    describe_error=describer(error_for),
)
"""OpenAI's error shape, with ``context_length_exceeded`` for too long an input."""
API = RESPONSES_API

_SHAPE = ChatShape(
    api=RESPONSES_API,
    parse=parse_responses_request,
    events=lambda request, tokens, _model: ResponsesStream(
        model=request.model,
        input_tokens=tokens,
        tool_names=request.tool_names,
        parallel_tool_calls=request.parallel_tool_calls,
        tool_choice=request.tool_choice,
    ),
    ping=b": keepalive\n\n",
)


def routes(context: ApiContext) -> list[Route]:
    """``POST /v1/responses``."""

    async def responses(request: Request, out: Exchange) -> None:
        """A Responses request, streamed (SSE) or not."""
        await serve_chat(context, request, out, _SHAPE)

    return [Route("POST", "/v1/responses", responses, RESPONSES_API)]
