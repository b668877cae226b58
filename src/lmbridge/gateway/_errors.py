"""Upstream failures -> :class:`~lmbridge.errors.LanguageModelError` with a message that says what to do.

=====================================================  ===============  ===========================
what happened                                          code             the message says
=====================================================  ===============  ===========================
HTTP 401 / 403 (or an auth error in the stream)        NoPermissions    set the key (command / env)
HTTP 400 that says the API key is invalid (Google)     NoPermissions    set the key (command / env)
HTTP 404, or ``model_not_found`` / ``not_found_error``  NotFound         check the model id / baseUrl
HTTP 429, rate limit or overload in the stream         Blocked          when to retry (``Retry-After``,
                                                                        or Google's ``RetryInfo``)
HTTP 429 ``insufficient_quota``                        Blocked          check plan and billing
HTTP 400 / 413 with a context-length error             Unknown          the conversation is too long
other 4xx                                              Unknown          the upstream's own message
5xx / 408 after the retries                            Unknown          unavailable, try later
connection refused, DNS, timeouts                      Unknown          cannot reach baseUrl
a blocked prompt or content filter in the stream       Blocked          rephrase the request
a malformed stream                                     Unknown          the upstream broke its format
=====================================================  ===============  ===========================

Every message and every logged body goes through :func:`redact` first, so an API key that an
upstream echoes back (some do, in "invalid key" messages) never reaches a log or VS Code: as it
is, escaped (JSON ``\\u0041``, ``\\r``, ``repr``'s ``\\x..``, URL ``%41``), broken by line breaks,
or cut (a long prefix or suffix of it).
"""

from __future__ import annotations

import email.utils
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..context import is_context_length_text
from ..entries import EDITOR_PREFIX, SET_KEY_COMMAND
from ..errors import (
    ContextLengthError,
    LanguageModelError,
    ToolArgumentsError,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamProtocolError,
    UpstreamReportedError,
)

__all__ = [
    "ErrorContext",
    "UpstreamErrorInfo",
    "error_info",
    "is_context_too_long",
    "map_http_error",
    "map_stream_error",
    "map_transport_error",
    "parse_retry_after",
    "redact",
    "retry_delay_in_body",
]

REDACTED = "[redacted]"

# Keys shorter than this are not redacted by substring: replacing a 3-letter "key" everywhere
# would mangle every message, and such keys are test values, not secrets.
_MIN_SECRET_LEN = 6


# A cut key: prefixes and suffixes this long are redacted too (shorter ones are vendor
# prefixes such as "sk-proj-" or the last four characters some APIs show on purpose).
_PARTIAL_LEN = 12

# Escapes a key may be printed with (JSON, repr, URL) and control characters (a key broken
# over lines): the text is searched with them decoded, and control characters dropped.
_ESCAPES = re.compile(
    r"\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})|\\([rntbf0\"\\/'])|%([0-9a-fA-F]{2})"
    r"|[\x00-\x1f\x7f]"
)
_SIMPLE = {"r": "\r", "n": "\n", "t": "\t", "b": "\b", "f": "\f", "0": "\0"}


