"""Crash safety with real processes: SIGKILL mid-trace and mid-burst, a newer database, ``ruyi store vacuum``."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from memory.store.sqlite_schema import LATEST
from tests.conftest import base_url
from tests.fake_upstream import FakeUpstream
from tests.memory.ruyi_process import (
    RuyiProcess,
    forwarded,
    replay,
    rewritten_links,
    wait_for,
)
from tests.traces import load, requests_of, trace_files


def trace() -> Path:
    return trace_files()[3]  # 43 requests; sticky decisions (an archive, pruning) early on at this window


CONFIG = {
    "window": {"models": {"gpt-4o*": 8000}},
    "retrieval": {"enabled": False},
    "notebook": {"pool_lines": False},
    "layout": {"memory_wait_s": 20.0},
}
"""Recall adds to the newest message what the store had written by then (off the request path): not compared here.
The notebook's dynamic-pool lines carry the minute they were written ("2026-11-27 09:33 session …: archive 2"), which
an archive's stable part shows: two runs compared here happen at different times, so a minute boundary between them
would make them differ (a restarted Ruyi itself reads the lines its predecessor wrote, with their own minutes).
An archive waits for the keeper's work on earlier answers up to ``layout.memory_wait_s`` (2 s by default): a
restarted process's first requests, on a machine busy with the rest of the suite, took longer once; here it may."""
BURST = {"window": {"models": {"gpt-4o*": 32000}}, "pruning": {"strategies": {"truncation": {"max_tool_output_tokens": 150}}}}


def first_difference(got: bytes, expected: bytes, around: int = 120) -> str:
    """Where two forwarded bodies first differ, with some bytes either side (a failure says what differed)."""
    at = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b), min(len(got), len(expected)))
    window = slice(max(0, at - around), at + around)
    return f"at byte {at}: got …{got[window]!r}… expected …{expected[window]!r}…"


def settled(proc: RuyiProcess) -> bool:
    """Whether nothing of the answers so far is still being remembered or written (GET /ruyi/v1/stats ``in_flight``):
    the keeper's facts and notebook, the archive's chunks and forms, the queues of both writers."""
    with urllib.request.urlopen(proc.url + "/ruyi/v1/stats", timeout=10) as resp:  # 127.0.0.1 only
        return not any(json.load(resp)["in_flight"].values())


def audited(proc: RuyiProcess, agent: str, session: str, request_id: str) -> bool:
    store = proc.store()
    try:
        return any(a["request_id"] == request_id for a in store.audit(agent, session))
    finally:
        store.close()


async def test_a_restart_mid_trace_forwards_byte_identical_requests(upstream: TestServer, fake: FakeUpstream, tmp_path: Path) -> None:
    requests = requests_of(load(trace())["messages"])
    ids = [f"req-{i}" for i in range(len(requests))]
    url = base_url(upstream) + "/v1"

    whole = RuyiProcess(url, tmp_path / "uninterrupted", CONFIG, tmp_path / "uninterrupted.log")
    await whole.start()
    await replay(whole.url, requests, "agent", ids)
    assert await whole.stop() == 0
    expected = forwarded(fake)
    first_rewrite = next(i for i, (_, body) in enumerate(expected) if b"[ruyi:" in body or b"<ruyi-archive" in body)
    cut = first_rewrite + 3  # killed after sticky decisions exist, well before the end
    assert cut < len(requests) - 5
    fake.received.clear()

    run = RuyiProcess(url, tmp_path / "killed", CONFIG, tmp_path / "killed.log")
    await run.start()
    session = (await replay(run.url, requests[:cut], "agent", ids[:cut]))[-1]
    # What is written in the background (calibration beside the audit record, the facts and notebook the keeper
    # learns after each answer, which the next archive's block shows) is best effort by design; kill once it is all
    # in, so that the restarted process starts from what the uninterrupted one had at that point.
    await wait_for(lambda: audited(run, "agent", session, ids[cut - 1]), "the audit record of the last request")
    await wait_for(lambda: settled(run), "nothing left to remember or write")
    await run.kill()
    await run.start()
    sessions = await replay(run.url, requests[cut:], "agent", ids[cut:])
    assert await run.stop() == 0
    assert set(sessions) == {session}
    got = forwarded(fake)
    assert [i for i, _ in got] == [i for i, _ in expected] == ids
    # byte for byte; when not, say whether an archive stopped waiting for the keeper (the block then differs by design)
    unsettled = [log.name for log in (tmp_path / "uninterrupted.log", tmp_path / "killed.log") if "archive_memory_unsettled" in log.read_text()]
    differing = [i for i, ((_, a), (_, b)) in enumerate(zip(got, expected, strict=True)) if a != b]
    assert not differing, (
        f"requests {differing} differ (cut at {cut}); archives unsettled in: {unsettled or 'neither log'}; "
        f"the first: {first_difference(got[differing[0]][1], expected[differing[0]][1]) if differing else ''}"
    )
    assert any(b"[ruyi:" in body or b"<ruyi-archive" in body for _, body in got[cut:])


