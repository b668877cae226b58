"""The models an upstream serves: ``GET {base}/models`` or the configured list -> ModelInfo.

Catalog shapes read
    OpenAI ``{"data": [{"id", "object": "model", "owned_by"}]}``; the Vercel AI Gateway adds
    ``name``, ``description``, ``context_window``, ``max_tokens``, ``type`` and ``tags``
    (``tool-use``, ``vision`` ...); OpenRouter-style ``context_length``,
    ``top_provider.max_completion_tokens``, ``architecture.input_modalities`` and
    ``supported_parameters``; vLLM ``max_model_len``; Anthropic ``display_name`` (with
    ``has_more`` / ``last_id`` paging). Formats with a catalog of their own shape name their
    parser in :mod:`lmbridge.formats` (Gemini: ``models`` with ``nextPageToken`` paging). Entries whose ``type`` says they are not chat models
    (embeddings, images, speech ...) are left out, and so are well-known non-chat OpenAI ids
    (``text-embedding-*``, ``whisper-*``, ``dall-e-*`` ...) when no type is given.

The output reserve (why ``maxInputTokens`` is less than the context window)
    A model's context window holds the prompt *and* the answer. VS Code and Copilot fill the
    prompt up to ``maxInputTokens``; if that were the whole window, a full prompt would leave
    no room to answer and the upstream would refuse it (Anthropic checks
    ``input + max_tokens <= context window`` before it starts). So each model keeps a reserve
    for output::

        reserve          = min(max output tokens, context window * outputReserve)
        maxInputTokens   = context window - reserve
        maxOutputTokens  = reserve

    so that ``maxInputTokens + maxOutputTokens`` is the model's real context window: Copilot
    takes that sum as the window (its context ring and its budget), and the reserve is the
    output budget lmbridge asks for when a request names none. The model's own output limit is
    in the tooltip; a request may still ask for up to it.

    ``outputReserve`` defaults to ``0.25``: a quarter of the window, or the model's whole
    output limit when that is smaller (GPT-4o: 128k window, 16k output -> 112k input;
    Claude Sonnet 4: 200k window, 64k output -> 150k input, 50k reserved). It is also the
    output budget requested when a request names none and the upstream requires one
    (Anthropic's ``max_tokens``), so a prompt within ``maxInputTokens`` always fits. A value
    of 1 or more is a number of tokens instead of a fraction. The seeds argued for the raw
    window (VS Code "decides") and for a fixed 15 %; neither leaves room for a long answer
    from a large-output model, and the raw window makes a full prompt fail outright.

Catalogs without limits (plain OpenAI shape) get the provider's ``contextWindow``
(default 128,000) and ``maxOutputTokens`` (default 4,096). Without any capability signal, a
model is taken to call tools (what VS Code's agent mode needs; an upstream that cannot will
say so) and not to take images; both defaults are configurable.

:class:`ModelCatalog` caches the list for ``catalogTtl`` seconds (default 600) and calls its
``on_change`` callback when a refresh brings a different list. Static ``models`` from the
configuration skip the catalog.

Any provider's ``baseUrl`` is contacted when VS Code lists models, with no user action, so the
list is read as a stream with bounds: at most :data:`MAX_CATALOG_BYTES` after content decoding
(all pages together; a gzip bomb is inflated a step at a time and stopped there, see
:mod:`lmbridge.gateway._body`), and within :data:`CATALOG_DEADLINE` seconds in all (an answer
trickled a byte at a time is given up then). Either failure is a :class:`LanguageModelError`
naming the limit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from .. import formats
from ..config_fields import MODEL_FIELDS, check
from ..errors import ConfigError, LanguageModelError, UpstreamHTTPError
from ..parts import ModelCapabilities, ModelInfo
from ._body import BodyTooLarge, read_body, read_head
from ._client import UpstreamClient
from ._errors import map_http_error, map_transport_error

__all__ = [
    "CATALOG_DEADLINE",
    "DEFAULT_CATALOG_TTL",
    "DEFAULT_OUTPUT_RESERVE",
    "MAX_CATALOG_BYTES",
    "MIN_CONTEXT_WINDOW",
    "CatalogModel",
    "CatalogParser",
    "ModelCatalog",
    "ModelDefaults",
    "catalog_model",
    "output_reserve",
    "parse_catalog",
    "parse_static_models",
]

log = logging.getLogger("lmbridge.gateway")

DEFAULT_OUTPUT_RESERVE = 0.25
"""The share of the context window kept for output (see the module docstring)."""

DEFAULT_CATALOG_TTL = 600.0
"""Seconds a fetched catalog stays fresh."""

MAX_CATALOG_BYTES = 8 * 1024 * 1024
"""The most bytes a model list may have, all pages together, after content decoding (the
largest public catalogs are well under 2 MiB)."""

CATALOG_DEADLINE = 30.0
"""Seconds a model list may take to arrive in all (every page, every byte)."""

_MAX_PAGES = 20

_NON_CHAT_TYPES = frozenset(
    {
        "embedding",
        "embeddings",
        "image",
        "video",
        "speech",
        "transcription",
        "tts",
        "stt",
        "audio",
        "rerank",
        "reranking",
        "moderation",
    }
)
_NON_CHAT_IDS = re.compile(
    r"(^|/)(text-embedding|embed|whisper|tts-|dall-e|gpt-image|sora|omni-moderation"
    r"|text-moderation|davinci-00|babbage-00)|-transcribe|-tts($|-)",
    re.IGNORECASE,
)
_TOOL_TAGS = frozenset({"tool-use", "tools", "tool_use", "function-calling", "function_calling"})
_IMAGE_TAGS = frozenset({"vision", "image-input", "image_input", "multimodal"})
_DATE_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


@dataclass(frozen=True)
class ModelDefaults:
    """What a model gets when neither the catalog nor the configuration says."""

    context_window: int = 128_000
    """Tokens of context (prompt + answer)."""
    max_output_tokens: int = 4_096
    """Tokens of output."""
    output_reserve: float = DEFAULT_OUTPUT_RESERVE
    """A fraction (< 1) of the context window, or a number of tokens (>= 1), kept for output."""
    tool_calling: bool = True
    """Whether a model without capability information calls tools."""
    image_input: bool = False
    """Whether a model without capability information takes images."""

    def __post_init__(self) -> None:
        for name in ("context_window", "max_output_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.context_window < MIN_CONTEXT_WINDOW:
            raise ConfigError(
                f"contextWindow must be at least {MIN_CONTEXT_WINDOW} (a token of input and one "
                f"of output), got {self.context_window!r}"
            )
        r = self.output_reserve
        if isinstance(r, bool) or not isinstance(r, (int, float)) or r <= 0:
            raise ConfigError(
                f"outputReserve must be a fraction of the context window (0 < x < 1) or a "
                f"number of tokens (>= 1), got {r!r}"
            )


MIN_CONTEXT_WINDOW = 2
"""The smallest context window with room for both budgets: a token of input, one of output. A
catalog's smaller window counts as not given; the configuration's is refused."""


def output_reserve(context_window: int, max_output_tokens: int, reserve: float) -> int:
    """Tokens kept for output: ``min(max output, window * reserve)`` (``reserve`` >= 1: tokens).

    Clamped to ``1 .. context_window - 1`` so that both budgets stay positive.
    """
    cap = int(context_window * reserve) if reserve < 1 else int(reserve)
    kept = min(max_output_tokens, cap)
    return max(1, min(kept, context_window - 1))


@dataclass(frozen=True)
class CatalogModel:
    """One model: what VS Code is told, and what requests to it need."""

    info: ModelInfo
    """The model information for VS Code."""
    default_max_tokens: int
    """The output budget requested when a request names none (the reserve)."""
    context_window: int | None = None
    """The context window, when known."""
    extra_body: dict[str, Any] = field(default_factory=dict)
    """Fields laid under this model's request bodies (from the configuration)."""
    context_management: bool | None = None
    """Whether the catalog says the model takes Anthropic's context editing (its
    ``capabilities.context_management.supported``); ``None``: it does not say."""


