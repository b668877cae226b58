"""Error mapping, Retry-After parsing, key redaction and the retry policy (pure functions)."""

from __future__ import annotations

import email.utils

import pytest

from lmbridge.errors import (
    ConfigError,
    LanguageModelError,
    ToolArgumentsError,
    UpstreamHTTPError,
    UpstreamProtocolError,
    UpstreamReportedError,
)
from lmbridge.gateway import (
    ErrorContext,
    RetryPolicy,
    is_retryable_status,
    parse_retry_after,
    redact,
)
from lmbridge.gateway._errors import (
    error_info,
    is_context_too_long,
    map_http_error,
    map_stream_error,
    map_transport_error,
)

KEY = "sk-test-0123456789abcdef"
CTX = ErrorContext(
    provider="acme",
    base_url="https://api.acme.test/v1",
    model="acme-large",
    api_key_env="ACME_API_KEY",
    has_key=True,
    secrets=(KEY,),
)


def http_error(status: int, body: str, retry_after: float | None = None) -> LanguageModelError:
    return map_http_error(
        UpstreamHTTPError("x", status_code=status, body=body, retry_after=retry_after), CTX
    )


# --------------------------------------------------------------------------- redaction


def test_redact_replaces_every_occurrence() -> None:
    text = f"bad key {KEY}; again {KEY}."
    assert redact(text, [KEY]) == "bad key [redacted]; again [redacted]."
    assert redact(text, [None, ""]) == text


def test_redact_ignores_trivially_short_values() -> None:
    assert redact("a cat", ["a"]) == "a cat"


# --------------------------------------------------------------------------- error bodies


@pytest.mark.parametrize(
    ("body", "message", "etype", "code"),
    [
        (
            '{"error": {"message": "m1", "type": "invalid_request_error", "code": "context_length_exceeded"}}',
            "m1",
            "invalid_request_error",
            "context_length_exceeded",
        ),
        (
            '{"type": "error", "error": {"type": "not_found_error", "message": "model: x"}}',
            "model: x",
            "not_found_error",
            None,
        ),
        ('{"error": "plain words"}', "plain words", None, None),
        ('{"message": "top level"}', "top level", None, None),
        ('[{"error": {"code": 429, "message": "gem", "status": "RESOURCE_EXHAUSTED"}}]', "gem", "RESOURCE_EXHAUSTED", "429"),
        ("<html>Bad Gateway</html>", "<html>Bad Gateway</html>", None, None),
        ("", "no details", None, None),
    ],
)
def test_error_info_reads_every_shape(body: str, message: str, etype: str | None, code: str | None) -> None:
    info = error_info(body)
    assert (info.message, info.type, info.code) == (message, etype, code)


# --------------------------------------------------------------------------- HTTP statuses


@pytest.mark.parametrize("status", [401, 403])
def test_auth_errors_say_how_to_set_the_key(status: int) -> None:
    err = http_error(status, f'{{"error": {{"message": "Incorrect API key provided: {KEY}"}}}}')
    assert err.code == "NoPermissions"
    assert "lmbridge: Set API Key" in err.message
    assert "ACME_API_KEY" in err.message
    assert KEY not in err.message
    assert "[redacted]" in err.message


def test_auth_error_without_a_key_says_none_is_set() -> None:
    ctx = ErrorContext(provider="acme", base_url="http://h", has_key=False)
    err = map_http_error(UpstreamHTTPError("x", status_code=401, body="{}"), ctx)
    assert err.code == "NoPermissions"
    assert "none is set" in err.message
    assert "apiKeyEnv" in err.message


def test_unknown_model_is_not_found() -> None:
    err = http_error(404, '{"error": {"message": "The model `acme-large` does not exist", "code": "model_not_found"}}')
    assert err.code == "NotFound"
    assert "'acme-large'" in err.message
    assert "model id" in err.message


def test_model_not_found_code_on_400_is_not_found() -> None:
    assert http_error(400, '{"error": {"message": "nope", "code": "model_not_found"}}').code == "NotFound"


def test_rate_limit_is_blocked_with_the_retry_time() -> None:
    err = http_error(429, '{"error": {"message": "Rate limit reached"}}', retry_after=20)
    assert err.code == "Blocked"
    assert "retry in 20 s" in err.message
    assert "retry in 3 min" in http_error(429, "{}", retry_after=180).message


def test_quota_exhausted_is_blocked_and_points_at_billing() -> None:
    err = http_error(429, '{"error": {"message": "You exceeded your quota", "code": "insufficient_quota"}}')
    assert err.code == "Blocked"
    assert "billing" in err.message


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, '{"error": {"message": "This model\'s maximum context length is 128000 tokens.", "code": "context_length_exceeded"}}'),
        (400, '{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}'),
        (413, '{"type": "error", "error": {"type": "request_too_large", "message": "Request exceeds the maximum allowed number of bytes."}}'),
    ],
)
def test_context_too_long_gets_a_clear_message(status: int, body: str) -> None:
    err = http_error(status, body)
    assert err.code == "Unknown"
    assert err.message.startswith("the conversation is too long for model 'acme-large'")
    assert "new chat" in err.message


