"""The first pass every converter shares: VS Code messages -> a checked list of turns.

:func:`prepare` validates the conversation once and applies every rule that does not depend
on the target, so each target module is a thin renderer over the same :class:`Turn` list:

1. a first pass maps every tool call's ``callId`` to its tool name (tool results carry only
   the id, and some targets need the name);
2. the system prompt: VS Code's proposed System role (3) is accepted as is; when a conversation
   has no System message, assistant messages before the first user message are the system
   prompt (VS Code's stable API has only User and Assistant, so extensions put the system
   prompt there; the seeds' ``fixSystemMessages``);
3. parts become blocks: empty text and thinking in non-assistant turns are dropped, thinking
   chunks of one block are joined (by id within a run of reasoning parts, so interleaved
   blocks and a closing metadata-only part find their block), data parts go through :mod:`lmbridge.mime` (JSON and text
   become text, images stay images where the model takes them), Copilot's internal data parts
   (``cache_control`` ...) become markers or are dropped;
4. images in non-user messages follow ``image_in_non_user``: placeholder text, skip or error;
5. consecutive turns of one role are merged (Anthropic requires alternation, and results split
   over two user messages still answer the calls before them); the first text of a merged
   message starts with a blank line (:data:`MESSAGE_SEPARATOR`) when text comes before it,
   since targets concatenate a turn's texts;
6. tool-sequence repair: every tool call is answered in the turn right after it (a clear
   placeholder result, or the call is dropped), results come first in their turn, and a
   result whose call is not right before it is kept as text rather than lost.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeAlias, TypeVar, cast

from .._unicode import repair_surrogates
from ..errors import ConversionError, WireError
from ..mime import factory_for, is_image, parse_mime
from ..parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatRole,
    ChatTool,
    DataPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from ..terminal import (
    CleanTerminal,
    clean_terminal_output,
    clean_terminal_scope,
    clean_terminal_text,
)

__all__ = [
    "ANTHROPIC_IMAGE_TYPES",
    "COPILOT_INTERNAL_MIME_TYPES",
    "MESSAGE_SEPARATOR",
    "MISSING_RESULT_TEXT",
    "OPENAI_IMAGE_TYPES",
    "Block",
    "CacheBlock",
    "CallBlock",
    "CleanTerminal",
    "ConversionPolicy",
    "ImagePolicy",
    "MediaBlock",
    "MediaKind",
    "MissingResultPolicy",
    "OrphanResultPolicy",
    "ResultBlock",
    "TextBlock",
    "ThinkingBlock",
    "Turn",
    "clean_terminal_output",
    "clean_terminal_scope",
    "clean_terminal_text",
    "data_url",
    "media_kind",
    "parse_data_url",
    "placeholder_for",
    "policy_from",
    "prepare",
    "sampling_options",
    "tool_schema",
    "valid_unicode",
]

ImagePolicy = Literal["placeholder", "skip", "error"]
"""What to do with an image in a message that cannot carry one."""
MissingResultPolicy = Literal["placeholder", "drop"]
"""What to do with a tool call that has no result before the next turn."""
OrphanResultPolicy = Literal["text", "error"]
"""What to do with a tool result whose call is not in the turn right before it."""

MISSING_RESULT_TEXT = (
    "[no result: this tool call was not answered (the tool was cancelled, failed or was never run)]"
)
"""The text of the placeholder result given to an unanswered tool call."""

COPILOT_INTERNAL_MIME_TYPES = frozenset(
    {
        "cache_control",
        "stateful_marker",
        "thinking",
        "context_management",
        "phase_data",
        "usage",
        "tool_call_stream",
    }
)
"""Data-part "MIME types" Copilot uses for its own markers (not MIME types: no slash).

