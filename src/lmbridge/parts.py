"""The VS Code language-model data model, as Python dataclasses.

Names and fields mirror the VS Code API (``vscode.LanguageModelTextPart`` ->
:class:`TextPart`, ``callId`` -> ``call_id`` ...). Every decoder, converter, the host,
the consumer client and the CLI speak this one model.

Each part also has one JSON *wire form*, shared by the CLI, the host and the extension::

    {"kind": "text", "value": "..."}
    {"kind": "thinking", "value": "..." | ["..."], "id"?: "...", "metadata"?: {...}}
    {"kind": "toolCall", "callId": "...", "name": "...", "input": {...}}
    {"kind": "toolResult", "callId": "...", "content": [wire parts]}
    {"kind": "data", "mimeType": "...", "data": "<base64>"}

:func:`part_to_wire` / :func:`part_from_wire` convert between the two, and so do the
``*_to_wire`` / ``*_from_wire`` helpers for messages, model information and options.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json as _json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .errors import WireError

__all__ = [
    "ChatMessage",
    "ChatRequestOptions",
    "ChatRole",
    "ChatTool",
    "DataPart",
    "FinishReason",
    "MessagePart",
    "ModelCapabilities",
    "ModelInfo",
    "Part",
    "ResponsePart",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolMode",
    "ToolResultContent",
    "ToolResultPart",
    "Usage",
    "WireError",
    "message_from_wire",
    "message_to_wire",
    "messages_from_wire",
    "model_info_from_wire",
    "model_info_to_wire",
    "options_from_wire",
    "options_to_wire",
    "part_from_wire",
    "part_to_wire",
    "parts_from_wire",
    "parts_to_wire",
    "usage_from_wire",
    "usage_to_wire",
]


# --------------------------------------------------------------------------- parts


@dataclass(slots=True)
class TextPart:
    """``vscode.LanguageModelTextPart``: a piece of visible (markdown) text."""

    value: str
    """The text. Consumers concatenate consecutive text parts."""
    kind: Literal["text"] = field(default="text", init=False, repr=False, compare=False)


@dataclass(slots=True)
class ThinkingPart:
    """``vscode.LanguageModelThinkingPart`` (proposed API): model reasoning.

    A reasoning block streams as several thinking parts with the same ``id``; signatures or
    encrypted reasoning that must be replayed to the upstream travel in ``metadata``
    (often on a final part whose ``value`` is empty).
    """

    value: str | list[str]
    """The reasoning text, one chunk or a list of chunks."""
    id: str | None = None
    """Identifies the reasoning block this chunk belongs to."""
    metadata: Mapping[str, Any] | None = None
    """Upstream data to keep with the block (signature, encrypted content, redacted data)."""
    kind: Literal["thinking"] = field(default="thinking", init=False, repr=False, compare=False)

    @property
    def text(self) -> str:
        """The reasoning as one string."""
        return self.value if isinstance(self.value, str) else "".join(self.value)


@dataclass(slots=True)
class ToolCallPart:
    """``vscode.LanguageModelToolCallPart``: a complete request to run a tool."""

    call_id: str
    """Unique within a response; the tool result refers back to it."""
    name: str
    """The tool's name, as given in the request options."""
    input: dict[str, Any]
    """The tool's arguments: always a JSON object."""
    kind: Literal["toolCall"] = field(default="toolCall", init=False, repr=False, compare=False)


_COMPACT_JSON = _json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


@dataclass(slots=True)
class DataPart:
    """``vscode.LanguageModelDataPart``: bytes with a MIME type (images, JSON, files)."""

    data: bytes
    """The raw bytes."""
    mime_type: str
    """The MIME type of ``data``."""
    kind: Literal["data"] = field(default="data", init=False, repr=False, compare=False)

    @classmethod
    def image(cls, data: bytes, mime: str) -> DataPart:
        """An image (``image/png``, ``image/jpeg`` ...)."""
        return cls(bytes(data), mime)

    @classmethod
    def json(cls, value: Any, mime: str = "text/x-json") -> DataPart:
        """A JSON value, serialised compactly; VS Code's default MIME type is ``text/x-json``."""
        text = _COMPACT_JSON.encode(value)  # json.dumps(value, <the same options>), built once
        return cls(text.encode("utf-8"), mime)

    @classmethod
    def text(cls, value: str, mime: str = "text/plain") -> DataPart:
        """Text data that is not meant to be shown as chat output."""
        return cls(value.encode("utf-8"), mime)

    def decode_json(self) -> Any:
        """The JSON value held by a :meth:`json` part."""
        return _json.loads(self.data.decode("utf-8"))


