"""The persistent per-message cache: hits across restarts, edits, no content, bad databases."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lmbridge.parts import ChatMessage, ChatRequestOptions, ChatTool, ToolCallPart
from lmbridge.tokens import TokenEstimator, TokenStore, TokenStoreWarning

SECRET = "the launch code is Zebra-Quartz-7731"


def conversation() -> list[ChatMessage]:
    return [
        ChatMessage.system("You are a careful assistant who answers in French."),
        ChatMessage.user(f"Remember this: {SECRET}. " * 20),
        ChatMessage.assistant([ToolCallPart("call_1", "note", {"text": SECRET})]),
        ChatMessage.user("Now summarise what I told you, and list the steps you took." * 5),
    ]


def test_observe_stores_actual_tokens_spread_by_estimate() -> None:
    est = TokenEstimator("openai", model_id="gpt-4o")
    msgs = conversation()
    before = est.estimate_request(msgs)
    assert before.cached == [False] * 4
    est.observe(msgs, None, 1000)
    after = est.estimate_request(msgs)
    assert after.cached == [True] * 4
    assert after.total == 1000
    # spread in proportion to the estimates
    raw = [est.raw_message(m) for m in msgs]
    for got, r in zip(after.messages, raw, strict=True):
        assert got == pytest.approx((1000 - est.costs.request) * r / sum(raw))
    assert est.count_message(msgs[1]) == round(after.messages[1] + 0.5 - 1e-9)


def test_an_edited_message_is_the_only_one_re_estimated() -> None:
    est = TokenEstimator("anthropic", model_id="claude-x")
    msgs = conversation()
    est.observe(msgs, None, 1500)
    known = est.estimate_request(msgs).messages
    edited = [*msgs[:2], ChatMessage.assistant("I wrote it down."), msgs[3]]
    again = est.estimate_request(edited)
    assert again.cached == [True, True, False, True]
    assert again.messages[0] == known[0] and again.messages[3] == known[3]
    # removing messages elsewhere keeps the others' stored counts
    trimmed = est.estimate_request([msgs[0], msgs[3]])
    assert trimmed.cached == [True, True]
    # the next turn: old messages from the store, the new one estimated, and observing the
    # request stores the new one with the tokens the stored ones leave
    longer = [*msgs, ChatMessage.user("And one more question about the weather?")]
    est.observe(longer, None, 1500 + 25)
    final = est.estimate_request(longer)
    assert final.cached == [True] * 5
    assert final.messages[4] == pytest.approx(25)


def test_tool_definitions_are_cached_too() -> None:
    est = TokenEstimator("openai")
    opts = ChatRequestOptions(tools=[ChatTool("search", "Search the web.", {"type": "object"})])
    msgs = [ChatMessage.user("hi")]
    est.observe(msgs, opts, 400)
    assert est.count_request(msgs, opts) == 400


def test_cache_hit_after_a_restart(tmp_path: Path) -> None:
    """One process learns; a new process reads the same database and gets the counts."""
    db = tmp_path / "tokens.db"
    script = textwrap.dedent(
        """
        import sys
        from lmbridge.parts import ChatMessage
        from lmbridge.tokens import TokenEstimator, TokenStore
        store = TokenStore.open(sys.argv[1])
        est = TokenEstimator("openai", model_id="gpt-4o", store=store)
        msgs = [ChatMessage.user("hello " * 50), ChatMessage.assistant("world " * 30)]
        if sys.argv[2] == "learn":
            est.observe(msgs, None, 777)
        r = est.estimate_request(msgs)
        print(r.total, all(r.cached), round(est.factor, 6))
        store.close()
        """
    )
    first = subprocess.run(
        [sys.executable, "-c", script, str(db), "learn"], capture_output=True, text=True, check=True
    )
    second = subprocess.run(
        [sys.executable, "-c", script, str(db), "read"], capture_output=True, text=True, check=True
    )
    total, cached, factor = second.stdout.split()
    assert first.stdout == second.stdout
    assert (total, cached) == ("777", "True")
    assert float(factor) != 1.0  # the calibration persisted too


def test_the_database_holds_no_content(tmp_path: Path) -> None:
    db = tmp_path / "tokens.db"
    store = TokenStore.open(db)
    est = TokenEstimator("openai", model_id="gpt-4o-secret-model", store=store)
    msgs = conversation()
    est.observe(msgs, ChatRequestOptions(tools=[ChatTool("note", "Take a note.")]), 2000)
    store.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())  # db, -wal, -shm
    assert raw  # something was written
    for needle in (SECRET, "Zebra", "French", "summarise", "note", "gpt-4o-secret-model"):
        assert needle.encode() not in raw
        assert needle.encode("utf-16-le") not in raw
    # only blobs and numbers in the tables
    with sqlite3.connect(db) as conn:
        for table in ("messages", "calibration"):
            for row in conn.execute(f"SELECT * FROM {table}"):
                assert all(isinstance(v, (bytes, int, float)) for v in row)


def test_a_corrupt_database_is_set_aside_and_rebuilt(tmp_path: Path) -> None:
    db = tmp_path / "tokens.db"
    garbage = b"this is not a database" * 100
    db.write_bytes(garbage)
    with pytest.warns(TokenStoreWarning, match="was corrupt; it was set aside") as caught:
        store = TokenStore.open(db)
    assert len(caught) == 1
    assert store.persistent  # a new database, in place of the corrupt one
    assert (tmp_path / "tokens.db.corrupt").read_bytes() == garbage  # kept for a look
    est = TokenEstimator("openai", store=store)
    msgs = conversation()
    assert est.count_request(msgs) > 0
    est.observe(msgs, None, 900)
    store.close()
    again = TokenStore.open(db)  # the next start reads what was learnt
    assert TokenEstimator("openai", store=again).count_request(msgs) == 900
    again.close()


def test_database_corrupted_while_open_degrades_with_a_warning(tmp_path: Path) -> None:
    db = tmp_path / "tokens.db"
    store = TokenStore.open(db)
    est = TokenEstimator("openai", store=store)
    est.observe(conversation(), None, 900)
    store._memory.clear()  # force a database read
    # overwrite the file under the open connection
    for p in tmp_path.iterdir():
        if p.name.startswith("tokens.db"):
            p.write_bytes(b"\x00garbage" * 2000)
    with pytest.warns(TokenStoreWarning) as caught:
        count = est.count_request(conversation())
        est.observe(conversation(), None, 950)  # learnt in memory, no second warning
        assert est.count_request(conversation()) == 950
    assert count > 0 and len(caught) == 1
    store.close()
    with pytest.warns(TokenStoreWarning, match="set aside"):
        reopened = TokenStore.open(db)  # the next start rebuilds it
    assert reopened.persistent
    reopened.close()


def test_locked_database_degrades_with_a_warning(tmp_path: Path) -> None:
    db = tmp_path / "tokens.db"
    TokenStore.open(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
    try:
        store = TokenStore.open(db, timeout=0.05)
        est = TokenEstimator("openai", store=store)
        msgs = conversation()
        with pytest.warns(TokenStoreWarning, match="locked"):
            est.observe(msgs, None, 900)
        assert est.count_request(msgs) == 900  # learnt in memory all the same
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.close()


@pytest.mark.parametrize(
    ("fault", "lift"),
    [
        # SQLite's own limit answers as a full disk does (SQLITE_FULL, "disk is full")
        ("PRAGMA max_page_count = {pages}", "PRAGMA max_page_count = 1073741823"),
        # and query_only as a read-only file does (SQLITE_READONLY)
        ("PRAGMA query_only = 1", "PRAGMA query_only = 0"),
    ],
    ids=["full-disk", "read-only"],
)
def test_a_full_or_read_only_database_degrades_once_and_is_used_again_after(
    tmp_path: Path, fault: str, lift: str
) -> None:
    db = tmp_path / "tokens.db"
    store = TokenStore.open(db)
    est = TokenEstimator("openai", store=store)
    first = conversation()
    est.observe(first, None, 900)
    assert store._db is not None
    (pages,) = store._db.execute("PRAGMA page_count").fetchone()
    store._db.execute(fault.format(pages=pages))
    later = [*first, ChatMessage.user("and one more thing " * 200)]
    with pytest.warns(TokenStoreWarning, match="full|readonly|read-only") as caught:
        # (enough new entries that the file must grow: the space it has is not enough)
        store.put_many({bytes([i % 256, i // 256]) * 8: 1.0 for i in range(5000)})
        for total in (1500, 1600, 1700):  # writes fail each time: still one warning
            est.observe(later, None, total)
            assert est.count_request(later) == total  # estimates go on, learnt in memory
    assert len(caught) == 1
    assert store.persistent  # the file stays in use: the fault may pass
    store._db.execute(lift)
    est.observe(later, None, 1800)
    store.close()
    reopened = TokenStore.open(db)  # what was learnt after the fault passed is in the file
    assert TokenEstimator("openai", store=reopened).count_request(later) == 1800
    reopened.close()


def test_hosts_writing_at_once_never_corrupt_the_shared_database(tmp_path: Path) -> None:
    """Two VS Code windows' hosts share tokens.sqlite: writing at the same time, each write
    goes in whole or (after the busy timeout) not at all, and the file stays sound."""
    db = tmp_path / "tokens.sqlite"
    TokenStore.open(db).close()  # the secret and the tables, made once
    script = textwrap.dedent(
        """
        import sys, warnings
        from lmbridge.tokens import TokenStore
        store = TokenStore.open(sys.argv[1])
        tag = int(sys.argv[2])
        for batch in range(40):
            store.put_many({bytes([tag, batch, i]) * 5 + b"x": float(tag * 1000 + batch * 50 + i)
                            for i in range(50)})
            store.put_calibration(b"model" * 3 + bytes([tag]), 1.0 + batch / 100, batch, 1.0)
        store.close()
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(db), str(tag)]) for tag in (1, 2, 3)
    ]
    assert [p.wait(120) for p in procs] == [0, 0, 0]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    store = TokenStore.open(db)
    found = store.get_many(
        [bytes([tag, batch, i]) * 5 + b"x" for tag in (1, 2, 3) for batch in range(40) for i in range(50)]
    )
    assert len(found) > 0
    for key, tokens in found.items():  # every value that went in is the one written
        assert tokens == key[0] * 1000 + key[1] * 50 + key[2]
    store.close()


