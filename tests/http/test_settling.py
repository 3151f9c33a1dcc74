"""A whole answer is sent before its after-answer work; the agent's next request, sent the moment the answer arrives
(on a new connection: a kept-alive one is served in order anyway), still sees what that work taught: the calibration
its tokens are counted with, the Responses id its ``previous_response_id`` names; Ruyi's own API sees the audit record
and the access event's metrics of every answer already sent."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from proxy import appkeys
from proxy.http.settling import Unsettled
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

ROUNDS = 12
ADMIN = {"Authorization": "Bearer sk-test"}


def conversation(step: int, big: int = 0) -> list[dict[str, Any]]:
    """``big``: characters of tool output in every user turn (its raw turn redacted and hashed after the answer,
    in a worker thread: what makes that work slow enough for the next request to overtake it, were it not waiting)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for s in range(step + 1):
        if s:
            messages.append({"role": "assistant", "content": "Hello from the fake upstream."})
        output = " ".join(f"line {s}.{i}: value={i * 7919 % 104729}" for i in range(big // 28)) if big else ""
        messages.append({"role": "user", "content": f"step {s}: fix the failing test " + "context " * (40 + 7 * s) + output})
    return messages


async def counted_in_turn(proxy: TestServer, pause_s: float, big: int) -> list[int]:
    """One agent's growing conversation, not streamed, each request on a new connection after ``pause_s``; the tokens
    each request was counted with (calibrated by every earlier answer)."""
    out = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        for step in range(ROUNDS):
            body = {"model": "gpt-4o", "stream": False, "messages": conversation(step, big)}
            async with http.post(base_url(proxy) + "/v1/chat/completions", json=body, headers={"X-Ruyi-Agent": "settling"}) as resp:
                assert resp.status == 200
                await resp.read()
                out.append(int(resp.headers["X-Ruyi-Tokens-Before"]))
            await asyncio.sleep(pause_s)
    return out


@pytest.mark.parametrize("big", [0, 20_000], ids=["small", "large-tool-output"])
async def test_the_next_request_sent_at_once_is_counted_as_if_the_answer_had_waited(
    make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Path, monkeypatch: pytest.MonkeyPatch, big: int
) -> None:
    fake.prompt_scale = 1.7  # the upstream counts 1.7× Ruyi's estimate: every answer moves the calibration
    at_once = await counted_in_turn(await make_proxy(), 0.0, big)
    monkeypatch.setenv("RUYI_DATA_DIR", str(data_dir.parent / "paced"))  # the same conversation, another Ruyi and store
    paced = await counted_in_turn(await make_proxy(), 0.5, big)
    assert at_once == paced
    assert at_once[-1] > at_once[0] and len(set(at_once)) > ROUNDS // 2  # the calibration did move


async def test_a_responses_chain_sent_at_once_stays_one_session(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    previous, sessions = "resp_before_ruyi", []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        for n in range(ROUNDS):
            body = {"model": "gpt-5-codex", "store": True, "previous_response_id": previous, "input": [{"role": "user", "content": f"{n}: go on"}]}
            async with http.post(base_url(proxy) + "/v1/responses", json=body, headers={"X-Ruyi-Agent": "chained"}) as resp:
                assert resp.status == 200
                previous = (await resp.json())["id"]
                sessions.append(resp.headers["X-Ruyi-Session"])
    assert len(set(sessions)) == 1, sessions  # each request found the session by the answer id the previous one left


async def test_the_admin_api_reads_every_answer_already_sent(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.prompt_scale = 1.7
    proxy = await make_proxy(server={"loop_rewrite_bytes": 0})  # each answer's work in a worker thread: the widest gap
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        for step in range(ROUNDS):
            body = {"model": "gpt-4o", "stream": False, "messages": conversation(step)}
            async with http.post(base_url(proxy) + "/v1/chat/completions", json=body, headers={"X-Ruyi-Agent": "admin-reads"}) as resp:
                assert resp.status == 200
                session, usage = resp.headers["X-Ruyi-Session"], (await resp.json())["usage"]
            headers = {**ADMIN, "X-Ruyi-Agent": "admin-reads"}
            async with http.get(base_url(proxy) + f"/ruyi/v1/sessions/{session}", headers=headers) as got:
                assert got.status == 200
                assert (await got.json())["upstream_prompt_tokens"] == usage["prompt_tokens"]  # this answer's, recorded after it
            async with http.get(base_url(proxy) + "/metrics", headers=ADMIN) as got:
                answered = [
                    line for line in (await got.text()).splitlines() if line.startswith("ruyi_requests_total{") and "/v1/chat/completions" in line
                ]
            assert sum(float(line.rsplit(" ", 1)[1]) for line in answered) == step + 1  # its access event counted
    unsettled = proxy.app[appkeys.UNSETTLED]
    assert len(unsettled) == 0 and unsettled.overdue == 0


class HeldWork:
    """Holds up the work after one answer for ``HELD_S``: while the upstream is answering, the registry's lock is taken by
    another thread (so the work goes to a worker thread) and the only worker thread is kept busy (so it queues there);
    both are let go once the answer has reached the client. Anything sent at once then arrives before that work ran."""

    HELD_S = 0.3

    def __init__(self, proxy: TestServer, fake: FakeUpstream) -> None:
        self.measurer, self.fake = proxy.app[appkeys.MEASURER], fake

    async def post(self, http: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[Any, dict[str, str]]:
        taken, answered, release = threading.Event(), threading.Event(), threading.Event()

        def hold() -> None:
            with self.measurer.sessions.lock:  # type: ignore[attr-defined]
                taken.set()
                answered.wait(10)

        self.fake.fault = "hold"
        self.fake.held.clear()
        self.fake.arrived.clear()
        asked = asyncio.ensure_future(http.post(url, json=body, headers=headers))
        await self.fake.arrived.wait()
        busy = asyncio.ensure_future(self.measurer.offload.run(release.wait, 10, bounded=False))  # the only worker thread
        holder = threading.Thread(target=hold)
        holder.start()
        await asyncio.get_running_loop().run_in_executor(None, taken.wait, 10)
        self.fake.held.set()
        async with await asyncio.wait_for(asked, 10) as resp:
            assert resp.status == 200
            got, headers_back = (await resp.read() if body.get("stream") else await resp.json()), dict(resp.headers)
        for _ in range(20):  # the handler's work is on its way to the worker thread's queue
            await asyncio.sleep(0.005)
        answered.set()
        threading.Timer(self.HELD_S, release.set).start()
        asyncio.get_running_loop().call_later(5, busy.cancel)
        self.fake.fault = None
        return got, headers_back


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_request_sent_while_the_answers_work_is_held_up_sees_its_calibration(
    make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """A stream's work runs once its last event is sent: the next request waits for it as after a whole answer."""
    fake.prompt_scale = 1.7
    url = "/v1/chat/completions"

    async def three(proxy: TestServer, held: bool) -> list[int]:
        out = []
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
            for step in range(3):
                body = {"model": "gpt-4o", "stream": stream, "messages": conversation(step)}
                if held and step == 1:
                    _, headers = await HeldWork(proxy, fake).post(http, base_url(proxy) + url, body, {"X-Ruyi-Agent": "held"})
                else:
                    async with http.post(base_url(proxy) + url, json=body, headers={"X-Ruyi-Agent": "held"}) as resp:
                        assert resp.status == 200
                        headers = dict(resp.headers)
                        await resp.read()
                    if not held:
                        await asyncio.sleep(0.5)
                out.append(int(headers["X-Ruyi-Tokens-Before"]))
        return out

    proxy = await make_proxy(server={"worker_threads": 1})
    held = await three(proxy, True)
    assert proxy.app[appkeys.UNSETTLED].waited >= 1  # the third request did wait
    monkeypatch.setenv("RUYI_DATA_DIR", str(data_dir.parent / "paced"))
    paced = await three(await make_proxy(server={"worker_threads": 1}), False)
    assert held == paced


async def test_a_responses_chain_sent_while_the_answers_work_is_held_up_stays_one_session(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(server={"worker_threads": 1})
    url = base_url(proxy) + "/v1/responses"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        body = {"model": "gpt-5-codex", "store": True, "previous_response_id": "resp_before_ruyi", "input": [{"role": "user", "content": "go"}]}
        first, headers = await HeldWork(proxy, fake).post(http, url, body, {"X-Ruyi-Agent": "chained"})
        body = {**body, "previous_response_id": first["id"], "input": [{"role": "user", "content": "go on"}]}
        async with http.post(url, json=body, headers={"X-Ruyi-Agent": "chained"}) as resp:
            assert resp.status == 200
            assert resp.headers["X-Ruyi-Session"] == headers["X-Ruyi-Session"]  # found by the answer id the held work records


async def test_metrics_read_while_the_answers_work_is_held_up_count_it(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(server={"worker_threads": 1})
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        body = {"model": "gpt-4o", "stream": False, "messages": conversation(0)}
        await HeldWork(proxy, fake).post(http, base_url(proxy) + "/v1/chat/completions", body, {})
        async with http.get(base_url(proxy) + "/metrics", headers=ADMIN) as got:
            answered = [
                line for line in (await got.text()).splitlines() if line.startswith("ruyi_requests_total{") and "/v1/chat/completions" in line
            ]
    assert sum(float(line.rsplit(" ", 1)[1]) for line in answered) == 1


async def test_a_wait_for_an_unsettled_answer_is_bounded_and_per_agent() -> None:
    unsettled = Unsettled()
    first = unsettled.begin("a")
    assert unsettled.waiting_for("a") and not unsettled.waiting_for("b")
    assert await unsettled.wait("b", within_s=5.0)  # another agent never waits
    waiter = asyncio.ensure_future(unsettled.wait("a", within_s=5.0))
    await asyncio.sleep(0)
    assert not waiter.done()
    unsettled.settle("a", first)  # its work done: its access event still to come
    await asyncio.sleep(0)
    assert not waiter.done()
    unsettled.settle("a", first)
    assert await waiter and not unsettled.waiting_for("a") and len(unsettled) == 0
    hung = unsettled.begin("a")
    assert not await unsettled.wait(None, within_s=0.05)  # never settled: given up, counted
    assert unsettled.overdue == 1 and unsettled.waited == 2
    # given up once (a disk the kernel holds can keep the work for minutes): the agent's later requests go at once
    assert not unsettled.waiting_for("a") and await unsettled.wait("a", within_s=5.0) and unsettled.waited == 2
    unsettled.settle("a", hung)
    unsettled.settle("a", hung)  # its work ends at last: nothing left, nothing raised
    assert len(unsettled) == 0 and hung.done()
