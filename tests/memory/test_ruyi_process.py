"""The test helper that runs `ruyi serve`: a test that fails before stopping it leaves nothing running."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from aiohttp.test_utils import TestServer

from tests.conftest import base_url
from tests.memory.ruyi_process import RuyiProcess, kill_left_running


async def test_a_process_not_stopped_is_killed_after_its_test(upstream: TestServer, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    proc = RuyiProcess(base_url(upstream) + "/v1", data_dir, {}, tmp_path / "ruyi.log")
    await proc.start()
    assert proc.proc is not None and proc.proc.returncode is None
    kill_left_running()  # what tests/conftest.py's autouse fixture does after every test
    assert await asyncio.wait_for(proc.proc.wait(), 30) == -signal.SIGKILL
    kill_left_running()  # nothing left: a second call is a no-op


async def test_a_stopped_process_is_not_signalled_again(upstream: TestServer, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    proc = RuyiProcess(base_url(upstream) + "/v1", data_dir, {}, tmp_path / "ruyi.log")
    await proc.start()
    assert await proc.stop() == 0
    kill_left_running()
    assert proc.proc is not None and proc.proc.returncode == 0
