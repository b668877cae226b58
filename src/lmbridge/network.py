"""VS Code's network settings, as the host's HTTP client applies them (no I/O here).

The extension sends them in ``initialize`` / ``configure`` as ``network``::

    {"proxy": str | null, "proxyStrictSSL": bool, "noProxy": [str], "systemCertificates": bool}

from ``http.proxy``, ``http.proxyStrictSSL``, ``http.noProxy`` and ``http.systemCertificates``,
which VS Code registers as application-scoped (machine-scoped in a remote window) and
restricted settings: a workspace cannot set them. Absent fields (or no ``network`` at all) mean
VS Code's defaults: no proxy beyond the environment's (``HTTPS_PROXY``, ``HTTP_PROXY``,
``ALL_PROXY`` with ``NO_PROXY``), certificates verified, the system's certificate store used.

Which requests go through the proxy (:meth:`NetworkSettings.bypasses`): never one to this
machine (loopback names and addresses); not one whose host matches ``noProxy`` the way VS Code
matches it (``example.com`` and ``.example.com`` match the host and every subdomain,
``*.example.com`` too, ``host:port`` only that port, ``*`` everything); every other one. An
``https`` request goes through the proxy as a ``CONNECT`` tunnel: the proxy sees the host name
and port, never the headers (the API key) or the body.

SOCKS5 proxies (``socks5://``, ``socks5h://``, and ``socks://`` as VS Code takes it) are
followed too (httpx with ``socksio``; the proxy resolves the names). A proxy setting that
cannot be followed (SOCKS4, a URL without a host ...) is no error that would take every
provider down: :attr:`NetworkSettings.problem` says why, the host reports it once, and requests
go as without the setting.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .errors import ConfigError

__all__ = ["NetworkSettings", "is_loopback_host", "no_proxy_matches", "redact_proxy"]

_PROXY_SCHEMES = {"http": "http", "https": "https", "socks5": "socks5", "socks5h": "socks5h",
                  "socks": "socks5h"}  # fmt: skip
"""The proxy URL schemes taken, and what each is to httpx: ``socks://`` is SOCKS5 with the
name resolved by the proxy, as VS Code's own proxy agent takes it."""


@dataclass(frozen=True)
class NetworkSettings:
    """The network settings the host's HTTP client follows."""

    proxy: str | None = None
    """The proxy URL (``http://``, ``https://``, ``socks5://``, ``socks5h://``; credentials
    allowed); ``None``: the environment's."""
    proxy_strict_ssl: bool = True
    """``False``: certificates are not verified (VS Code's ``http.proxyStrictSSL``: for a
    TLS-inspecting proxy whose certificate is not trusted)."""
    no_proxy: tuple[str, ...] = ()
    """Hosts that do not go through the proxy (VS Code's ``http.noProxy`` entries)."""
    system_certificates: bool = True
    """Verify against the operating system's certificate store (``truststore``) rather than
    the bundled one (``certifi``)."""
    problem: str | None = field(default=None, compare=False)
    """Why the ``proxy`` setting could not be followed (a SOCKS4 proxy, a URL without a
    host ...): it is then left out, requests go as without it, and the host reports this
    once. One unusable setting must not take every provider down."""

    @classmethod
    def from_wire(cls, raw: Any) -> NetworkSettings:
        """Parse ``network`` from ``initialize``/``configure``; ``None`` gives the defaults.

        Raises :class:`ConfigError` naming the field (a proxy URL's credentials never appear
        in a message); a ``proxy`` that cannot be followed is not an error but
        :attr:`problem`.
        """
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise ConfigError("network: expected an object")
        proxy, problem = _proxy(raw.get("proxy"))
        flags: dict[str, bool] = {}
        for key, default in (("proxyStrictSSL", True), ("systemCertificates", True)):
            value = raw.get(key, default)
            if value is None:
                value = default
            if not isinstance(value, bool):
                raise ConfigError(f"network.{key}: expected true or false, got {value!r}")
            flags[key] = value
        no_proxy = raw.get("noProxy") or []
        if not isinstance(no_proxy, Sequence) or isinstance(no_proxy, str):
            raise ConfigError("network.noProxy: expected a list of host names")
        if not all(isinstance(item, str) for item in no_proxy):
            raise ConfigError("network.noProxy: expected a list of host names")
        return cls(
            proxy=proxy,
            proxy_strict_ssl=flags["proxyStrictSSL"],
            no_proxy=tuple(item.strip().lower() for item in no_proxy if item.strip()),
            system_certificates=flags["systemCertificates"],
            problem=problem,
        )

    def to_wire(self) -> dict[str, Any]:
        """The wire form (what :meth:`from_wire` reads)."""
        return {
            "proxy": self.proxy,
            "proxyStrictSSL": self.proxy_strict_ssl,
            "noProxy": list(self.no_proxy),
            "systemCertificates": self.system_certificates,
        }

    def bypasses(self, host: str, port: int) -> bool:
        """Whether a request to ``host:port`` skips the configured proxy (module notes)."""
        return is_loopback_host(host) or no_proxy_matches(self.no_proxy, host, port)


def _proxy(raw: Any) -> tuple[str | None, str | None]:
    """The proxy URL to use from the ``proxy`` setting, or ``None`` and why it cannot be."""
    if raw is not None and not isinstance(raw, str):
        return None, _unusable("is not a URL string")
    proxy = (raw or "").strip()
    if not proxy:
        return None, None
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    scheme = _PROXY_SCHEMES.get(parts.scheme.lower())
    if scheme is None:
        return None, _unusable(
            f"{parts.scheme!r} proxies are not supported (http://, https://, socks5:// and "
            f"socks5h:// are)"
        )
    try:
        host, _ = parts.hostname, parts.port
    except ValueError:
        host = None
    if not host:
        return None, _unusable(
            f"{redact_proxy(proxy)!r} is not a URL such as http://proxy.example.com:8080"
        )
    return parts._replace(scheme=scheme).geturl(), None


def _unusable(why: str) -> str:
    return (
        f"network.proxy (VS Code's http.proxy): {why}; lmbridge's requests go without it "
        f"(through the environment's proxy, if any)"
    )


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address, brackets allowed) is this machine: a loopback
    address, or the name ``localhost``.

    Only names every resolver keeps on this machine count. RFC 6761 asks resolvers to answer
    ``*.localhost`` with loopback too, but many do not (glibc without ``nss-myhostname``, for
    one, asks the DNS server, and so does any resolver that forwards unknown names), so
    ``name.localhost`` may reach another machine: it is treated as any other host."""
    host = host.strip("[]").lower().rstrip(".")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def no_proxy_matches(entries: Sequence[str], host: str, port: int) -> bool:
    """VS Code's ``http.noProxy`` matching: ``*`` matches every host; ``name`` or ``.name``
    (``*.name`` too) matches ``name`` and its subdomains; ``name:port`` only that port."""
    host = host.strip("[]").lower().rstrip(".")
    for raw in entries:
        entry = raw.strip().lower()
        if entry == "*":
            return True
        name, _, want_port = entry.partition(":")
        if name.startswith("*."):
            name = name[1:]
        name = name.rstrip(".")
        if not name or name == ".":
            continue
        domain = name if name.startswith(".") else f".{name}"
        if f".{host}".endswith(domain) and (not want_port or want_port == str(port)):
            return True
    return False


def redact_proxy(url: str) -> str:
    """A proxy URL without its credentials (for messages and logs)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]).geturl()
