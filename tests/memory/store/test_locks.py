"""Per-session locks beside the SQLite file: one holder across threads and processes, released when a holder dies (SIGKILL)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memory.store.locks import FileSessionLocks, slot_of
from memory.store.sqlite_store import SQLiteStore

JOIN_S = 30.0
"""How long a test waits for a thread or a lock before it fails (a broken lock fails the test, never hangs it)."""

HOLDER = """
import sys
from pathlib import Path
from memory.store.locks import FileSessionLocks
lock = FileSessionLocks(Path(sys.argv[1])).lock("agent", "s1")
lock.acquire()
print("held", flush=True)
sys.stdin.read()
"""


def held_elsewhere(path: Path, agent: str, session: str) -> bool:
    """Whether another process holds the session's byte (probed without waiting)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, slot_of(agent, session), os.SEEK_SET)
    except OSError:
        return True
    finally:
        os.close(fd)  # drops what the probe took
    return False


def test_a_session_lock_held_by_a_process_is_released_when_it_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "ruyi.db-locks"
    root = Path(__file__).resolve().parents[3]
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=root)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"held"
        assert held_elsewhere(path, "agent", "s1")
        assert not held_elsewhere(path, "agent", "s2")  # another session is free
        mine = FileSessionLocks(path)
        assert mine.lock("agent", "s1").acquire(timeout=0.1) is False  # a waiter gives up, holding nothing
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert not held_elsewhere(path, "agent", "s1")  # the kernel took it back
        assert mine.lock("agent", "s1").acquire(timeout=30) is True
        mine.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def take_turns(first: Any, second: Any) -> list[str]:
    """``first`` held while a thread wants ``second`` (the same session's lock): the order of the release and the take."""
    order: list[str] = []
    first.acquire()

    def other() -> None:
        with second:
            order.append("second acquired")

    thread = threading.Thread(target=other, daemon=True)
    thread.start()
    order.append("first releasing")
    first.release()
    thread.join(JOIN_S)
    assert not thread.is_alive(), "the second never got the lock"
    return order


def test_threads_of_one_process_take_turns_on_a_session(tmp_path: Path) -> None:
    locks = FileSessionLocks(tmp_path / "ruyi.db-locks")
    assert take_turns(locks.lock("agent", "s1"), locks.lock("agent", "s1")) == ["first releasing", "second acquired"]


def test_a_lock_released_from_another_thread_is_released(tmp_path: Path) -> None:
    """A request's lock is taken where it is resolved and released where its turn ends, maybe another thread."""
    locks = FileSessionLocks(tmp_path / "ruyi.db-locks")
    lock = locks.lock("agent", "s1")
    lock.acquire()
    thread = threading.Thread(target=lock.release, daemon=True)
    thread.start()
    thread.join(JOIN_S)
    assert not thread.is_alive()
    again = locks.lock("agent", "s1")
    assert again.acquire(timeout=JOIN_S) is True  # a release that did not release fails here instead of hanging
    again.release()


@pytest.mark.parametrize("sid", ["s1", "会话"])
def test_the_sqlite_store_hands_out_locks_beside_its_file(tmp_path: Path, sid: str) -> None:
    store = SQLiteStore(tmp_path / "ruyi.db")
    with store.session_lock("agent", sid):
        assert (tmp_path / "ruyi.db-locks").exists()
    store.close()


PG_HOLDER = """
import sys
from memory.store.pg_locks import PgSessionLocks
lock = PgSessionLocks(sys.argv[1]).lock("agent", "s1")
lock.acquire()
print("held", flush=True)
sys.stdin.read()
"""


def test_an_advisory_session_lock_is_released_when_its_replica_is_killed(pg_url: str) -> None:
    import psycopg

    from memory.store.pg_locks import LOCK_CLASS, PgSessionLocks, key_of

    def free(session: str) -> bool:
        with psycopg.connect(pg_url, autocommit=True) as conn:  # closed at once: what it took is released
            return bool(conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, key_of("agent", session))).fetchone()[0])

    root = Path(__file__).resolve().parents[3]
    child = subprocess.Popen([sys.executable, "-c", PG_HOLDER, pg_url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=root)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"held"
        assert not free("s1") and free("s2")
        locks = PgSessionLocks(pg_url)
        assert locks.lock("agent", "s1").acquire(timeout=0.1) is False  # lock_timeout: a waiter gives up
        locks.close()
        child.send_signal(signal.SIGKILL)
        child.wait()
        for _ in range(200):  # the server notices the dead connection (no time asserted: only that it ends up free)
            if free("s1"):
                break
            time.sleep(0.05)
        assert free("s1")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_the_postgres_store_locks_sessions_across_its_connections(pg_url: str) -> None:
    from memory.store.backend import open_store
    from memory.store.options import StoreOptions

    a, b = (open_store(StoreOptions(backend="postgres", url=pg_url)) for _ in range(2))
    assert a is not None and b is not None
    assert take_turns(a.session_lock("agent", "s1"), b.session_lock("agent", "s1")) == ["first releasing", "second acquired"]
    a.close()
    b.close()


def test_a_watched_lock_knows_how_long_it_has_been_held() -> None:
    from memory.store.locks import WatchedLock, held_longest

    lock = WatchedLock()
    assert lock.held_for() == 0.0
    with lock:
        with lock:  # re-entrant, as the registry's lock
            assert lock.acquire(blocking=False)
            lock.release()
        started = time.monotonic()
        while lock.held_for() <= 0.0 and time.monotonic() - started < 10:
            time.sleep(0.01)
        assert lock.held_for() > 0.0 and held_longest() >= lock.held_for() - 0.5
        taken = threading.Event()
        other = threading.Thread(target=lambda: taken.set() if lock.acquire(timeout=0.05) else None)
        other.start()
        other.join(10)
        assert not taken.is_set()  # held by this thread: another one waits
    assert lock.held_for() == 0.0
