"""Every field of a ``lmbridge.providers`` entry, described once.

This table is the one description of provider configuration. Three readers agree because they
read it:

- the validation (:mod:`lmbridge.config` for the fields every entry has,
  :func:`lmbridge.gateway.build_provider` for an upstream's options,
  :func:`lmbridge.gateway.catalog.parse_static_models` for ``models`` items and
  :class:`lmbridge.gateway.RetryPolicy` for ``retry``) takes names, JSON types, enums and limits
  from here, through :func:`check`;
- the VS Code settings schema: ``lmbridge.providers`` in ``extension/package.json`` is
  :func:`providers_setting`;
- the README's option table, between ``<!-- provider-options:begin -->`` and
  ``<!-- provider-options:end -->``, is :func:`readme_table`.

``python -m lmbridge.config_fields --write`` regenerates both files from a checkout;
``--check`` says whether they are current (the test suite fails when they drift), and with no
argument the schema of one entry is printed.

Each :class:`Field` also says which entries it applies to (upstream formats, Python providers)
and whether a workspace's settings may set it (:attr:`Field.workspace`, the trust class that
:func:`lmbridge.config.merge_workspace_entries` applies; SECURITY.md explains why).

Importing this module imports no other layer: it is data plus pure functions (the format
names come from the registry in :mod:`lmbridge.formats`, itself data).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from . import formats
from .errors import ConfigError

__all__ = [
    "CAPABILITY_FIELDS",
    "MODEL_FIELDS",
    "PROVIDER_FIELDS",
    "RETRY_FIELDS",
    "UPSTREAM",
    "Field",
    "JsonType",
    "Trust",
    "check",
    "entry_schema",
    "option_fields",
    "provider_field",
    "providers_setting",
    "readme_table",
    "workspace_fields",
]

JsonType = Literal["string", "boolean", "integer", "number", "object", "array"]
Trust = Literal["honoured", "removed", "entry-ignored"]
"""What happens to the field in an entry from a workspace's settings: ``honoured``; ``removed``
from the entry (which stays); ``entry-ignored``: the whole entry is ignored."""

UPSTREAM: tuple[str, ...] = formats.names()
"""Every upstream wire format (a field for all of them applies to every ``format`` entry)."""

PYTHON = "python"
"""The name :attr:`Field.applies` uses for Python-provider entries (``"provider": ...``)."""


@dataclass(frozen=True)
class Field:
    """One configuration field: what it takes, what it means, who may set it."""

    name: str
    """The key, as written in settings (camelCase)."""
    types: tuple[JsonType, ...]
    """The JSON types it takes (``integer`` includes integral numbers such as ``4.0``)."""
    expected: str
    """What it takes, in words, for error messages (``"a positive number"``)."""
    doc: str
    """Markdown, one paragraph: what it does."""
    example: Any
    """A value as a user would write it (checked by the tests against the schema)."""
    default: Any = None
    """The value when it is missing (``None``: none, or it depends on the format)."""
    enum: tuple[Any, ...] = ()
    """The only values taken, when not empty."""
    minimum: float | None = None
    exclusive_minimum: float | None = None
    maximum: float | None = None
    exclusive_maximum: float | None = None
    pattern: str | None = None
    """A regular expression a string must match (the same syntax in Python and JSON schema)."""
    pattern_error: str | None = None
    """What VS Code says when the pattern does not match."""
    values: JsonType | None = None
    """For an ``object`` of free keys: the type of every value (``headers``)."""
    fields: tuple[Field, ...] = ()
    """For an ``object`` with known keys (``retry``): its fields; other keys are errors."""
    item_fields: tuple[Field, ...] = ()
    """For an ``array`` of model ids or objects (``models``): the objects' fields."""
    required: bool = False
    """Whether an object of the enclosing level must have it."""
    applies: tuple[str, ...] = UPSTREAM
    """The formats (and :data:`PYTHON`) whose entries read it; others refuse it (upstream
    formats) or receive it as an option of their own (Python providers)."""
    workspace: Trust = "honoured"
    """What a workspace's entry may do with it (see :data:`Trust`)."""
    workspace_reason: str = ""
    """Why a workspace may not set it (the ``reason`` of the reported ignored setting)."""
    workspace_maximum: float | None = None
    """The most a workspace's entry may set a number to (``None``: as the user may); a
    larger value is lowered to it and reported."""

    @property
    def for_all_upstreams(self) -> bool:
        """Whether every upstream format reads it."""
        return all(f in self.applies for f in UPSTREAM)


