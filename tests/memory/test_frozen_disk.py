"""A store on a file system frozen in the kernel (``fsfreeze``: every read and write of it blocks, as on a hung disk):
requests are answered unmodified, the sessions API says 503, and all is normal again once it thaws.

Needs root, a loop device, ``mkfs.ext4`` and ``fsfreeze`` (skipped with the reason otherwise). The file system is
thawed in a ``finally`` and, should this process die first, by a watchdog process of its own."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tests.conftest import base_url
from tests.fake_upstream import FakeUpstream
from tests.memory.ruyi_process import RuyiProcess, wait_for

CONFIG = {"store": {"deadline_ms": 300}}  # a stuck store is given up after 2 s (proxy/offload.py: stuck_after)
THAW_WATCHDOG_S = 50


def _can_freeze() -> str | None:
    if os.geteuid() != 0:
        return "needs root (mount, fsfreeze)"
    missing = [tool for tool in ("mkfs.ext4", "fsfreeze", "mount", "umount") if shutil.which(tool) is None]
    return f"missing {', '.join(missing)}" if missing else None


@pytest.fixture
def mount() -> Iterator[Path]:
    """A 16 MiB ext4 file system on a loop device, mounted outside pytest's temporary folders (never walked while frozen)."""
    reason = _can_freeze()
    if reason:
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="ruyi-frozen-"))
    image, mnt = root / "disk.img", root / "mnt"
    mnt.mkdir()
    with image.open("wb") as f:
        f.truncate(16 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, timeout=60, capture_output=True)
    done = subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], timeout=60, capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"cannot mount a loop device here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["fsfreeze", "-u", str(mnt)], timeout=30, capture_output=True)  # if a test left it frozen
        subprocess.run(["umount", "-l", str(mnt)], timeout=60, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def frozen(mnt: Path) -> Iterator[None]:
    subprocess.run(["fsfreeze", "-f", str(mnt)], check=True, timeout=30)
    watchdog = subprocess.Popen(["sh", "-c", f"sleep {THAW_WATCHDOG_S}; fsfreeze -u '{mnt}'"], start_new_session=True)
    try:
        yield
    finally:
        subprocess.run(["fsfreeze", "-u", str(mnt)], timeout=30, capture_output=True)
        watchdog.kill()
        watchdog.wait()


def body(agent: str, turns: int) -> bytes:
    messages = [{"role": "user", "content": f"{agent}: find why test_parse fails in parser_{turns}.py"}]
    for t in range(turns):
        messages += [{"role": "assistant", "content": f"reading step {t}"}, {"role": "user", "content": f"go on {t}"}]
    return json.dumps({"model": "gpt-4o", "messages": messages}).encode()


async def send(http: aiohttp.ClientSession, url: str, agent: str, turns: int) -> tuple[int, str]:
    rid = f"{agent}-{turns}"
    headers = {"X-Ruyi-Agent": agent, "X-Request-Id": rid, "Content-Type": "application/json"}
    async with http.post(url + "/v1/chat/completions", data=body(agent, turns), headers=headers) as resp:
        await resp.read()
        return resp.status, rid


async def stats(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with http.get(url + "/ruyi/v1/stats") as resp:
        return dict(await resp.json())


def received(fake: FakeUpstream, request_id: str) -> bytes:
    for r in fake.received:
        if any(k.lower() == "x-request-id" and v == request_id for k, v in r.headers.items()):
            return r.body
    raise AssertionError(f"{request_id} never reached the upstream")


async def test_a_frozen_disk_lets_requests_through_unmodified(upstream: TestServer, fake: FakeUpstream, mount: Path) -> None:
    run = RuyiProcess(base_url(upstream) + "/v1", mount / "data", CONFIG, mount.parent / "ruyi.log")
    await run.start()
    timeout = aiohttp.ClientTimeout(total=30)  # a hang fails the test; nothing is timed
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http:
            for turns in range(3):
                assert (await send(http, run.url, "warm", turns))[0] == 200
            await wait_for(lambda: not any(_stats_sync(run.url)["in_flight"].values()), "the warm requests written")
            with frozen(mount):
                answers = await asyncio.gather(*(send(http, run.url, f"cold-{i}", i % 3) for i in range(6)), send(http, run.url, "warm", 3))
                async with http.get(run.url + "/ruyi/v1/sessions", headers={"X-Ruyi-Agent": "warm"}) as resp:
                    api = resp.status, await resp.json()
                during = await stats(http, run.url)
                again = await send(http, run.url, "cold-again", 1)
            assert [status for status, _ in answers] == [200] * 7 and again[0] == 200
            for i in range(6):  # an agent never seen needs the store to be resolved: it went through as sent
                assert received(fake, f"cold-{i}-{i % 3}") == body(f"cold-{i}", i % 3)
            assert api[0] == 503 and api[1]["error"]["code"] == "store_stalled"
            assert during["store_stuck"]["waits_given_up"] >= 1 and during["failed_open"]
            await wait_for(lambda: not _stats_sync(run.url)["store_stuck"]["stuck"], "the store answering again")
            assert (await send(http, run.url, "after", 2))[0] == 200
            async with http.get(run.url + "/ruyi/v1/sessions", headers={"X-Ruyi-Agent": "after"}) as resp:
                assert resp.status == 200 and len((await resp.json())["sessions"]) == 1
    finally:
        await run.kill()


def _stats_sync(url: str) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(url + "/ruyi/v1/stats", timeout=10) as resp:  # 127.0.0.1 only
        return dict(json.load(resp))
