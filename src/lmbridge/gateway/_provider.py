"""Upstream-backed providers: the Python provider API over a wire-format client and a catalog.

:class:`UpstreamProvider` is a :class:`~lmbridge.provider.LanguageModelChatProvider` like any
other: the host drives it with :func:`~lmbridge.provider.respond`, so the stream contract is
enforced on it as on a hand-written provider. :func:`build_provider` is the factory the
configuration calls for ``"format"`` entries. The options it takes besides the entry's own
fields (``extraBody``, ``conversion``, ``chatPath``, ``modelsPath``, ``retry``, ``timeout``,
model defaults such as ``contextWindow`` and ``outputReserve``, ``catalogTtl``, ``thinking``,
``apiKeyHeader``, ``contextCheck`` ...), with their types, limits, defaults and the formats
that read them, are the table of :mod:`lmbridge.config_fields`; an option the table does not
give the entry's format is an error naming the known ones.

A format's client may take options of its own (its ``provider_options``), passed to it as
keyword arguments: ``"vertex": true`` for ``gemini`` (see :mod:`lmbridge.gateway.gemini`),
``"contextManagement": false`` for ``anthropic`` (context editing, on by default for the
models that take it; :mod:`lmbridge.gateway.anthropic`), ``"truncation": "disabled"`` for
``responses`` (``"auto"`` by default; :mod:`lmbridge.gateway.responses`).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from .. import formats
from ..config_fields import PYTHON, Field, check, option_fields
from ..entries import (
    SET_KEY_COMMAND,
    ProviderContext,
    ProviderEntry,
    entry_origin,
    url_credential_problem,
)
from ..errors import ConfigError, ConversionError, LanguageModelError
from ..network import NetworkSettings
from ..parts import ChatMessage, ChatRequestOptions, ModelInfo
from ..provider import (
    CancellationToken,
    ChatResult,
    LanguageModelChatProvider,
    ModelInformationOptions,
    ResponseProgress,
    estimate_tokens,
)
from ..token_cache import estimate_request
from ..tokens import TokenEstimator, TokenStore, shared_store
from ..upstream import AssemblerOptions
from ._body import ACCEPT_ENCODING
from ._client import Sleep, UpstreamClient, effort_schema
from ._network import ProxyRouter, ssl_verify
from ._retry import RetryPolicy
from .catalog import DEFAULT_CATALOG_TTL, ModelCatalog, ModelDefaults, parse_static_models

__all__ = [
    "DEFAULT_TIMEOUT",
    "UpstreamProvider",
    "build_provider",
    "default_http_client",
]

log = logging.getLogger("lmbridge.gateway")

DEFAULT_TIMEOUT = 300.0
"""Seconds to wait for the next byte: reasoning models can think for minutes before the first."""


def default_http_client(
    timeout: float = DEFAULT_TIMEOUT, network: NetworkSettings | None = None
) -> httpx.AsyncClient:
    """The HTTP client a provider makes when none is given.

    Redirects are not followed (a POST redirected to a GET loses its body; the error names
    the status instead). ``network`` (VS Code's ``http.*`` settings, default: VS Code's
    defaults) picks the proxy and the certificate checks (:mod:`lmbridge.network`).
    """
    from .. import __version__

    network = network or NetworkSettings()
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout, connect=15.0, write=60.0, pool=30.0),
        follow_redirects=False,
        # only the encodings lmbridge inflates with bounds (gateway/_body.py)
        headers={"user-agent": f"lmbridge/{__version__}", "accept-encoding": ACCEPT_ENCODING},
        transport=ProxyRouter(network, verify=ssl_verify(network)),
    )


class UpstreamProvider(LanguageModelChatProvider):
    """A provider that serves an upstream's models through one wire-format client.

    Token counts come from :class:`~lmbridge.tokens.TokenEstimator` (one per model), which
    learns from the input-token usage each stream reports; ``token_store`` keeps what it
    learns (default: in memory).
    """

    def __init__(
        self,
        client: UpstreamClient,
        *,
        catalog: ModelCatalog | None = None,
        owns_http: bool = False,
        token_store: TokenStore | None = None,
        context_check: bool = True,
    ) -> None:
        super().__init__()
        self.context_check = context_check
        """Whether the host checks a request's estimate against the model's input limit
        before sending it (the ``contextCheck`` option)."""
        self.client = client
        self.catalog = catalog or ModelCatalog(client)
        self.catalog.on_change = self.models_changed
        self._owns_http = owns_http
        self._token_store = token_store
        self._estimators: dict[str, TokenEstimator | None] = {}
        self.list_error: LanguageModelError | None = None
        """Why the last model listing failed (``None`` after a success): a silent listing
        answers ``[]``, and the host answers requests to this provider's models with this."""

    def __repr__(self) -> str:
        return f"UpstreamProvider({self.client!r})"

    async def provide_language_model_chat_information(
        self, options: ModelInformationOptions, token: CancellationToken
    ) -> list[ModelInfo]:
        """The catalog's models (static ones from the configuration, or ``GET /models``).

        When the catalog cannot be read: ``silent`` requests get an empty list (logged),
        others the error, whose message says what to fix.
        """
        try:
            models = await self.catalog.models()
        except LanguageModelError as exc:
            self.list_error = exc
            if options.silent:
                log.warning("%s: no models: %s", self.client.provider, exc)
                return []
            raise
        self.list_error = None
        return [self._with_effort(m.info) for m in models]

    def _with_effort(self, info: ModelInfo) -> ModelInfo:
        """``info`` with the Thinking Effort entry, when the model reasons (or the provider's
        ``reasoningEffort`` option says its models do)."""
        levels = self.client.effort_levels(info.id)
        if not levels and self.client.reasoning_effort is not None:
            levels = ("low", "medium", "high")
        if not levels or info.configuration_schema is not None:
            return info
        return dataclasses.replace(info, configuration_schema=effort_schema(levels))

    async def provide_language_model_chat_response(
        self,
        model: ModelInfo,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        progress: ResponseProgress,
        token: CancellationToken,
    ) -> ChatResult:
        """Stream the upstream's answer to ``progress``; feed the reported usage to the estimator."""
        known = self.catalog.get(model.id)
        result = await self.client.stream(
            model.id,
            messages,
            options,
            progress,
            token,
            default_max_tokens=known.default_max_tokens if known else model.max_output_tokens,
            image_input=model.capabilities.image_input,
            extra_body=known.extra_body if known else None,
        )
        actual = result.usage.input_tokens
        if actual is not None:
            estimator = self._estimator(model)
            if estimator is not None:
                try:
                    estimator.observe(messages, options, actual)
                except Exception:  # calibration must never fail a response
                    log.debug("token estimator observe failed", exc_info=True)
        return result

    def provide_token_count(
        self, model: ModelInfo, text: str | ChatMessage, token: CancellationToken
    ) -> int:
        """Estimated tokens of ``text`` for ``model`` (this provider's estimator learns from the
        usage its upstream reports)."""
        return estimate_tokens(model, text, self._estimator(model))

    def estimate_request_tokens(
        self, model: ModelInfo, messages: Sequence[ChatMessage], options: ChatRequestOptions
    ) -> int:
        """Estimated input tokens of a whole request (messages, tool definitions, overhead),
        by this provider's estimator for ``model``; the host's context check uses it."""
        return estimate_request(model, messages, options, self._estimator(model))

    def calibration_factor(self, model: ModelInfo) -> float | None:
        """The correction factor this provider's estimator applies for ``model`` (learnt from
        the usage its upstream reports; 1.0 before any), for the usage line."""
        estimator = self._estimator(model)
        return estimator.factor if estimator is not None else None

    def _estimator(self, model: ModelInfo) -> TokenEstimator | None:
        # one per model: calibration and the message cache are per model id
        if model.id in self._estimators:
            return self._estimators[model.id]
        estimator: TokenEstimator | None
        try:
            estimator = TokenEstimator(model.family, model_id=model.id, store=self._token_store)
        except Exception:  # a family it refuses: the simple estimate
            log.debug("no token estimator for %r", model.id, exc_info=True)
            estimator = None
        self._estimators[model.id] = estimator
        return estimator

    async def aclose(self) -> None:
        """Close the HTTP client when this provider made it."""
        if self._owns_http:
            await self.client.http.aclose()


