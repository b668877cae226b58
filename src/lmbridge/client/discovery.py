"""The endpoint file: how an external process finds the loopback endpoint and its token.

The host writes ``{"url", "token", "pid"}`` to a file only the user can read (mode 0600, in a
0700 directory) when it opens the endpoint, and removes it when it closes. The default place is
``$LMBRIDGE_ENDPOINT_FILE``, else ``$XDG_CACHE_HOME/lmbridge/endpoint.json``
(``~/.cache/lmbridge/endpoint.json``; ``%LOCALAPPDATA%\\lmbridge\\endpoint.json`` on Windows).
``$LMBRIDGE_ENDPOINT_URL`` with ``$LMBRIDGE_ENDPOINT_TOKEN`` bypass the file (containers, tests).

The host started by the extension writes the file into the extension's storage folder
(``<user data>/User/globalStorage/lmbridge.lmbridge/endpoint.json``) unless
``$LMBRIDGE_ENDPOINT_FILE`` is set; when the default file does not exist, :func:`find_endpoint`
looks there for VS Code, Insiders, VSCodium, Cursor and code-server (:func:`editor_endpoint_files`)
and takes the newest file whose host is alive.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError

__all__ = [
    "EndpointInfo",
    "EndpointNotFoundError",
    "default_endpoint_file",
    "editor_endpoint_files",
    "find_endpoint",
    "read_endpoint_file",
    "remove_endpoint_file",
    "write_endpoint_file",
]


class EndpointNotFoundError(ConfigError):
    """No usable endpoint file: the message says where it looked and what to do."""


@dataclass(frozen=True, slots=True)
class EndpointInfo:
    """Where the loopback endpoint listens and the token it wants."""

    url: str
    """Base URL, ``http://127.0.0.1:<port>``."""
    token: str
    """Bearer token every request must carry."""
    pid: int | None = None
    """The process serving it, to tell a stale file from a live one."""
    path: Path | None = field(default=None, compare=False)
    """The endpoint file it was read from (``None``: from the environment)."""


def default_endpoint_file() -> Path:
    """Where the endpoint file is written and looked for by default."""
    explicit = os.environ.get("LMBRIDGE_ENDPOINT_FILE")
    if explicit:
        return Path(explicit)
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "lmbridge" / "endpoint.json"


def write_endpoint_file(info: EndpointInfo, path: Path | None = None) -> Path:
    """Write ``info`` atomically with mode 0600 (the token is a secret) in a 0700 folder
    (see :func:`_private_folder`); return the path."""
    path = path or default_endpoint_file()
    _private_folder(path.parent)
    body = json.dumps({"url": info.url, "token": info.token, "pid": info.pid}).encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    # O_EXCL with the mode given at creation: the token is never readable by others, not even
    # for the moment between creating and chmod-ing.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, body)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return path


def _private_folder(folder: Path) -> None:
    """Create ``folder`` with mode 0700, or make lmbridge's own existing folder 0700.

    A folder the user named through ``$LMBRIDGE_ENDPOINT_FILE`` keeps its mode (it may be
    their home or a shared folder); the file itself is 0600 wherever it is.
    """
    if not folder.is_dir():
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)  # mkdir's mode is filtered by the umask
        return
    if sys.platform == "win32" or folder.name not in _OWN_FOLDERS:
        return
    st = folder.stat()
    if st.st_uid != os.getuid():
        raise ConfigError(
            f"the endpoint file's folder {folder} belongs to another user: delete it or set "
            "LMBRIDGE_ENDPOINT_FILE to a file in a folder of yours"
        )
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(folder, 0o700)