CatalogParser = Callable[..., "list[CatalogModel]"]
"""A format's model-list parser: ``(entries, *, provider, defaults) -> [CatalogModel]``, where
``entries`` are the models of every page of the answer (see :func:`parse_catalog`)."""


# --------------------------------------------------------------------------- parsing


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value > 0:
        return value
    if isinstance(value, float) and value.is_integer() and value > 0:
        return int(value)
    if isinstance(value, str) and value.isdigit() and int(value) > 0:
        return int(value)
    return None


def _first_int(obj: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        found = _int(obj.get(key))
        if found is not None:
            return found
    return None


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value.lower()}
    if isinstance(value, (list, tuple)):
        return {v.lower() for v in value if isinstance(v, str)}
    return set()


def family_of(model_id: str) -> str:
    """A family name from a model id: no vendor prefix, no date or ``-latest`` suffix."""
    base = model_id.rsplit("/", 1)[-1]
    return _DATE_SUFFIX.sub("", base) or base


def _capabilities(m: Mapping[str, Any], defaults: ModelDefaults) -> ModelCapabilities:
    tags = _strings(m.get("tags"))
    caps = m.get("capabilities")
    if isinstance(caps, (list, tuple)):
        tags |= _strings(caps)
    params = _strings(m.get("supported_parameters"))
    arch = m.get("architecture")
    modalities = _strings(m.get("input_modalities")) | _strings(m.get("modalities"))
    if isinstance(arch, Mapping):
        modalities |= _strings(arch.get("input_modalities"))
    if isinstance(m.get("modalities"), Mapping):
        modalities |= _strings(m["modalities"].get("input"))
    tool: bool | None = None
    image: bool | None = None
    if tags or params:
        tool = bool(tags & _TOOL_TAGS) or "tools" in params
    if tags or modalities:
        image = bool(tags & _IMAGE_TAGS) or "image" in modalities
    if isinstance(caps, Mapping):
        for key in ("toolCalling", "tool_calling", "function_calling", "tools"):
            if isinstance(caps.get(key), bool):
                tool = caps[key]
        for key in ("imageInput", "image_input", "vision"):
            if isinstance(caps.get(key), bool):
                image = caps[key]
    if m.get("type") == "vlm":  # LM Studio
        image = True
    return ModelCapabilities(
        image_input=defaults.image_input if image is None else image,
        tool_calling=defaults.tool_calling if tool is None else tool,
    )