_COMMON = (PYTHON, *UPSTREAM)
_HEADER_NAME_RE = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"

# --------------------------------------------------------------------------- nested objects

RETRY_FIELDS: tuple[Field, ...] = (
    Field(
        "maxAttempts", ("integer",), "an integer of at least 1",
        "Attempts in all, the first included (`1`: never retry).",
        example=3, default=4, minimum=1,
    ),
    Field(
        "initialDelay", ("number",), "a number of seconds (>= 0)",
        "The first wait before a retry, in seconds.",
        example=0.5, default=1.0, minimum=0,
    ),
    Field(
        "multiplier", ("number",), "a number of at least 1",
        "Each further wait is this many times the previous one.",
        example=2, default=2.0, minimum=1,
    ),
    Field(
        "maxDelay", ("number",), "a number of seconds (>= 0)",
        "No single wait is longer than this, in seconds.",
        example=8, default=16.0, minimum=0,
    ),
    Field(
        "maxRetryAfter", ("number",), "a number of seconds (>= 0)",
        "The longest `Retry-After` waited for, in seconds; a longer one fails the request at "
        "once, saying when to try again.",
        example=30, default=60.0, minimum=0,
    ),
    Field(
        "jitter", ("number",), "a fraction (>= 0)",
        "Waits are lengthened by up to this fraction, at random, so that clients do not "
        "retry in step.",
        example=0.2, default=0.1, minimum=0,
    ),
)
"""The fields of ``retry`` (see :class:`lmbridge.gateway.RetryPolicy`)."""

CAPABILITY_FIELDS: tuple[Field, ...] = (
    Field(
        "toolCalling", ("boolean", "integer"), "true or false",
        "Whether the model calls tools (VS Code's agent mode needs it). A number is the "
        "most tools it takes in one request.",
        example=True,
    ),
    Field(
        "imageInput", ("boolean",), "true or false",
        "Whether the model takes images.",
        example=True,
    ),
)
"""The fields of a model's ``capabilities`` (also taken at the model's top level)."""

MODEL_FIELDS: tuple[Field, ...] = (
    Field(
        "id", ("string",), "a non-empty string",
        "The upstream's model id (the part of the VS Code model id after `<name>/`).",
        example="gpt-4o", required=True, pattern=r"\S",
        pattern_error="The upstream's model id, not empty.",
    ),
    Field("name", ("string",), "a string", "The name the model picker shows.",
          example="GPT-4o"),
    Field("family", ("string",), "a string",
          "The model family VS Code reports (default: the id without vendor prefix and date).",
          example="gpt-4o"),
    Field("version", ("string",), "a string", "The version VS Code reports (default: the id).",
          example="2024-08-06"),
    Field(
        "contextWindow", ("integer",), "a positive integer",
        "Tokens of context (prompt and answer); the input limit is this less the output "
        "reserve (see `outputReserve`).",
        example=128000, minimum=1,
    ),
    Field(
        "maxInputTokens", ("integer",), "a positive integer",
        "The input limit VS Code gets, taken as given (less than `contextWindow` when both "
        "are set).",
        example=112000, minimum=1,
    ),
    Field("maxOutputTokens", ("integer",), "a positive integer",
          "The most tokens the model writes in one answer.", example=16384, minimum=1),
    Field(
        "capabilities", ("object",), "an object",
        "What the model can do: `toolCalling`, `imageInput`.",
        example={"toolCalling": True, "imageInput": True}, fields=CAPABILITY_FIELDS,
    ),
    *CAPABILITY_FIELDS,
    Field("tooltip", ("string",), "a string", "The model picker's tooltip.",
          example="Fast and cheap"),
    Field(
        "extraBody", ("object",), "an object",
        "Fields laid under this model's request bodies (over the provider's `extraBody`).",
        example={"reasoning_effort": "high"},
    ),
)
"""The fields of a ``models`` item given as an object (a plain string is its ``id``)."""

