"""Provider configuration: the ``lmbridge.providers`` list, validated and turned into providers.

The same list comes from VS Code settings (sent in ``initialize`` / ``configure``) or from
``lmbridge host --config FILE`` (JSON: the list itself or ``{"providers": [...]}``; TOML:
``[[providers]]`` tables). Two kinds of entry::

    {"name": "mine", "provider": "package.module:Class", ...its own options}
    {"name": "openai", "format": "chat-completions", "baseUrl": "https://...",
     "apiKeyEnv": "OPENAI_API_KEY", "headers": {...}, "models": [...]}

A Python provider's target is a class, a factory function or a provider instance; its other
fields are passed as keyword arguments (plus ``context=`` when the callable takes a
``context`` parameter). A target without a colon names an entry point of the group
``lmbridge.providers``; installed entry points also appear as providers of their own name.

Upstream-backed entries name a ``format`` registered in :mod:`lmbridge.formats`; they are built
by :func:`lmbridge.gateway.build_provider`, imported when the first one is loaded.

API keys come from the extension's SecretStorage (``secrets``) or from the environment variable
named by ``apiKeyEnv``, never from the configuration itself: an ``apiKey`` field is an error, and
so is a credential header in ``headers`` (``Authorization``, ``x-api-key``, ``api-key`` ...).

Names are unique: a repeated name is an error of the later entry (naming both positions), and
the first entry keeps working.

Every field (its JSON types, default, limits, the formats that read it, and its trust class) is
described once, in :mod:`lmbridge.config_fields`; the checks here and in the gateway read it.

Trust: the user's entries (user settings, a ``--config`` file) may do anything above. Entries from
a workspace's settings come separately and pass :func:`merge_workspace_entries` first: one with a
``provider`` (it would import and call code) is ignored, ``apiKeyEnv``, ``allowInsecureHttp``
and ``vertex`` (Gemini's access-token command) are removed (the trust classes of the table), and
one whose name is taken is ignored; each is reported as an :class:`IgnoredSetting`. A provider reference is checked before anything is called
(:func:`_resolve_target`): it must name a provider class, a provider instance (a ``@chat_model``
function) or a factory marked with :func:`~lmbridge.provider.provider_factory`.

Stored keys are bound to an origin (:func:`origin_of`): a key from ``secrets`` is given to an
entry only when the entry's origin (:func:`entry_origin`) is the one recorded with the key.
Otherwise the provider loads without a key and every request to it fails with ``NoPermissions``
(:attr:`LoadedProvider.key_error`), saying how to confirm the new origin. Keys are trimmed and
refused when they hold control characters; a key never goes over plain ``http://`` to a host
that is not loopback unless the (user's) entry says ``"allowInsecureHttp": true``.

Reloading (``configure``) passes the providers loaded before as ``previous``: an entry whose
configuration, API key, storage folder and (for Python providers) settings are unchanged gets
its provider back as it was, with its catalog and token estimators, instead of a new one.

Each entry loads on its own: a broken one becomes a :class:`LoadedProvider` with an ``error``
(a :class:`~lmbridge.errors.LanguageModelError` whose message says what to fix), and the others
keep working. With no entries at all, the built-in no-network ``echo`` provider is served.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import importlib.metadata
import inspect
import ipaddress
import json
import logging
import os
import re
import secrets as _secrets
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from . import formats
from .config_fields import PROVIDER_FIELDS, check, provider_field, workspace_fields
from .errors import ConfigError, LanguageModelError
from .network import NetworkSettings
from .provider import LanguageModelChatProvider, is_provider_factory

__all__ = [
    "DEFAULT_PROVIDERS",
    "ENTRY_POINT_GROUP",
    "HOST_SETTINGS",
    "KNOWN_FORMATS",
    "IgnoredSetting",
    "LoadedProvider",
    "ProviderContext",
    "ProviderEntry",
    "StoredKey",
    "entry_origin",
    "is_loopback_host",
    "load_config_file",
    "load_providers",
    "merge_workspace_entries",
    "origin_of",
    "parse_entries",
    "parse_secrets",
    "url_credential_problem",
]

_log = logging.getLogger("lmbridge.config")

ENTRY_POINT_GROUP = "lmbridge.providers"
"""Entry point group under which packages publish providers."""

KNOWN_FORMATS = formats.names()
"""The upstream wire formats lmbridge knows (the registrations of :mod:`lmbridge.formats`)."""

DEFAULT_PROVIDERS: list[dict[str, Any]] = [
    {"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider"}
]
"""What is served when the configuration lists no provider: a model that needs no network."""

SET_KEY_COMMAND = "lmbridge: Set API Key"
CONFIRM_ORIGIN_COMMAND = "lmbridge: Confirm API Key Origin"
PROVIDERS_SETTING = "lmbridge.providers"

HOST_SETTINGS = frozenset({"logLevel", "apps", "endpointEnabled", "consumerModel"})
"""``settings`` keys the host itself uses; a change to them does not rebuild providers."""

# Header names that carry credentials: a key there would sit in a settings file in clear.
_CREDENTIAL_HEADER = re.compile(
    r"^(proxy-)?authorization$|api[-_]?key|(^|[-_])(token|secret)$|^cookie$", re.IGNORECASE
)

# Fingerprints mix the API key in through an HMAC with a key of this process only, so a
# fingerprint says nothing about the API key to anyone who sees it.
_FINGERPRINT_KEY = _secrets.token_bytes(32)


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

    @property
    def where(self) -> str:
        """How messages refer to this entry."""
        return f"providers[{self.index}] ({self.name!r})"


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


@dataclass
class LoadedProvider:
    """A configured provider, or why it could not be loaded."""

    name: str
    """The provider's name."""
    provider: LanguageModelChatProvider | None
    """The provider, when it loaded."""
    error: LanguageModelError | None = None
    """Why it did not: the error of every request to it."""
    entry: ProviderEntry | None = None
    """The entry it came from (``None`` when the entry itself was unreadable)."""
    fingerprint: str | None = field(default=None, repr=False, compare=False)
    """What the provider was built from (entry, key, storage, settings), as an opaque digest:
    equal fingerprints mean a reload may keep the provider."""
    key_error: LanguageModelError | None = None
    """Why the provider got no key although one is stored (another origin, a key that is not
    valid, plain http): it loads, and every chat request to it fails with this."""

    @property
    def ok(self) -> bool:
        """Whether the provider loaded."""
        return self.provider is not None


