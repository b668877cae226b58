"""The description of a provider entry: what a ``providers`` item is, read by every layer.

Every source of providers produces these entries: the ``lmbridge.providers`` setting and
``lmbridge host --config`` files (:mod:`lmbridge.sources.settings`). The gateway builds
providers from them, and :mod:`lmbridge.config` loads them. This module sits below all of
those, with :mod:`lmbridge.config_fields` (every field, its types and its trust class) and
:mod:`lmbridge.formats` (the wire formats): it imports no source, no gateway and no HTTP stack.

An entry is one of::

    {"name": "mine", "provider": "package.module:Class", ...its own options}
    {"name": "openai", "format": "chat-completions", "baseUrl": "https://...",
     "apiKeyEnv": "OPENAI_API_KEY", "headers": {...}, "models": [...]}

:func:`parse_entries` validates a list of them: ``apiKey`` and credential headers are refused
(keys never sit in a configuration), and a repeated name is an error of the later entry. Keys
are bound to an origin (:func:`origin_of`, :func:`entry_origin`); a :class:`StoredKey` is a key
from the extension's SecretStorage with the origin recorded for it.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from . import formats
from .config_fields import PROVIDER_FIELDS, check, provider_field
from .errors import ConfigError
from .network import NetworkSettings, is_loopback_host

__all__ = [
    "CONFIRM_ORIGIN_COMMAND",
    "DEFAULT_PROVIDERS",
    "EDITOR_PREFIX",
    "ENTRY_POINT_GROUP",
    "HOST_SETTINGS",
    "KNOWN_FORMATS",
    "PROVIDERS_SETTING",
    "SET_KEY_COMMAND",
    "ProviderContext",
    "ProviderEntry",
    "StoredKey",
    "credential_param_pattern",
    "entry_origin",
    "is_loopback_host",
    "origin_of",
    "parse_entries",
    "parse_secrets",
    "url_credential_problem",
]

ENTRY_POINT_GROUP = "lmbridge.providers"
"""Entry point group under which packages publish providers."""

KNOWN_FORMATS = formats.names()
"""The upstream wire formats lmbridge knows (the registrations of :mod:`lmbridge.formats`)."""

DEFAULT_PROVIDERS: list[dict[str, Any]] = [
    {"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider"}
]
"""What is served when the configuration lists no provider: a model that needs no network."""

EDITOR_PREFIX = "editor:"
"""The name prefix of the providers VS Code's Language Models editor configures
(:mod:`lmbridge.sources.editor`); no other entry's name may start with it."""

SET_KEY_COMMAND = "lmbridge: Set API Key"
CONFIRM_ORIGIN_COMMAND = "lmbridge: Confirm API Key Origin"
PROVIDERS_SETTING = "lmbridge.providers"

HOST_SETTINGS = frozenset({"logLevel", "apps", "endpointEnabled", "consumerModel"})
"""``settings`` keys the host itself uses; a change to them does not rebuild providers."""

# Header names that carry credentials: a key there would sit in a settings file in clear.
_CREDENTIAL_HEADER = re.compile(
    r"^(proxy-)?authorization$|api[-_]?key|(^|[-_])(token|secret)$|^cookie$", re.IGNORECASE
)



@dataclass(frozen=True)
class ProviderEntry:
    """One validated configuration entry."""

    name: str
    """The provider's name: the prefix of its model ids and the ``detail`` VS Code shows."""
    index: int
    """Position in the configured list (for messages)."""
    provider: str | None = None
    """``package.module:Attr`` or an entry point name (Python providers)."""
    format: str | None = None
    """The upstream wire format (upstream-backed providers)."""
    base_url: str | None = None
    """The upstream's base URL."""
    api_key_env: str | None = None
    """Environment variable holding the API key."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra HTTP headers for the upstream."""
    models: list[Any] | None = None
    """Static models (ids or objects); ``None``: ask the provider / the catalog."""
    options: dict[str, Any] = field(default_factory=dict)
    """Every other field, as given."""
    allow_insecure_http: bool = False
    """Whether the key may go over plain ``http://`` to a host that is not loopback."""
    label: str | None = None
    """Where the entry comes from, for messages (``None``: ``providers[<index>]``)."""

    @property
    def where(self) -> str:
        """How messages refer to this entry."""
        return f"{self.label or f'providers[{self.index}]'} ({self.name!r})"


@dataclass
class ProviderContext:
    """What a provider factory gets besides its options."""

    name: str
    """The provider's configured name."""
    api_key: str | None = field(default=None, repr=False)
    """The API key (from SecretStorage or ``apiKeyEnv``); never log it."""
    storage_path: str | None = None
    """A directory the extension gives the host for caches (e.g. token counts)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Other ``lmbridge.*`` settings the extension sent."""
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("lmbridge.provider"))
    """Logger for the provider (goes to stderr and the output channel)."""
    network: NetworkSettings = field(default_factory=NetworkSettings)
    """VS Code's network settings (proxy, certificates) for the provider's HTTP client."""



# --------------------------------------------------------------------------- origins and keys