ToolResultContent: TypeAlias = "TextPart | DataPart | ThinkingPart"


@dataclass(slots=True)
class ToolResultPart:
    """``vscode.LanguageModelToolResultPart``: the result of a tool call, in a request message.

    Never part of a response: providers must not emit it.
    """

    call_id: str
    """The ``call_id`` of the tool call this answers."""
    content: list[TextPart | DataPart | ThinkingPart]
    """What the tool returned."""
    kind: Literal["toolResult"] = field(
        default="toolResult", init=False, repr=False, compare=False
    )


Part: TypeAlias = "TextPart | ThinkingPart | ToolCallPart | ToolResultPart | DataPart"
"""Any part of a message."""
MessagePart: TypeAlias = Part
"""A part as it appears in request messages."""
ResponsePart: TypeAlias = "TextPart | ThinkingPart | ToolCallPart | DataPart"
"""What a provider may report in a response (never a tool result)."""


# --------------------------------------------------------------------------- messages


class ChatRole(enum.IntEnum):
    """``vscode.LanguageModelChatMessageRole``. ``SYSTEM`` is VS Code's proposed role 3."""

    USER = 1
    ASSISTANT = 2
    SYSTEM = 3


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """``vscode.LanguageModelChatMessage``: one turn of a conversation."""

    role: ChatRole
    """Who speaks."""
    content: list[Part]
    """The parts of the turn, in order."""
    name: str | None = None
    """Optional name of the speaker."""

    @classmethod
    def user(cls, content: str | Sequence[Part], name: str | None = None) -> ChatMessage:
        """A user message (a string becomes one :class:`TextPart`)."""
        return cls(ChatRole.USER, _content(content), name)

    @classmethod
    def assistant(cls, content: str | Sequence[Part], name: str | None = None) -> ChatMessage:
        """An assistant message (a string becomes one :class:`TextPart`)."""
        return cls(ChatRole.ASSISTANT, _content(content), name)

    @classmethod
    def system(cls, content: str | Sequence[Part]) -> ChatMessage:
        """A system message (VS Code's proposed role 3)."""
        return cls(ChatRole.SYSTEM, _content(content))

    @property
    def text(self) -> str:
        """The concatenated value of the message's text parts."""
        return "".join(p.value for p in self.content if isinstance(p, TextPart))


def _content(content: str | Sequence[Part]) -> list[Part]:
    return [TextPart(content)] if isinstance(content, str) else list(content)


# --------------------------------------------------------------------------- models


@dataclass(frozen=True, slots=True)
class ModelCapabilities:
    """``LanguageModelChatCapabilities``."""

    image_input: bool = False
    """Whether the model accepts images in user messages."""
    tool_calling: bool | int = False
    """Whether the model calls tools; an int is the most tools it takes."""


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """``vscode.LanguageModelChatInformation``: what the model picker shows and the limits."""

    id: str
    """Unique within the provider."""
    name: str
    """Human-readable name."""
    family: str
    """Model family (``gpt-4o``, ``claude-sonnet`` ...); selectors match on it."""
    version: str
    """Version string."""
    max_input_tokens: int
    """Tokens the prompt may use."""
    max_output_tokens: int
    """Tokens the response may use."""
    tooltip: str | None = None
    """Hover text in the model picker."""
    detail: str | None = None
    """Secondary text in the model picker (here: the provider's name)."""
    capabilities: ModelCapabilities = field(default_factory=ModelCapabilities)
    """What the model can do."""
    configuration_schema: dict[str, Any] | None = None
    """A JSON schema of per-model settings VS Code shows in its model picker (the Thinking
    Effort entry); the chosen values come back in ``ChatRequestOptions.model_configuration``."""


@dataclass(frozen=True, slots=True)
class ChatTool:
    """``vscode.LanguageModelChatTool``: a tool the model may call."""

    name: str
    """The tool's name."""
    description: str = ""
    """What the tool does, for the model."""
    input_schema: dict[str, Any] | None = None
    """JSON schema of the tool's input object."""


class ToolMode(enum.IntEnum):
    """``vscode.LanguageModelChatToolMode``."""

    AUTO = 1
    REQUIRED = 2


