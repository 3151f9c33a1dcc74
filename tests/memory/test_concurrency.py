"""50 sessions replayed at once through a real `ruyi serve`, with `ruyi store vacuum` running beside it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from tests.conftest import base_url
from tests.fake_upstream import FakeUpstream
from tests.memory.ruyi_process import RuyiProcess, forwarded, replay, rewritten_links
from tests.traces import load, requests_of, trace_files

SESSIONS = 50
REQUESTS_EACH = 12
CONFIG = {"window": {"models": {"gpt-4o*": 32000}}, "pruning": {"strategies": {"truncation": {"max_tool_output_tokens": 150}}}}


async def vacuum(data_dir: Path) -> int:
    """`ruyi store vacuum` from another process, against the live database."""
    env = {**os.environ, "RUYI_DATA_DIR": str(data_dir)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "proxy.cli", "store", "vacuum", env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    return await proc.wait()


@pytest.mark.timeout(180)  # 50 sessions' requests through a real process: ~30 s alone, twice that on a loaded machine
async def test_fifty_concurrent_sessions_lose_nothing(upstream: TestServer, fake: FakeUpstream, tmp_path: Path) -> None:
    traces = [requests_of(load(path)["messages"])[:REQUESTS_EACH] for path in trace_files()]
    work = {f"agent-{n}": traces[n % len(traces)] for n in range(SESSIONS)}
    run = RuyiProcess(base_url(upstream) + "/v1", tmp_path / "data", CONFIG, tmp_path / "ruyi.log")
    await run.start()
    replays = [replay(run.url, reqs, agent, [f"{agent}:{i}" for i in range(len(reqs))]) for agent, reqs in work.items()]
    *sessions, vacuums = await asyncio.gather(*replays, asyncio.gather(vacuum(run.data_dir), vacuum(run.data_dir)))
    assert vacuums == [0, 0]
    assert await run.stop() == 0
    log = run.log.read_text()
    assert "database is locked" not in log
    failures = [e for e in run.events() if e["event"].startswith("store_") and e.get("level") in ("warning", "error")]
    assert failures == []
    assert all(len(set(s)) == 1 for s in sessions), "each agent's requests stayed in one session"

    sent = forwarded(fake)
    assert len(sent) == sum(len(r) for r in work.values())
    store = run.store()
    rewrites = 0
    for agent, reqs in work.items():
        (sid,) = store.session_ids(agent)
        stored = store.load_session(agent, sid)
        assert stored is not None and stored.record.requests == len(reqs)
        assert [a["request_id"] for a in store.audit(agent, sid)] == [f"{agent}:{i}" for i in range(len(reqs))]
        assert [r["request_id"] for r in store.reports(agent, sid, 100)] == [f"{agent}:{i}" for i in range(len(reqs))]
        for request_id, body in sent:
            if request_id.startswith(agent + ":"):
                changed = rewritten_links(reqs[int(request_id.split(":")[1])], json.loads(body)["messages"])
                assert set(changed) <= set(stored.decisions), f"{request_id}: a forwarded rewrite is not stored"
                rewrites += len(changed)
    assert rewrites > 50, "the replay made decisions"
