"""The persistent token cache: message hash -> tokens, model hash -> calibration, in SQLite.

The only I/O of the token estimator. It holds hashes and numbers, never message content:
keys are 16-byte digests made by the estimator, values are token counts and factors.

- Keys on disk are HMACs of the estimator's digests with a per-installation secret
  (``tokens.key`` beside the database, 0600, made once): without it a stored key confirms
  nothing, so nobody can test whether a guessed message was ever counted. A database from
  before (plain digests) or made with another secret holds only a cache: it is emptied.
- Private: the database and its ``-wal`` / ``-shm`` files are 0600 and the folder made for them
  0700 (modes of existing files are corrected on open; POSIX only).

- stdlib ``sqlite3`` in WAL mode, so a second process (another VS Code window's host) can
  read while one writes; writes wait at most ``busy_timeout`` and are otherwise skipped.
- Bounded: beyond ``max_entries`` messages the least recently written are evicted.
- Never fails a request: when the database is locked, unwritable or full, the store issues
  one :class:`TokenStoreWarning` and carries on in memory (writes that fail are skipped; the
  file is used again once it can be). A file found corrupt when opened is set aside as
  ``<name>.corrupt`` and a new one started; one corrupted while open is left alone until the
  next open.
- Lookups go through an in-process dictionary first, so a hit costs microseconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["TokenStore", "TokenStoreWarning", "shared_store"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    key BLOB PRIMARY KEY,
    tokens REAL NOT NULL,
    used INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS messages_used ON messages(used);
CREATE TABLE IF NOT EXISTS calibration (
    model BLOB PRIMARY KEY,
    factor REAL NOT NULL,
    observations INTEGER NOT NULL,
    weight REAL NOT NULL,
    used INTEGER NOT NULL
) WITHOUT ROWID;
"""
_MEMORY_LIMIT = 50_000
_SCHEMA_VERSION = 2  # before it (user_version 0): plain digests as keys
_KEY_FILE_NAME = "tokens.key"
_SECRET_BYTES = 32
_CHECK = b"lmbridge token store"


def _private_file(path: str) -> None:
    # 0600, created if missing, corrected if it exists (umask 022 made the old ones 0644)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    if os.name == "posix":
        os.chmod(path, 0o600)


def private_folder(folder: str | os.PathLike[str]) -> None:
    """Make ``folder`` (with its parents) and restrict it to its owner (0700 on POSIX)."""
    Path(folder).mkdir(mode=0o700, parents=True, exist_ok=True)
    if os.name == "posix" and os.stat(folder).st_uid == os.getuid():
        os.chmod(folder, 0o700)