def remove_endpoint_file(path: Path | None = None, pid: int | None = None) -> None:
    """Remove the endpoint file if it still belongs to ``pid`` (another host may have replaced it)."""
    path = path or default_endpoint_file()
    if pid is not None:
        try:
            current = json.loads(path.read_text("utf-8")).get("pid")
        except (OSError, ValueError, AttributeError):
            return
        if current != pid:
            return
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def read_endpoint_file(path: Path | None = None) -> EndpointInfo:
    """Read and check the endpoint file; :class:`EndpointNotFoundError` says what is wrong."""
    path = path or default_endpoint_file()
    hint = (
        "start VS Code with the lmbridge extension and enable its loopback endpoint "
        "(setting lmbridge.endpoint.enabled)"
    )
    try:
        st = path.stat()
        raw = path.read_text("utf-8")
    except FileNotFoundError:
        raise EndpointNotFoundError(f"no lmbridge endpoint file at {path}: {hint}") from None
    except OSError as exc:
        raise EndpointNotFoundError(f"cannot read the endpoint file {path}: {exc}") from None
    if sys.platform != "win32":
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise EndpointNotFoundError(
                f"the endpoint file {path} is readable by other users (mode "
                f"{stat.S_IMODE(st.st_mode):o}); refusing to use its token: delete it and "
                "restart the endpoint"
            )
        if st.st_uid != os.getuid():
            raise EndpointNotFoundError(f"the endpoint file {path} belongs to another user")
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise EndpointNotFoundError(f"the endpoint file {path} is not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise EndpointNotFoundError(f"the endpoint file {path}: expected a JSON object")
    url, token, pid = obj.get("url"), obj.get("token"), obj.get("pid")
    if not isinstance(url, str) or not isinstance(token, str) or not url or not token:
        raise EndpointNotFoundError(f"the endpoint file {path}: 'url' and 'token' must be strings")
    if pid is not None and (not isinstance(pid, int) or isinstance(pid, bool)):
        raise EndpointNotFoundError(f"the endpoint file {path}: 'pid' must be an integer")
    if isinstance(pid, int):
        problem = _host_problem(pid, st.st_mtime)
        if problem is not None:
            raise EndpointNotFoundError(
                f"the endpoint file {path} is stale (process {pid} {problem}): {hint}"
            )
    return EndpointInfo(url.rstrip("/"), token, pid, path)


_EDITORS = ("Code", "Code - Insiders", "VSCodium", "Cursor")
_EXTENSION_ID = "lmbridge.lmbridge"
_OWN_FOLDERS = frozenset({"lmbridge", _EXTENSION_ID})
"""Names of the folders lmbridge itself puts the file in (the default one, the extension's
storage folder): those are made 0700 also when they exist already."""


def editor_endpoint_files(home: Path | None = None) -> list[Path]:
    """Where the extension's host writes the endpoint file, for the usual editors' user data."""
    home = home or Path.home()
    if sys.platform == "win32":
        bases = [Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")]
    elif sys.platform == "darwin":
        bases = [home / "Library" / "Application Support"]
    else:
        bases = [Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")]
    data = [base / editor for base in bases for editor in _EDITORS]
    share = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    data.append(share / "code-server")
    return [d / "User" / "globalStorage" / _EXTENSION_ID / "endpoint.json" for d in data]


def find_endpoint(path: Path | None = None) -> EndpointInfo:
    """The endpoint from ``$LMBRIDGE_ENDPOINT_URL``/``$LMBRIDGE_ENDPOINT_TOKEN``, the endpoint
    file, or (when the default file does not exist) the newest live one an editor's host wrote."""
    url = os.environ.get("LMBRIDGE_ENDPOINT_URL")
    token = os.environ.get("LMBRIDGE_ENDPOINT_TOKEN")
    if path is None and url and token:
        return EndpointInfo(url.rstrip("/"), token)
    if path is None and not os.environ.get("LMBRIDGE_ENDPOINT_FILE"):
        default = default_endpoint_file()
        if not default.exists():
            found = []
            for candidate in editor_endpoint_files():
                with contextlib.suppress(OSError):
                    found.append((candidate.stat().st_mtime, candidate))
            problems: list[str] = []
            for _, candidate in sorted(found, reverse=True):
                try:
                    return read_endpoint_file(candidate)
                except EndpointNotFoundError as exc:
                    problems.append(str(exc))
            editors = editor_endpoint_files()
            where = f"{editors[0].parents[3]} and the other editors' user data"
            raise EndpointNotFoundError(
                problems[0]
                if problems
                else f"no lmbridge endpoint file at {default}, nor one written by VS Code's "
                f"lmbridge host ({_EXTENSION_ID}/endpoint.json in the global storage of "
                f"{where}): is VS Code running with lmbridge, and its loopback endpoint on "
                "(setting lmbridge.endpoint.enabled)?"
            )
    return read_endpoint_file(path)


def _host_problem(pid: int, written_at: float) -> str | None:
    """Why process ``pid`` cannot be the host that wrote the endpoint file at ``written_at``
    (a pid is reused once its process ends, maybe by another user's process), or ``None``."""
    if sys.platform == "win32":  # os.kill(pid, 0) would terminate the process there
        return None
    proc = Path(f"/proc/{pid}")
    if Path("/proc/self").is_dir():  # Linux: the owner and the start time say it
        try:
            owner = proc.stat().st_uid
        except FileNotFoundError:
            return "is not running"
        except OSError:
            return None
        if owner != os.getuid():
            return "belongs to another user: its pid was reused"
        started = _start_time(pid)
        if started is not None and started > written_at + 2.0:  # the clock's ticks are coarse
            return "started after the file was written: its pid was reused"
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "is not running"
    except PermissionError:  # exists, but another user's: not the host that wrote our file
        return "belongs to another user: its pid was reused"
    return None


def _start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), from Linux's /proc."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        # the fields after the command's ")" (which may hold spaces): state is the 3rd field,
        # the start time (in clock ticks after boot) the 22nd
        ticks = int(stat_line.rsplit(")", 1)[1].split()[19])
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