async def test_a_write_burst_killed_leaves_every_forwarded_decision_stored(upstream: TestServer, fake: FakeUpstream, tmp_path: Path) -> None:
    traces = {f"agent-{n}": requests_of(load(path)["messages"]) for n, path in enumerate(trace_files())}
    run = RuyiProcess(base_url(upstream) + "/v1", tmp_path / "burst", BURST, tmp_path / "burst.log")
    await run.start()
    tasks = [asyncio.create_task(replay(run.url, reqs, agent, [f"{agent}:{i}" for i in range(len(reqs))])) for agent, reqs in traces.items()]
    await wait_for(lambda: len(forwarded(fake)) >= 150, "a burst of 150 forwarded requests")
    await run.kill()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert any(isinstance(r, BaseException) for r in results), "killed in the middle of the burst"
    db = tmp_path / "burst" / "ruyi.db"
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)
    store = run.store()  # opens cleanly
    sent = forwarded(fake)
    checked = 0
    for request_id, body in sent:
        agent, i = request_id.split(":")
        original = traces[agent][int(i)]
        changed = rewritten_links(original, json.loads(body)["messages"])
        stored: dict[str, Any] = {}
        for sid in store.session_ids(agent):
            stored.update(store.load_session(agent, sid).decisions)  # type: ignore[union-attr]
        assert set(changed) <= set(stored), f"{request_id}: forwarded a rewrite whose decision is not stored"
        checked += len(changed)
    assert checked > 20, "the burst rewrote messages"


def test_a_newer_database_stops_start_up_with_a_clear_message(tmp_path: Path) -> None:
    data = tmp_path / "newer"
    data.mkdir()
    conn = sqlite3.connect(data / "ruyi.db")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    env = {"RUYI_DATA_DIR": str(data), "PATH": "/usr/bin:/bin"}
    res = subprocess.run([sys.executable, "-m", "proxy.cli", "serve", "--port", "1"], capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert str(data / "ruyi.db") in res.stderr and "schema version 99" in res.stderr and f"({LATEST})" in res.stderr


@pytest.mark.parametrize("days", [20, 5])
def test_store_vacuum_removes_what_is_older_than_ttl(tmp_path: Path, days: int) -> None:
    from memory.chain import chain_of
    from memory.session import SessionOptions
    from memory.sessions import SessionRegistry
    from memory.store.sqlite_store import SQLiteStore

    data = tmp_path / "data"
    clock = [1_000.0]
    registry = SessionRegistry(SessionOptions(), clock=lambda: clock[0], store=SQLiteStore(data / "ruyi.db"))
    s = registry.resolve("a", chain_of([{"role": "user", "content": "task"}])).session
    registry.record("a", s.session_id, refs={"r1": "original"})
    registry.flush()
    registry.store.close()  # type: ignore[union-attr]
    age = f"import time; time.time = lambda: {clock[0] + days * 86400}"  # the command runs `days` later
    code = f"{age}\nimport sys\nfrom proxy.cli import main\nsys.exit(main(['store', 'vacuum']))"
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={"RUYI_DATA_DIR": str(data), "PATH": "/usr/bin:/bin"}
    )
    assert res.returncode == 0, res.stderr
    gone = days > 14
    assert f"removed {int(gone)} session(s) unseen for 14 days" in res.stdout
    store = SQLiteStore(data / "ruyi.db")
    assert (store.load_session("a", s.session_id) is None) == gone
    assert (store.find_ref("a", "r1") is None) == gone