def _decoded(text: str) -> tuple[str, list[int], list[int]]:
    """``text`` with escapes decoded and control characters dropped, and for each of its
    characters where it starts and ends in ``text``."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    last = 0
    for m in _ESCAPES.finditer(text):
        a, b = m.span()
        if a > last:
            out.append(text[last:a])
            starts.extend(range(last, a))
            ends.extend(range(last + 1, a + 1))
        last = b
        hex4, hex2, simple, pct = m.groups()
        code = hex4 or hex2 or pct
        if code is not None:
            ch = chr(int(code, 16))
        elif simple is not None:
            ch = _SIMPLE.get(simple, simple)
        else:
            continue  # a raw control character
        if ch < " " or ch == "\x7f":
            continue  # an escaped one: both are gaps
        out.append(ch)
        starts.append(a)
        ends.append(b)
    if last < len(text):
        out.append(text[last:])
        starts.extend(range(last, len(text)))
        ends.extend(range(last + 1, len(text) + 1))
    return "".join(out), starts, ends


def _spans(view: str, core: str) -> list[tuple[int, int]]:
    """Where ``core`` (whole, or a prefix or suffix of at least ``_PARTIAL_LEN``) is in ``view``."""
    found: list[tuple[int, int]] = []
    n = len(core)
    probe = core if n <= _PARTIAL_LEN else core[:_PARTIAL_LEN]
    i = view.find(probe)
    while i >= 0:
        j, k = i + len(probe), len(probe)
        while k < n and j < len(view) and view[j] == core[k]:
            j, k = j + 1, k + 1
        found.append((i, j))
        i = view.find(probe, j)
    if n > _PARTIAL_LEN:
        probe = core[-_PARTIAL_LEN:]
        i = view.find(probe)
        while i >= 0:
            start, k = i, n - _PARTIAL_LEN
            while k > 0 and start > 0 and view[start - 1] == core[k - 1]:
                start, k = start - 1, k - 1
            found.append((start, i + _PARTIAL_LEN))
            i = view.find(probe, i + 1)
    return found


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with each secret replaced by ``[redacted]``: as it is, escaped (JSON, ``repr``,
    URL), broken by line breaks, or cut to a prefix or suffix of 12 characters or more."""
    for secret in secrets:
        if not secret:
            continue
        # Control characters in the key are gaps too: "ab\r\ncd" is found however printed.
        core = "".join(ch for ch in secret if ch >= " " and ch != "\x7f")
        if len(core) < _MIN_SECRET_LEN:
            continue
        text = text.replace(core, REDACTED)
        view, starts, ends = _decoded(text)
        spans = sorted((starts[a], ends[b - 1]) for a, b in _spans(view, core))
        if not spans:
            continue
        pieces: list[str] = []
        last = 0
        for a, b in spans:
            if b <= last:
                continue
            pieces.append(text[last : max(a, last)])
            pieces.append(REDACTED)
            last = b
        pieces.append(text[last:])
        text = "".join(pieces)
    return text


@dataclass(frozen=True)
class ErrorContext:
    """What an error message needs to say what to do."""

    provider: str
    """The provider's configured name."""
    base_url: str
    """The upstream's base URL (never contains the key)."""
    model: str | None = None
    """The upstream model id of the request, if any."""
    api_key_env: str | None = None
    """The environment variable the key may come from."""
    has_key: bool = False
    """Whether a key was sent."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """Values to redact from every message."""

    def redact(self, text: str) -> str:
        """``text`` without the secrets."""
        return redact(text, self.secrets)

    def key_advice(self) -> str:
        """How to set the key: for a Language Models editor group, the group's own action
        (its key lives in VS Code's storage, not lmbridge's)."""
        if self.provider.startswith(EDITOR_PREFIX):
            return (
                "set the group's key with Update API Key on its row in the Language Models "
                "editor (Chat: Manage Language Models)"
            )
        where = f"the command '{SET_KEY_COMMAND}'"
        if self.api_key_env:
            return f"set the API key with {where} or the environment variable {self.api_key_env}"
        return (
            f"set the API key with {where}, or name an environment variable holding it "
            f"with 'apiKeyEnv' in the provider's configuration"
        )


# --------------------------------------------------------------------------- bodies


@dataclass(frozen=True)
class UpstreamErrorInfo:
    """The upstream's own words about an error, from whatever shape it used."""

    message: str
    """Its message (or the start of the body when it had none)."""
    type: str | None = None
    """``error.type`` (``invalid_request_error``, ``overloaded_error`` ...)."""
    code: str | None = None
    """``error.code`` (``context_length_exceeded``, ``model_not_found`` ...)."""


