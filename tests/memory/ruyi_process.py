"""`ruyi serve` as a real process on a given data_dir, and traces replayed through it as their agent made them."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from memory.chain import chain_of
from memory.store.sqlite_store import SQLiteStore
from tests.conftest import free_port
from tests.fake_upstream import FakeUpstream

Messages = list[dict[str, Any]]

_RUNNING: set[asyncio.subprocess.Process] = set()
"""Every `ruyi serve` started and not yet stopped or killed: what a failed test leaves (``kill_left_running``)."""


def kill_left_running() -> None:
    """SIGKILL every `ruyi serve` a test started and did not stop (it failed before it could): none outlives its test
    (tests/conftest.py calls this after each test)."""
    while _RUNNING:
        proc = _RUNNING.pop()
        if proc.returncode is None:
            try:
                os.kill(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class RuyiProcess:
    """One `ruyi serve` in front of an upstream, its log in a file (JSON lines, never a full pipe)."""

    def __init__(self, upstream: str, data_dir: Path, config: Mapping[str, Any], log: Path, level: str = "info", args: Sequence[str] = ()) -> None:
        self.upstream, self.data_dir, self.log, self.level, self.args = upstream, data_dir, log, level, tuple(args)
        self.config_file = data_dir.parent / f"{data_dir.name}.yaml"
        self.config_file.write_text(json.dumps(dict(config)))  # JSON is YAML
        self.proc: asyncio.subprocess.Process | None = None
        self.url = ""

    async def start(self) -> None:
        port = free_port()
        env = {**os.environ, "RUYI_DATA_DIR": str(self.data_dir), "RUYI_LOG_LEVEL": self.level}
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "proxy.cli",
                "serve",
                "--port",
                str(port),
                "--upstream",
                self.upstream,
                "--config",
                str(self.config_file),
                *self.args,
                stdout=log,
                stderr=log,
                env=env,
            )
        _RUNNING.add(self.proc)
        self.url = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as http:
            for _ in range(600):
                try:
                    async with http.get(self.url + "/healthz") as resp:
                        if resp.status == 200:
                            return
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)
        raise AssertionError(f"ruyi serve did not start; see {self.log}")

    async def kill(self) -> None:
        """SIGKILL: no drain, no cleanup, nothing flushed that was not flushed already."""
        assert self.proc is not None
        self.proc.kill()
        await self.proc.wait()
        _RUNNING.discard(self.proc)

    async def stop(self) -> int:
        """SIGTERM: the graceful way (drains the queue, closes the store)."""
        assert self.proc is not None
        self.proc.terminate()
        code = await asyncio.wait_for(self.proc.wait(), 60)
        _RUNNING.discard(self.proc)
        return code

    def events(self) -> list[dict[str, Any]]:
        lines = self.log.read_text(errors="replace").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def store(self) -> SQLiteStore:
        return SQLiteStore(self.data_dir / "ruyi.db")


async def post(http: aiohttp.ClientSession, url: str, messages: Messages, agent: str, request_id: str) -> aiohttp.ClientResponse:
    body = {"model": "gpt-4o", "messages": messages}
    headers = {"X-Ruyi-Agent": agent, "X-Request-Id": request_id}
    async with http.post(url + "/v1/chat/completions", json=body, headers=headers) as resp:
        await resp.read()
        assert resp.status == 200, resp.status
        return resp


async def replay(url: str, requests: Sequence[Messages], agent: str, ids: Sequence[str]) -> list[str]:
    """Send the requests one after the other, as the agent did; returns the session of each."""
    sessions = []
    async with aiohttp.ClientSession() as http:
        for messages, request_id in zip(requests, ids):
            resp = await post(http, url, messages, agent, request_id)
            sessions.append(resp.headers["X-Ruyi-Session"])
    return sessions


def forwarded(fake: FakeUpstream) -> list[tuple[str, bytes]]:
    """(request id, body) of every chat request the upstream received, in order."""
    ids = [next((v for k, v in r.headers.items() if k.lower() == "x-request-id"), "") for r in fake.received]
    return [(i, r.body) for i, r in zip(ids, fake.received) if r.path == "/v1/chat/completions"]


def rewritten_links(original: Messages, sent: Messages) -> list[str]:
    """Chain links (of the client's messages) of the messages Ruyi changed before forwarding."""
    assert len(original) == len(sent)
    links = chain_of(original).links
    return [links[i] for i, (a, b) in enumerate(zip(original, sent)) if a != b]


async def wait_for(condition: Any, what: str, tries: int = 400) -> None:
    """Poll a condition (no timing is asserted: only that it ends up true)."""
    for _ in range(tries):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")