def _tooltip(
    name: str, provider: str, description: str | None, model: CatalogModel, max_output: int
) -> str:
    info = model.info
    head = description.strip() if description and description.strip() else f"{name} via {provider}"
    if model.context_window:
        return (
            f"{head}\n{model.context_window:,}-token context: {info.max_input_tokens:,} for "
            f"input, {model.context_window - info.max_input_tokens:,} kept for output "
            f"(max output {max_output:,})."
        )
    return f"{head}\n{info.max_input_tokens:,} input tokens, {max_output:,} output."


def catalog_model(
    model_id: str,
    *,
    provider: str,
    defaults: ModelDefaults,
    name: str | None = None,
    family: str | None = None,
    version: str | None = None,
    context_window: int | None = None,
    max_input_tokens: int | None = None,
    max_output_tokens: int | None = None,
    capabilities: ModelCapabilities,
    description: str | None = None,
    tooltip: str | None = None,
    extra_body: dict[str, Any] | None = None,
) -> CatalogModel:
    """One model from what a catalog or the configuration says; explicit ``max_input_tokens``
    are taken as given, else the output reserve is kept from the window (module docstring)."""
    max_out = max_output_tokens or defaults.max_output_tokens
    if context_window is not None and context_window < MIN_CONTEXT_WINDOW:
        context_window = None  # no room for both budgets: as if the window were not given
    if max_input_tokens is not None:
        # explicit limits are taken as given: the caller did the arithmetic
        window = context_window or max_input_tokens + max_out
        default_max = min(max_out, max(1, window - max_input_tokens))
        max_in = max_input_tokens
    else:
        window = context_window or defaults.context_window
        max_out = min(max_out, window)
        default_max = output_reserve(window, max_out, defaults.output_reserve)
        max_in = window - default_max
    display = name or model_id
    info = ModelInfo(
        id=model_id,
        name=display,
        family=family or family_of(model_id),
        version=version or model_id,
        max_input_tokens=max_in,
        max_output_tokens=default_max,
        tooltip=None,
        detail=provider,
        capabilities=capabilities,
    )
    out = CatalogModel(info, default_max, window, dict(extra_body or {}))
    text = tooltip or _tooltip(display, provider, description, out, max_out)
    return dataclasses.replace(out, info=dataclasses.replace(info, tooltip=text))