def error_info(body: str) -> UpstreamErrorInfo:
    """Read an error body: OpenAI ``{"error": {...}}``, Anthropic ``{"type": "error", "error": {...}}``,
    ``{"error": "text"}``, ``{"message": ...}``, ``{"detail": ...}``, or plain text."""
    text = body.strip()
    try:
        obj: Any = json.loads(text) if text.startswith(("{", "[")) else None
    except ValueError:
        obj = None
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        obj = obj[0]  # Gemini-style servers wrap the error in a list
    if isinstance(obj, dict):
        inner = obj.get("error", obj)
        if isinstance(inner, str):
            return UpstreamErrorInfo(inner, _str(obj.get("type")), _str(obj.get("code")))
        if isinstance(inner, dict):
            message = inner.get("message") or inner.get("detail") or obj.get("message")
            if not isinstance(message, str) or not message:
                message = _short(json.dumps(inner, ensure_ascii=False))
            etype = _str(inner.get("type")) or _str(inner.get("status"))
            if etype == "error":
                etype = None
            return UpstreamErrorInfo(message, etype, _str(inner.get("code")))
    return UpstreamErrorInfo(_short(text) if text else "no details")


def _str(value: Any) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    return str(value)


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_context_too_long(info: UpstreamErrorInfo) -> bool:
    """Whether the upstream says the prompt does not fit the model's context."""
    words = " ".join(x for x in (info.code, info.type, info.message) if x)
    return is_context_length_text(words)


def _is_model_not_found(info: UpstreamErrorInfo) -> bool:
    if info.code in ("model_not_found", "NOT_FOUND") or info.type == "not_found_error":
        return True
    message = info.message.lower()
    return "model" in message and ("not found" in message or "does not exist" in message)


# --------------------------------------------------------------------------- Retry-After