_DEFAULT_PORTS = {"http": 80, "https": 443}

# Query parameters that carry credentials (Google's ?key=, SAS ?sig=, ?access_token= ...).
# "api-version" (Azure) and the like are not credentials.
_CREDENTIAL_PARAM = re.compile(
    r"^(?:(?:x[-_]?)?api[-_]?key|key|(?:access|auth|id|refresh)?[-_]?token|secret"
    r"|client[-_]?secret|password|passwd|pwd|sig|signature|auth|credentials?)$",
    re.IGNORECASE,
)


def credential_param_pattern() -> str:
    """The pattern (case-insensitive) of query parameter names that carry a credential: the
    extension's Manage Models refuses the same URLs (``extension/src/credentials.ts`` is made
    from it by ``extension/scripts/credential_rule.py``)."""
    return _CREDENTIAL_PARAM.pattern


def origin_of(url: str) -> str:
    """The origin of an ``http(s)`` URL: ``scheme://host:port``, lower-cased, the port always
    written (80 / 443 by default) and IPv6 hosts in brackets. Raises :class:`ValueError` for
    anything else. The extension computes the same string (docs: PROTOCOL, "API keys").

    >>> origin_of("https://API.OpenAI.com/v1")
    'https://api.openai.com:443'
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError(f"not an http(s) URL: {scheme or 'no scheme'}")
    host = parts.hostname  # lower-cased, without brackets
    if not host:
        raise ValueError("the URL has no host")
    port = parts.port or _DEFAULT_PORTS[scheme]  # ValueError for a port out of range
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if not host.isascii():
            host = host.encode("idna").decode("ascii")  # as a browser's URL parser would
        return f"{scheme}://{host.rstrip('.')}:{port}"
    if ip.version == 6:
        return f"{scheme}://[{ip.compressed}]:{port}"
    return f"{scheme}://{ip}:{port}"


def entry_origin(entry: ProviderEntry) -> str:
    """Where an entry's key goes: the origin of its ``baseUrl``, or ``python:<reference>`` for a
    Python provider without one."""
    if entry.base_url is not None:
        return origin_of(entry.base_url)
    return f"python:{entry.provider}"



def url_credential_problem(url: str) -> str | None:
    """What credential ``url`` carries (``None`` when none), in words that never repeat it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        # brackets around no IPv6 address: urlsplit refuses the URL (and origin_of will);
        # read the raw text where a credential would be
        head, _, query = url.partition("?")
        netloc = head.split("#", 1)[0]
        has_userinfo = "@" in netloc
    else:
        netloc, query = parts.netloc, parts.query
        try:
            has_userinfo = parts.username is not None or parts.password is not None
        except ValueError:
            has_userinfo = "@" in netloc
    if has_userinfo or "@" in netloc:
        return "it carries credentials before the host ('user:password@')"
    for name, _ in parse_qsl(query.split("#", 1)[0], keep_blank_values=True):
        if _CREDENTIAL_PARAM.match(name.strip()):
            return f"its query parameter {name!r} looks like a credential"
    return None


@dataclass(frozen=True)
class StoredKey:
    """A key from the extension's SecretStorage and the origin it was stored for."""

    key: str = field(repr=False)
    """The key, as received (checked when used)."""
    origin: str | None = None
    """The origin recorded with the key (``None``: none recorded, the key is not used)."""
    bound: bool = True
    """``False`` for a plain string from a Python caller: usable by the entry of that name."""


