"""Replicas share sessions: two real `ruyi serve` processes on one store, a session's requests alternating between
them (one killed with SIGKILL mid-session), forward the bytes one process forwards."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tests.conftest import base_url
from tests.fake_upstream import FakeUpstream
from tests.memory.ruyi_process import Messages, RuyiProcess, forwarded, post, wait_for
from tests.traces import load, requests_of, trace_files

CONFIG: dict[str, Any] = {"window": {"models": {"gpt-4o*": 8000}}, "retrieval": {"enabled": False}}
"""As the restart test's: sticky decisions and an archive early on; recall (written off the path) not compared."""


@pytest.fixture(params=["sqlite", "postgres"])
def shared(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The replicas' config: one SQLite file, or one PostgreSQL database (skipped without a server)."""
    if request.param == "postgres":
        return {**CONFIG, "store": {"shared": True, "backend": "postgres", "url": request.getfixturevalue("pg_url")}}
    return {**CONFIG, "store": {"shared": True}}


def trace() -> Path:
    return trace_files()[3]  # 43 requests; pruning and an archive early on at this window


async def alternate(procs: Sequence[RuyiProcess], requests: Sequence[Messages], ids: Sequence[str], start: int = 0) -> list[str]:
    """Request i goes to procs[i % len(procs)]; returns the session of each."""
    sessions = []
    async with aiohttp.ClientSession() as http:
        for i, (messages, request_id) in enumerate(zip(requests, ids), start):
            resp = await post(http, procs[i % len(procs)].url, messages, "agent", request_id)
            sessions.append(resp.headers["X-Ruyi-Session"])
            # What an answer teaches the agent's memory (the facts of the compact form) is written in the background,
            # best effort by design, as calibration is: a replica that reads it back before the other wrote it would
            # differ by timing alone. Reading the notebook waits for that replica's background memory work.
            async with http.get(procs[i % len(procs)].url + "/ruyi/v1/notebook", headers={"X-Ruyi-Agent": "agent"}) as settled:
                assert settled.status == 200
    return sessions


async def single_run(url: str, tmp_path: Path, fake: FakeUpstream, requests: Sequence[Messages], ids: Sequence[str]) -> list[bytes]:
    one = RuyiProcess(url, tmp_path / "single", CONFIG, tmp_path / "single.log")
    await one.start()
    await alternate([one], requests, ids)
    assert await one.stop() == 0
    expected = [body for _, body in forwarded(fake)]
    fake.received.clear()
    assert any(b"[ruyi:" in body for body in expected) and any(b"<ruyi-archive" in body for body in expected)
    return expected


async def test_two_replicas_alternating_forward_what_one_process_forwards(
    upstream: TestServer, fake: FakeUpstream, tmp_path: Path, shared: dict[str, Any]
) -> None:
    requests = requests_of(load(trace())["messages"])
    ids = [f"req-{i}" for i in range(len(requests))]
    url = base_url(upstream) + "/v1"
    expected = await single_run(url, tmp_path, fake, requests, ids)

    replicas = [RuyiProcess(url, tmp_path / "shared", shared, tmp_path / f"replica-{n}.log") for n in range(2)]
    for proc in replicas:
        await proc.start()
    sessions = await alternate(replicas, requests, ids)
    for proc in replicas:
        assert await proc.stop() == 0
    assert len(set(sessions)) == 1  # one session, though no replica saw two requests of it in a row
    got = forwarded(fake)
    assert [i for i, _ in got] == ids
    assert [body for _, body in got] == expected  # byte for byte
    reloaded = [e for proc in replicas for e in proc.events() if e.get("event") == "session_reloaded"]
    assert len(reloaded) >= len(requests) - 2  # each replica found the other's newer row and read it back


async def test_a_replica_killed_mid_session_the_other_carries_on_byte_identically(
    upstream: TestServer, fake: FakeUpstream, tmp_path: Path, shared: dict[str, Any]
) -> None:
    requests = requests_of(load(trace())["messages"])
    ids = [f"req-{i}" for i in range(len(requests))]
    url = base_url(upstream) + "/v1"
    expected = await single_run(url, tmp_path, fake, requests, ids)
    first_rewrite = next(i for i, body in enumerate(expected) if b"[ruyi:" in body or b"<ruyi-archive" in body)
    cut = first_rewrite + 3
    assert cut < len(requests) - 5

    replicas = [RuyiProcess(url, tmp_path / "shared", shared, tmp_path / f"replica-{n}.log") for n in range(2)]
    for proc in replicas:
        await proc.start()
    before = await alternate(replicas, requests[:cut], ids[:cut])
    await replicas[0].kill()  # SIGKILL: nothing drained, its in-memory sessions gone
    after = await alternate(replicas[1:], requests[cut:], ids[cut:])
    assert await replicas[1].stop() == 0
    assert set(before) == set(after) and len(set(before)) == 1
    got = forwarded(fake)
    assert [i for i, _ in got] == ids
    assert [body for _, body in got] == expected  # byte for byte


async def test_a_replica_killed_mid_request_the_client_retries_on_the_other_with_the_same_bytes(
    upstream: TestServer, fake: FakeUpstream, tmp_path: Path, shared: dict[str, Any]
) -> None:
    """Killed after it forwarded (its decisions durable) and before it answered: the client's retry on the other
    replica forwards the very bytes the dead one did, and the session goes on as one process's would."""
    requests = requests_of(load(trace())["messages"])
    ids = [f"req-{i}" for i in range(len(requests))]
    url = base_url(upstream) + "/v1"
    expected = await single_run(url, tmp_path, fake, requests, ids)
    cut = next(i for i, body in enumerate(expected) if b"[ruyi:" in body) + 1  # decisions exist; this request may add more
    if cut % 2:
        cut += 1  # the request is sent to replicas[0], the one killed
    replicas = [RuyiProcess(url, tmp_path / "shared", shared, tmp_path / f"replica-{n}.log") for n in range(2)]
    for proc in replicas:
        await proc.start()
    await alternate(replicas, requests[:cut], ids[:cut])
    fake.fault = "hold"  # the upstream has the request and has not answered
    async with aiohttp.ClientSession() as http:
        pending = asyncio.ensure_future(post(http, replicas[0].url, requests[cut], "agent", ids[cut]))
        await wait_for(lambda: len(forwarded(fake)) == cut + 1, "the request forwarded by the replica about to die")
        await replicas[0].kill()
        with pytest.raises(aiohttp.ClientError):
            await pending
    fake.fault = None
    fake.held.set()
    await alternate(replicas[1:], requests[cut:], ids[cut:])  # the client's retry, then the rest of the session
    assert await replicas[1].stop() == 0
    got = [body for _, body in forwarded(fake)]
    assert got[cut] == got[cut + 1] == expected[cut]  # what the dead replica sent, and the retry, byte for byte
    assert got[: cut + 1] + got[cut + 2 :] == expected