@dataclass(frozen=True, slots=True)
class ChatRequestOptions:
    """``ProvideLanguageModelChatResponseOptions`` / ``LanguageModelChatRequestOptions``."""

    tools: list[ChatTool] = field(default_factory=list)
    """Tools the model may call."""
    tool_mode: ToolMode = ToolMode.AUTO
    """Whether the model must call a tool."""
    model_options: dict[str, Any] = field(default_factory=dict)
    """Model-specific options (temperature, max tokens ...)."""
    model_configuration: dict[str, Any] = field(default_factory=dict)
    """The values the user chose for the model's ``configurationSchema`` in VS Code's model
    picker (``options.modelConfiguration``), e.g. ``{"reasoningEffort": "high"}``."""


class FinishReason(str, enum.Enum):
    """Why a response ended, normalised over every upstream."""

    STOP = "stop"
    LENGTH = "length"
    TOOL_CALLS = "tool-calls"
    CONTENT_FILTER = "content-filter"
    ERROR = "error"
    CANCELLED = "cancelled"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage a stream reported. ``None`` means the upstream did not say."""

    input_tokens: int | None = None
    """Prompt tokens, cached ones included."""
    output_tokens: int | None = None
    """Completion tokens, reasoning included."""
    cache_read_tokens: int | None = None
    """Prompt tokens served from the upstream's cache."""
    cache_write_tokens: int | None = None
    """Prompt tokens written to the upstream's cache."""
    reasoning_tokens: int | None = None
    """Completion tokens spent on reasoning."""

    def __init__(
        self,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        reasoning_tokens: int | None = None,
    ) -> None:
        # What the generated __init__ of a frozen dataclass does, through the slots' own
        # setters (a stream makes one per usage report: this is about twice as fast).
        _set_input(self, input_tokens)
        _set_output(self, output_tokens)
        _set_cache_read(self, cache_read_tokens)
        _set_cache_write(self, cache_write_tokens)
        _set_reasoning(self, reasoning_tokens)

    @property
    def total_tokens(self) -> int | None:
        """Input plus output, when both are known."""
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens

    def merged(self, other: Usage) -> Usage:
        """This usage with every field that ``other`` knows replaced by ``other``'s value."""
        return Usage(
            input_tokens=_pick(other.input_tokens, self.input_tokens),
            output_tokens=_pick(other.output_tokens, self.output_tokens),
            cache_read_tokens=_pick(other.cache_read_tokens, self.cache_read_tokens),
            cache_write_tokens=_pick(other.cache_write_tokens, self.cache_write_tokens),
            reasoning_tokens=_pick(other.reasoning_tokens, self.reasoning_tokens),
        )


_USAGE_SETTERS: tuple[Callable[[Usage, int | None], None], ...] = tuple(
    getattr(Usage, name).__set__
    for name in (
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
    )
)
_set_input, _set_output, _set_cache_read, _set_cache_write, _set_reasoning = _USAGE_SETTERS


def _pick(new: int | None, old: int | None) -> int | None:
    return old if new is None else new


# --------------------------------------------------------------------------- wire form


def part_to_wire(part: Part) -> dict[str, Any]:
    """The JSON wire form of a part."""
    if isinstance(part, TextPart):
        return {"kind": "text", "value": part.value}
    if isinstance(part, ThinkingPart):
        out: dict[str, Any] = {"kind": "thinking", "value": part.value}
        if part.id is not None:
            out["id"] = part.id
        if part.metadata is not None:
            out["metadata"] = dict(part.metadata)
        return out
    if isinstance(part, ToolCallPart):
        return {"kind": "toolCall", "callId": part.call_id, "name": part.name, "input": part.input}
    if isinstance(part, ToolResultPart):
        return {
            "kind": "toolResult",
            "callId": part.call_id,
            "content": [part_to_wire(p) for p in part.content],
        }
    if isinstance(part, DataPart):
        return {
            "kind": "data",
            "mimeType": part.mime_type,
            "data": base64.b64encode(part.data).decode("ascii"),
        }
    raise TypeError(f"not a part: {part!r}")


