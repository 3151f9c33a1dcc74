"""``ruyi serve`` as a real process: start-up warning, health endpoints, graceful drain on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tests.conftest import base_url, free_port
from tests.fake_upstream import FakeUpstream, make_fake_app


async def start_ruyi(*args: str, env: dict[str, str] | None = None) -> tuple[asyncio.subprocess.Process, str]:
    port = free_port()
    env = {**os.environ, "RUYI_LOG_LEVEL": "info", **(env or {})}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "proxy.cli",
        "serve",
        "--port",
        str(port),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as http:
        for _ in range(300):
            try:
                async with http.get(url + "/healthz") as resp:
                    if resp.status == 200:
                        return proc, url
            except aiohttp.ClientConnectionError:
                if proc.returncode is not None:
                    break
                await asyncio.sleep(0.05)
    if proc.returncode is None:
        proc.kill()
    stderr = (await proc.stderr.read()).decode() if proc.stderr is not None else ""
    raise AssertionError(f"ruyi serve did not start: {stderr[-2000:]}")


@pytest.fixture
async def procs() -> AsyncIterator[list[asyncio.subprocess.Process]]:
    started: list[asyncio.subprocess.Process] = []
    yield started
    for proc in started:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def events(proc: asyncio.subprocess.Process) -> list[dict[str, Any]]:
    assert proc.stderr is not None
    out = await proc.stderr.read()
    return [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]


async def test_a_client_key_in_the_environment_is_read_by_env_and_not_taken_for_config(
    procs: list[asyncio.subprocess.Process], upstream: TestServer, tmp_path: Path
) -> None:
    """The README's own example: auth.keys [env:RUYI_CLIENT_KEY] with RUYI_CLIENT_KEY set. Names that are not
    RUYI_<SECTION>__<KEY> or a shortcut are not config: mentioned at debug level (never their values)."""
    config = tmp_path / "ruyi.yaml"
    config.write_text("auth:\n  keys: [env:RUYI_CLIENT_KEY]\n")
    env = {"RUYI_CLIENT_KEY": "client-key-from-env", "RUYI_TRACE_DIR": "/nowhere", "RUYI_LOG_LEVEL": "debug"}
    proc, url = await start_ruyi("--upstream", base_url(upstream) + "/v1", "--config", str(config), env=env)
    procs.append(proc)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(url + "/v1/chat/completions", json=body) as resp:
            assert resp.status == 401
        async with http.post(url + "/v1/chat/completions", json=body, headers={"X-Ruyi-Key": "client-key-from-env"}) as resp:
            assert resp.status == 200
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 30) == 0
    logged = await events(proc)
    ignored = [e for e in logged if e["event"] == "environment_variables_ignored"]
    assert len(ignored) == 1 and ignored[0]["level"] == "debug"
    assert {"RUYI_CLIENT_KEY", "RUYI_TRACE_DIR"} <= set(ignored[0]["names"])
    assert "client-key-from-env" not in json.dumps(logged)


async def test_warns_once_when_the_upstream_is_down_and_keeps_serving(procs: list[asyncio.subprocess.Process]) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    proc, url = await start_ruyi("--upstream", dead)
    procs.append(proc)
    async with aiohttp.ClientSession() as http:
        async with http.get(url + "/readyz") as resp:
            assert resp.status == 503 and (await resp.json())["upstream"] == dead
        async with http.get(url + "/healthz") as resp:
            assert resp.status == 200
        async with http.get(url + "/readyz") as resp:  # asked again, still down: still no second warning
            assert resp.status == 503
    proc.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(proc.wait(), 30) == 0
    warnings = [e for e in await events(proc) if e["event"] == "upstream_unreachable"]
    assert len(warnings) == 1 and warnings[0]["upstream"] == dead
    assert "--upstream" in warnings[0]["hint"] and "RUYI_UPSTREAM" in warnings[0]["hint"]


async def test_sigterm_lets_a_running_stream_finish(procs: list[asyncio.subprocess.Process], upstream: TestServer, fake: FakeUpstream) -> None:
    fake.chunk_delay = 0.15
    proc, url = await start_ruyi("--upstream", base_url(upstream) + "/v1")
    procs.append(proc)
    async with aiohttp.ClientSession() as http:
        async with http.get(url + "/readyz") as resp:
            assert resp.status == 200
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        async with http.post(url + "/v1/chat/completions", json=body) as resp:
            first = await resp.content.readline()
            assert first.startswith(b"data: ")
            proc.send_signal(signal.SIGTERM)
            rest = await resp.content.read()
    assert rest.rstrip().endswith(b"data: [DONE]")
    assert fake.finished_streams == 1
    assert await asyncio.wait_for(proc.wait(), 30) == 0
    with pytest.raises(aiohttp.ClientConnectionError):
        async with aiohttp.ClientSession() as http:
            await http.get(url + "/healthz")


async def test_sigterm_ends_streams_still_open_at_the_deadline_with_an_error_and_drains_the_store(
    procs: list[asyncio.subprocess.Process], aiohttp_server: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    endless = FakeUpstream(reply=" ".join(["word"] * 2000), chunk_delay=0.1)  # 200 s of stream
    slow = FakeUpstream(fault="delay", delay=600)  # answers nothing for 10 minutes
    up, slow_up = await aiohttp_server(make_fake_app(endless)), await aiohttp_server(make_fake_app(slow))
    config = tmp_path / "ruyi.yaml"
    config.write_text(
        json.dumps(
            {
                "server": {"shutdown_grace_seconds": 1},
                "routes": [
                    {"model": "llama*", "url": base_url(up), "kind": "ollama"},
                    {"model": "slow*", "url": base_url(slow_up) + "/v1", "kind": "openai"},
                ],
            }
        )
    )
    proc, url = await start_ruyi("--upstream", base_url(up) + "/v1", "--config", str(config))
    procs.append(proc)
    messages = [{"role": "user", "content": "hi"}]
    async with aiohttp.ClientSession() as http:
        sse = await http.post(url + "/v1/chat/completions", json={"model": "m", "messages": messages, "stream": True})
        ndjson = await http.post(url + "/api/chat", json={"model": "llama3", "messages": messages})
        assert (await sse.content.readline()).startswith(b"data: ") and (await ndjson.content.readline()).startswith(b"{")
        waiting = asyncio.ensure_future(http.post(url + "/v1/chat/completions", json={"model": "slow", "messages": messages}))
        await slow.wait_for()
        proc.send_signal(signal.SIGTERM)
        sse_rest, ndjson_rest = await asyncio.gather(sse.content.read(), ndjson.content.read())  # hang guard below
        answer = await waiting
        assert answer.status == 503 and (await answer.json())["error"]["code"] == "ruyi_shutting_down"
    events_sse = [line for line in sse_rest.split(b"\n\n") if line.strip()]
    assert events_sse[-1] == b"data: [DONE]"
    error = json.loads(events_sse[-2].removeprefix(b"data: "))["error"]
    assert error["code"] == "ruyi_shutting_down" and "shutdown_grace_seconds" in error["message"]
    last_line = json.loads(ndjson_rest.strip().split(b"\n")[-1])
    assert "shutdown_grace_seconds" in last_line["error"]
    assert endless.finished_streams == 0
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    names = [e["event"] for e in await events(proc)]
    assert "shutdown_deadline_cut" in names and "store_queue_drained" in names


async def test_head_and_get_of_the_root_answer_200(make_proxy: Any) -> None:
    proxy = await make_proxy()
    async with aiohttp.ClientSession() as http:
        async with http.head(base_url(proxy) + "/") as resp:
            assert resp.status == 200
        async with http.get(base_url(proxy) + "/") as resp:
            assert resp.status == 200 and (await resp.json())["dashboard"] == "/ruyi/ui"