# --------------------------------------------------------------------------- provider entries

PROVIDER_FIELDS: tuple[Field, ...] = (
    # ---- every entry
    Field(
        "name", ("string",), "a non-empty string",
        "Unique name of the provider; its model ids are `<name>/<model>`.",
        example="openai", required=True, pattern=r"^(?!editor:)[^/]*[^/\s][^/]*$",
        pattern_error="A non-empty name without '/' (model ids are \"<name>/<model>\"), not "
        "starting with 'editor:' (the Language Models editor's providers have that prefix).",
        applies=_COMMON,
    ),
    Field(
        "format", ("string",), f"one of {', '.join(UPSTREAM)}",
        "The upstream's wire format. An entry has either `format` (with `baseUrl`) or "
        "`provider`.",
        example="chat-completions", enum=UPSTREAM,
    ),
    Field(
        "baseUrl", ("string",), "an http(s) URL with a host",
        "Base URL of the upstream API (required with `format`). Never with credentials in it "
        "(`user:pass@`, `?key=`): keys are stored with **lmbridge: Set API Key**, bound to "
        "this URL's origin.",
        example="https://api.openai.com/v1", pattern=r"^[hH][tT][tT][pP][sS]?://",
        pattern_error="An http:// or https:// URL.", applies=_COMMON,
    ),
    Field(
        "provider", ("string",), '"package.module:Class"',
        "A Python provider: `\"package.module:Class\"` (a class, a factory marked "
        "`@lmbridge.provider_factory` or a provider instance; `Class` may be a dotted path) "
        "or, without a colon, the name of an installed `lmbridge.providers` entry point. Its "
        "other fields are passed to it as keyword arguments.",
        example="my_package.my_module:MyProvider", pattern=r"\S",
        pattern_error="\"package.module:Class\" (a class, factory or instance; the attribute "
        "may be dotted) or the name of an installed 'lmbridge.providers' entry point.",
        applies=(PYTHON,), workspace="entry-ignored",
        workspace_reason="a Python provider imports and runs code, so it is honoured only "
        "from user settings",
    ),
    Field(
        "apiKeyEnv", ("string",), "the name of an environment variable",
        "Environment variable of the host's process (VS Code's) holding the API key, used "
        "when no key is stored.",
        example="OPENAI_API_KEY", pattern=r"\S", pattern_error="The name of a variable.",
        applies=_COMMON, workspace="removed",
        workspace_reason="a workspace cannot choose which environment variable is sent as a "
        "key",
    ),
    Field(
        "apiKeyHeader", ("string",), "an HTTP header name such as 'api-key'",
        "Send the key as this header's value instead of the format's own credentials (e.g. "
        "`api-key` for Azure OpenAI). The key itself still comes from the stored key or "
        "`apiKeyEnv`.",
        example="api-key", pattern=_HEADER_NAME_RE, pattern_error="An HTTP header name.",
    ),
    Field(
        "headers", ("object",), "an object of string values",
        "Extra HTTP headers sent to the upstream. Not for credentials (`Authorization`, "
        "`x-api-key` ... are refused).",
        example={"X-Team": "research"}, default={}, values="string", applies=_COMMON,
    ),
    Field(
        "allowInsecureHttp", ("boolean",), "true or false",
        "Allow the key over plain `http://` to a host that is not this machine.",
        example=True, default=False, applies=_COMMON, workspace="removed",
        workspace_reason="sending a key over plain http is allowed only by user settings",
    ),
    Field(
        "models", ("array",), "a list of model ids or objects",
        "The models to offer, as ids or objects; without it the upstream's model list "
        "(`GET {baseUrl}/models`) is read. Python providers receive it as an option.",
        example=[{"id": "gpt-4o", "maxOutputTokens": 16384}, "gpt-4o-mini"],
        item_fields=MODEL_FIELDS, applies=_COMMON,
    ),
    # ---- upstream options
    Field(
        "extraBody", ("object",), "an object",
        "Fields laid under every request body (the request's own fields win).",
        example={"service_tier": "flex"}, default={},
    ),
    Field(
        "conversion", ("object",), "an object",
        "How VS Code messages become the format's request, camelCase or snake_case: "
        "`missingToolResult` (`placeholder`, `drop`), `orphanToolResult` (`text`, `error`), "
        "`imageInNonUser` (`placeholder`, `skip`, `error`), `cleanTerminal`, and the "
        "format's own (`chat-completions`: `systemRole`, `maxTokensField`, "
        "`reasoningContent` ...). Checked when the provider loads.",
        example={"missingToolResult": "drop"}, default={},
    ),
    Field(
        "chatPath", ("string",), "a path such as '/chat/completions'",
        "The streaming endpoint, relative to `baseUrl` (default: the format's own), or an "
        "absolute URL (which gets the key only at `baseUrl`'s origin).",
        example="/chat/completions",
    ),
    Field(
        "modelsPath", ("string",), "a path such as '/models'",
        "The model list, relative to `baseUrl` (default: the format's own), or an absolute "
        "URL.",
        example="/models",
    ),
    Field(
        "retry", ("object",), "an object",
        "Retries of requests that fail before their answer begins (HTTP 408, 429, 5xx, "
        "connection errors), honouring `Retry-After`.",
        example={"maxAttempts": 3, "maxDelay": 8}, fields=RETRY_FIELDS,
    ),
    Field(
        "timeout", ("number",), "a positive number",
        "Seconds to wait for the next byte of a response (reasoning models may think for "
        "minutes before the first).",
        example=120, default=300, exclusive_minimum=0, workspace_maximum=300,
        workspace_reason="a workspace's upstream may not keep the host waiting longer than "
        "the default",
    ),
    Field(
        "contextWindow", ("integer",), "a positive integer",
        "Context window of models the upstream's list says nothing about.",
        example=200000, default=128000, minimum=1,
    ),
    Field(
        "maxOutputTokens", ("integer",), "a positive integer",
        "Output limit of models the upstream's list says nothing about.",
        example=8192, default=4096, minimum=1,
    ),
    Field(
        "outputReserve", ("number",),
        "a fraction of the context window (0 < x < 1) or a number of tokens (>= 1)",
        "What each model keeps for its answer: a fraction of the context window (below 1) "
        "or a number of tokens, at most the model's output limit. The input limit VS Code "
        "gets is the window less this.",
        example=0.2, default=0.25, exclusive_minimum=0,
    ),
    Field(
        "toolCalling", ("boolean",), "true or false",
        "Whether models the upstream's list says nothing about call tools.",
        example=False, default=True,
    ),
    Field(
        "imageInput", ("boolean",), "true or false",
        "Whether models the upstream's list says nothing about take images.",
        example=True, default=False,
    ),
    Field(
        "catalogTtl", ("number",), "a number of seconds (>= 0)",
        "Seconds a fetched model list stays fresh.",
        example=3600, default=600, minimum=0,
    ),
    Field(
        "thinking", ("string",), "'part', 'text', 'off' or 'drop'",
        "How the model's reasoning is shown: as thinking parts (as quoted text where VS Code "
        "has no thinking parts), as text, or not at all (`off`; `drop` is the same).",
        example="text", default="part", enum=("part", "text", "off", "drop"),
    ),
    Field(
        "reasoningEffort", ("string",), "'minimal', 'low', 'medium' or 'high'",
        "The thinking effort of the provider's models when VS Code's model picker chose none "
        "(where VS Code has its Thinking Effort entry, the picker's choice wins): OpenAI's "
        "`reasoning_effort`, Anthropic's thinking budget (2,048, 8,192 or 24,576 tokens), "
        "Gemini's `thinkingLevel` (Gemini 3) or thinking budget. With it, every model of the "
        "provider gets the picker's entry.",
        example="high", enum=("minimal", "low", "medium", "high"),
        applies=("chat-completions", "responses", "anthropic", "gemini"),
    ),
    Field(
        "contextCheck", ("boolean",), "true or false",
        "Check each request's estimate (messages, tool definitions, system prompt) against "
        "the model's window before sending it; one certainly over it (over even if the "
        "estimate were 10% high) fails at once, without an upstream request, saying by how "
        "many tokens it is over. Anything else is sent.",
        example=False, default=True,
    ),
    Field(
        "contextManagement", ("boolean",), "true or false",
        "Anthropic context editing for the models that support it (Claude 4 and later): old "
        "tool uses, and old thinking when thinking is on, are cleared once the prompt grows "
        "past the API's threshold; the `anthropic-beta` header is added for you.",
        example=False, default=True, applies=("anthropic",),
    ),
    Field(
        "truncation", ("string",), "'auto' or 'disabled'",
        "The Responses API's `truncation`: `auto` lets the upstream drop the oldest items "
        "of a conversation that no longer fits.",
        example="disabled", default="auto", enum=("auto", "disabled"), applies=("responses",),
    ),
    Field(
        "vertex", ("boolean",), "true or false",
        "The base URL is Vertex AI's: the credential is an OAuth access token (`apiKeyEnv`, "
        "the stored key, or the command in the environment variable "
        "`LMBRIDGE_VERTEX_TOKEN_COMMAND` of VS Code's process) sent as a Bearer token.",
        example=True, default=False, applies=("gemini",), workspace="removed",
        workspace_reason="Vertex AI may use the access-token command of the user's "
        "environment, so it is honoured only from user settings",
    ),
)
"""Every field of a provider entry, in the order the docs list them."""

