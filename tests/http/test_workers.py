"""``ruyi serve --workers N``: processes sharing the port (SO_REUSEPORT) and the store; refused without a shared store."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import aiohttp
from aiohttp.test_utils import TestServer

from tests.conftest import base_url
from tests.fake_upstream import FakeUpstream
from tests.memory.ruyi_process import RuyiProcess, forwarded, post


def conversation(turns: int) -> list[dict[str, str]]:
    messages = [{"role": "user", "content": "count with me"}]
    for i in range(turns):
        messages += [{"role": "assistant", "content": f"{i}"}, {"role": "user", "content": f"and {i + 1}?"}]
    return messages


async def test_workers_share_the_port_and_the_sessions(upstream: TestServer, fake: FakeUpstream, tmp_path: Path) -> None:
    proc = RuyiProcess(base_url(upstream) + "/v1", tmp_path / "data", {}, tmp_path / "ruyi.log", args=["--workers", "2"])
    await proc.start()
    for _ in range(600):  # both workers up before the requests start (each starts at its own pace; bounded)
        if len({e["pid"] for e in proc.events() if e.get("event") == "serving"}) == 2:
            break
        await asyncio.sleep(0.05)
    sessions = []
    for turns in range(24):
        async with aiohttp.ClientSession() as http:  # a new connection each time: the kernel picks a worker for each
            resp = await post(http, proc.url, conversation(turns), "agent", f"req-{turns}")
            sessions.append(resp.headers["X-Ruyi-Session"])
    assert await proc.stop() == 0
    events = proc.events()
    started = next(e for e in events if e.get("event") == "workers_started")
    serving = {e["pid"] for e in events if e.get("event") == "serving"}
    assert len(started["pids"]) == 2 and serving == set(started["pids"])
    assert len(set(sessions)) == 1 and len(forwarded(fake)) == 24  # one session, whichever worker answered
    assert any(e.get("event") == "session_reloaded" for e in events)  # a worker read back what the other wrote
    assert any(e.get("event") == "workers_stopped" for e in events)


def test_workers_are_refused_without_a_store_every_process_opens(tmp_path: Path) -> None:
    env = {**os.environ, "RUYI_STORE__BACKEND": "memory"}
    res = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "serve", "--workers", "2", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "server.workers" in res.stderr and "sqlite or postgres" in res.stderr
