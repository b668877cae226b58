"""Anthropic Messages (``POST {base}/messages``, ``anthropic-version: 2023-06-01``).

The body comes from :func:`lmbridge.convert.to_anthropic` (tools with ``input_schema``,
``tool_choice`` ``{"type": "any"}`` for :attr:`~lmbridge.parts.ToolMode.REQUIRED`). The API
requires ``max_tokens``: the options' value when they name one, else the model's output
reserve (see :mod:`lmbridge.gateway.catalog`). Credentials are ``x-api-key``.

Context editing is on by default for the models that support it (the catalog's
``capabilities.context_management.supported`` when it says, else Claude 4 and later by id): the body gets ``context_management`` with ``clear_tool_uses_20250919`` (old tool
results are cleared once the prompt grows past the API's threshold) and, when the request turns
thinking on, ``clear_thinking_20251015`` first (the API wants it first), and the request gets
the beta header ``anthropic-beta: context-management-2025-06-27``, merged with any
``anthropic-beta`` the configuration's ``headers`` give. A ``context_management`` from
``extraBody`` or the model options is sent as given (with the header). ``"contextManagement":
false`` turns the default off::

    {"name": "claude", "format": "anthropic", "baseUrl": "https://api.anthropic.com/v1",
     "apiKeyEnv": "ANTHROPIC_API_KEY", "contextManagement": false}
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import httpx

from ..convert import sampling_options, to_anthropic
from ..parts import ChatMessage, ChatRequestOptions
from ._client import UpstreamClient, UpstreamRequest, bare_model

# Claude 3.7 and 4 on take extended thinking; the budgets of each effort (the API's minimum
# budget is 1,024 tokens, and the budget must stay below max_tokens).
_THINKING_MODELS = re.compile(r"^claude-(3-7|(opus|sonnet|haiku)-[4-9]|[4-9])")
THINKING_BUDGETS = {"low": 2_048, "medium": 8_192, "high": 24_576}

if TYPE_CHECKING:
    from .catalog import CatalogModel

__all__ = [
    "ANTHROPIC_VERSION",
    "CONTEXT_MANAGEMENT_BETA",
    "DEFAULT_MAX_TOKENS",
    "AnthropicClient",
    "context_management_supported",
]

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent (the converter is written against it)."""

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when neither the options nor the model information give one."""

CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
"""The ``anthropic-beta`` value that context editing needs."""

# "claude-sonnet-4-5-20250929", "claude-opus-4-1", "anthropic.claude-haiku-4-5...", not
# "claude-3-7-sonnet": the generation is the first number after "claude-" (and a name).
_CLAUDE_GENERATION = re.compile(r"claude-(?:[a-z]+-)?(\d+)(?!\d)")


def context_management_supported(model: str) -> bool:
    """Whether a model id names a Claude that takes context editing (Claude 4 and later)."""
    found = _CLAUDE_GENERATION.search(model.lower())
    return found is not None and int(found.group(1)) >= 4


class AnthropicClient(UpstreamClient):
    """Streams Anthropic Messages."""

    format = "anthropic"
    chat_path = "/messages"
    passthrough_options = frozenset(
        {"thinking", "top_k", "metadata", "service_tier", "context_management"}
    )
    provider_options: ClassVar[frozenset[str]] = frozenset({"contextManagement"})

    def __init__(
        self, http: httpx.AsyncClient, *, context_management: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(http, **kwargs)
        if not isinstance(context_management, bool):
            raise TypeError(
                f"contextManagement: expected true or false, got {context_management!r}"
            )
        self.context_management = context_management
        """Whether requests to models that support it get context editing by default."""
        self.catalog_support: dict[str, bool] = {}
        """What the model catalog says about context editing, by model id (it wins over the
        model id's generation)."""

    def note_catalog(self, models: Sequence[CatalogModel]) -> None:
        """Keep what the catalog says about each model's context editing support."""
        self.catalog_support = {
            m.info.id: m.context_management for m in models if m.context_management is not None
        }

    def supports_context_management(self, model: str) -> bool:
        """The catalog's word for ``model``, else :func:`context_management_supported`."""
        known = self.catalog_support.get(model)
        return context_management_supported(model) if known is None else known

    def protocol_headers(self) -> dict[str, str]:
        """``anthropic-version``."""
        return {"anthropic-version": ANTHROPIC_VERSION}

    def key_headers(self, key: str) -> dict[str, str]:
        """``x-api-key``."""
        return {"x-api-key": key}

    def effort_levels(self, model: str) -> tuple[str, ...]:
        """Claude 3.7 and Claude 4 on (extended thinking)."""
        return tuple(THINKING_BUDGETS) if _THINKING_MODELS.match(bare_model(model)) else ()

    def apply_effort(self, body: dict[str, Any], effort: str, model: str) -> None:
        """``thinking`` with the effort's budget, kept below ``max_tokens``; the sampling
        options thinking refuses (``temperature``, ``top_k``) are left out."""
        budget = THINKING_BUDGETS.get(effort)
        max_tokens = body.get("max_tokens")
        if budget is None or not isinstance(max_tokens, int):
            return
        budget = min(budget, max_tokens - 1_024)
        if budget < 1_024:
            return  # too small an output budget to think in
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        body.pop("temperature", None)
        body.pop("top_k", None)

    def build_body(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        *,
        default_max_tokens: int | None = None,
        image_input: bool = True,
    ) -> dict[str, Any]:
        """The body by :func:`~lmbridge.convert.to_anthropic`; ``max_tokens`` is the options'
        value, else ``default_max_tokens``, else :data:`DEFAULT_MAX_TOKENS`."""
        requested = sampling_options(options).get("max_tokens")
        max_tokens = requested or default_max_tokens or DEFAULT_MAX_TOKENS
        kwargs = {"image_input": image_input, **self.converter_options}
        return to_anthropic(messages, options, model=model, max_tokens=max_tokens, **kwargs)

    def finish_request(self, request: UpstreamRequest) -> UpstreamRequest:
        """Context editing by default, and its beta header (module notes)."""
        model = request.model or ""
        body = request.body
        if (
            "context_management" not in body
            and self.context_management
            and self.supports_context_management(model)
        ):
            edits: list[dict[str, Any]] = []
            thinking = body.get("thinking")
            if isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive"):
                edits.append({"type": "clear_thinking_20251015"})  # must come first
            edits.append({"type": "clear_tool_uses_20250919"})
            body["context_management"] = {"edits": edits}
        if "context_management" in body:
            _add_beta(request.headers, CONTEXT_MANAGEMENT_BETA)
        add_cache_breakpoints(body)
        return request


_EPHEMERAL = {"type": "ephemeral"}
_UNCACHEABLE = ("thinking", "redacted_thinking")  # blocks the API takes no cache_control on


def add_cache_breakpoints(body: dict[str, Any]) -> None:
    """Prompt-cache breakpoints for a request that has none (every consumer but Copilot,
    which places its own): on the last tool definition, on the system prompt, and on the last
    block of each of the last two user turns. Anthropic caches the prefix up to a breakpoint;
    the next request of the conversation reads it back at a tenth of the price, up to the
    previous request's last turn. Four breakpoints, the API's most."""
    tools = body.get("tools")
    system = body.get("system")
    messages = body.get("messages")
    blocks: list[Any] = []
    if isinstance(tools, list):
        blocks.extend(tools)
    if isinstance(system, list):
        blocks.extend(system)
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            blocks.extend(content)
    if any(isinstance(b, Mapping) and "cache_control" in b for b in blocks):
        return  # the caller placed its own
    if isinstance(tools, list) and tools and isinstance(tools[-1], dict):
        tools[-1]["cache_control"] = dict(_EPHEMERAL)
    if isinstance(system, str) and system.strip():
        body["system"] = [{"type": "text", "text": system, "cache_control": dict(_EPHEMERAL)}]
    elif isinstance(system, list) and system and isinstance(system[-1], dict):
        system[-1]["cache_control"] = dict(_EPHEMERAL)
    marked = 0
    for message in reversed(messages if isinstance(messages, list) else []):
        if marked == 2:
            break
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        cacheable = [
            b for b in content if isinstance(b, dict) and b.get("type") not in _UNCACHEABLE
        ] if isinstance(content, list) else []
        if cacheable:
            cacheable[-1]["cache_control"] = dict(_EPHEMERAL)
            marked += 1


def _add_beta(headers: dict[str, str], beta: str) -> None:
    """Add ``beta`` to the ``anthropic-beta`` header (comma-separated, any name case)."""
    name = next((k for k in headers if k.lower() == "anthropic-beta"), "anthropic-beta")
    values = [v.strip() for v in headers.get(name, "").split(",") if v.strip()]
    if beta not in values:
        values.append(beta)
    headers[name] = ",".join(values)