_BY_NAME = {f.name: f for f in PROVIDER_FIELDS}


def provider_field(name: str) -> Field:
    """The provider field called ``name`` (``KeyError`` when there is none)."""
    return _BY_NAME[name]


def option_fields(fmt: str) -> tuple[Field, ...]:
    """The fields an entry of upstream format ``fmt`` takes, the common ones included."""
    return tuple(f for f in PROVIDER_FIELDS if fmt in f.applies)


def workspace_fields(trust: Trust) -> tuple[str, ...]:
    """The names of the fields of one trust class, in table order."""
    return tuple(f.name for f in PROVIDER_FIELDS if f.workspace == trust)


# --------------------------------------------------------------------------- validation


def _is_type(value: Any, t: JsonType) -> bool:
    if t == "string":
        return isinstance(value, str)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "object":
        return isinstance(value, Mapping)
    if t == "array":
        return isinstance(value, list)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if t == "integer":
        return isinstance(value, int) or (math.isfinite(value) and value.is_integer())
    return math.isfinite(value)  # number


def _shown(value: Any) -> str:
    # Containers are named by their type only: a header value or a body may hold a secret.
    if isinstance(value, (Mapping, list, tuple)):
        return type(value).__name__
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check(f: Field, value: Any, where: str) -> None:
    """Raise :class:`ConfigError` ``"{where}.{name}: expected ..., got ..."`` unless ``value``
    has one of the field's types and keeps its enum, limits and pattern; for objects with known
    fields, each of those too (unknown keys are errors). Semantic checks (URLs, credentials)
    stay with the readers."""
    here = f"{where}.{f.name}"
    if not any(_is_type(value, t) for t in f.types) or (
        f.enum and not any(value == e and type(value) is type(e) for e in f.enum)
    ):
        raise ConfigError(f"{here}: expected {f.expected}, got {_shown(value)}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low_ok = (f.minimum is None or value >= f.minimum) and (
            f.exclusive_minimum is None or value > f.exclusive_minimum
        )
        high_ok = (f.maximum is None or value <= f.maximum) and (
            f.exclusive_maximum is None or value < f.exclusive_maximum
        )
        if not (low_ok and high_ok):
            raise ConfigError(f"{here}: expected {f.expected}, got {_shown(value)}")
    if isinstance(value, str) and f.pattern is not None and not re.search(f.pattern, value):
        raise ConfigError(f"{here}: expected {f.expected}, got {_shown(value)}")
    if isinstance(value, Mapping):
        if f.values is not None and not all(
            isinstance(k, str) and _is_type(v, f.values) for k, v in value.items()
        ):
            raise ConfigError(f"{here}: expected {f.expected}")
        if f.fields:
            check_object(f.fields, value, here)