def _catalog_entry(m: Mapping[str, Any], provider: str, defaults: ModelDefaults) -> CatalogModel | None:
    model_id = m.get("id")
    if not isinstance(model_id, str) or not model_id:
        return None
    mtype = m.get("type")
    if isinstance(mtype, str) and mtype.lower() in _NON_CHAT_TYPES:
        return None
    if mtype is None and _NON_CHAT_IDS.search(model_id):
        return None
    top = m.get("top_provider") if isinstance(m.get("top_provider"), Mapping) else {}
    assert isinstance(top, Mapping)
    window = _first_int(
        m, "context_window", "context_length", "max_context_length", "max_model_len"
    ) or _first_int(top, "context_length")
    max_out = _first_int(
        m, "max_tokens", "max_output_tokens", "max_completion_tokens"
    ) or _first_int(top, "max_completion_tokens")
    max_in = _first_int(m, "max_input_tokens")
    name = m.get("name") or m.get("display_name")
    description = m.get("description")
    caps = m.get("capabilities")
    editing = caps.get("context_management") if isinstance(caps, Mapping) else None
    supported = editing.get("supported") if isinstance(editing, Mapping) else None
    out = catalog_model(
        model_id,
        provider=provider,
        defaults=defaults,
        name=name if isinstance(name, str) and name else None,
        context_window=window,
        max_input_tokens=max_in if max_in and window is None else None,
        max_output_tokens=max_out,
        capabilities=_capabilities(m, defaults),
        description=description if isinstance(description, str) else None,
    )
    if isinstance(supported, bool):
        out = dataclasses.replace(out, context_management=supported)
    return out


def parse_catalog(
    payload: Any, *, provider: str, defaults: ModelDefaults | None = None
) -> list[CatalogModel]:
    """The chat models in one ``GET /models`` answer (unreadable entries are skipped)."""
    defaults = defaults or ModelDefaults()
    if isinstance(payload, Mapping):
        entries = payload.get("data", payload.get("models"))
    else:
        entries = payload
    if not isinstance(entries, list):
        raise ValueError("expected {'data': [models]} or a list of models")
    out: list[CatalogModel] = []
    seen: set[str] = set()
    for m in entries:
        if not isinstance(m, Mapping):
            continue
        model = _catalog_entry(m, provider, defaults)
        if model is not None and model.info.id not in seen:
            seen.add(model.info.id)
            out.append(model)
    return out


_STATIC_KEYS = tuple(f.name for f in MODEL_FIELDS)


def parse_static_models(
    raw: Sequence[Any], *, provider: str, defaults: ModelDefaults | None = None, where: str = "models"
) -> list[CatalogModel]:
    """Models from the configuration: ids, or objects with ``id`` and optional ``name``,
    ``family``, ``version``, ``contextWindow``, ``maxInputTokens``, ``maxOutputTokens``,
    ``capabilities: {toolCalling, imageInput}`` (or those two at the top level), ``tooltip``
    and ``extraBody``. :class:`ConfigError` names the bad field."""
    defaults = defaults or ModelDefaults()
    out: list[CatalogModel] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        here = f"{where}[{i}]"
        if isinstance(item, str):
            item = {"id": item}
        if not isinstance(item, Mapping):
            raise ConfigError(f"{here}: expected a model id or an object, got {type(item).__name__}")
        unknown = sorted(set(item) - set(_STATIC_KEYS))
        if unknown:
            raise ConfigError(
                f"{here}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(_STATIC_KEYS))})"
            )
        model_id = item.get("id")
        if not isinstance(model_id, str) or not model_id.strip():
            raise ConfigError(f"{here}.id: expected a non-empty string")
        for f in MODEL_FIELDS:  # types and limits from the table of lmbridge.config_fields
            if item.get(f.name) is not None:
                check(f, item[f.name], here)
        if model_id in seen:
            raise ConfigError(f"{here}.id: {model_id!r} is listed twice")
        seen.add(model_id)
        texts: dict[str, str | None] = {}
        for key in ("name", "family", "version", "tooltip"):
            texts[key] = item.get(key)
        limits: dict[str, int | None] = {}
        for key in ("contextWindow", "maxInputTokens", "maxOutputTokens"):
            limits[key] = _int(item.get(key))
        window = limits["contextWindow"]
        if window is not None and window < MIN_CONTEXT_WINDOW:
            raise ConfigError(
                f"{here}.contextWindow: must be at least {MIN_CONTEXT_WINDOW} (a token of input "
                f"and one of output), got {window}"
            )
        if (
            limits["contextWindow"] is not None
            and limits["maxInputTokens"] is not None
            and limits["maxInputTokens"] >= limits["contextWindow"]
        ):
            raise ConfigError(f"{here}.maxInputTokens: must be less than contextWindow")
        caps_raw = item.get("capabilities") or {}
        flags: dict[str, Any] = {}
        for key in ("toolCalling", "imageInput"):
            flags[key] = caps_raw.get(key, item.get(key))
        extra = item.get("extraBody") or {}
        out.append(
            catalog_model(
                model_id,
                provider=provider,
                defaults=defaults,
                name=texts["name"],
                family=texts["family"],
                version=texts["version"],
                context_window=limits["contextWindow"],
                max_input_tokens=limits["maxInputTokens"],
                max_output_tokens=limits["maxOutputTokens"],
                capabilities=ModelCapabilities(
                    image_input=defaults.image_input
                    if flags["imageInput"] is None
                    else bool(flags["imageInput"]),
                    tool_calling=defaults.tool_calling
                    if flags["toolCalling"] is None
                    else flags["toolCalling"],
                ),
                tooltip=texts["tooltip"],
                extra_body=dict(extra),
            )
        )
    return out