def test_two_processes_share_the_store(tmp_path: Path) -> None:
    db = tmp_path / "tokens.db"
    a = TokenStore.open(db)
    b = TokenStore.open(db)
    a.put_many({b"k" * 16: 12.5})
    assert b.get(b"k" * 16) == 12.5
    b.put_many({b"j" * 16: 3.0})
    assert a.get(b"j" * 16) == 3.0
    a.close()
    b.close()


def test_store_is_bounded(tmp_path: Path) -> None:
    store = TokenStore.open(tmp_path / "tokens.db", max_entries=100)
    for i in range(30):
        store.put_many({i.to_bytes(2, "big") + bytes([j]) * 14: float(j) for j in range(10)})
    assert len(store) <= 100 + 100 // 20 * 10
    # the newest entries survive
    assert store.get((29).to_bytes(2, "big") + bytes([9]) * 14) == 9.0
    store.close()


def test_what_survives_eviction_is_read_back_from_the_database_file(tmp_path: Path) -> None:
    def key(batch: int, j: int) -> bytes:
        return batch.to_bytes(2, "big") + bytes([j]) * 14

    db = tmp_path / "tokens.db"
    store = TokenStore.open(db, max_entries=100)
    for i in range(30):
        store.put_many({key(i, j): float(i * 10 + j) for j in range(10)})
    store.close()
    reopened = TokenStore.open(db, max_entries=100)  # nothing in memory: every read is SQL
    assert len(reopened) <= 100 + 100 // 20 * 10
    assert reopened.get(key(29, 9)) == 299.0  # the newest survive
    assert reopened.get(key(25, 0)) == 250.0
    assert reopened.get(key(0, 0)) is None  # the oldest were evicted from the file
    assert reopened.get(key(5, 5)) is None
    reopened.close()


