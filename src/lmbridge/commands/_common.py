"""What every subcommand shares: reading a file or ``-``, and errors as one line on stderr."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["InputError", "os_reason", "read_bytes", "read_text", "say_error", "start_host_args"]


class InputError(Exception):
    """A file cannot be read, or its content is not what the command takes (exit 1 or 2)."""


def os_reason(exc: OSError) -> str:
    """An OS error in words, without Python's ``[Errno N]`` and repr of the path."""
    return exc.strerror or type(exc).__name__


def read_bytes(path: str) -> bytes:
    """The bytes of ``path``; ``-`` reads standard input. :class:`InputError` when unreadable."""
    if path != "-" and os.path.isdir(path):  # Windows says "Permission denied" for a folder
        raise InputError(f"{path} is a folder, not a file")
    try:
        if path == "-":
            return sys.stdin.buffer.read()
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {os_reason(exc)}") from None


def read_text(path: str, *, encoding: str = "utf-8") -> str:
    """The text of ``path`` (``-``: standard input); :class:`InputError` when unreadable or
    not text in ``encoding`` (never showing the raw bytes)."""
    data = read_bytes(path)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        name = "standard input" if path == "-" else path
        raise InputError(
            f"{name} is not {encoding.upper().replace('-SIG', '')} text (byte {exc.start}: "
            f"{exc.reason}); is it a binary file?"
        ) from None


def say_error(command: str, message: Any) -> None:
    """Print ``lmbridge COMMAND: message`` as one line on stderr."""
    text = " ".join(str(message).split())
    print(f"lmbridge {command}: {text}", file=sys.stderr)


def start_host_args(config: str | None, *extra: str) -> tuple[list[str], Path | None]:
    """The ``lmbridge host`` arguments for a configuration given on the command line.

    ``-`` (standard input) is read here and handed to the host in a private temporary file
    (the host's own standard input carries the protocol); the caller removes the returned
    file. The configuration is checked first, so a bad file is this command's error.
    """
    from ..config import load_config_file
    from ..errors import ConfigError

    if config is None:
        return [], None
    try:
        data = load_config_file(config)
    except ConfigError as exc:
        raise InputError(str(exc)) from None
    if config != "-":
        return ["--config", config, *extra], None
    import json
    import tempfile

    fd, name = tempfile.mkstemp(prefix="lmbridge-config-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return ["--config", name, *extra], Path(name)