def installation_secret(folder: str | os.PathLike[str]) -> bytes:
    """The store's secret in ``folder`` (``tokens.key``, 0600), made the first time.

    Made atomically (written to a private temporary file, then linked into place), so two
    hosts starting together agree on one secret.
    """
    path = os.path.join(os.fspath(folder), _KEY_FILE_NAME)
    for _ in range(3):
        try:
            with open(path, "rb") as f:
                data = f.read()
            if len(data) == _SECRET_BYTES:
                if os.name == "posix" and os.stat(path).st_mode & 0o077:
                    os.chmod(path, 0o600)
                return data
            os.unlink(path)  # truncated or foreign: a new one (the cache is rebuilt)
        except FileNotFoundError:
            pass
        tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secrets.token_bytes(_SECRET_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # fails if another process got there first: use theirs
        except FileExistsError:
            pass
        except OSError:  # no hard links here: a plain rename (last writer wins)
            with contextlib.suppress(OSError):
                os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    raise OSError(f"cannot make the token store's secret {path}")


class TokenStoreWarning(RuntimeWarning):
    """The token database cannot be used; counts fall back to estimation."""


class TokenStore:
    """Message-hash -> tokens cache and per-model calibration, persisted in SQLite.

    Use :meth:`open` for a file and :meth:`in_memory` for a process-local store.
    """

    def __init__(
        self,
        connection: sqlite3.Connection | None,
        *,
        path: str | None = None,
        max_entries: int = 200_000,
        secret: bytes | None = None,
    ) -> None:
        self._db = connection
        self._secret = secret or secrets.token_bytes(_SECRET_BYTES)
        self.path = path
        """The database file, or ``None`` for an in-memory store."""
        self.max_entries = max_entries
        """Messages kept before the least recently written are evicted."""
        self._memory: dict[bytes, float] = {}
        self._calibration: dict[bytes, tuple[float, int, float]] = {}
        self._lock = threading.Lock()
        self._writes = 0
        self._warned = False

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, max_entries: int = 200_000, timeout: float = 0.2
    ) -> TokenStore:
        """The store in the database file ``path`` (created with its folder if missing).

        Never raises for a bad database: it warns and returns a store that works in memory.
        """
        path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(path))
        rebuilt: str | None = None
        try:
            if not os.path.isdir(folder):
                private_folder(folder)
            secret = installation_secret(folder)
            try:
                db = _connect(path, secret, timeout)
            except sqlite3.DatabaseError as exc:
                if isinstance(exc, sqlite3.OperationalError):
                    raise  # locked, unwritable, full: the file may be fine, so it stays
                # Corrupt (not a database, a malformed image): it will not heal, and it holds
                # only a cache. Set it aside (kept for a look) and start a new one.
                rebuilt = _set_aside(path)
                db = _connect(path, secret, timeout)
        except (sqlite3.Error, OSError) as exc:
            store = cls(None, path=path, max_entries=max_entries)
            store._degrade(exc)
            return store
        store = cls(db, path=path, max_entries=max_entries, secret=secret)
        if rebuilt is not None:
            store._warned = True  # the one warning about this file
            warnings.warn(
                f"token cache {path} was corrupt; it was set aside as {rebuilt} and a new one "
                "started (counts are learnt again)",
                TokenStoreWarning,
                stacklevel=2,
            )
        return store

    @classmethod
    def in_memory(cls, *, max_entries: int = 200_000) -> TokenStore:
        """A store that lives in this process only."""
        return cls(None, max_entries=max_entries)

    def close(self) -> None:
        """Close the database; the store keeps answering from memory."""
        with self._lock:
            if self._db is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._db.close()
                self._db = None

    def __enter__(self) -> TokenStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def persistent(self) -> bool:
        """Whether writes reach the database (false in memory or after a failure)."""
        return self._db is not None

    def _degrade(self, exc: BaseException) -> None:
        if not self._warned:
            self._warned = True
            where = self.path or "memory"
            warnings.warn(
                f"token cache {where} is unusable ({type(exc).__name__}: {exc}); "
                "token counts fall back to estimation",
                TokenStoreWarning,
                stacklevel=3,
            )
        if (
            self._db is not None
            and isinstance(exc, sqlite3.DatabaseError)
            and not isinstance(exc, sqlite3.OperationalError)
        ):
            # a corrupt file will not heal: stop touching it
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def _seal(self, key: bytes) -> bytes:
        """The key as stored: an HMAC with the installation's secret."""
        return hmac.new(self._secret, key, hashlib.sha256).digest()[:16]

    # ------------------------------------------------------------------ messages

    def get(self, key: bytes) -> float | None:
        """Stored tokens for a message key, or ``None``."""
        hit = self._memory.get(key)
        if hit is not None or self._db is None:
            return hit
        return self.get_many([key]).get(key)

    def get_many(self, keys: Iterable[bytes]) -> dict[bytes, float]:
        """Stored tokens for the keys that have them."""
        found: dict[bytes, float] = {}
        missing: list[bytes] = []
        for k in keys:
            hit = self._memory.get(k)
            if hit is None:
                missing.append(k)
            else:
                found[k] = hit
        if missing and self._db is not None:
            sealed = {self._seal(k): k for k in missing}
            with self._lock:
                try:
                    for i in range(0, len(missing), 500):
                        batch = list(sealed)[i : i + 500]
                        marks = ",".join("?" * len(batch))
                        rows = self._db.execute(
                            f"SELECT key, tokens FROM messages WHERE key IN ({marks})",  # noqa: S608
                            batch,
                        ).fetchall()
                        for k, tokens in rows:
                            key = sealed[bytes(k)]
                            found[key] = float(tokens)
                            self._remember(key, float(tokens))
                except sqlite3.Error as exc:
                    self._degrade(exc)
        return found

    def put_many(self, items: Mapping[bytes, float]) -> None:
        """Store tokens for message keys (replacing older values)."""
        if not items:
            return
        for k, v in items.items():
            self._remember(k, v)
        if self._db is None:
            return
        now = time.time_ns() // 1000
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany(
                        "INSERT OR REPLACE INTO messages(key, tokens, used) VALUES (?, ?, ?)",
                        [(self._seal(k), float(v), now) for k, v in items.items()],
                    )
                    self._writes += len(items)
                    if self._writes >= max(1, self.max_entries // 20):
                        self._writes = 0
                        self._evict()
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                self._degrade(exc)

    def _evict(self) -> None:
        assert self._db is not None
        (count,) = self._db.execute("SELECT count(*) FROM messages").fetchone()
        excess = count - self.max_entries
        if excess > 0:
            self._db.execute(
                "DELETE FROM messages WHERE key IN "
                "(SELECT key FROM messages ORDER BY used LIMIT ?)",
                (excess,),
            )

    def _remember(self, key: bytes, tokens: float) -> None:
        memory = self._memory
        if len(memory) >= _MEMORY_LIMIT:
            # drop the older half (dicts keep insertion order)
            for k in list(memory)[: _MEMORY_LIMIT // 2]:
                del memory[k]
        memory[key] = tokens

    def __len__(self) -> int:
        """Messages in the database (or in memory without one)."""
        if self._db is not None:
            with self._lock:
                try:
                    return int(self._db.execute("SELECT count(*) FROM messages").fetchone()[0])
                except sqlite3.Error as exc:
                    self._degrade(exc)
        return len(self._memory)

    # ------------------------------------------------------------------ calibration

    def get_calibration(self, model: bytes) -> tuple[float, int, float] | None:
        """``(factor, observations, weight)`` stored for a model key, or ``None``."""
        if self._db is not None:
            with self._lock:
                try:
                    row = self._db.execute(
                        "SELECT factor, observations, weight FROM calibration WHERE model = ?",
                        (self._seal(model),),
                    ).fetchone()
                    if row is not None:
                        self._calibration[model] = (float(row[0]), int(row[1]), float(row[2]))
                except sqlite3.Error as exc:
                    self._degrade(exc)
        return self._calibration.get(model)

    def put_calibration(
        self, model: bytes, factor: float, observations: int, weight: float
    ) -> None:
        """Store a model's correction factor."""
        self._calibration[model] = (factor, observations, weight)
        if self._db is None:
            return
        with self._lock:
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO calibration(model, factor, observations, weight, used) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (self._seal(model), factor, observations, weight, time.time_ns() // 1000),
                )
            except sqlite3.Error as exc:
                self._degrade(exc)


def _connect(path: str, secret: bytes, timeout: float) -> sqlite3.Connection:
    """The database at ``path``, private, in WAL mode, its tables made and checked."""
    for name in (path, f"{path}-wal", f"{path}-shm"):
        if name == path or os.path.exists(name):
            _private_file(name)
    db = sqlite3.connect(path, timeout=timeout, check_same_thread=False, isolation_level=None)
    try:
        db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        _prepare(db, secret)
        db.execute("SELECT count(*) FROM messages").fetchone()
    except BaseException:
        db.close()
        raise
    return db


def _set_aside(path: str) -> str:
    """Move a corrupt database (and its WAL and shared-memory files) to ``<path>.corrupt``;
    return that name. Another host may have moved it already: then nothing is left to move."""
    aside = f"{path}.corrupt"
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.replace(path + suffix, aside + suffix)
    return aside


def _prepare(db: sqlite3.Connection, secret: bytes) -> None:
    """Create the tables; empty a database of an older layout or made with another secret."""
    check = hmac.new(secret, _CHECK, hashlib.sha256).digest()[:16]

    def current() -> bool:
        (version,) = db.execute("PRAGMA user_version").fetchone()
        if version != _SCHEMA_VERSION:
            return False
        row = db.execute("SELECT value FROM meta WHERE name = 'check'").fetchone()
        return row is not None and bytes(row[0]) == check

    with contextlib.suppress(sqlite3.OperationalError):  # no meta table yet
        if current():
            return
    db.execute("BEGIN IMMEDIATE")
    try:
        with contextlib.suppress(sqlite3.OperationalError):
            if current():  # another process migrated it meanwhile
                db.execute("COMMIT")
                return
        # a cache: dropping it costs a few recounts, and its old keys confirm guesses
        for table in ("messages", "calibration", "meta"):
            db.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in _SCHEMA.split(";"):  # executescript would commit half-way
            if statement.strip():
                db.execute(statement)
        db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value BLOB NOT NULL)")
        db.execute("INSERT INTO meta(name, value) VALUES ('check', ?)", (check,))
        db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise


_shared: dict[str, TokenStore] = {}


def shared_store(storage_path: str | None) -> TokenStore | None:
    """The one store of a storage folder (``tokens.sqlite`` in it), shared by every provider of
    the process; ``None`` without a folder (estimates are then kept in memory only)."""
    if not storage_path:
        return None
    path = str(Path(storage_path) / "tokens.sqlite")
    store = _shared.get(path)
    if store is None:
        with contextlib.suppress(OSError):  # the store warns about an unusable folder itself
            private_folder(storage_path)
        store = _shared[path] = TokenStore.open(path)
    return store