def parts_to_wire(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """The wire form of several parts."""
    return [part_to_wire(p) for p in parts]


def _str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise WireError(f"{where}.{key}: expected a string, got {_type(value)}")
    return value


def _type(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def part_from_wire(obj: Any, where: str = "part") -> Part:
    """Parse one wire part; :class:`WireError` names what is wrong and where."""
    if not isinstance(obj, Mapping):
        raise WireError(f"{where}: expected an object, got {_type(obj)}")
    kind = obj.get("kind")
    if kind == "text":
        return TextPart(_str(obj, "value", where))
    if kind == "thinking":
        value = obj.get("value")
        if not (
            isinstance(value, str)
            or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        ):
            raise WireError(f"{where}.value: expected a string or a list of strings")
        ident = obj.get("id")
        if ident is not None and not isinstance(ident, str):
            raise WireError(f"{where}.id: expected a string, got {_type(ident)}")
        metadata = obj.get("metadata")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise WireError(f"{where}.metadata: expected an object, got {_type(metadata)}")
        return ThinkingPart(value, ident, dict(metadata) if metadata is not None else None)
    if kind == "toolCall":
        tool_input = obj.get("input")
        if not isinstance(tool_input, dict):
            raise WireError(f"{where}.input: tool input must be an object, got {_type(tool_input)}")
        return ToolCallPart(_str(obj, "callId", where), _str(obj, "name", where), tool_input)
    if kind == "toolResult":
        content = obj.get("content")
        if not isinstance(content, list):
            raise WireError(f"{where}.content: expected a list, got {_type(content)}")
        inner: list[TextPart | DataPart | ThinkingPart] = []
        for i, item in enumerate(content):
            p = part_from_wire(item, f"{where}.content[{i}]")
            if isinstance(p, (ToolCallPart, ToolResultPart)):
                raise WireError(f"{where}.content[{i}]: a tool result cannot contain {p.kind}")
            inner.append(p)
        return ToolResultPart(_str(obj, "callId", where), inner)
    if kind == "data":
        mime = _str(obj, "mimeType", where)
        raw = _str(obj, "data", where)
        try:
            data = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise WireError(f"{where}.data: not valid base64 ({exc})") from None
        return DataPart(data, mime)
    raise WireError(f"{where}.kind: unknown part kind {kind!r}")


def parts_from_wire(objs: Any, where: str = "parts") -> list[Part]:
    """Parse a list of wire parts."""
    if not isinstance(objs, list):
        raise WireError(f"{where}: expected a list, got {_type(objs)}")
    return [part_from_wire(o, f"{where}[{i}]") for i, o in enumerate(objs)]


def message_to_wire(message: ChatMessage) -> dict[str, Any]:
    """``{"role": 1|2|3, "content": [wire parts], "name": str|None}``."""
    return {
        "role": int(message.role),
        "content": parts_to_wire(message.content),
        "name": message.name,
    }


def message_from_wire(obj: Any, where: str = "message") -> ChatMessage:
    """Parse one wire message. Unknown roles are an error that names the value."""
    if not isinstance(obj, Mapping):
        raise WireError(f"{where}: expected an object, got {_type(obj)}")
    role = obj.get("role")
    if isinstance(role, bool) or role not in (1, 2, 3):
        raise WireError(f"{where}.role: expected 1 (user), 2 (assistant) or 3 (system), got {role!r}")
    name = obj.get("name")
    if name is not None and not isinstance(name, str):
        raise WireError(f"{where}.name: expected a string, got {_type(name)}")
    content = obj.get("content", [])
    if isinstance(content, str):  # a convenience for hand-written files
        content = [{"kind": "text", "value": content}]
    return ChatMessage(ChatRole(role), parts_from_wire(content, f"{where}.content"), name)


def messages_from_wire(objs: Any, where: str = "messages") -> list[ChatMessage]:
    """Parse a list of wire messages."""
    if not isinstance(objs, list):
        raise WireError(f"{where}: expected a list, got {_type(objs)}")
    return [message_from_wire(o, f"{where}[{i}]") for i, o in enumerate(objs)]


def model_info_to_wire(info: ModelInfo) -> dict[str, Any]:
    """The camelCase form of ``vscode.LanguageModelChatInformation``."""
    out: dict[str, Any] = {
        "id": info.id,
        "name": info.name,
        "family": info.family,
        "version": info.version,
        "maxInputTokens": info.max_input_tokens,
        "maxOutputTokens": info.max_output_tokens,
        "capabilities": {
            "imageInput": info.capabilities.image_input,
            "toolCalling": info.capabilities.tool_calling,
        },
    }
    if info.tooltip is not None:
        out["tooltip"] = info.tooltip
    if info.detail is not None:
        out["detail"] = info.detail
    if info.configuration_schema is not None:
        out["configurationSchema"] = info.configuration_schema
    return out


def model_info_from_wire(obj: Any, where: str = "model") -> ModelInfo:
    """Parse the camelCase model information."""
    if not isinstance(obj, Mapping):
        raise WireError(f"{where}: expected an object, got {_type(obj)}")
    caps = obj.get("capabilities") or {}
    if not isinstance(caps, Mapping):
        raise WireError(f"{where}.capabilities: expected an object, got {_type(caps)}")
    limits = {}
    for key in ("maxInputTokens", "maxOutputTokens"):
        value = obj.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise WireError(f"{where}.{key}: expected a non-negative integer, got {value!r}")
        limits[key] = value
    tool_calling = caps.get("toolCalling", False)
    if not isinstance(tool_calling, (bool, int)):
        raise WireError(f"{where}.capabilities.toolCalling: expected a boolean or an integer")
    schema = obj.get("configurationSchema")
    return ModelInfo(
        id=_str(obj, "id", where),
        name=str(obj.get("name") or obj["id"]),
        family=str(obj.get("family") or obj["id"]),
        version=str(obj.get("version") or ""),
        max_input_tokens=limits["maxInputTokens"],
        max_output_tokens=limits["maxOutputTokens"],
        tooltip=obj.get("tooltip"),
        detail=obj.get("detail"),
        capabilities=ModelCapabilities(
            image_input=bool(caps.get("imageInput", False)), tool_calling=tool_calling
        ),
        configuration_schema=schema if isinstance(schema, dict) else None,
    )


def options_to_wire(options: ChatRequestOptions) -> dict[str, Any]:
    """``{"tools": [{"name", "description", "inputSchema"}], "toolMode": 1|2, "modelOptions": {}}``."""
    return {
        "tools": [
            {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
            for t in options.tools
        ],
        "toolMode": int(options.tool_mode),
        "modelOptions": dict(options.model_options),
        **({"modelConfiguration": dict(options.model_configuration)}
           if options.model_configuration else {}),
    }  # fmt: skip


def options_from_wire(obj: Any, where: str = "options") -> ChatRequestOptions:
    """Parse request options; missing fields take VS Code's defaults."""
    if obj is None:
        return ChatRequestOptions()
    if not isinstance(obj, Mapping):
        raise WireError(f"{where}: expected an object, got {_type(obj)}")
    tools_raw = obj.get("tools") or []
    if not isinstance(tools_raw, list):
        raise WireError(f"{where}.tools: expected a list, got {_type(tools_raw)}")
    tools = []
    for i, t in enumerate(tools_raw):
        here = f"{where}.tools[{i}]"
        if not isinstance(t, Mapping):
            raise WireError(f"{here}: expected an object, got {_type(t)}")
        schema = t.get("inputSchema")
        if schema is not None and not isinstance(schema, dict):
            raise WireError(f"{here}.inputSchema: expected an object, got {_type(schema)}")
        desc = t.get("description") or ""
        if not isinstance(desc, str):
            raise WireError(f"{here}.description: expected a string, got {_type(desc)}")
        tools.append(ChatTool(_str(t, "name", here), desc, schema))
    mode = obj.get("toolMode", 1)
    if mode is None:
        mode = 1
    if isinstance(mode, bool) or mode not in (1, 2):
        raise WireError(f"{where}.toolMode: expected 1 (auto) or 2 (required), got {mode!r}")
    model_options = obj.get("modelOptions") or {}
    if not isinstance(model_options, dict):
        raise WireError(f"{where}.modelOptions: expected an object, got {_type(model_options)}")
    configuration = obj.get("modelConfiguration") or {}
    if not isinstance(configuration, dict):
        raise WireError(
            f"{where}.modelConfiguration: expected an object, got {_type(configuration)}"
        )
    return ChatRequestOptions(tools, ToolMode(mode), dict(model_options), dict(configuration))


_USAGE_FIELDS = (
    ("input_tokens", "inputTokens"),
    ("output_tokens", "outputTokens"),
    ("cache_read_tokens", "cacheReadTokens"),
    ("cache_write_tokens", "cacheWriteTokens"),
    ("reasoning_tokens", "reasoningTokens"),
)


def usage_to_wire(usage: Usage) -> dict[str, int]:
    """camelCase usage with only the known fields."""
    out = {}
    for attr, key in _USAGE_FIELDS:
        value = getattr(usage, attr)
        if value is not None:
            out[key] = value
    return out


def usage_from_wire(obj: Any) -> Usage:
    """Parse camelCase usage; unknown or non-integer fields are ignored."""
    if not isinstance(obj, Mapping):
        return Usage()
    values: dict[str, int] = {}
    for attr, key in _USAGE_FIELDS:
        v = obj.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            values[attr] = v
    return Usage(**values)