def parse_secrets(raw: Any) -> dict[str, StoredKey]:
    """``secrets`` as sent in ``initialize``/``configure``: ``{name: {"key", "origin"}}``, or a
    plain string (not bound to an origin, for programmatic callers). Raises
    :class:`ConfigError` naming the provider whose value is malformed, never echoing a key."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("secrets: expected an object of provider name -> key")
    out: dict[str, StoredKey] = {}
    for name, value in raw.items():
        name = str(name)
        if isinstance(value, StoredKey):
            out[name] = value
        elif isinstance(value, str):
            if value:
                out[name] = StoredKey(value, None, bound=False)
        elif isinstance(value, Mapping):
            key, origin = value.get("key"), value.get("origin")
            if not isinstance(key, str) or (origin is not None and not isinstance(origin, str)):
                raise ConfigError(
                    f"secrets[{name!r}]: expected {{\"key\": string, \"origin\": string or null}}"
                )
            if key:
                out[name] = StoredKey(key, origin)
        elif value is not None:
            raise ConfigError(f"secrets[{name!r}]: expected an object or a string")
    return out


# --------------------------------------------------------------------------- entries

_COMMON = frozenset(f.name for f in PROVIDER_FIELDS if "python" in f.applies) | {"format"}
"""The fields :class:`ProviderEntry` holds itself; the others are its ``options``."""


def parse_entries(
    raw: Any, labels: Mapping[int, str] | None = None
) -> list[ProviderEntry | ConfigError]:
    """Validate a ``providers`` list entry by entry; a bad entry becomes its :class:`ConfigError`.

    ``labels`` names the source of the entries at those positions in messages (the Language
    Models editor's groups); the others are ``providers[<index>]``. An entry whose name starts
    with :data:`EDITOR_PREFIX` is refused unless it has a label: that prefix is the editor's.
    """
    labels = labels or {}
    if raw is None:
        return []
    if not isinstance(raw, list):
        return [ConfigError(f"providers: expected a list, got {type(raw).__name__}")]
    out: list[ProviderEntry | ConfigError] = []
    first: dict[str, int] = {}  # name -> position of its first entry (even a broken one)
    for i, obj in enumerate(raw):
        name = obj.get("name") if isinstance(obj, Mapping) else None
        label = labels.get(i)
        if isinstance(name, str) and name in first:
            # The first entry of a name wins; the repeat must not replace (or hide) it.
            out.append(
                ConfigError(
                    f"{label or f'providers[{i}]'} ({name!r}): the name {name!r} is already "
                    f"used by providers[{first[name]}]; give each provider its own name (it is "
                    f"the prefix of its model ids)"
                )
            )
            continue
        if isinstance(name, str):
            first[name] = i
        try:
            out.append(_parse_entry(i, obj, label))
        except ConfigError as exc:
            out.append(exc)
    return out


def _parse_entry(i: int, obj: Any, label: str | None = None) -> ProviderEntry:
    here = label or f"providers[{i}]"
    if not isinstance(obj, Mapping):
        raise ConfigError(f"{here}: expected an object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{here}.name: expected a non-empty string")
    if "/" in name:
        raise ConfigError(f"{here}.name: {name!r} must not contain '/' (model ids are name/model)")
    if label is None and name.startswith(EDITOR_PREFIX):
        raise ConfigError(
            f"{here}.name: {name!r} starts with {EDITOR_PREFIX!r}, which is kept for the "
            f"providers of VS Code's Language Models editor; choose another name"
        )
    here = f"{label or f'providers[{i}]'} ({name!r})"
    if "apiKey" in obj:
        # Keys in settings files leak (sync, screenshots, repos): refuse, and never echo it.
        raise ConfigError(
            f"{here}: 'apiKey' is not allowed in the configuration; put the key in an "
            f"environment variable and name it with 'apiKeyEnv', or store it with the "
            f"command '{SET_KEY_COMMAND}'"
        )
    provider, fmt = obj.get("provider"), obj.get("format")
    if provider is not None and fmt is not None:
        raise ConfigError(
            f"{here}: give either 'provider' (Python) or 'format' (upstream), not both"
        )
    if provider is None and fmt is None:
        raise ConfigError(
            f"{here}: needs 'provider' (\"package.module:Class\") or 'format' "
            f"({' | '.join(KNOWN_FORMATS)}) with 'baseUrl'"
        )
    if provider is not None:
        check(provider_field("provider"), provider, here)
    if fmt is not None and not isinstance(fmt, str):
        raise ConfigError(f"{here}.format: expected one of {', '.join(KNOWN_FORMATS)}")
    base_url = obj.get("baseUrl")
    if fmt is not None and not isinstance(base_url, str):
        raise ConfigError(f"{here}.baseUrl: required with 'format', e.g. https://api.openai.com/v1")
    if base_url is not None:
        if not isinstance(base_url, str):
            raise ConfigError(f"{here}.baseUrl: expected a string")
        problem = url_credential_problem(base_url)
        if problem is not None:
            # Never echo the URL: the secret part is in it.
            raise ConfigError(
                f"{here}.baseUrl: {problem}, and keys are not allowed in the configuration; "
                f"store the key with the command '{SET_KEY_COMMAND}' (it is sent as the "
                f"format's credentials, or in the header named by 'apiKeyHeader')"
            )
        try:
            origin_of(base_url)  # the key's origin comes from it
        except ValueError:
            raise ConfigError(
                f"{here}.baseUrl: {base_url!r} is not an http(s) URL with a host"
            ) from None
        check(provider_field("baseUrl"), base_url, here)
    for key in ("allowInsecureHttp", "apiKeyEnv", "headers", "models"):
        if obj.get(key) is not None:
            check(provider_field(key), obj[key], here)
    insecure = obj.get("allowInsecureHttp") is True
    key_env = obj.get("apiKeyEnv")
    headers = obj.get("headers") or {}
    for header in headers:
        if _CREDENTIAL_HEADER.search(header.strip()):
            # Same reason as apiKey above; the value is never echoed.
            raise ConfigError(
                f"{here}.headers: {header!r} carries a credential, and API keys are not "
                f"allowed in the configuration; put the key in an environment variable and "
                f"name it with 'apiKeyEnv', or store it with the command '{SET_KEY_COMMAND}'"
            )
    models = obj.get("models")
    options = {k: v for k, v in obj.items() if k not in _COMMON}
    return ProviderEntry(
        name=name,
        index=i,
        provider=provider,
        format=fmt,
        base_url=base_url,
        api_key_env=key_env,
        headers=dict(headers),
        models=models,
        options=options,
        allow_insecure_http=insecure,
        label=label,
    )
