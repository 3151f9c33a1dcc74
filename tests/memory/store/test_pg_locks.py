"""Per-session locks on PostgreSQL: one holder per session across stores (replicas), other sessions free, a holder killed
with SIGKILL holds nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psycopg

from memory.store.pg_store import PgStore

ROOT = Path(__file__).resolve().parents[3]


def waiting(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = "
                           "(SELECT oid FROM pg_database WHERE datname = current_database())").fetchone()
    return int(row[0]) if row else 0


def test_a_session_has_one_holder_across_replicas_and_other_sessions_do_not_wait(pg_url: str) -> None:
    one, two = PgStore(pg_url), PgStore(pg_url)
    held = one.session_lock("a", "s")
    held.acquire()
    with two.session_lock("a", "other"), two.session_lock("b", "s"):  # other sessions, other agents: free
        pass
    got = threading.Event()

    def second() -> None:
        with two.session_lock("a", "s"):
            got.set()

    thread = threading.Thread(target=second)
    thread.start()
    while waiting(pg_url) == 0:  # the second replica now waits on the server
        got.wait(0.01)
    assert not got.is_set()
    held.release()
    thread.join()
    assert got.is_set()
    one.close()
    two.close()


def test_a_holder_killed_with_sigkill_releases_the_session(pg_url: str) -> None:
    code = ("import sys, time; from memory.store.pg_store import PgStore; lock = PgStore(sys.argv[1]).session_lock('a', 's'); "
            "lock.acquire(); print('held', flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, pg_url], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        store = PgStore(pg_url)
        with store.session_lock("a", "s"):  # would wait for ever if the dead process still held it
            pass
        store.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
