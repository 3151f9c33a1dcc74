"""A Ruyi killed (SIGKILL) while it compacts a notebook leaves the last good version, still pending."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import aiohttp
from aiohttp.test_utils import TestServer

from tests.api.test_anchors_api import call
from tests.conftest import base_url
from tests.fake_upstream import FakeUpstream
from tests.memory.ruyi_process import RuyiProcess


async def test_a_kill_during_compaction_leaves_the_last_good_version(upstream: TestServer, fake: FakeUpstream, tmp_path: Path) -> None:
    config = {
        "summarizer": {"model": "openai/gpt-4o", "api_base": base_url(upstream) + "/v1", "api_key": "sk-summarizer-test"},
        "notebook": {"idle_seconds": 0, "check_seconds": 3600},
    }
    ruyi = RuyiProcess(base_url(upstream) + "/v1", tmp_path / "data", config, tmp_path / "ruyi.log")
    await ruyi.start()
    async with aiohttp.ClientSession() as http:
        for i in range(10):
            status, before = await call(http, "POST", ruyi.url + "/ruyi/v1/notebook/history", agent="a", json={"text": f"milestone {i}"})
        assert before["pending"] is True
        fake.fault = "hold"  # the summarizer is asked, and never answers
        compacting = asyncio.create_task(call(http, "POST", ruyi.url + "/ruyi/v1/notebook/compact", agent="a"))
        await fake.wait_for(lambda r: r.path == "/v1/chat/completions")
        await ruyi.kill()
        try:
            await compacting
        except aiohttp.ClientError:
            pass
        fake.fault = None
        fake.held.set()
        with sqlite3.connect(tmp_path / "data" / "ruyi.db") as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        await ruyi.start()
        status, after = await call(http, "GET", ruyi.url + "/ruyi/v1/notebook", agent="a")
        assert after["version"] == before["version"] and after["sections"] == before["sections"] and after["pending"] is True
    assert await ruyi.stop() == 0