# --------------------------------------------------------------------------- configuration

def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _options_of(fmt: str) -> dict[str, Field]:
    # The fields of lmbridge.config_fields that a ``fmt`` entry takes besides the entry's own.
    return {f.name: f for f in option_fields(fmt) if PYTHON not in f.applies and f.name != "format"}


def build_provider(
    entry: ProviderEntry,
    context: ProviderContext,
    *,
    http: httpx.AsyncClient | None = None,
    sleep: Sleep | None = None,
    clock: Callable[[], float] | None = None,
) -> UpstreamProvider:
    """The provider for a ``"format"`` entry (the factory registered with the configuration).

    ``http`` is the client to use (default: :func:`default_http_client`, owned and closed by
    the provider); ``sleep`` and ``clock`` reach the retry logic (tests pass fakes).
    """
    where = entry.where
    fmt = entry.format or ""
    try:
        cls: type[UpstreamClient] = formats.get(fmt).client_class()
    except ValueError:
        raise ConfigError(
            f"{where}.format: unknown format {fmt!r}; use one of {', '.join(formats.names())}"
        ) from None
    if not entry.base_url:
        raise ConfigError(f"{where}.baseUrl: required with 'format'")
    known = _options_of(fmt)
    unknown = sorted(set(entry.options) - set(known))
    if unknown:
        raise ConfigError(
            f"{where}: unknown option(s) {', '.join(unknown)} for a {fmt!r} provider "
            f"(known: {', '.join(sorted(known))})"
        )
    # null is the same as leaving the option out
    options = {k: v for k, v in entry.options.items() if v is not None}
    paths: dict[str, str | None] = {}
    for key in ("chatPath", "modelsPath"):
        value = options.get(key)
        # credentials first: the type check below would echo the value
        problem = url_credential_problem(value) if isinstance(value, str) else None
        if problem is not None:  # never echoed: the secret part is in it
            raise ConfigError(
                f"{where}.{key}: {problem}, and keys are not allowed in the configuration; "
                f"store the key with the command '{SET_KEY_COMMAND}' (sent as the format's "
                f"credentials, or in the header named by 'apiKeyHeader')"
            )
        paths[key] = value
    for key, value in options.items():
        check(known[key], value, where)  # types, enums and limits, as the table says
    extra_body = options.get("extraBody", {})
    conversion = options.get("conversion", {})
    thinking = options.get("thinking", known["thinking"].default)
    if thinking == "off":
        thinking = "drop"  # the settings' word for it; the assembler's is "drop"
    context_check = options.get("contextCheck", known["contextCheck"].default)
    retry = RetryPolicy.from_config(options.get("retry"), where)
    timeout = float(options.get("timeout", DEFAULT_TIMEOUT))
    ttl = float(options.get("catalogTtl", DEFAULT_CATALOG_TTL))
    given: dict[str, Any] = {
        _snake(key): int(options[key]) if known[key].types == ("integer",) else options[key]
        for key in ("contextWindow", "maxOutputTokens", "outputReserve", "toolCalling", "imageInput")
        if key in options
    }
    try:
        defaults = ModelDefaults(**given)
    except (ConfigError, TypeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    owns_http = http is None
    own_options = {_snake(k): options[k] for k in sorted(cls.provider_options) if k in options}
    try:
        client = cls(
            http or default_http_client(timeout, context.network),
            base_url=entry.base_url,
            api_key=context.api_key,
            provider=entry.name,
            api_key_env=entry.api_key_env,
            headers=entry.headers,
            extra_body=dict(extra_body),
            converter_options={_snake(k): v for k, v in conversion.items()},
            chat_path=paths["chatPath"],
            models_path=paths["modelsPath"],
            retry=retry,
            assembler_options=AssemblerOptions(thinking=thinking),
            sleep=sleep,
            clock=clock,
            api_key_header=options.get("apiKeyHeader"),
            key_origin=entry_origin(entry),
            **own_options,
        )
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    client.reasoning_effort = options.get("reasoningEffort")
    try:  # converter options are checked now, not at the first request
        client.build_body("check", [ChatMessage.user("check")], ChatRequestOptions())
    except (ConversionError, TypeError) as exc:
        raise ConfigError(f"{where}.conversion: {exc}") from None
    static = None
    if entry.models is not None:
        static = parse_static_models(
            entry.models, provider=entry.name, defaults=defaults, where=f"{where}.models"
        )
    catalog = ModelCatalog(
        client,
        defaults=defaults,
        static=static,
        ttl=ttl,
    )
    return UpstreamProvider(
        client,
        catalog=catalog,
        owns_http=owns_http,
        token_store=shared_store(context.storage_path),
        context_check=context_check,
    )
