"""A safe ``sys.path`` for the host: no working folder, storage folder or app folder on it.

``python -m lmbridge host`` (and ``-c``) put the working folder on ``sys.path``, and the
extension starts the host in a folder a repository may have written to: a ``json.py`` or a
``my_provider.py`` there would be imported as if it were installed. The extension already
starts the host with a clean path; the host removes these entries again at start and when the
storage folder becomes known, keeping those the user put on ``PYTHONPATH`` on purpose.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, MutableSequence

__all__ = ["clean_sys_path", "untrusted_entries"]


def _same(a: str, b: str) -> bool:
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def untrusted_entries(
    path: Iterable[str], folders: Iterable[str], keep: Iterable[str] = ()
) -> list[str]:
    """The entries of ``path`` that are ``''``, ``'.'`` or one of ``folders`` (however
    spelled), except those in ``keep`` (``PYTHONPATH``: the user's own choice)."""
    folders = [f for f in folders if f]
    kept = [k for k in keep if k]
    out: list[str] = []
    for entry in path:
        named = any(_same(entry, f) for f in folders) and not any(_same(entry, k) for k in kept)
        if entry in ("", ".") or named:
            out.append(entry)
    return out


def clean_sys_path(
    *folders: str, path: MutableSequence[str] | None = None, environ: dict[str, str] | None = None
) -> list[str]:
    """Remove ``''``, ``'.'``, the working folder and ``folders`` from ``sys.path`` (or ``path``);
    return what was removed."""
    target = sys.path if path is None else path
    env = os.environ if environ is None else environ
    keep = env.get("PYTHONPATH", "").split(os.pathsep)
    try:
        cwd = os.getcwd()
    except OSError:  # the folder was removed under us: nothing to match
        cwd = ""
    removed = untrusted_entries(target, [cwd, *folders], keep)
    for entry in removed:
        while entry in target:
            target.remove(entry)
    return removed