# --------------------------------------------------------------------------- the catalog


class ModelCatalog:
    """The models of one upstream: static, or fetched from ``GET /models`` and cached.

    :meth:`models` returns the cached list while it is fresh (``ttl`` seconds), else fetches
    it again (concurrent callers share one fetch). When a fetch brings a list different from
    the one before, ``on_change`` is called. A failed refresh keeps serving the old list (and
    logs why); a failed first fetch raises the mapped :class:`LanguageModelError`.
    """

    def __init__(
        self,
        client: UpstreamClient,
        *,
        defaults: ModelDefaults | None = None,
        static: Sequence[CatalogModel] | None = None,
        ttl: float = DEFAULT_CATALOG_TTL,
        clock: Callable[[], float] | None = None,
        on_change: Callable[[], None] | None = None,
        max_bytes: int = MAX_CATALOG_BYTES,
        deadline: float = CATALOG_DEADLINE,
    ) -> None:
        self.client = client
        self.max_bytes = max_bytes
        """The most bytes the list may have, all pages together, after content decoding."""
        self.deadline = deadline
        """Seconds the list may take to arrive in all."""
        self.defaults = defaults or ModelDefaults()
        self.static = list(static) if static is not None else None
        self.ttl = ttl
        self.on_change = on_change
        self._clock = clock or time.monotonic
        self._models: list[CatalogModel] | None = self.static
        self._fetched_at: float | None = None
        if self.static is not None:
            self._tell_client(self.static)
        self._lock = asyncio.Lock()
        self.fetches = 0
        """How many times the catalog was fetched (for tests and diagnostics)."""

    def _tell_client(self, models: Sequence[CatalogModel]) -> None:
        # a format client may want what the catalog says (Anthropic: context editing support)
        note = getattr(self.client, "note_catalog", None)
        if callable(note):
            note(models)

    @property
    def cached(self) -> list[CatalogModel] | None:
        """The list as last known, without fetching."""
        return self._models

    def get(self, model_id: str) -> CatalogModel | None:
        """A known model by id, without fetching."""
        for m in self._models or ():
            if m.info.id == model_id:
                return m
        return None

    def _fresh(self) -> bool:
        if self.static is not None:
            return True
        return (
            self._models is not None
            and self._fetched_at is not None
            and self._clock() - self._fetched_at < self.ttl
        )

    async def models(self, *, force: bool = False) -> list[CatalogModel]:
        """The models, fetched when the cache is stale (or ``force``)."""
        if self.static is not None:
            return list(self.static)
        if not force and self._fresh():
            return list(self._models or ())
        async with self._lock:
            if not force and self._fresh():
                return list(self._models or ())
            try:
                fetched = await self.fetch()
            except LanguageModelError as exc:
                if self._models is None:
                    raise
                log.warning(
                    "%s: refreshing the model catalog failed, keeping the last list: %s",
                    self.client.provider, exc,
                )
                self._fetched_at = self._clock()  # do not hammer a failing upstream
                return list(self._models)
            before = self._models
            self._models = fetched
            self._fetched_at = self._clock()
            self._tell_client(fetched)
        if before is not None and [m.info for m in before] != [m.info for m in fetched]:
            log.info("%s: the model list changed (%d models)", self.client.provider, len(fetched))
            if self.on_change is not None:
                self.on_change()
        return list(fetched)

    async def fetch(self) -> list[CatalogModel]:
        """``GET {base}/models`` (following ``has_more`` / ``last_id`` and ``nextPageToken``
        pages), parsed by the format's catalog parser; within :attr:`deadline` seconds and
        :attr:`max_bytes` bytes (module notes)."""
        client = self.client
        self.fetches += 1
        try:
            return await asyncio.wait_for(self._fetch(), self.deadline)
        except asyncio.TimeoutError:
            raise LanguageModelError(
                f"{client.provider}: the model list at {client.redact(client.models_url)} did "
                f"not arrive within {self.deadline:g} s; list the models in the provider's "
                f"'models' setting, or check the baseUrl"
            ) from None

    async def _fetch(self) -> list[CatalogModel]:
        client = self.client
        ctx = client.error_context()
        url = client.models_url
        entries: list[Any] = []
        params: dict[str, str] = {}
        left = self.max_bytes
        for _ in range(_MAX_PAGES):
            try:
                # never follow redirects: one elsewhere would take the credentials with it
                async with client.http.stream(
                    "GET", url, headers=client.catalog_headers(), params=params,
                    follow_redirects=False,
                ) as response:  # fmt: skip
                    status = response.status_code
                    if status != 200:
                        raw = await read_head(response, 65536)
                    else:
                        raw = await read_body(response, left)
            except httpx.TransportError as exc:
                raise map_transport_error(exc, ctx) from exc
            except httpx.DecodingError as exc:
                raise LanguageModelError(
                    f"{client.provider}: the model list at {client.redact(url)} cannot be read: "
                    f"{client.redact(str(exc))}"
                ) from exc
            except BodyTooLarge as exc:
                log.info("%s: the model catalog passed %d bytes", client.provider, exc.limit)
                raise LanguageModelError(
                    f"{client.provider}: the model list at {client.redact(url)} passed "
                    f"{self.max_bytes:,} bytes, more than any real model list; list the models in "
                    f"the provider's 'models' setting, or check the baseUrl"
                ) from None
            left -= len(raw)
            text = raw.decode("utf-8", "replace")
            if status != 200:
                body = client.redact(text)
                log.info(
                    "%s: HTTP %d from %s: %s",
                    client.provider, status, client.redact(url), body,
                )  # fmt: skip
                error = UpstreamHTTPError(
                    f"{client.provider}: HTTP {status} from the model catalog",
                    status_code=status,
                    body=body,
                )
                mapped = map_http_error(error, ctx)
                if mapped.code == "NotFound":
                    mapped = LanguageModelError.not_found(
                        f"{client.provider}: {client.redact(url)} has no model catalog (HTTP "
                        f"{status}); list the models in the provider's 'models' setting, or "
                        f"check the baseUrl"
                    )
                raise mapped from error
            try:
                payload = json.loads(raw)
                page = payload.get("data") if isinstance(payload, Mapping) else payload
                if not isinstance(page, list):
                    page = payload.get("models") if isinstance(payload, Mapping) else None
                if not isinstance(page, list):
                    raise ValueError("no 'data' list")
            except (ValueError, RecursionError) as exc:
                log.info("%s: unreadable model catalog: %s", client.provider, client.redact(text[:2000]))
                raise LanguageModelError(
                    f"{client.provider}: {client.redact(url)} did not return a model list ({exc}); list the "
                    f"models in the provider's 'models' setting, or check the baseUrl"
                ) from exc
            entries.extend(page)
            following = _next_page(payload)
            if following is None:
                break
            params = following
        parse: CatalogParser = formats.get(client.format).catalog_parser()
        models = parse(entries, provider=client.provider, defaults=self.defaults)
        log.debug("%s: %d models in the catalog", client.provider, len(models))
        return models


def _next_page(payload: Any) -> dict[str, str] | None:
    """The query of the next catalog page: Anthropic's ``has_more`` / ``last_id``, Google's
    ``nextPageToken``; ``None`` on the last page."""
    if not isinstance(payload, Mapping):
        return None
    last = payload.get("last_id")
    if payload.get("has_more") and isinstance(last, str):
        return {"after_id": last}
    token = payload.get("nextPageToken")
    if isinstance(token, str) and token:
        return {"pageToken": token}
    return None
