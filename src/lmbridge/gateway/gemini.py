"""Google Gemini: the Gemini API and Vertex AI (``POST {base}/models/{model}:streamGenerateContent?alt=sse``).

The body comes from :func:`lmbridge.convert.to_gemini` (the model is in the URL); model
options Gemini keeps in ``generationConfig`` (``thinkingConfig``, ``topK``,
``responseMimeType`` ...) are put there, and ``safetySettings`` / ``cachedContent`` / ``labels``
at the top. The stream is SSE (``alt=sse``); an answer in the JSON-array form (a ``chatPath``
without ``alt=sse``) is read too (:class:`~lmbridge.upstream.gemini.GeminiArrayStreamDecoder`).

Gemini API::

    {"name": "gemini", "format": "gemini",
     "baseUrl": "https://generativelanguage.googleapis.com/v1beta", "apiKeyEnv": "GEMINI_API_KEY"}

The key goes in ``x-goog-api-key``. The models come from ``GET {base}/models`` (``nextPageToken``
pages): the ones that can ``generateContent``, with ``inputTokenLimit`` as ``maxInputTokens``,
``outputTokenLimit`` as ``maxOutputTokens``, and whether they think in the tooltip.

Vertex AI (``"vertex": true``)::

    {"name": "vertex", "format": "gemini", "vertex": true, "apiKeyEnv": "VERTEX_ACCESS_TOKEN",
     "baseUrl": "https://us-central1-aiplatform.googleapis.com/v1/projects/MY-PROJECT/locations/us-central1/publishers/google",
     "models": [{"id": "gemini-2.5-pro", "maxInputTokens": 1048576, "maxOutputTokens": 65536}]}

The project and location are in the base URL; list the models (Vertex has no Gemini model
list under that URL). The credential is an OAuth access token sent as ``Authorization:
Bearer``: from the environment variable named by ``apiKeyEnv`` (or the stored key), or, when
neither is set, printed by the command in the environment variable
:data:`TOKEN_COMMAND_ENV` of the host (e.g. ``gcloud auth print-access-token``). That command
runs code, so it is read from the user's environment only, never from a settings file: a
setting can turn Vertex on, never choose what runs. ``vertex`` itself is honoured only from the
user's settings (a workspace's entries lose it, see :func:`lmbridge.config.merge_workspace_entries`),
and the command's token is sent only to a ``*.googleapis.com`` base URL (or a loopback one, e.g.
a local proxy), and only to that URL's origin, like a key: an absolute ``chatPath`` or
``modelsPath`` elsewhere is sent without it. It runs without a shell, its output is cached for :data:`TOKEN_LIFETIME`
seconds, and it is never logged.

Token counts use the ``google`` token family (the estimator tells it from the model id).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import quote, urlsplit

import httpx

from ..convert import to_gemini
from ..errors import LanguageModelError
from ..network import is_loopback_host
from ..parts import ChatMessage, ChatRequestOptions, ModelCapabilities, ResponsePart
from ..provider import CancellationToken, ChatResult, Progress
from ..upstream.gemini import GeminiArrayStreamDecoder, GeminiDecoder
from ._client import BodyDecoder, UpstreamClient, UpstreamRequest, bare_model
from ._errors import ErrorContext, redact
from .catalog import CatalogModel, ModelDefaults, catalog_model

__all__ = [
    "GENERATION_OPTIONS",
    "TOKEN_COMMAND_ENV",
    "TOKEN_LIFETIME",
    "GeminiClient",
    "parse_gemini_catalog",
]

TOKEN_COMMAND_ENV = "LMBRIDGE_VERTEX_TOKEN_COMMAND"  # noqa: S105 - a variable name, no secret
"""The environment variable holding the command that prints a Vertex AI access token."""

TOKEN_LIFETIME = 45 * 60.0
"""Seconds a token from the command is used (Google's access tokens live an hour)."""

GEMINI_THINKING_BUDGETS = {"low": 1_024, "medium": 8_192, "high": 24_576}
"""Gemini 2.5's thinking budget for each effort."""

GENERATION_OPTIONS = frozenset(
    {
        "thinkingConfig",
        "topK",
        "candidateCount",
        "presencePenalty",
        "frequencyPenalty",
        "responseMimeType",
        "responseSchema",
        "responseJsonSchema",
        "responseModalities",
        "mediaResolution",
        "responseLogprobs",
        "logprobs",
        "speechConfig",
        "imageConfig",
    }
)
"""Model options sent in ``generationConfig`` as they are."""


class GeminiClient(UpstreamClient):
    """Streams Gemini ``streamGenerateContent`` from the Gemini API or Vertex AI."""

    format = "gemini"
    chat_path = "/models/{model}:streamGenerateContent?alt=sse"
    passthrough_options = frozenset({"safetySettings", "cachedContent", "labels"})
    provider_options: ClassVar[frozenset[str]] = frozenset({"vertex"})

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        vertex: bool = False,
        environ: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(http, **kwargs)
        if not isinstance(vertex, bool):
            raise TypeError(f"vertex: expected true or false, got {vertex!r}")
        self.vertex = vertex
        """Vertex AI: the credential is an access token sent as ``Authorization: Bearer``."""
        env = os.environ if environ is None else environ
        command = env.get(TOKEN_COMMAND_ENV, "").strip() if vertex else ""
        host = (urlsplit(self.base_url).hostname or "").lower()
        # The command's token goes only to Google (or to this machine, e.g. a local proxy).
        google = host == "googleapis.com" or host.endswith(".googleapis.com")
        to_google = google or is_loopback_host(host)
        self._token_command = (
            shlex.split(command) if command and not self.has_key and to_google else None
        )
        self._token: str | None = None
        self._token_at = 0.0
        self._token_lock = asyncio.Lock()

    # -- requests

    def key_headers(self, key: str) -> dict[str, str]:
        """``x-goog-api-key`` (Gemini API), or ``Authorization: Bearer`` (Vertex AI)."""
        if self.vertex:
            return {"authorization": f"Bearer {key}"}
        return {"x-goog-api-key": key}

    def credential_names(self) -> set[str]:
        """The base class's, and ``authorization`` when the token command's token is sent:
        guarded like a key (an absolute ``chatPath`` or ``modelsPath`` elsewhere never gets
        it)."""
        names = super().credential_names()
        if self._token_command is not None:
            names.add("authorization")
        return names

    def auth_headers(self) -> dict[str, str]:
        """The base class's headers, plus the token from the command when there is one."""
        out = super().auth_headers()
        if self._token:
            out["authorization"] = f"Bearer {self._token}"
        return out

    def stream_url(self, model: str) -> str:
        """The streaming URL for ``model`` (``models/`` in front of the id is allowed)."""
        name = model.removeprefix("models/")
        return self.endpoint.replace("{model}", quote(name, safe=""))

    def build_request(self, model: str, *args: Any, **kwargs: Any) -> UpstreamRequest:
        """The base class's request, to the model's own URL."""
        request = super().build_request(model, *args, **kwargs)
        return dataclasses.replace(request, url=self.stream_url(model))

    def effort_levels(self, model: str) -> tuple[str, ...]:
        """Gemini 3 (``thinkingLevel`` low or high) and Gemini 2.5 (a thinking budget)."""
        name = bare_model(model)
        if name.startswith("gemini-3"):
            return ("low", "high")
        if name.startswith("gemini-2.5"):
            return tuple(GEMINI_THINKING_BUDGETS)
        return ()

    def apply_effort(self, body: dict[str, Any], effort: str, model: str) -> None:
        """``generationConfig.thinkingConfig``: ``thinkingLevel`` for Gemini 3, else
        ``thinkingBudget``."""
        config = dict(body.get("generationConfig") or {})
        thinking = dict(config.get("thinkingConfig") or {})
        if bare_model(model).startswith("gemini-3"):
            thinking["thinkingLevel"] = effort
        elif effort in GEMINI_THINKING_BUDGETS:
            thinking["thinkingBudget"] = GEMINI_THINKING_BUDGETS[effort]
        else:
            return
        config["thinkingConfig"] = thinking
        body["generationConfig"] = config

    def build_body(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions,
        *,
        default_max_tokens: int | None = None,
        image_input: bool = True,
    ) -> dict[str, Any]:
        """The body by :func:`~lmbridge.convert.to_gemini`, with :data:`GENERATION_OPTIONS`
        from the model options in ``generationConfig`` (the output budget only when asked)."""
        kwargs = {"image_input": image_input, **self.converter_options}
        body = to_gemini(messages, options, **kwargs)
        extra = {k: v for k, v in options.model_options.items() if k in GENERATION_OPTIONS}
        if extra:
            body["generationConfig"] = {**extra, **body.get("generationConfig", {})}
        return body

    def body_decoder(self, content_type: str) -> BodyDecoder | None:
        """SSE, or the JSON-array form when the answer is ``application/json``."""
        if content_type.startswith("application/json"):
            return GeminiArrayStreamDecoder(GeminiDecoder(self.assembler_options))
        return super().body_decoder(content_type)

    # -- credentials from the token command

    @property
    def has_key(self) -> bool:
        """Whether a key, or a token command, is configured."""
        return super().has_key or getattr(self, "_token_command", None) is not None

    def error_context(self, model: str | None = None) -> ErrorContext:
        """The base class's context; the command's token is redacted too."""
        ctx = super().error_context(model)
        if self._token:
            ctx = dataclasses.replace(ctx, secrets=(*ctx.secrets, self._token))
        return ctx

    def redact(self, text: str) -> str:
        """``text`` without the key or the command's token."""
        return redact(super().redact(text), (self._token,))

    async def stream(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        options: ChatRequestOptions | None,
        progress: Progress[ResponsePart],
        token: CancellationToken = CancellationToken.NONE,
        **kwargs: Any,
    ) -> ChatResult:
        """Refresh the command's access token when due, then stream as usual."""
        await self.refresh_token()
        return await super().stream(model, messages, options, progress, token, **kwargs)

    async def refresh_token(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Run the token command when there is one and its last token is older than
        :data:`TOKEN_LIFETIME`; :class:`LanguageModelError` when it fails."""
        if self._token_command is None:
            return
        async with self._token_lock:
            if self._token and clock() - self._token_at < TOKEN_LIFETIME:
                return
            argv = self._token_command
            what = f"{self.provider}: the access-token command in ${TOKEN_COMMAND_ENV}"
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
            except OSError as exc:
                raise LanguageModelError.no_permissions(
                    f"{what} cannot run ({exc.strerror or exc})"
                ) from None
            try:
                out, err = await asyncio.wait_for(proc.communicate(), 60)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
                raise LanguageModelError.no_permissions(f"{what} did not finish in 60 s") from None
            token = out.decode("utf-8", "replace").strip()
            if proc.returncode != 0 or not token:
                said = err.decode("utf-8", "replace").strip()[-300:]
                raise LanguageModelError.no_permissions(
                    f"{what} failed (exit {proc.returncode}){': ' + said if said else ''}"
                )
            self._token = token
            self._token_at = clock()


# --------------------------------------------------------------------------- the model list


def parse_gemini_catalog(
    entries: Any, *, provider: str, defaults: ModelDefaults | None = None
) -> list[CatalogModel]:
    """The chat models of a Gemini ``GET /models`` answer (``{"models": [...]}`` pages).

    Models that cannot ``generateContent`` (embeddings, AQA ...) are left out; ids lose their
    ``models/`` prefix; ``inputTokenLimit`` / ``outputTokenLimit`` are the limits; Gemini's chat
    models take images and call tools.
    """
    defaults = defaults or ModelDefaults()
    if isinstance(entries, Mapping):
        entries = entries.get("models")
    if not isinstance(entries, list):
        raise ValueError("expected {'models': [models]} or a list of models")
    out: list[CatalogModel] = []
    seen: set[str] = set()
    for m in entries:
        if not isinstance(m, Mapping) or not isinstance(m.get("name"), str):
            continue
        methods = m.get("supportedGenerationMethods")
        if isinstance(methods, list) and not (
            {"generateContent", "streamGenerateContent"} & set(methods)
        ):
            continue
        model_id = m["name"].removeprefix("models/")
        if not model_id or model_id in seen:
            continue
        seen.add(model_id)
        description = m.get("description") if isinstance(m.get("description"), str) else None
        if m.get("thinking") is True:
            description = f"{description or model_id} (thinks before answering)"
        out.append(
            catalog_model(
                model_id,
                provider=provider,
                defaults=defaults,
                name=m.get("displayName") if isinstance(m.get("displayName"), str) else None,
                version=m.get("version") if isinstance(m.get("version"), str) else None,
                max_input_tokens=_positive(m.get("inputTokenLimit")),
                max_output_tokens=_positive(m.get("outputTokenLimit")),
                capabilities=ModelCapabilities(image_input=True, tool_calling=True),
                description=description,
            )
        )
    return out


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