def test_in_memory_store() -> None:
    store = TokenStore.in_memory()
    assert not store.persistent
    store.put_many({b"a" * 16: 1.0})
    assert store.get(b"a" * 16) == 1.0
    assert store.get(b"b" * 16) is None
    store.close()


# --------------------------------------------------------------------------- privacy


posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")


@posix_only
def test_the_database_is_private_to_its_owner(tmp_path: Path) -> None:
    import os
    import stat

    from lmbridge.tokens import shared_store

    storage = tmp_path / "globalStorage" / "lmbridge"
    store = shared_store(str(storage))
    assert store is not None and store.persistent
    TokenEstimator("openai", store=store).observe(conversation(), None, 900)

    def mode(p: Path) -> int:
        return stat.S_IMODE(os.stat(p).st_mode)

    assert mode(storage) == 0o700
    files = sorted(p.name for p in storage.iterdir())
    assert {"tokens.sqlite", "tokens.key"} <= set(files)
    assert {p.name: mode(p) for p in storage.iterdir()} == dict.fromkeys(files, 0o600)
    store.close()


@posix_only
def test_modes_of_existing_files_are_corrected(tmp_path: Path) -> None:
    import os
    import stat

    db = tmp_path / "tokens.sqlite"
    TokenStore.open(db).close()
    for p in tmp_path.iterdir():
        os.chmod(p, 0o644)
    TokenStore.open(db).close()
    assert {stat.S_IMODE(os.stat(p).st_mode) for p in tmp_path.iterdir()} == {0o600}