def parse_retry_after(headers: Mapping[str, str], now: Callable[[], float]) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` (OpenAI) or ``Retry-After`` (seconds or an
    HTTP date, relative to ``now()``, a UNIX time); ``None`` when absent or unreadable."""
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if value >= 0:
                return value
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
        return seconds if seconds >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - now())


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def retry_delay_in_body(body: str) -> float | None:
    """Seconds to wait from a Google error body's ``RetryInfo`` detail (``"retryDelay":
    "34.4s"``, a protobuf Duration); ``None`` when there is none."""
    if "RetryInfo" not in body:
        return None
    try:
        obj: Any = json.loads(body)
    except ValueError:
        return None
    if isinstance(obj, list) and obj:
        obj = obj[0]
    error = obj.get("error") if isinstance(obj, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            m = _DURATION.match(str(detail.get("retryDelay", "")))
            if m:
                return float(m.group(1))
    return None


def _wait_text(seconds: float | None) -> str:
    if seconds is None:
        return "try again in a moment"
    if seconds < 90:
        return f"retry in {max(1, round(seconds))} s"
    return f"retry in {round(seconds / 60)} min"


# --------------------------------------------------------------------------- mapping


_GOOGLE_BAD_KEY = re.compile(r"API_KEY_INVALID|API key not valid")


def map_http_error(error: UpstreamHTTPError, ctx: ErrorContext, *, attempts: int = 1) -> LanguageModelError:
    """The :class:`LanguageModelError` for a non-success HTTP answer (``error.body`` is redacted)."""
    status = error.status_code
    info = error_info(error.body)
    said = ctx.redact(info.message)
    where = f"{ctx.provider} ({ctx.base_url})"
    model = f"model {ctx.model!r}" if ctx.model else "the model"
    if status in (401, 403) or (status == 400 and _GOOGLE_BAD_KEY.search(error.body)):
        if ctx.has_key:
            head = f"{ctx.provider} rejected the API key (HTTP {status}: {said})"
        else:
            head = f"{ctx.provider} needs an API key and none is set (HTTP {status}: {said})"
        return LanguageModelError.no_permissions(f"{head}; {ctx.key_advice()}")
    if status == 429 or info.code in ("rate_limit_exceeded", "insufficient_quota"):
        if info.code == "insufficient_quota" or info.type == "insufficient_quota":
            return LanguageModelError.blocked(
                f"{ctx.provider}: the account's quota is used up (HTTP {status}: {said}); "
                f"check the plan and billing of the API key"
            )
        return LanguageModelError.blocked(
            f"{ctx.provider} is rate limiting requests (HTTP {status}: {said}); "
            f"{_wait_text(error.retry_after)}"
        )
    if status in (400, 413, 422) and is_context_too_long(info):
        return ContextLengthError(
            f"the conversation is too long for {model} at {ctx.provider} (HTTP {status}: {said}); "
            f"start a new chat, remove attached context, or pick a model with a larger context window",
            upstream=f"HTTP {status}: {said}",
        )
    if status == 404 or _is_model_not_found(info):
        return LanguageModelError.not_found(
            f"{model} was not found at {where} (HTTP {status}: {said}); check the model id, "
            f"and the baseUrl if every model fails"
        )
    if status == 408 or status >= 500:
        tried = f" after {attempts} attempts" if attempts > 1 else ""
        kind = "overloaded" if status == 529 or info.type == "overloaded_error" else "unavailable"
        return LanguageModelError(
            f"{where} is {kind} (HTTP {status}{tried}: {said}); try again later"
        )
    return LanguageModelError(f"{where} refused the request (HTTP {status}: {said})")


def map_transport_error(
    exc: httpx.TransportError, ctx: ErrorContext, *, attempts: int = 1, streaming: bool = False
) -> LanguageModelError:
    """The error for a network failure (nothing received, or the stream broke off)."""
    tried = f" after {attempts} attempts" if attempts > 1 else ""
    detail = ctx.redact(str(exc) or type(exc).__name__)
    if streaming and isinstance(exc, httpx.TimeoutException):
        return LanguageModelError(
            f"{ctx.provider} stopped sending during the response: nothing came within its read "
            f"timeout ({type(exc).__name__}); the text so far is kept; try again, or raise the "
            f"provider's 'timeout' setting if the model pauses that long"
        )
    if streaming:
        return LanguageModelError(
            f"the connection to {ctx.provider} broke off during the response ({detail}); "
            f"the text so far is kept; try again"
        )
    if isinstance(exc, httpx.TimeoutException):
        return LanguageModelError(
            f"{ctx.provider} did not answer in time{tried} ({type(exc).__name__}: {detail}); "
            f"check that {ctx.base_url} is up, or raise the provider's 'timeout' setting"
        )
    return LanguageModelError(
        f"cannot reach {ctx.provider} at {ctx.base_url}{tried} ({type(exc).__name__}: {detail}); "
        f"check the baseUrl and the network (proxy, VPN, firewall)"
    )


def map_stream_error(error: UpstreamError, ctx: ErrorContext) -> LanguageModelError:
    """The error for a failure the stream itself reported, or a malformed stream."""
    text = ctx.redact(str(error))
    if isinstance(error, UpstreamReportedError):
        info = UpstreamErrorInfo(text, error.error_type, error.code)
        joined = " ".join(x for x in (error.code, error.error_type) if x)
        if re.search(r"auth|permission|api[_ ]key", joined, re.IGNORECASE):
            return LanguageModelError.no_permissions(f"{ctx.provider}: {text}; {ctx.key_advice()}")
        if is_context_too_long(info):
            model = f"model {ctx.model!r}" if ctx.model else "the model"
            return ContextLengthError(
                f"the conversation is too long for {model} at {ctx.provider} ({text}); start a "
                f"new chat, remove attached context, or pick a model with a larger context window",
                upstream=text,
            )
        if re.search(r"rate|quota|overload|exhausted|unavailable", joined, re.IGNORECASE):
            return LanguageModelError.blocked(f"{ctx.provider}: {text}; try again in a moment")
        if error.error_type == "prompt_blocked":
            return LanguageModelError.blocked(f"{ctx.provider}: {text}")
        if _is_model_not_found(info):
            return LanguageModelError.not_found(f"{ctx.provider}: {text}; check the model id")
        return LanguageModelError(f"{ctx.provider} reported an error: {text}")
    if isinstance(error, ToolArgumentsError):
        return LanguageModelError(f"{ctx.provider}: the model produced a broken tool call: {text}")
    if isinstance(error, UpstreamProtocolError):
        return LanguageModelError(
            f"{ctx.provider} sent a response lmbridge cannot read ({text}); is the provider's "
            f"'format' right for {ctx.base_url}?"
        )
    return LanguageModelError(f"{ctx.provider}: {text}")
