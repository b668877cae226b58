"""Provider configuration: the entries of every source, loaded into providers.

The layers, from the bottom: the description of an entry (:mod:`lmbridge.entries` with its
fields and trust classes in :mod:`lmbridge.config_fields` and the wire formats in
:mod:`lmbridge.formats`); the sources, which only produce entries (:mod:`lmbridge.sources`: the
``lmbridge.providers`` setting as VS Code sends it in ``initialize`` / ``configure``, and
``lmbridge host --config FILE``); the gateway, which builds upstream-backed providers from an
entry; and this module, which loads the entries of every source through the gateway or as
Python providers. The names of the lower modules are re-exported here for existing imports.
Two kinds of entry::

    {"name": "mine", "provider": "package.module:Class", ...its own options}
    {"name": "openai", "format": "chat-completions", "baseUrl": "https://...",
     "apiKeyEnv": "OPENAI_API_KEY", "headers": {...}, "models": [...]}

A Python provider's target is a class, a factory function or a provider instance; its other
fields are passed as keyword arguments (plus ``context=`` when the callable takes a
``context`` parameter). A target without a colon names an entry point of the group
``lmbridge.providers``; installed entry points also appear as providers of their own name.

Upstream-backed entries name a ``format`` registered in :mod:`lmbridge.formats`; they are built
by :func:`lmbridge.gateway.build_provider`.

API keys come from the extension's SecretStorage (``secrets``) or from the environment variable
named by ``apiKeyEnv``, never from the configuration itself: an ``apiKey`` field is an error, and
so is a credential header in ``headers`` (``Authorization``, ``x-api-key``, ``api-key`` ...).

Names are unique: a repeated name is an error of the later entry (naming both positions), and
the first entry keeps working.

Every field (its JSON types, default, limits, the formats that read it, and its trust class) is
described once, in :mod:`lmbridge.config_fields`; the checks of :mod:`lmbridge.entries` and the
gateway read it.

Trust: the user's entries (user settings, a ``--config`` file) may do anything above. Entries from
a workspace's settings come separately and pass
:func:`~lmbridge.sources.settings.merge_workspace_entries` first: one with a
``provider`` (it would import and call code) is ignored, ``apiKeyEnv``, ``allowInsecureHttp``
and ``vertex`` (Gemini's access-token command) are removed (the trust classes of the table), and
one whose name is taken is ignored; each is reported as an :class:`IgnoredSetting`. A provider
reference is checked before anything is called
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
import importlib.machinery
import inspect
import json
import logging
import os
import secrets as _secrets
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import importlib.metadata

from . import gateway  # its modules load when a first entry needs one (lmbridge._lazy)
from .entries import (
    CONFIRM_ORIGIN_COMMAND,
    DEFAULT_PROVIDERS,
    EDITOR_PREFIX,
    ENTRY_POINT_GROUP,
    HOST_SETTINGS,
    KNOWN_FORMATS,
    SET_KEY_COMMAND,
    ProviderContext,
    ProviderEntry,
    StoredKey,
    entry_origin,
    origin_of,
    parse_entries,
    parse_secrets,
    url_credential_problem,
)
from .errors import ConfigError, LanguageModelError
from .network import NetworkSettings, is_loopback_host
from .provider import LanguageModelChatProvider, is_provider_factory
from .sources.settings import IgnoredSetting, load_config_file, merge_workspace_entries

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

# Fingerprints mix the API key in through an HMAC with a key of this process only, so a
# fingerprint says nothing about the API key to anyone who sees it.
_FINGERPRINT_KEY = _secrets.token_bytes(32)


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
    labels: Mapping[int, str] | None = None,
) -> list[LoadedProvider]:
    """Load every configured provider (plus installed entry points); failures are isolated.

    ``raw`` is the ``providers`` list (the user's, merged with a workspace's by
    :func:`merge_workspace_entries`); empty or missing means :data:`DEFAULT_PROVIDERS`.
    ``secrets`` maps provider names to :class:`StoredKey` or the wire form :func:`parse_secrets`
    reads (a plain string: a key not bound to an origin). ``previous`` are the providers loaded
    before (on a reload): an entry whose fingerprint is unchanged gets the same provider object
    back, not a new one. A repeated name yields an error entry under that name after the first
    one's; callers keep the first of a name. ``network`` (VS Code's proxy and certificate
    settings) reaches every provider's context; a change rebuilds the providers. ``labels``
    names another source than ``providers[i]`` for the entries at those positions (see
    :func:`~lmbridge.entries.parse_entries`).
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
    for item in parse_entries(raw, labels):
        if isinstance(item, ConfigError):
            name = _name_of(str(item))
            names.add(name)
            loaded.append(LoadedProvider(name, None, LanguageModelError(str(item))))
            continue
        names.add(item.name)
        loaded.append(_load_entry(item, stored, environ, storage_path, settings, before, network))
    if entry_points:
        for ep in _entry_points():
            if ep.name in names or "/" in ep.name or ep.name.startswith(EDITOR_PREFIX):
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
    # Read at every initialize and configure, on the path VS Code waits for at each start:
    # importlib.metadata costs about as much to import as to read every installed
    # distribution's metadata, and almost always finds no entry point of the group. A quick
    # look at the entry_points.txt files on sys.path says whether one may be there.
    if not _may_declare_entry_points():
        return []
    import importlib.metadata

    try:
        return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # a broken distribution's metadata must not stop the host
        _log.exception("reading the %s entry points failed", ENTRY_POINT_GROUP)
        return []


def _may_declare_entry_points() -> bool:
    """False only when no distribution importlib.metadata would find can declare an entry
    point of :data:`ENTRY_POINT_GROUP`: every distribution is a ``*.dist-info`` or
    ``*.egg-info`` folder in a folder on ``sys.path`` and no ``entry_points.txt`` of theirs
    names the group. True whenever anything else is found (a zip file or an egg on the path,
    a meta path finder of another kind that finds distributions, an unreadable file)."""
    for finder in sys.meta_path:
        if hasattr(finder, "find_distributions") and finder is not importlib.machinery.PathFinder:
            return True
    group = ENTRY_POINT_GROUP.encode()
    for entry in sys.path:
        folder = entry or "."
        if folder.endswith(".egg"):
            return True
        try:
            with os.scandir(folder) as names:
                metadata = [
                    n.path
                    for n in names
                    if n.name.lower().endswith((".dist-info", ".egg-info")) and n.is_dir()
                ]
        except NotADirectoryError:
            return True  # a zip file on the path
        except OSError:
            continue  # no such folder: nothing found there
        for path in metadata:
            try:
                with open(os.path.join(path, "entry_points.txt"), "rb") as f:
                    if group in f.read():
                        return True
            except FileNotFoundError:
                continue
            except OSError:
                return True
    return False


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
    try:
        return gateway.build_provider(entry, context)
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
        missing = exc.name or module_name
        if missing != module_name and not module_name.startswith(f"{missing}."):
            raise ConfigError(
                f"{entry.where}.provider: importing {module_name!r} failed: it needs "
                f"{missing!r}, which is not installed in the Python that runs the host "
                f"({sys.executable})"
            ) from exc
        raise ConfigError(
            f"{entry.where}.provider: cannot import {module_name!r} ({exc}). The host looks "
            f"modules up in the Python that runs it ({sys.executable}): its installed packages "
            f"and PYTHONPATH, and, only for `lmbridge host --config`, `chat` and `check` run "
            f"from a terminal, the current folder last (the host VS Code starts never looks in "
            f"a workspace folder); install the package or add its folder to PYTHONPATH"
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