def test_stored_keys_are_keyed_hashes_that_confirm_nothing(tmp_path: Path) -> None:
    import hashlib
    import hmac

    from lmbridge.tokens.estimator import message_key

    db = tmp_path / "tokens.sqlite"
    store = TokenStore.open(db)
    est = TokenEstimator("openai", model_id="gpt-4o", store=store)
    msgs = conversation()
    est.observe(msgs, None, 900)
    store.close()
    with sqlite3.connect(db) as conn:
        stored = {bytes(k) for (k,) in conn.execute("SELECT key FROM messages")}
        models = {bytes(m) for (m,) in conn.execute("SELECT model FROM calibration")}
    plain = {message_key(est._namespace, m) for m in msgs}
    assert len(stored) == len(msgs)
    # what an attacker who guesses a message can compute is not in the database
    assert not stored & plain and est._namespace not in models
    assert not stored & {hashlib.sha256(m.text.encode()).digest()[:16] for m in msgs}
    secret = (tmp_path / "tokens.key").read_bytes()
    assert len(secret) == 32
    assert stored == {hmac.new(secret, k, hashlib.sha256).digest()[:16] for k in plain}
    # and the store still finds them (a new process, same secret)
    again = TokenEstimator("openai", model_id="gpt-4o", store=TokenStore.open(db))
    assert again.count_request(msgs) == 900


def test_each_installation_has_its_own_secret(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        TokenStore.open(folder / "tokens.sqlite").put_many({b"k" * 16: 1.0})
    assert (a / "tokens.key").read_bytes() != (b / "tokens.key").read_bytes()
    with sqlite3.connect(a / "tokens.sqlite") as x, sqlite3.connect(b / "tokens.sqlite") as y:
        assert x.execute("SELECT key FROM messages").fetchall() != y.execute(
            "SELECT key FROM messages"
        ).fetchall()


def test_an_old_database_with_plain_keys_is_emptied(tmp_path: Path) -> None:
    db = tmp_path / "tokens.sqlite"
    with sqlite3.connect(db) as conn:  # the layout before keyed hashes (user_version 0)
        conn.executescript(
            "CREATE TABLE messages (key BLOB PRIMARY KEY, tokens REAL NOT NULL,"
            " used INTEGER NOT NULL) WITHOUT ROWID;"
            "CREATE TABLE calibration (model BLOB PRIMARY KEY, factor REAL NOT NULL,"
            " observations INTEGER NOT NULL, weight REAL NOT NULL, used INTEGER NOT NULL)"
            " WITHOUT ROWID;"
        )
        conn.execute("INSERT INTO messages VALUES (?, 5.0, 1)", (b"p" * 16,))
        conn.execute("INSERT INTO calibration VALUES (?, 1.2, 3, 1.0, 1)", (b"m" * 16,))
    store = TokenStore.open(db)
    assert store.persistent and len(store) == 0
    assert store.get(b"p" * 16) is None and store.get_calibration(b"m" * 16) is None
    store.put_many({b"q" * 16: 2.0})
    store.close()
    # a lost secret: what was stored with the old one is dropped, not misread
    (tmp_path / "tokens.key").unlink()
    store = TokenStore.open(db)
    assert len(store) == 0 and store.get(b"q" * 16) is None
    store.close()


def test_two_hosts_starting_together_agree_on_one_secret(tmp_path: Path) -> None:
    import threading

    from lmbridge.tokens.store import installation_secret

    got: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: got.append(installation_secret(tmp_path)))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1 and (tmp_path / "tokens.key").read_bytes() == got[0]
    assert not [p for p in tmp_path.iterdir() if p.name != "tokens.key"]  # no temporary left
