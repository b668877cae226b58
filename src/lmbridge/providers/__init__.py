"""Providers that ship with lmbridge and need no network.

:mod:`lmbridge.providers.echo` is the built-in default: what a newcomer sees in VS Code before
configuring an upstream or an API key. Upstream-backed providers live in :mod:`lmbridge.gateway`.
"""

from __future__ import annotations

__all__: list[str] = []
