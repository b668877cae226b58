"""Token counts for VS Code messages and whole requests, learning from real usage.

:class:`TokenEstimator` costs every part of a message (text, thinking, tool calls, tool
results, images by their header size, other data by size), tool definitions and the
per-message and per-request overheads of the model's family. With a
:class:`~lmbridge.tokens.store.TokenStore` it also learns:

- :meth:`TokenEstimator.observe` takes the input tokens an upstream reported for a request,
  spreads the tokens that are not yet accounted for over the messages that were estimated
  (in proportion to their estimates) and stores them under a hash of each message, and
  updates the model's correction factor (:class:`~lmbridge.tokens.calibration.Calibration`).
- Later counts use the stored tokens of every message seen before (wherever it sits in the
  conversation, whatever was edited or removed around it) and estimate only the others.

The estimator does no I/O itself: persistence is the store's job.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    DataPart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from .calibration import Calibration
from .images import image_tokens
from .store import TokenStore
from .text import TextEstimator

_log = logging.getLogger("lmbridge.tokens")

__all__ = [
    "FAMILIES",
    "FamilyCosts",
    "RequestEstimate",
    "TextCounter",
    "TokenEstimator",
    "family_costs",
    "family_for",
    "message_key",
    "weight_set_for",
]

FAMILIES: tuple[str, ...] = (
    "openai",
    "anthropic",
    "google",
    "llama",
    "qwen",
    "mistral",
    "deepseek",
    "unknown",
)
"""The token families :func:`family_for` returns."""

_FAMILY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (family, re.compile(pattern))
    for family, pattern in (
        ("anthropic", r"claude|anthropic"),
        ("google", r"gemini|gemma|palm|bison|google"),
        ("llama", r"llama|meta-"),
        ("qwen", r"qwen|qwq"),
        ("deepseek", r"deepseek"),
        ("mistral", r"mistral|mixtral|codestral|ministral|magistral|devstral|pixtral"),
        ("openai", r"gpt|chatgpt|codex|davinci|openai|(?:^|[/:._ -])o[1345](?:$|[-_: ])"),
    )
)


def family_for(model_id: str, family: str | None = None) -> str:
    """The token family of a model from its family string and id.

    ``family`` wins when it names a family outright (``"anthropic"``) or a model family
    (``"claude-sonnet-4"``, ``"gpt-4o"``); otherwise the id is matched
    (``"anthropic/claude-opus-4"``, ``"o3-mini"`` ...). ``"unknown"`` when nothing matches.
    """
    for text in (family, model_id):
        if not text:
            continue
        lowered = text.lower()
        if lowered in FAMILIES:
            return lowered
        for name, pattern in _FAMILY_PATTERNS:
            if pattern.search(lowered):
                return name
    return "unknown"


_CL100K_MODELS = re.compile(r"gpt-(?:3\.5|4)(?![.o\d])|text-embedding-(?:ada|3)")


def weight_set_for(family: str, model_id: str | None = None) -> str:
    """The text weight set of :mod:`lmbridge.tokens.weights` for a family and model."""
    if family == "openai":
        return "cl100k" if model_id and _CL100K_MODELS.search(model_id.lower()) else "o200k"
    return {"google": "o200k", "llama": "llama3"}.get(family, family)


@dataclass(frozen=True, slots=True)
class FamilyCosts:
    """Fixed token costs around the content, per family."""

    message: int
    """Per message (role markers, separators)."""
    request: int
    """Per request (the reply primer)."""
    name: int
    """When a message has a ``name``."""
    tool_call: int
    """Per tool call, besides its name and JSON input."""
    tool_result: int
    """Per tool result, besides its content."""
    tool_definition: int
    """Per tool definition, besides its name, description and schema."""
    tools: int
    """Once when the request has tools (Anthropic's tool-use system prompt: 346)."""


_COSTS = {
    # OpenAI's documented chat format: 3 per message, +1 for a name, 3 for the reply primer.
    "openai": FamilyCosts(3, 3, 1, 8, 4, 8, 12),
    "anthropic": FamilyCosts(4, 3, 1, 12, 8, 10, 346),
    "google": FamilyCosts(4, 3, 1, 8, 6, 10, 20),
}
_DEFAULT_COSTS = FamilyCosts(4, 3, 1, 10, 6, 10, 20)


def family_costs(family: str) -> FamilyCosts:
    """The overheads of a family (a middle ground for families without documented ones)."""
    return _COSTS.get(family, _DEFAULT_COSTS)


class TextCounter(Protocol):
    """What :class:`TokenEstimator` counts texts with: the estimator
    (:class:`~lmbridge.tokens.text.TextEstimator`) or an exact tokenizer
    (:class:`~lmbridge.tokens.exact.ExactTextCounter`)."""

    @property
    def weight_set(self) -> str:
        """The tokenizer's name as a weight set (``o200k``, ``cl100k``, ``anthropic`` ...)."""
        ...

    def estimate(self, text: str) -> float:
        """Tokens of ``text``."""
        ...


def _is_text_mime(mime: str) -> bool:
    return mime.startswith("text/") or mime.endswith(
        ("/json", "+json", "/xml", "+xml", "/yaml", "/javascript")
    )


def _h(hasher: hashlib._Hash, tag: bytes, data: bytes) -> None:
    # length-prefixed so that different part boundaries never hash alike
    hasher.update(tag + len(data).to_bytes(8, "little"))
    hasher.update(data)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _hash_part(hasher: hashlib._Hash, part: Part) -> None:
    if isinstance(part, TextPart):
        _h(hasher, b"T", part.value.encode("utf-8", "surrogatepass"))
    elif isinstance(part, ThinkingPart):
        _h(hasher, b"K", part.text.encode("utf-8", "surrogatepass"))
    elif isinstance(part, ToolCallPart):
        _h(hasher, b"C", part.call_id.encode("utf-8", "surrogatepass"))
        _h(hasher, b"N", part.name.encode("utf-8", "surrogatepass"))
        _h(hasher, b"I", _json(part.input).encode("utf-8", "surrogatepass"))
    elif isinstance(part, ToolResultPart):
        _h(hasher, b"R", part.call_id.encode("utf-8", "surrogatepass"))
        _h(hasher, b"(", str(len(part.content)).encode())
        for inner in part.content:
            _hash_part(hasher, inner)
    elif isinstance(part, DataPart):
        _h(hasher, b"M", part.mime_type.encode("utf-8", "surrogatepass"))
        _h(hasher, b"D", hashlib.sha256(part.data).digest())
    else:  # pragma: no cover - the part model is closed
        raise TypeError(f"not a part: {part!r}")


def message_key(namespace: bytes, message: ChatMessage) -> bytes:
    """The cache key of a message: a 16-byte digest of ``namespace`` and its canonical content.

    The content is the role, the name and every part (text; thinking text; tool call id,
    name and input as sorted JSON; tool result id and content; data MIME type and the
    SHA-256 of its bytes).
    """
    hasher = hashlib.sha256(namespace)
    _h(hasher, b"r", bytes([int(message.role)]))
    if message.name is not None:
        _h(hasher, b"n", message.name.encode("utf-8", "surrogatepass"))
    for part in message.content:
        _hash_part(hasher, part)
    return hasher.digest()[:16]


def _tools_key(namespace: bytes, tools: Sequence[ChatTool]) -> bytes:
    hasher = hashlib.sha256(namespace + b"\x00tools")
    for tool in tools:
        _h(hasher, b"t", _json([tool.name, tool.description, tool.input_schema]).encode())
    return hasher.digest()[:16]


@dataclass(slots=True)
class RequestEstimate:
    """A request's count with its parts, as :meth:`TokenEstimator.estimate_request` gives it."""

    total: int
    """The request's input tokens (margin included): what :meth:`count_request` returns."""
    messages: list[float] = field(default_factory=list)
    """Tokens of each message (stored or estimated, calibrated, no margin)."""
    cached: list[bool] = field(default_factory=list)
    """Whether each message's tokens came from the store."""
    tools: float = 0.0
    """Tokens of the tool definitions."""
    overhead: int = 0
    """The fixed per-request tokens."""


class TokenEstimator:
    """Token counts for one model: estimated, calibrated, and cached per message.

    ``family`` is a token family or a VS Code model family string (see :func:`family_for`);
    ``model_id`` picks the calibration and cache namespace (and e.g. cl100k for gpt-4);
    ``store`` persists what is learnt (without one, learning lasts as long as the object);
    ``margin`` inflates every count (``0.1``: 10 % more) to stay clear of context limits;
    ``text_counter`` replaces the text estimator (e.g. by an exact tokenizer,
    :class:`~lmbridge.tokens.exact.ExactTextCounter`): messages and requests are then
    counted from its counts, with the same overheads.
    """

    def __init__(
        self,
        family: str | None = None,
        *,
        store: TokenStore | None = None,
        margin: float = 0.0,
        model_id: str | None = None,
        sample_bytes: int | None = None,
        text_counter: TextCounter | None = None,
    ) -> None:
        if margin < 0 or not math.isfinite(margin):
            raise ValueError(f"margin must be a non-negative number, got {margin!r}")
        self.family = family_for(model_id or "", family)
        """The token family in use."""
        self.model_id = model_id
        """The model whose calibration and cache entries this estimator uses."""
        self.margin = margin
        """Relative safety margin added to every count."""
        self.store = store if store is not None else TokenStore.in_memory()
        """Where message counts and calibration are kept."""
        self.weight_set = weight_set_for(self.family, model_id)
        """The text weights in use (:data:`lmbridge.tokens.weights.WEIGHTS` key)."""
        self.costs = family_costs(self.family)
        """The family's fixed overheads."""
        self._text: TextCounter = (
            text_counter
            if text_counter is not None
            else TextEstimator(self.weight_set, sample_bytes=sample_bytes)
        )
        scope = f"{self.weight_set}\x00{model_id or self.family}"
        self._namespace = hashlib.sha256(scope.encode()).digest()[:16]
        stored = self.store.get_calibration(self._namespace)
        self.calibration = Calibration(*stored) if stored else Calibration()
        """The model's correction factor."""

    # ------------------------------------------------------------------ raw costs

    def raw_text(self, text: str) -> float:
        """Uncalibrated tokens of a text."""
        return self._text.estimate(text)

    def raw_part(self, part: Part) -> float:
        """Uncalibrated tokens of one part."""
        if isinstance(part, TextPart):
            return self._text.estimate(part.value)
        if isinstance(part, ThinkingPart):
            return self._text.estimate(part.text)
        if isinstance(part, ToolCallPart):
            return (
                self.costs.tool_call
                + self._text.estimate(part.name)
                + self._text.estimate(_json(part.input))
            )
        if isinstance(part, ToolResultPart):
            return self.costs.tool_result + sum(self.raw_part(p) for p in part.content)
        if isinstance(part, DataPart):
            return self._raw_data(part)
        raise TypeError(f"not a message part: {part!r}")

    def _raw_data(self, part: DataPart) -> float:
        mime = part.mime_type.lower().split(";")[0].strip()
        if "/" not in mime:
            # VS Code's markers (cache_control, stateful_marker ...) are not sent as content
            return 0.0
        if mime.startswith("image/"):
            return float(image_tokens(self.family, part.data))
        if _is_text_mime(mime):
            return self._text.estimate(part.data.decode("utf-8", "replace"))
        # other binary data: one token per 4 bytes
        return len(part.data) / 4

    def raw_message(self, message: ChatMessage) -> float:
        """Uncalibrated tokens of a message, its overhead included."""
        total = float(self.costs.message + (self.costs.name if message.name else 0))
        for part in message.content:
            total += self.raw_part(part)
        return total

    def raw_tools(self, tools: Sequence[ChatTool]) -> float:
        """Uncalibrated tokens of tool definitions (name, description, JSON schema, overheads)."""
        if not tools:
            return 0.0
        total = float(self.costs.tools)
        for tool in tools:
            total += self.costs.tool_definition + self._text.estimate(tool.name)
            total += self._text.estimate(tool.description)
            if tool.input_schema:
                total += self._text.estimate(_json(tool.input_schema))
        return total

    # ------------------------------------------------------------------ counts

    @property
    def factor(self) -> float:
        """The current correction factor for this model."""
        return self.calibration.factor

    def _out(self, tokens: float) -> int:
        return math.ceil(tokens * (1.0 + self.margin) - 1e-9)

    def count_text(self, text: str) -> int:
        """Tokens of a plain string (calibrated, margin included)."""
        return self._out(self._text.estimate(text) * self.calibration.factor)

    def key(self, message: ChatMessage) -> bytes:
        """The message's cache key for this model."""
        return message_key(self._namespace, message)

    def count_message(self, message: ChatMessage) -> int:
        """Tokens of a message: stored if seen before, else estimated and calibrated."""
        stored = self.store.get(message_key(self._namespace, message))
        if stored is not None:
            return self._out(stored)
        return self._out(self.raw_message(message) * self.calibration.factor)

    def estimate_request(
        self, messages: Sequence[ChatMessage], options: ChatRequestOptions | None = None
    ) -> RequestEstimate:
        """The whole request's tokens, with what each message contributed."""
        keys = [message_key(self._namespace, m) for m in messages]
        tools = options.tools if options is not None else []
        tools_key = _tools_key(self._namespace, tools) if tools else None
        stored = self.store.get_many([*keys, tools_key] if tools_key else keys)
        factor = self.calibration.factor
        out = RequestEstimate(0, overhead=self.costs.request)
        for key, message in zip(keys, messages, strict=False):
            hit = stored.get(key)
            out.cached.append(hit is not None)
            out.messages.append(hit if hit is not None else self.raw_message(message) * factor)
        if tools_key is not None:
            hit = stored.get(tools_key)
            out.tools = hit if hit is not None else self.raw_tools(tools) * factor
        out.total = self._out(out.overhead + out.tools + sum(out.messages))
        return out

    def count_request(
        self, messages: Sequence[ChatMessage], options: ChatRequestOptions | None = None
    ) -> int:
        """Input tokens of a whole request: messages, tool definitions and overheads."""
        return self.estimate_request(messages, options).total

    # ------------------------------------------------------------------ learning

    def observe(
        self,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions | None,
        actual_input_tokens: int,
    ) -> None:
        """Learn from the input tokens an upstream reported for this request.

        Tokens not covered by stored messages are spread over the other messages (and the
        tool definitions) in proportion to their raw estimates and stored; the ratio of those
        tokens to the raw estimates calibrates the model's factor. When the stored counts
        cannot be right (they leave a negative or absurd remainder), everything is re-spread.
        """
        if actual_input_tokens <= 0 or not messages:
            return
        tools = options.tools if options is not None else []
        items: list[tuple[bytes, float]] = [
            (message_key(self._namespace, m), self.raw_message(m)) for m in messages
        ]
        if tools:
            items.append((_tools_key(self._namespace, tools), self.raw_tools(tools)))
        stored = self.store.get_many(k for k, _ in items)
        available = float(actual_input_tokens - self.costs.request)
        known = sum(stored[k] for k, _ in items if k in stored)
        fresh = [(k, raw) for k, raw in items if k not in stored]
        fresh_raw = sum(raw for _, raw in fresh)
        remainder = available - known
        if fresh and fresh_raw > 0 and 0.33 <= remainder / fresh_raw <= 3.0:
            self._learn(fresh_raw, remainder)
            self._spread(fresh, remainder)
        elif not fresh and known > 0 and abs(remainder) <= 0.05 * known:
            return  # every message known and the counts agree: nothing to learn
        else:
            everything_raw = sum(raw for _, raw in items)
            if everything_raw <= 0 or available <= 0:
                return
            self._learn(everything_raw, available)
            self._spread(items, available)

    def _learn(self, raw: float, actual: float) -> None:
        before = self.calibration.factor
        self.calibration.observe(raw, actual)
        cal = self.calibration
        if cal.factor != before:
            # a change of 1% or more is worth a line at info; smaller steps at debug
            level = logging.INFO if abs(cal.factor - before) >= 0.01 * before else logging.DEBUG
            _log.log(
                level,
                "calibration for %s: factor %.3f -> %.3f (%d observations)",
                self.model_id or self.family,
                before,
                cal.factor,
                cal.observations,
            )
        self.store.put_calibration(self._namespace, cal.factor, cal.observations, cal.weight)

    def _spread(self, items: Sequence[tuple[bytes, float]], tokens: float) -> None:
        raw_total = sum(raw for _, raw in items)
        if raw_total <= 0:
            return
        self.store.put_many({k: tokens * raw / raw_total for k, raw in items})