def check_object(fields: Sequence[Field], obj: Mapping[str, Any], where: str) -> None:
    """Check every key of ``obj`` against ``fields``: an unknown key, a missing required one
    or a bad value is a :class:`ConfigError` naming it."""
    known = {f.name: f for f in fields}
    for key in obj:
        if key not in known:
            raise ConfigError(
                f"{where}.{key}: unknown option (known: {', '.join(known)})"
            )
    for f in fields:
        if f.name in obj:
            check(f, obj[f.name], where)
        elif f.required:
            raise ConfigError(f"{where}.{f.name}: required ({f.expected})")


# --------------------------------------------------------------------------- JSON schema


def _applies_text(f: Field) -> str:
    if f.applies == _COMMON:
        return ""
    if f.applies == (PYTHON,):
        return "Python providers only."
    if f.for_all_upstreams:
        return "Upstream formats only." if PYTHON not in f.applies else ""
    names = ", ".join(f"`{a}`" for a in f.applies if a != PYTHON)
    return f"Format {names} only." if len(f.applies) == 1 else f"Formats {names} only."


def _trust_text(f: Field) -> str:
    if f.workspace_maximum is not None:
        return f"A workspace's entry may set at most `{f.workspace_maximum:g}`."
    if f.workspace == "removed":
        return "From user settings only: a workspace's entry loses it."
    if f.workspace == "entry-ignored":
        return "From user settings only: a workspace's entry with it is ignored."
    return ""