# --------------------------------------------------------------------------- files


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read the providers from a ``.json`` or ``.toml`` file: the same list as the
    ``lmbridge.providers`` setting, bare (JSON ``[...]``) or as ``{"providers": [...]}``
    (TOML: ``[[providers]]`` tables, TOML has no bare lists). Returns ``{"providers": [...],
    ...}`` either way.

    A file without a suffix is sniffed (``{`` or ``[`` starts JSON, else TOML); any other
    suffix (``.yaml`` ...) is an error saying which types are read.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in ("", ".json", ".toml"):
        raise ConfigError(
            f"{p}: {suffix!r} files are not read; use a .json or .toml file (JSON: the "
            f'providers list or {{"providers": [...]}}; TOML: [[providers]] tables)'
        )
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the configuration file {p}: {exc.strerror or exc}") from exc
    as_toml = suffix == ".toml" or (suffix != ".json" and not text.lstrip().startswith(("{", "[")))
    try:
        data: Any = _toml_loads(text) if as_toml else json.loads(text)
    except ValueError as exc:
        kind = "TOML" if as_toml else "JSON"
        hint = "" if suffix else " (a file without a suffix is read as JSON or TOML)"
        raise ConfigError(f"{p}: not valid {kind}{hint}: {exc}") from exc
    if isinstance(data, list):
        return {"providers": data}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected the providers list, or an object with a 'providers' list")
    providers = data.get("providers", [])
    if not isinstance(providers, list):
        raise ConfigError(f"{p}: 'providers' must be a list, got {type(providers).__name__}")
    return data


def _toml_loads(text: str) -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
    return tomllib.loads(text)


# --------------------------------------------------------------------------- origins and keys

_DEFAULT_PORTS = {"http": 80, "https": 443}

# Query parameters that carry credentials (Google's ?key=, SAS ?sig=, ?access_token= ...).
# "api-version" (Azure) and the like are not credentials.
_CREDENTIAL_PARAM = re.compile(
    r"^(?:(?:x[-_]?)?api[-_]?key|key|(?:access|auth|id|refresh)?[-_]?token|secret"
    r"|client[-_]?secret|password|passwd|pwd|sig|signature|auth|credentials?)$",
    re.IGNORECASE,
)


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


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address, brackets allowed) is this machine."""
    host = host.strip("[]").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_credential_problem(url: str) -> str | None:
    """What credential ``url`` carries (``None`` when none), in words that never repeat it."""
    parts = urlsplit(url)
    try:
        has_userinfo = parts.username is not None or parts.password is not None
    except ValueError:
        has_userinfo = "@" in parts.netloc
    if has_userinfo or "@" in parts.netloc:
        return "it carries credentials before the host ('user:password@')"
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
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


def _clean_key(name: str, key: str, source: str) -> str:
    # Trim; refuse what cannot be a key. The message names the provider, never the key.
    key = key.strip()
    if not key:
        raise LanguageModelError.no_permissions(
            f"provider {name!r}: the API key {source} is empty; store it again with the command "
            f"'{SET_KEY_COMMAND}'"
        )
    if any(ch < " " or "\x7f" <= ch <= "\x9f" or ch in "\u2028\u2029" for ch in key):
        raise LanguageModelError.no_permissions(
            f"provider {name!r}: the API key {source} contains control characters (a line "
            f"break, NUL ...) and is not used; store it again with the command "
            f"'{SET_KEY_COMMAND}'"
        )
    return key


# --------------------------------------------------------------------------- workspace entries


@dataclass(frozen=True)
class IgnoredSetting:
    """A part of a workspace's configuration the host did not honour, and why."""

    name: str | None
    """The entry's name (``None`` when it has none)."""
    field: str | None
    """``provider``, ``apiKeyEnv``, ``allowInsecureHttp``, ``vertex``, ``name``; ``None`` for an entry."""
    value: str
    """The ignored value, shortened (names and references only; never a key)."""
    reason: str
    """One sentence saying why."""
    setting: str = PROVIDERS_SETTING
    """The setting it came from."""

    def to_wire(self) -> dict[str, Any]:
        """The item of ``initialize``/``configure``'s ``ignored`` list."""
        return {
            "setting": self.setting,
            "name": self.name,
            "field": self.field,
            "value": self.value,
            "reason": self.reason,
        }

    def __str__(self) -> str:
        where = f"{self.setting} entry {self.name!r}" if self.name else self.setting
        what = f"{self.field} = {self.value}" if self.field else self.value
        return f"ignored from the workspace settings: {where}: {what}: {self.reason}"


def _short_value(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_WORKSPACE_REASONS = {
    "name": "a provider of this name is already configured (user settings win, and a name is "
    "used once)",
    **{f.name: f.workspace_reason for f in PROVIDER_FIELDS if f.workspace != "honoured"},
}
# The trust classes of :mod:`lmbridge.config_fields`: fields whose presence drops a workspace's
# entry (``provider``), and fields removed from it (``apiKeyEnv``, ``allowInsecureHttp``, ``vertex``).
_WORKSPACE_DROPS_ENTRY = workspace_fields("entry-ignored")
_WORKSPACE_REMOVED = workspace_fields("removed")


def merge_workspace_entries(
    user: Any, workspace: Any
) -> tuple[list[Any], list[IgnoredSetting]]:
    """The user's entries followed by what a workspace may add, and what it may not.

    Pure. A workspace entry with ``provider`` (a Python reference: it would import and call
    code) is ignored; ``apiKeyEnv`` (it could send any environment variable),
    ``allowInsecureHttp`` and ``vertex`` (it would send the token of the user's Vertex AI
    token command) are removed from it; one whose name a user entry (or an earlier
    workspace entry) has is ignored, so a workspace can never take over a user's provider or
    its stored key. Malformed entries pass through to be reported by :func:`parse_entries`.
    """
    merged: list[Any] = list(user) if isinstance(user, list) else ([] if user is None else [user])
    ignored: list[IgnoredSetting] = []
    if workspace is None:
        return merged, ignored
    if not isinstance(workspace, list):
        ignored.append(
            IgnoredSetting(None, None, _short_value(workspace), "expected a list of providers")
        )
        return merged, ignored
    taken = {
        e["name"] for e in merged if isinstance(e, Mapping) and isinstance(e.get("name"), str)
    }
    for obj in workspace:
        if not isinstance(obj, Mapping):
            merged.append(obj)
            continue
        name = obj.get("name")
        label = name if isinstance(name, str) else None
        dropping = next((k for k in _WORKSPACE_DROPS_ENTRY if k in obj), None)
        whole = dropping if dropping is not None else "name" if label in taken else None
        if whole is not None:  # the entry goes entirely
            ignored.append(
                IgnoredSetting(label, whole, _short_value(obj[whole]), _WORKSPACE_REASONS[whole])
            )
            continue
        entry = dict(obj)
        for key in _WORKSPACE_REMOVED:  # the entry stays without them
            if key in entry:
                value = _short_value(entry.pop(key))
                ignored.append(IgnoredSetting(label, key, value, _WORKSPACE_REASONS[key]))
        if label is not None:
            taken.add(label)
        merged.append(entry)
    return merged, ignored


# --------------------------------------------------------------------------- entries

_COMMON = frozenset(f.name for f in PROVIDER_FIELDS if "python" in f.applies) | {"format"}
"""The fields :class:`ProviderEntry` holds itself; the others are its ``options``."""


def parse_entries(raw: Any) -> list[ProviderEntry | ConfigError]:
    """Validate a ``providers`` list entry by entry; a bad entry becomes its :class:`ConfigError`."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        return [ConfigError(f"providers: expected a list, got {type(raw).__name__}")]
    out: list[ProviderEntry | ConfigError] = []
    first: dict[str, int] = {}  # name -> position of its first entry (even a broken one)
    for i, obj in enumerate(raw):
        name = obj.get("name") if isinstance(obj, Mapping) else None
        if isinstance(name, str) and name in first:
            # The first entry of a name wins; the repeat must not replace (or hide) it.
            out.append(
                ConfigError(
                    f"providers[{i}] ({name!r}): the name {name!r} is already used by "
                    f"providers[{first[name]}]; give each provider its own name (it is the "
                    f"prefix of its model ids)"
                )
            )
            continue
        if isinstance(name, str):
            first[name] = i
        try:
            out.append(_parse_entry(i, obj))
        except ConfigError as exc:
            out.append(exc)
    return out


def _parse_entry(i: int, obj: Any) -> ProviderEntry:
    here = f"providers[{i}]"
    if not isinstance(obj, Mapping):
        raise ConfigError(f"{here}: expected an object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{here}.name: expected a non-empty string")
    if "/" in name:
        raise ConfigError(f"{here}.name: {name!r} must not contain '/' (model ids are name/model)")
    here = f"providers[{i}] ({name!r})"
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
    )


# --------------------------------------------------------------------------- loading


def load_providers(
    raw: Any,
    *,
    secrets: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    storage_path: str | None = None,
    settings: Mapping[str, Any] | None = None,
    entry_points: bool = True,
    previous: Iterable[LoadedProvider] = (),
    network: NetworkSettings | None = None,
) -> list[LoadedProvider]:
    """Load every configured provider (plus installed entry points); failures are isolated.

    ``raw`` is the ``providers`` list (the user's, merged with a workspace's by
    :func:`merge_workspace_entries`); empty or missing means :data:`DEFAULT_PROVIDERS`.
    ``secrets`` maps provider names to :class:`StoredKey` or the wire form :func:`parse_secrets`
    reads (a plain string: a key not bound to an origin). ``previous`` are the providers loaded
    before (on a reload): an entry whose fingerprint is unchanged gets the same provider object
    back, not a new one. A repeated name yields an error entry under that name after the first
    one's; callers keep the first of a name. ``network`` (VS Code's proxy and certificate
    settings) reaches every provider's context; a change rebuilds the providers.
    """
    stored = parse_secrets(secrets)
    network = network or NetworkSettings()
    environ = os.environ if environ is None else environ
    settings = dict(settings or {})
    if raw is None or raw == []:
        raw = DEFAULT_PROVIDERS
    before = {p.name: p for p in previous if p.provider is not None and p.fingerprint}
    loaded: list[LoadedProvider] = []
    names: set[str] = set()
    for item in parse_entries(raw):
        if isinstance(item, ConfigError):
            name = _name_of(str(item))
            names.add(name)
            loaded.append(LoadedProvider(name, None, LanguageModelError(str(item))))
            continue
        names.add(item.name)
        loaded.append(_load_entry(item, stored, environ, storage_path, settings, before, network))
    if entry_points:
        for ep in _entry_points():
            if ep.name in names or "/" in ep.name:
                continue
            entry = ProviderEntry(name=ep.name, index=len(loaded), provider=ep.name)
            loaded.append(
                _load_entry(entry, stored, environ, storage_path, settings, before, network)
            )
    return loaded


def _name_of(message: str) -> str:
    # "providers[2] ('x'): ..." -> "x"; entries without a readable name get their position
    start = message.find("('")
    end = message.find("')", start)
    if start >= 0 and end > start:
        return message[start + 2 : end]
    return message.split(":", 1)[0].split(".", 1)[0].split(" ", 1)[0]


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    try:
        return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # a broken distribution's metadata must not stop the host
        _log.exception("reading the %s entry points failed", ENTRY_POINT_GROUP)
        return []


def _load_entry(
    entry: ProviderEntry,
    secrets: Mapping[str, StoredKey],
    environ: Mapping[str, str],
    storage_path: str | None,
    settings: dict[str, Any],
    before: Mapping[str, LoadedProvider],
    network: NetworkSettings,
) -> LoadedProvider:
    try:
        api_key, key_error = _api_key(entry, secrets, environ)  # the host reports key_error
        fingerprint = _fingerprint(entry, api_key, storage_path, settings, network)
        kept = before.get(entry.name)
        if kept is not None and kept.fingerprint == fingerprint:
            return LoadedProvider(
                entry.name, kept.provider, None, entry, fingerprint, key_error=key_error
            )
        context = ProviderContext(
            name=entry.name,
            api_key=api_key,
            storage_path=storage_path,
            settings=settings,
            log=logging.getLogger(f"lmbridge.provider.{entry.name}"),
            network=network,
        )
        if entry.format is not None:
            provider = _build_upstream(entry, context)
        else:
            provider = _build_python(entry, context)
        return LoadedProvider(entry.name, provider, None, entry, fingerprint, key_error=key_error)
    except LanguageModelError as exc:
        return LoadedProvider(entry.name, None, exc, entry)
    except ConfigError as exc:
        return LoadedProvider(entry.name, None, LanguageModelError(str(exc)), entry)


def _fingerprint(
    entry: ProviderEntry,
    api_key: str | None,
    storage_path: str | None,
    settings: Mapping[str, Any],
    network: NetworkSettings,
) -> str:
    # Everything a provider is built from. The position is left out (moving an entry changes
    # nothing), and so are the host's own settings; upstream-backed providers read no settings.
    shape = {
        "name": entry.name,
        "provider": entry.provider,
        "format": entry.format,
        "baseUrl": entry.base_url,
        "apiKeyEnv": entry.api_key_env,
        "headers": entry.headers,
        "models": entry.models,
        "options": entry.options,
        "allowInsecureHttp": entry.allow_insecure_http,
        "storage": storage_path,
        "network": network.to_wire(),
        "settings": None
        if entry.format is not None
        else {k: v for k, v in settings.items() if k not in HOST_SETTINGS},
    }
    text = json.dumps(shape, sort_keys=True, default=repr)
    mac = hmac.new(_FINGERPRINT_KEY, text.encode("utf-8"), hashlib.sha256)
    mac.update(b"\0key\0" + (api_key or "").encode("utf-8") + (b"\1" if api_key else b"\0"))
    return mac.hexdigest()


def _api_key(
    entry: ProviderEntry, secrets: Mapping[str, StoredKey], environ: Mapping[str, str]
) -> tuple[str | None, LanguageModelError | None]:
    """The entry's key, or why a stored key is withheld (the provider then loads without one).

    Raises (the entry does not load) only when ``apiKeyEnv`` names a variable that is not set.
    """
    origin = entry_origin(entry)
    problem: LanguageModelError | None = None
    key: str | None = None
    stored = secrets.get(entry.name)
    if stored is not None:
        try:
            cleaned = _clean_key(entry.name, stored.key, "stored in VS Code")
        except LanguageModelError as exc:
            problem = exc
        else:
            if not stored.bound or stored.origin == origin:
                key = cleaned
            else:
                problem = _origin_changed(entry.name, stored.origin, origin)
    if key is None and entry.api_key_env:
        value = environ.get(entry.api_key_env)
        if value:
            try:
                key = _clean_key(entry.name, value, f"in {entry.api_key_env} (apiKeyEnv)")
            except LanguageModelError as exc:
                problem = exc
        elif problem is None:
            raise LanguageModelError.no_permissions(
                f"provider {entry.name!r}: no API key: the environment variable "
                f"{entry.api_key_env} (apiKeyEnv) is not set for the host; set it and restart, "
                f"or store a key with the command '{SET_KEY_COMMAND}'"
            )
    if key is not None and not entry.allow_insecure_http:
        parts = urlsplit(origin)
        if parts.scheme == "http" and not is_loopback_host(parts.hostname or ""):
            return None, LanguageModelError.no_permissions(
                f"provider {entry.name!r}: the API key is not sent over plain http to "
                f"{parts.hostname}, which is not this machine; use an https baseUrl, or set "
                f'"allowInsecureHttp": true in the provider\'s entry in your user settings'
            )
    return key, (None if key is not None else problem)


def _origin_changed(name: str, recorded: str | None, origin: str) -> LanguageModelError:
    was = (
        f"was stored for {recorded}"
        if recorded
        else "has no recorded origin (it was stored by an older version)"
    )
    return LanguageModelError.no_permissions(
        f"provider {name!r}: the stored API key {was}, but the provider now points to {origin}, "
        f"so the key is not sent; if {origin} is right, run the command "
        f"'{CONFIRM_ORIGIN_COMMAND}' to use the key there"
    )


def _build_upstream(entry: ProviderEntry, context: ProviderContext) -> LanguageModelChatProvider:
    assert entry.format is not None
    if entry.format not in KNOWN_FORMATS:
        raise ConfigError(
            f"{entry.where}.format: unknown format {entry.format!r}; use one of "
            f"{', '.join(KNOWN_FORMATS)}"
        )
    # An explicit lookup, here rather than at import: the HTTP stack loads only when needed.
    from .gateway import build_provider

    try:
        return build_provider(entry, context)
    except (ConfigError, LanguageModelError):
        raise
    except Exception as exc:
        _log.exception("building provider %r failed", entry.name)
        raise ConfigError(f"{entry.where}: {type(exc).__name__}: {exc}") from exc


_ACCEPTED = (
    "a LanguageModelChatProvider subclass, a provider instance (e.g. a @chat_model function) "
    "or a factory marked with @lmbridge.provider_factory"
)


def _resolve_target(entry: ProviderEntry) -> Any:
    """The object an entry's ``provider`` names, checked to be a provider, a provider class or
    a marked factory before anything is called (``os:system`` is refused, not run)."""
    target = entry.provider
    assert target is not None
    if ":" not in target:
        for ep in _entry_points():
            if ep.name == target:
                try:
                    obj = ep.load()
                except Exception as exc:
                    raise ConfigError(
                        f"{entry.where}.provider: loading entry point {target!r} ({ep.value}) "
                        f"failed: {type(exc).__name__}: {exc}"
                    ) from exc
                return _checked_target(entry, f"entry point {target!r} ({ep.value})", obj)
        raise ConfigError(
            f'{entry.where}.provider: {target!r} is neither "package.module:Class" nor an '
            f"installed '{ENTRY_POINT_GROUP}' entry point"
        )
    module_name, _, attr = target.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"{entry.where}.provider: cannot import {module_name!r} ({exc}); is the package "
            f"installed in the Python that runs the host ({sys.executable})?"
        ) from exc
    except Exception as exc:
        _log.exception("importing %s failed", module_name)
        raise ConfigError(
            f"{entry.where}.provider: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    for piece in attr.split("."):
        try:
            obj = getattr(obj, piece)
        except AttributeError:
            raise ConfigError(
                f"{entry.where}.provider: {module_name!r} has no attribute {attr!r}"
            ) from None
    return _checked_target(entry, repr(target), obj)


def _checked_target(entry: ProviderEntry, what: str, obj: Any) -> Any:
    if isinstance(obj, type):
        if issubclass(obj, LanguageModelChatProvider) or is_provider_factory(obj):
            return obj
    elif _is_provider(obj) or is_provider_factory(obj):
        return obj
    kind = f"class {obj.__qualname__}" if isinstance(obj, type) else type(obj).__name__
    raise ConfigError(
        f"{entry.where}.provider: {what} is not a provider (it is a {kind}); expected "
        f"{_ACCEPTED}; nothing was called"
    )


def _build_python(entry: ProviderEntry, context: ProviderContext) -> LanguageModelChatProvider:
    target = _resolve_target(entry)
    options = dict(entry.options)
    if entry.models is not None:
        options["models"] = entry.models
    if entry.base_url is not None:
        options["baseUrl"] = entry.base_url
    if entry.headers:
        options["headers"] = entry.headers
    if _is_provider(target):
        if options:
            raise ConfigError(
                f"{entry.where}: {entry.provider!r} is a provider instance and takes no options "
                f"(got {', '.join(sorted(options))})"
            )
        return target  # type: ignore[no-any-return]
    kwargs = dict(options)
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        sig = None
    if sig is not None:
        if "context" in sig.parameters:
            kwargs["context"] = context
        try:
            sig.bind(**kwargs)
        except TypeError as exc:
            raise ConfigError(
                f"{entry.where}: the options do not fit {entry.provider}: {exc}"
            ) from None
    try:
        made = target(**kwargs)
    except (ConfigError, LanguageModelError):
        raise
    except Exception as exc:
        _log.exception("creating provider %r failed", entry.name)
        raise ConfigError(
            f"{entry.where}: creating {entry.provider} failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not _is_provider(made):
        raise ConfigError(
            f"{entry.where}: {entry.provider} made a {type(made).__name__}, not a provider "
            f"(it needs provide_language_model_chat_information and "
            f"provide_language_model_chat_response)"
        )
    return made  # type: ignore[no-any-return]


def _is_provider(obj: Any) -> bool:
    if isinstance(obj, type):
        return False
    return isinstance(obj, LanguageModelChatProvider) or (
        callable(getattr(obj, "provide_language_model_chat_response", None))
        and callable(getattr(obj, "provide_language_model_chat_information", None))
    )