``cache_control`` marks a prompt-cache breakpoint after the part before it (Anthropic renders it
as ``cache_control``); the others carry Copilot's internal state and are never sent upstream.
"""


ANTHROPIC_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image types the Anthropic Messages API takes as ``image`` blocks."""
OPENAI_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image types OpenAI takes as ``image_url`` / ``input_image`` (its vision guide: PNG,
JPEG, WEBP, non-animated GIF); others (SVG, BMP, HEIC, TIFF ...) are answered with a 400."""

MediaKind = Literal["image", "pdf", "placeholder"]
"""How a target sends a :class:`MediaBlock`: as an image, as a PDF document, or as the
placeholder text of :func:`placeholder_for`."""


@dataclass(frozen=True, slots=True)
class ConversionPolicy:
    """The rules every converter shares; each is a keyword argument of every ``to_*`` function."""

    image_in_non_user: ImagePolicy = "placeholder"
    """Images (and other binary data) in assistant or system messages: a placeholder text
    naming the MIME type and size, skipped, or a :class:`ConversionError`."""
    image_input: bool = True
    """Whether the model takes images in user messages; if not, they become placeholders."""
    missing_tool_result: MissingResultPolicy = "placeholder"
    """An unanswered tool call gets a placeholder result, or is dropped from the history."""
    orphan_tool_result: OrphanResultPolicy = "text"
    """A result whose call is not right before it is kept as text, or is an error."""
    leading_assistant_as_system: bool = True
    """Without a System message, assistant messages before the first user message are the
    system prompt."""
    clean_terminal: bool = False
    """Strip ANSI escapes and control characters from all text (terminal output)."""


_POLICY_FIELDS = frozenset(f.name for f in fields(ConversionPolicy))
_CHOICES: dict[str, tuple[str, ...]] = {
    "image_in_non_user": ("placeholder", "skip", "error"),
    "missing_tool_result": ("placeholder", "drop"),
    "orphan_tool_result": ("text", "error"),
}


def policy_from(policy: ConversionPolicy | None, overrides: Mapping[str, Any]) -> ConversionPolicy:
    """A policy from an optional base and keyword overrides; unknown names are an error."""
    unknown = sorted(set(overrides) - _POLICY_FIELDS)
    if unknown:
        raise ConversionError(
            f"unknown conversion option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(_POLICY_FIELDS))}"
        )
    for key, allowed in _CHOICES.items():
        if key in overrides and overrides[key] not in allowed:
            raise ConversionError(
                f"{key} must be one of {', '.join(allowed)}, got {overrides[key]!r}"
            )
    base = policy or ConversionPolicy()
    values = {f.name: getattr(base, f.name) for f in fields(ConversionPolicy)}
    values.update(overrides)
    return ConversionPolicy(**values)


# --------------------------------------------------------------------------- blocks


@dataclass(slots=True)
class TextBlock:
    """Text. ``json`` holds the parsed value when the text came from a JSON data part."""

    text: str
    json: Any = None
    is_json: bool = False


@dataclass(slots=True)
class ThinkingBlock:
    """One reasoning block: its chunks joined, its metadata merged."""

    text: str
    id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class CallBlock:
    """A tool call."""

    call_id: str
    name: str
    input: dict[str, Any]


@dataclass(slots=True)
class MediaBlock:
    """Binary data the target may send as is: an image, or a file such as a PDF."""

    data: bytes
    mime: str

    @property
    def is_image(self) -> bool:
        """``image/*``."""
        return is_image(self.mime)


@dataclass(slots=True)
class ResultBlock:
    """A tool result answering the call right before it. ``synthetic`` marks a placeholder."""

    call_id: str
    name: str | None
    content: list[TextBlock | MediaBlock]
    synthetic: bool = False

    @property
    def text(self) -> str:
        """The result's text parts, concatenated (VS Code concatenates text parts too)."""
        return "".join(c.text for c in self.content if isinstance(c, TextBlock))


@dataclass(slots=True)
class CacheBlock:
    """A prompt-cache breakpoint after the block before it (Copilot's ``cache_control``)."""


Block: TypeAlias = "TextBlock | ThinkingBlock | CallBlock | MediaBlock | ResultBlock | CacheBlock"


@dataclass(slots=True)
class Turn:
    """One turn of the prepared conversation. User turns hold their results first."""

    role: Literal["system", "user", "assistant"]
    blocks: list[Block]

    @property
    def text(self) -> str:
        """The turn's text blocks, concatenated."""
        return "".join(b.text for b in self.blocks if isinstance(b, TextBlock))


# --------------------------------------------------------------------------- helpers

_T = TypeVar("_T")


def valid_unicode(value: _T) -> _T:
    """``value`` (a JSON-like tree) with every string valid Unicode: lone surrogates -> U+FFFD.

    JSON allows escapes such as ``"\\ud83d"`` that decode to half a UTF-16 pair, which no
    UTF-8 request body can carry (encoding fails, or the upstream rejects the bytes). Pairs
    written as two escapes are joined. Keys and values are both fixed; lists and tuples
    become lists. The input is not changed: a copy is returned, and the walk is iterative,
    so deeply nested tool inputs do not hit the recursion limit.
    """
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        container, key = stack.pop()
        item = container[key]
        if isinstance(item, str):
            fixed = repair_surrogates(item)
            if fixed is not item:
                container[key] = fixed
        elif isinstance(item, Mapping):
            new: dict[Any, Any] = {}
            for k, v in item.items():
                nk = repair_surrogates(k) if isinstance(k, str) else k
                new[nk] = v
                stack.append((new, nk))
            container[key] = new
        elif isinstance(item, (list, tuple)):
            copy = list(item)
            container[key] = copy
            stack.extend((copy, i) for i in range(len(copy)))
    return cast("_T", root[0])


def data_url(data: bytes, mime: str) -> str:
    """``data:<mime>;base64,<data>``."""
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


_DATA_URL_RE = re.compile(r"^data:([^;,]*)((?:;[^;,]*)*),(.*)$", re.DOTALL)


def parse_data_url(url: str, where: str) -> tuple[bytes, str]:
    """The bytes and MIME type of a ``data:`` URL; :class:`ConversionError` if malformed."""
    m = _DATA_URL_RE.match(url)
    if not m:
        shown = url if len(url) <= 60 else url[:60] + "..."
        raise ConversionError(
            f"{where}: malformed data URL {shown!r}: expected 'data:<mime>;base64,...'"
        )
    mime = m.group(1) or "text/plain"
    try:
        parse_mime(mime)
    except WireError as exc:
        raise ConversionError(f"{where}: {exc}") from None
    params = [p.strip().lower() for p in m.group(2).split(";") if p.strip()]
    payload = m.group(3)
    if "base64" in params:
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ConversionError(f"{where}: data URL is not valid base64 ({exc})") from None
    else:
        from urllib.parse import unquote_to_bytes

        data = unquote_to_bytes(payload)
    return data, mime


def placeholder_for(data: bytes, mime: str) -> str:
    """The text that stands for data a target cannot take (it names the MIME type and size)."""
    what = "image" if _is_image_mime(mime) else "data"
    return f"[{what} omitted: {mime}, {len(data)} bytes]"


def media_kind(block: MediaBlock, image_types: frozenset[str]) -> MediaKind:
    """How a target whose API takes ``image_types`` sends ``block`` (one rule for every target).

    An image of a type the API does not take becomes the placeholder, like any other data:
    sending it would make the whole request fail.
    """
    if block.mime in image_types:
        return "image"
    if block.mime == "application/pdf":
        return "pdf"
    return "placeholder"


def _is_image_mime(mime: str) -> bool:
    try:
        return is_image(mime)
    except WireError:
        return False


def tool_schema(tool: ChatTool) -> dict[str, Any]:
    """The tool's input schema; an object schema without properties when it has none."""
    if tool.input_schema:
        return dict(tool.input_schema)
    return {"type": "object", "properties": {}}


_SAMPLING_KEYS: dict[str, tuple[str, ...]] = {
    "temperature": ("temperature",),
    "top_p": ("top_p", "topP"),
    "max_tokens": (
        "max_tokens",
        "maxTokens",
        "max_output_tokens",
        "maxOutputTokens",
        "max_completion_tokens",
    ),
    "stop": ("stop", "stop_sequences", "stopSequences"),
    "seed": ("seed",),
}


def sampling_options(options: ChatRequestOptions) -> dict[str, Any]:
    """The model options every upstream knows, under one name each.

    Returns a subset of ``temperature``, ``top_p``, ``max_tokens``, ``stop`` (a list of
    strings) and ``seed``; each renderer maps them to its own field names. Other model
    options are specific to one upstream and are left to the gateway.
    """
    out: dict[str, Any] = {}
    mo = options.model_options
    for name, keys in _SAMPLING_KEYS.items():
        present = [k for k in keys if mo.get(k) is not None]
        if not present:
            continue
        key = present[0]
        value = mo[key]
        where = f"options.modelOptions.{key}"
        if name in ("temperature", "top_p"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConversionError(f"{where}: expected a number, got {value!r}")
        elif name in ("max_tokens", "seed"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConversionError(f"{where}: expected a non-negative integer, got {value!r}")
        else:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConversionError(f"{where}: expected a string or a list of strings")
        out[name] = value
    return out


# --------------------------------------------------------------------------- prepare


def prepare(messages: Sequence[ChatMessage], policy: ConversionPolicy) -> list[Turn]:
    """Validate ``messages`` and apply the shared rules (see the module docstring)."""
    if not isinstance(messages, (list, tuple)):
        raise ConversionError(
            f"messages: expected a list of ChatMessage, got {type(messages).__name__}"
        )
    for i, msg in enumerate(messages):
        if not isinstance(msg, ChatMessage):
            raise ConversionError(
                f"messages[{i}]: expected a ChatMessage, got {type(msg).__name__}"
            )
    system_idx = _system_indices(messages, policy)
    # A result is named by the latest call with its id so far: the same id may come back in a
    # later turn (an upstream that numbers its calls per answer, or another upstream after the
    # user switched models), and the earlier call's name must not be taken for it.
    tool_names: dict[str, str] = {}
    turns: list[Turn] = []
    for i, msg in enumerate(messages):
        role: Literal["system", "user", "assistant"]
        if i in system_idx:
            role = "system"
        elif msg.role == ChatRole.ASSISTANT:
            role = "assistant"
        else:
            role = "user"
        for part in msg.content if isinstance(msg.content, list) else ():
            if isinstance(part, ToolCallPart) and isinstance(part.call_id, str):
                tool_names[part.call_id] = part.name
        turns.append(Turn(role, _blocks(msg, role, i, tool_names, policy)))
    turns = _merge(turns)
    turns = _repair(turns, policy)
    return _unique_call_ids(_merge(turns))


def _unique_call_ids(turns: list[Turn]) -> list[Turn]:
    """Call ids unique across the conversation: a call whose id an earlier turn used gets a
    new one, and so do the results that answer it (in the turn after it, where
    :func:`_repair` put them). Anthropic refuses a repeated ``tool_use`` id, and OpenAI would
    pair a result with the wrong call; ids lmbridge's decoders make are unique within one
    answer only, and two upstreams may make the same ones."""
    seen: set[str] = set()
    for i, turn in enumerate(turns):
        if turn.role != "assistant":
            continue
        renamed: dict[str, str] = {}
        for block in turn.blocks:
            if not isinstance(block, CallBlock):
                continue
            if block.call_id in seen:
                n = 2
                while f"{block.call_id}_{n}" in seen:
                    n += 1
                renamed[block.call_id] = block.call_id = f"{block.call_id}_{n}"
            seen.add(block.call_id)
        if renamed and i + 1 < len(turns) and turns[i + 1].role == "user":
            for block in turns[i + 1].blocks:
                if isinstance(block, ResultBlock) and block.call_id in renamed:
                    block.call_id = renamed[block.call_id]
    return turns


def _system_indices(messages: Sequence[ChatMessage], policy: ConversionPolicy) -> set[int]:
    explicit = {i for i, m in enumerate(messages) if m.role == ChatRole.SYSTEM}
    if explicit or not policy.leading_assistant_as_system:
        return explicit
    out: set[int] = set()
    for i, msg in enumerate(messages):
        if msg.role != ChatRole.ASSISTANT:
            break
        # A leading assistant message that called a tool is a real turn, not a prompt.
        if any(isinstance(p, (ToolCallPart, ToolResultPart)) for p in msg.content):
            break
        out.add(i)
    if len(out) == len(messages):
        # Nothing but assistant messages: the rule needs a first user message to apply.
        return set()
    return out


def _clean(text: str, policy: ConversionPolicy) -> str:
    return clean_terminal_output(text) if policy.clean_terminal else text


def _blocks(
    msg: ChatMessage,
    role: Literal["system", "user", "assistant"],
    index: int,
    tool_names: Mapping[str, str],
    policy: ConversionPolicy,
) -> list[Block]:
    out: list[Block] = []
    if not isinstance(msg.content, list):
        raise ConversionError(f"messages[{index}].content: expected a list of parts")
    for j, part in enumerate(msg.content):
        where = f"messages[{index}].content[{j}]"
        if isinstance(part, TextPart):
            if not isinstance(part.value, str):
                raise ConversionError(f"{where}: text value must be a string")
            if part.value:
                out.append(TextBlock(_clean(part.value, policy)))
        elif isinstance(part, ThinkingPart):
            if role == "assistant":
                _add_thinking(out, part, where)
            # Reasoning in user or system turns has no meaning to any upstream: dropped.
        elif isinstance(part, ToolCallPart):
            if role != "assistant":
                raise ConversionError(
                    f"{where}: tool call {part.call_id!r} ({part.name}) in a "
                    f"{role} message; tool calls belong in assistant messages"
                )
            if not isinstance(part.input, dict):
                raise ConversionError(
                    f"{where}: tool call {part.call_id!r} ({part.name}) input must be a JSON "
                    f"object, got {type(part.input).__name__}"
                )
            if not part.call_id:
                raise ConversionError(f"{where}: tool call ({part.name}) has an empty callId")
            out.append(CallBlock(part.call_id, part.name, dict(part.input)))
        elif isinstance(part, ToolResultPart):
            content: list[TextBlock | MediaBlock] = []
            for k, inner in enumerate(part.content):
                iwhere = f"{where}.content[{k}]"
                if isinstance(inner, TextPart):
                    if inner.value:
                        content.append(TextBlock(_clean(inner.value, policy)))
                elif isinstance(inner, DataPart):
                    block = _data_block(inner, "user", iwhere, policy)
                    if isinstance(block, (TextBlock, MediaBlock)):
                        content.append(block)
                elif isinstance(inner, ThinkingPart):
                    continue
                else:
                    raise ConversionError(
                        f"{iwhere}: unknown part kind {type(inner).__name__} in a tool result"
                    )
            out.append(ResultBlock(part.call_id, tool_names.get(part.call_id), content))
        elif isinstance(part, DataPart):
            block = _data_block(part, role, where, policy)
            if block is not None:
                out.append(block)
        else:
            raise ConversionError(f"{where}: unknown part kind {type(part).__name__}")
    return out


_CLOSING_KEYS = ("signature", "redactedData", "encryptedContent")


def _add_thinking(out: list[Block], part: ThinkingPart, where: str) -> None:
    metadata = part.metadata
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ConversionError(f"{where}: thinking metadata must be an object")
    # VS Code streams one reasoning block as many parts with one id (the signature often
    # arrives on a final empty part): they are one block again here. Blocks may interleave
    # (the AI SDK ends block 4 after block 5 has started), so a part joins the block with its
    # id anywhere in the run of reasoning it belongs to: back to the last text or tool call.
    if part.id is not None:
        for prev in reversed(out):
            if not isinstance(prev, ThinkingBlock):
                break
            if prev.id == part.id:
                prev.text += part.text
                prev.metadata.update(metadata or {})
                return
    else:
        # Without ids, consecutive parts are one block until one carries its closing
        # signature (or redacted data / encrypted content): what follows is a new block.
        last = out[-1] if out else None
        if (
            isinstance(last, ThinkingBlock)
            and last.id is None
            and not any(k in last.metadata for k in _CLOSING_KEYS)
        ):
            last.text += part.text
            last.metadata.update(metadata or {})
            return
    out.append(ThinkingBlock(part.text, part.id, dict(metadata or {})))


def _data_block(
    part: DataPart, role: str, where: str, policy: ConversionPolicy
) -> TextBlock | MediaBlock | CacheBlock | None:
    mime = part.mime_type
    if isinstance(mime, str) and mime.strip().lower() in COPILOT_INTERNAL_MIME_TYPES:
        return CacheBlock() if mime.strip().lower() == "cache_control" else None
    try:
        kind = factory_for(mime)
        parsed = parse_mime(mime)
    except WireError as exc:
        raise ConversionError(f"{where}: {exc}") from None
    data = bytes(part.data)
    if kind in ("json", "text"):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            if kind == "json":
                try:
                    return TextBlock(text, json.loads(text), True)
                except ValueError:
                    return TextBlock(text)
            return TextBlock(_clean(text, policy))
    essence = parsed.essence
    if role == "user":
        if kind == "image" and not policy.image_input:
            return TextBlock(placeholder_for(data, essence))
        return MediaBlock(data, essence)
    # Binary data in an assistant or system message: no upstream takes it there.
    if policy.image_in_non_user == "skip":
        return None
    if policy.image_in_non_user == "error":
        raise ConversionError(
            f"{where}: {essence} data in {role} messages cannot be sent (image_in_non_user='error')"
        )
    return TextBlock(placeholder_for(data, essence))


MESSAGE_SEPARATOR = "\n\n"
"""Put between the texts of two user or two assistant messages merged into one turn."""


def _merge(turns: list[Turn]) -> list[Turn]:
    out: list[Turn] = []
    for turn in turns:
        if not any(not isinstance(b, CacheBlock) for b in turn.blocks):
            continue
        if out and out[-1].role == turn.role:
            out[-1].blocks.extend(_separated(out[-1].blocks, turn.blocks, turn.role))
        else:
            out.append(Turn(turn.role, list(turn.blocks)))
    return out


def _separated(before: list[Block], after: list[Block], role: str) -> list[Block]:
    """``after``, its first text starting with a blank line when text comes before it.

    Targets join a turn's text ("a1" and "a2" become "a1a2" in Chat Completions content, and
    servers concatenate text blocks or parts); the separator, in the text itself, keeps the
    two messages apart in every target. System texts are joined with a blank line by each
    renderer already.
    """
    if role == "system":
        return after
    # Whitespace-only text is left alone: Anthropic drops it, and it separates nothing.
    prev = next((b for b in reversed(before) if isinstance(b, TextBlock) and b.text.strip()), None)
    i = next((k for k, b in enumerate(after) if isinstance(b, TextBlock) and b.text.strip()), None)
    if prev is None or i is None:
        return after
    first = after[i]
    assert isinstance(first, TextBlock)
    if prev.text.endswith("\n\n") or first.text.startswith("\n\n"):
        sep = ""
    elif prev.text.endswith("\n") or first.text.startswith("\n"):
        sep = "\n"
    else:
        sep = MESSAGE_SEPARATOR
    if not sep:
        return after
    out = list(after)
    out[i] = TextBlock(sep + first.text, first.json, first.is_json)
    return out


def _orphan_text(result: ResultBlock) -> list[Block]:
    name = f" ({result.name})" if result.name else ""
    head = f"[tool result for call {result.call_id}{name}, whose call is not in the turn before]"
    text = result.text
    blocks: list[Block] = [TextBlock(f"{head}\n{text}" if text else head)]
    blocks.extend(c for c in result.content if isinstance(c, MediaBlock))
    return blocks


def _repair(turns: list[Turn], policy: ConversionPolicy) -> list[Turn]:
    out: list[Turn] = []
    i = 0
    while i < len(turns):
        turn = turns[i]
        if turn.role == "assistant":
            calls = [b for b in turn.blocks if isinstance(b, CallBlock)]
            orphans = [b for b in turn.blocks if isinstance(b, ResultBlock)]
            if orphans:
                turn = Turn(turn.role, [b for b in turn.blocks if not isinstance(b, ResultBlock)])
                for r in orphans:
                    _check_orphan(r, policy)
                    turn.blocks.extend(_orphan_text(r))
            _check_unique(calls)
            out.append(turn)
            nxt = turns[i + 1] if i + 1 < len(turns) and turns[i + 1].role == "user" else None
            answered = _answer(calls, nxt, out, policy)
            if answered is not None:
                out.append(answered)
            i += 2 if nxt is not None else 1
            continue
        if turn.role == "user":
            out.append(_answer_none(turn, policy))
        else:
            out.append(_system_turn(turn, policy))
        i += 1
    return out


def _check_unique(calls: list[CallBlock]) -> None:
    seen: set[str] = set()
    for c in calls:
        if c.call_id in seen:
            raise ConversionError(
                f"tool call id {c.call_id!r} ({c.name}) is used twice in one assistant turn"
            )
        seen.add(c.call_id)


def _check_orphan(result: ResultBlock, policy: ConversionPolicy) -> None:
    if policy.orphan_tool_result == "error":
        raise ConversionError(
            f"tool result for call {result.call_id!r} does not answer a tool call in the "
            "assistant turn right before it (orphan_tool_result='error')"
        )


def _answer(
    calls: list[CallBlock], nxt: Turn | None, out: list[Turn], policy: ConversionPolicy
) -> Turn | None:
    """The user turn after an assistant turn: results in call order, then everything else."""
    blocks = list(nxt.blocks) if nxt is not None else []
    by_id: dict[str, ResultBlock] = {}
    rest: list[Block] = []
    wanted = {c.call_id for c in calls}
    for b in blocks:
        if isinstance(b, ResultBlock) and b.call_id in wanted and b.call_id not in by_id:
            by_id[b.call_id] = b
        elif isinstance(b, ResultBlock):
            _check_orphan(b, policy)
            rest.extend(_orphan_text(b))
        else:
            rest.append(b)
    results: list[Block] = []
    missing: list[CallBlock] = []
    for c in calls:
        if c.call_id in by_id:
            results.append(by_id[c.call_id])
        elif policy.missing_tool_result == "placeholder":
            results.append(ResultBlock(c.call_id, c.name, [TextBlock(MISSING_RESULT_TEXT)], True))
        else:
            missing.append(c)
    if missing:
        drop = {id(c) for c in missing}
        prev = out[-1]
        prev.blocks = [b for b in prev.blocks if id(b) not in drop]
        if not any(not isinstance(b, CacheBlock) for b in prev.blocks):
            out.pop()
    if not results and not rest:
        return None
    return Turn("user", results + rest)


def _answer_none(turn: Turn, policy: ConversionPolicy) -> Turn:
    """A user turn not preceded by tool calls: every result in it is an orphan."""
    blocks: list[Block] = []
    for b in turn.blocks:
        if isinstance(b, ResultBlock):
            _check_orphan(b, policy)
            blocks.extend(_orphan_text(b))
        else:
            blocks.append(b)
    return Turn("user", blocks)


def _system_turn(turn: Turn, policy: ConversionPolicy) -> Turn:
    blocks: list[Block] = []
    for b in turn.blocks:
        if isinstance(b, ResultBlock):
            _check_orphan(b, policy)
            blocks.extend(x for x in _orphan_text(b) if isinstance(x, TextBlock))
        elif isinstance(b, MediaBlock):
            if policy.image_in_non_user == "error":
                raise ConversionError(f"{b.mime} data in a system message cannot be sent")
            if policy.image_in_non_user == "placeholder":
                blocks.append(TextBlock(placeholder_for(b.data, b.mime)))
        elif isinstance(b, (TextBlock, CacheBlock)):
            blocks.append(b)
    return Turn("system", blocks)