def _markdown(f: Field, top: bool) -> str:
    parts = [f.doc]
    if f.default is not None:
        parts.append(f"Default: `{_json(f.default)}`.")
    if top:
        parts += [t for t in (_applies_text(f), _trust_text(f)) if t]
    return " ".join(parts)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _schema(f: Field, top: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    out["type"] = f.types[0] if len(f.types) == 1 else list(f.types)
    if f.enum:
        out["enum"] = list(f.enum)
    for key, value in (
        ("minimum", f.minimum),
        ("exclusiveMinimum", f.exclusive_minimum),
        ("maximum", f.maximum),
        ("exclusiveMaximum", f.exclusive_maximum),
    ):
        if value is not None:
            out[key] = int(value) if float(value).is_integer() else value
    if f.pattern is not None:
        out["pattern"] = f.pattern
        if f.pattern_error:
            out["patternErrorMessage"] = f.pattern_error
    if f.values is not None:
        out["additionalProperties"] = {"type": f.values}
    if f.fields:
        out.update(_object_schema(f.fields))
    if f.item_fields:
        # Python providers read their own model objects: the fields are known, not required
        loose = _object_schema(f.item_fields)
        del loose["additionalProperties"]
        out["items"] = {"anyOf": [{"type": "string"}, loose]}
    out["markdownDescription"] = _markdown(f, top)
    if f.default is not None:
        out["default"] = f.default
    out["examples"] = [f.example]
    return out


def _object_schema(fields: Sequence[Field]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object"}
    required = [f.name for f in fields if f.required]
    if required:
        out["required"] = required
    out["properties"] = {f.name: _schema(f) for f in fields}
    out["additionalProperties"] = False
    return out


def entry_schema() -> dict[str, Any]:
    """The JSON schema of one provider entry (draft 7, as VS Code reads settings schemas).

    Python providers take any further option; an upstream entry takes only its format's
    fields, and a field of other formats is refused (``if``/``then`` on ``format``).
    """
    model_keys = {"propertyNames": {"enum": [f.name for f in MODEL_FIELDS]}}
    upstream_keys = [f.name for f in PROVIDER_FIELDS if any(a != PYTHON for a in f.applies)]
    conditions: list[dict[str, Any]] = [
        {
            "if": {"required": ["format"]},
            "then": {
                "propertyNames": {
                    "enum": upstream_keys,
                    # errorMessage: VS Code's own keyword for the problem it shows
                    "errorMessage": "Not an option of an upstream entry (see the README's "
                    'option table); a Python provider ("provider") takes options of its own.',
                },
                "properties": {
                    "models": {"items": {"anyOf": [{"type": "string"}, model_keys]}}
                },
            },
        }
    ]
    for f in PROVIDER_FIELDS:
        upstream = [a for a in f.applies if a != PYTHON]
        if upstream and not f.for_all_upstreams:
            names = " and ".join(f'"{a}"' for a in upstream)
            conditions.append(
                {
                    "if": {
                        "required": ["format", f.name],
                        "properties": {"format": {"not": {"enum": upstream}}},
                    },
                    "then": {
                        "properties": {
                            f.name: {
                                "not": {},
                                "errorMessage": f'"{f.name}" is read by format {names} only, '
                                "not by this entry's.",
                            }
                        }
                    },
                }
            )
    schema: dict[str, Any] = {
        "type": "object",
        "required": [f.name for f in PROVIDER_FIELDS if f.required],
        "properties": {f.name: _schema(f, top=True) for f in PROVIDER_FIELDS},
        "allOf": conditions,
    }
    return schema


_SETTING_DOC = (
    "Model providers served by the Python host. Each entry is either an upstream API (`name`, "
    "`format`, `baseUrl`, and options) or a Python provider (`name`, `provider`: "
    '`"package.module:Class"`, plus its own options). API keys are stored with the command '
    "**lmbridge: Set API Key**, never here, and are sent only to the origin (scheme, host, "
    "port) they were stored for. With no entry, the built-in echo model is served. A "
    "workspace's entries are used with limits: no `provider` (Python code), no "
    + ", ".join(f"`{n}`" for n in workspace_fields("removed")[:-1])
    + f" or `{workspace_fields('removed')[-1]}`, and no entry named like one of yours; each new "
    "entry stays off (never contacted, no model offered) until you allow it (**lmbridge: Manage "
    "Workspace Providers**). Every option is listed in the README."
)


def providers_setting() -> dict[str, Any]:
    """The ``lmbridge.providers`` entry of ``contributes.configuration.properties``."""
    example = {
        "name": "openai",
        "format": "responses",
        "baseUrl": "https://api.openai.com/v1",
    }
    return {
        "type": "array",
        "default": [],
        "markdownDescription": _SETTING_DOC,
        "examples": [[example]],
        "items": entry_schema(),
    }


EDITOR_VENDOR = "lmbridge-api"
"""The vendor whose providers VS Code's Language Models editor manages (see
:mod:`lmbridge.sources.editor`, which cannot be imported here: it sits above)."""

# What the editor's Add Models asks, in this order (VS Code prompts for every top-level
# property of a type it can ask for, and opens the JSON file when one is of another type: so
# only these are top-level; the other options are in ``allOf`` for the file's validation).
_EDITOR_ASKED = ("format", "baseUrl")
_EDITOR_NOT_TAKEN = frozenset({"name", "provider", *_EDITOR_ASKED})


def editor_configuration() -> dict[str, Any]:
    """The ``configuration`` of the :data:`EDITOR_VENDOR` contribution (``languageModelChatProviders``).

    Add Models asks for the format (a pick with each format's description), the base URL and
    the API key (``secret``: VS Code keeps it in its secret storage); every other option of an
    upstream entry can be written to the group in ``chatLanguageModels.json`` (**Go to config
    file**), where this schema validates it.
    """
    fmt = _schema(provider_field("format"))
    fmt.update(
        title="API format",
        description="The wire format the server speaks.",
        enumDescriptions=[formats.get(name).title for name in UPSTREAM],
    )
    base = _schema(provider_field("baseUrl"))
    base.update(
        title="Base URL",
        description="The API's base URL, for example https://api.openai.com/v1 or "
        "http://127.0.0.1:11434/v1 (no credentials in it: the key is asked next).",
    )
    key = {
        "type": "string",
        "secret": True,
        "title": "API key",
        "description": "Kept in VS Code's secret storage and sent only to the origin (scheme, "
        "host, port) of the base URL. Leave it empty for a server that needs none.",
    }
    for prop in (fmt, base):
        prop.pop("markdownDescription", None)
    others = {
        f.name: _schema(f, top=True)
        for f in PROVIDER_FIELDS
        if f.name not in _EDITOR_NOT_TAKEN and any(a != PYTHON for a in f.applies)
    }
    return {
        "type": "object",
        "properties": {"format": fmt, "baseUrl": base, "apiKey": key},
        "required": list(_EDITOR_ASKED),
        "allOf": [{"properties": others}],
    }


# --------------------------------------------------------------------------- README


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _type_text(f: Field) -> str:
    if f.enum:
        return " | ".join(f"`{_json(e)}`" for e in f.enum)
    text = " or ".join(f.types)
    if f.exclusive_minimum is not None:
        text += f" > {f.exclusive_minimum:g}"
    elif f.minimum is not None:
        text += f" ≥ {f.minimum:g}"
    return text


def _applies_cell(f: Field) -> str:
    if f.applies == _COMMON:
        return "all"
    if f.applies == UPSTREAM:
        return "upstream"
    return ", ".join(f"`{a}`" for a in f.applies)


def _rows(fields: Sequence[Field], prefix: str, with_scope: bool) -> list[str]:
    rows = []
    for f in fields:
        default = f"`{_json(f.default)}`" if f.default is not None else ""
        cells = [f"`{prefix}{f.name}`", _type_text(f), default]
        if with_scope:
            trust = {"honoured": "yes", "removed": "no (removed)", "entry-ignored": "no (entry ignored)"}
            said = trust[f.workspace]
            if f.workspace_maximum is not None:
                said = f"up to `{f.workspace_maximum:g}`"
            cells += [_applies_cell(f), said]
        cells.append(f"{f.doc} Example: `{_json(f.example)}`")
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return rows


def readme_table() -> str:
    """The README's option tables (provider fields, ``models`` items, ``retry``)."""
    lines = [
        "| option | type | default | entries | workspace | what it does |",
        "|---|---|---|---|---|---|",
        *_rows(PROVIDER_FIELDS, "", with_scope=True),
        "",
        "A `models` item is a model id or an object of these fields:",
        "",
        "| field | type | default | what it does |",
        "|---|---|---|---|",
        *_rows(MODEL_FIELDS, "", with_scope=False),
        "",
        "`retry` takes:",
        "",
        "| field | type | default | what it does |",
        "|---|---|---|---|",
        *_rows(RETRY_FIELDS, "", with_scope=False),
        "",
    ]
    return "\n".join(lines) + "\n"


README_BEGIN = "<!-- provider-options:begin (generated by python -m lmbridge.config_fields --write) -->"
README_END = "<!-- provider-options:end -->"


# --------------------------------------------------------------------------- files


def render_package_json(text: str) -> str:
    """``extension/package.json``'s text with ``lmbridge.providers`` regenerated."""
    package = json.loads(text)
    properties = package["contributes"]["configuration"]["properties"]
    properties["lmbridge.providers"] = providers_setting()
    for vendor in package["contributes"]["languageModelChatProviders"]:
        if vendor.get("vendor") == EDITOR_VENDOR:
            vendor["configuration"] = editor_configuration()
    return json.dumps(package, indent=2, ensure_ascii=False) + "\n"


def render_readme(text: str) -> str:
    """The README's text with the part between the markers regenerated."""
    begin, end = text.find(README_BEGIN), text.find(README_END)
    if begin < 0 or end < begin:
        raise ValueError(f"the README has no {README_BEGIN!r} ... {README_END!r} markers")
    head = text[: begin + len(README_BEGIN)]
    return f"{head}\n{readme_table()}{text[end:]}"


def main(argv: Sequence[str] | None = None) -> int:
    """``--write`` / ``--check`` the generated files of a checkout; else print the schema."""
    import argparse
    import sys
    from pathlib import Path

    parser = argparse.ArgumentParser(
        prog="python -m lmbridge.config_fields",
        description="The provider configuration's JSON schema; --write/--check regenerate "
        "extension/package.json's lmbridge.providers and the README's option table.",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the generated parts")
    mode.add_argument("--check", action="store_true", help="exit 1 when they are not current")
    parser.add_argument(
        "--root", type=Path, default=Path(__file__).resolve().parents[2],
        help="the checkout (default: the one this module is in)",
    )
    args = parser.parse_args(argv)
    if not (args.write or args.check):
        print(json.dumps(providers_setting(), indent=2, ensure_ascii=False))
        return 0
    stale = []
    for rel, render in (
        ("extension/package.json", render_package_json),
        ("README.md", render_readme),
    ):
        path = args.root / rel
        old = path.read_text("utf-8")
        new = render(old)
        if new != old:
            stale.append(rel)
            if args.write:
                path.write_text(new, "utf-8")
    verb = "rewrote" if args.write else "not current (run python -m lmbridge.config_fields --write)"
    for rel in stale:
        print(f"{rel}: {verb}", file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