def test_max_tokens_too_large_is_not_mistaken_for_context() -> None:
    info = error_info('{"error": {"message": "max_tokens: 100000 > 64000, which is the maximum allowed"}}')
    assert not is_context_too_long(info)


@pytest.mark.parametrize("status", [500, 502, 503, 529, 408])
def test_server_errors_say_try_later(status: int) -> None:
    err = map_http_error(UpstreamHTTPError("x", status_code=status, body="{}"), CTX, attempts=4)
    assert err.code == "Unknown"
    assert "after 4 attempts" in err.message
    assert "try again later" in err.message


def test_other_client_errors_carry_the_upstream_message() -> None:
    err = http_error(400, '{"error": {"message": "temperature must be <= 2"}}')
    assert err.code == "Unknown"
    assert "temperature must be <= 2" in err.message


# --------------------------------------------------------------------------- network and stream


def test_connection_errors_name_the_base_url() -> None:
    import httpx

    err = map_transport_error(httpx.ConnectError("All connection attempts failed"), CTX, attempts=3)
    assert "cannot reach acme at https://api.acme.test/v1 after 3 attempts" in err.message
    assert "baseUrl" in err.message
    timeout = map_transport_error(httpx.ReadTimeout("timed out"), CTX)
    assert "did not answer in time" in timeout.message
    broken = map_transport_error(httpx.ReadError("reset"), CTX, streaming=True)
    assert "broke off" in broken.message


@pytest.mark.parametrize(
    ("error", "code", "words"),
    [
        (UpstreamReportedError("overloaded", error_type="overloaded_error"), "Blocked", "try again"),
        (UpstreamReportedError("slow", code="rate_limit_exceeded"), "Blocked", "try again"),
        (UpstreamReportedError(f"bad {KEY}", error_type="authentication_error"), "NoPermissions", "Set API Key"),
        (UpstreamReportedError("too long", code="context_length_exceeded"), "Unknown", "too long for"),
        (UpstreamReportedError("boom", error_type="api_error"), "Unknown", "reported an error: boom"),
        (UpstreamProtocolError("not JSON"), "Unknown", "'format'"),
        (ToolArgumentsError("t", "c1", "{", "not valid JSON"), "Unknown", "broken tool call"),
    ],
)
def test_stream_errors_are_mapped(error: Exception, code: str, words: str) -> None:
    err = map_stream_error(error, CTX)  # type: ignore[arg-type]
    assert err.code == code
    assert words in err.message
    assert KEY not in err.message


# --------------------------------------------------------------------------- Retry-After


def test_retry_after_seconds_date_and_ms() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after({"Retry-After": "7"}, lambda: now) == 7.0
    assert parse_retry_after({"retry-after": "1.5"}, lambda: now) == 1.5
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"Retry-After": date}, lambda: now) == pytest.approx(30, abs=1)
    past = email.utils.formatdate(now - 30, usegmt=True)
    assert parse_retry_after({"Retry-After": past}, lambda: now) == 0.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}, lambda: now) == 0.25
    assert parse_retry_after({"Retry-After": "soon"}, lambda: now) is None
    assert parse_retry_after({"Retry-After": "-3"}, lambda: now) is None
    assert parse_retry_after({}, lambda: now) is None


# --------------------------------------------------------------------------- the policy


def test_retryable_statuses() -> None:
    assert all(is_retryable_status(s) for s in (408, 429, 500, 502, 503, 504, 529))
    assert not any(is_retryable_status(s) for s in (400, 401, 403, 404, 413, 422))


def test_backoff_grows_is_capped_and_ends() -> None:
    policy = RetryPolicy(max_attempts=6, initial_delay=1, multiplier=2, max_delay=5, jitter=0.5, random=lambda: 0.0)
    assert [policy.delay(n, None) for n in range(1, 7)] == [1, 2, 4, 5, 5, None]
    jittered = RetryPolicy(initial_delay=1, jitter=0.5, random=lambda: 1.0)
    assert jittered.delay(1, None) == 1.5


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    policy = RetryPolicy(max_attempts=3, max_retry_after=30)
    assert policy.delay(1, 12.0) == 12.0
    assert policy.delay(1, 31.0) is None  # too long: fail now and say when
    assert policy.delay(3, 1.0) is None  # attempts used up


def test_retry_policy_from_config() -> None:
    policy = RetryPolicy.from_config({"maxAttempts": 2, "maxRetryAfter": 5}, "p")
    assert (policy.max_attempts, policy.max_retry_after) == (2, 5)
    with pytest.raises(ConfigError, match=r"p\.retry\.tries: unknown option"):
        RetryPolicy.from_config({"tries": 2}, "p")
    with pytest.raises(ConfigError, match=r"p\.retry\.maxAttempts: expected an integer of at least 1, got 0"):
        RetryPolicy.from_config({"maxAttempts": 0}, "p")
    with pytest.raises(ConfigError, match="maxAttempts must be at least 1"):
        RetryPolicy(max_attempts=0)  # built in Python, not from settings
    with pytest.raises(ConfigError, match="expected an integer"):
        RetryPolicy.from_config({"maxAttempts": 1.5}, "p")
