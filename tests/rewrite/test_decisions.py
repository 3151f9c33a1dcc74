"""Decisions stay made: they accumulate per message, durably across restarts, and nothing is decided twice."""

from __future__ import annotations

import asyncio
import copy
import json
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp

from memory.chain import chain_of
from memory.store.sqlite_store import SQLiteStore
from proxy import appkeys
from proxy.context import RequestContext
from proxy.know.options import TierOptions
from proxy.know.tiers import tier_for
from proxy.rewrite.steps import default_steps
from tests.conftest import MakeProxy, base_url, config_for
from tests.fake_upstream import FakeUpstream

TINY = {
    "window": {"models": {"gpt-4o*": 1000}, "reserve_min_tokens": 100},
    "pruning": {"economic": False, "clear_at_least": 0.0, "protected_turns": 1},
    "archive": {"enabled": False},
}
"""Every request is over the prune tier, so a batch runs on each one and takes what the strategies find (no archive:
pruning on its own)."""


def module(name: str) -> str:
    return "\n".join(f"def {name}_{i}(x):\n    return x * {i}  # {name}, line {i}" for i in range(40))


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def parallel_writes(reads: int, more: int = 0) -> list[dict[str, Any]]:
    """Claude Code writing two files in one message (parallel tool calls), then reading them back one by one."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Write a.py and b.py"},
        {
            "role": "assistant",
            "content": "Writing both.",
            "tool_calls": [
                call("call_wa", "Write", file_path="/w/a.py", content=module("a")),
                call("call_wb", "Write", file_path="/w/b.py", content=module("b")),
            ],
        },
        {"role": "tool", "tool_call_id": "call_wa", "content": "File created successfully at: /w/a.py"},
        {"role": "tool", "tool_call_id": "call_wb", "content": "File created successfully at: /w/b.py"},
    ]
    for name in "ab"[:reads]:
        messages.append(
            {"role": "assistant", "content": f"Checking {name}.py.", "tool_calls": [call(f"call_r{name}", "Read", file_path=f"/w/{name}.py")]}
        )
        messages.append({"role": "tool", "tool_call_id": f"call_r{name}", "content": module(name)})
    for i in range(more):
        messages.append({"role": "assistant", "content": f"Step {i}.", "tool_calls": [call(f"call_l{i}", "Bash", command=f"ls /w/d{i}")]})
        messages.append({"role": "tool", "tool_call_id": f"call_l{i}", "content": f"x{i}.py"})
    return messages


async def post(proxy: Any, messages: list[dict[str, Any]]) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            base_url(proxy) + "/v1/chat/completions", json={"model": "gpt-4o", "messages": messages}, headers={"X-Ruyi-Agent": "a"}
        )
        await resp.read()
        assert resp.status == 200
        return resp


async def reports(proxy: Any, session: str) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base_url(proxy)}/ruyi/v1/sessions/{session}/report", headers={"X-Ruyi-Agent": "a"}) as r:
            return list((await r.json())["reports"])


def decided_and_in_force(session_reports: list[dict[str, Any]]) -> tuple[int, int]:
    """Items decided over a session's life (its kept reports) and items in force at its end."""
    kept = [r for r in session_reports if r.get("applied", r["mode"] == "on")]
    decided = sum(row["items"] for r in kept for row in r["strategies"].values())
    last = kept[-1]
    return decided, last["in_force"]["items"] + sum(row["items"] for row in last["strategies"].values())


async def test_two_decisions_on_one_message_accumulate_across_restarts(make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Path) -> None:
    requests = [parallel_writes(1), parallel_writes(2), parallel_writes(2, 1), parallel_writes(2, 2)]
    proxy = await make_proxy(**TINY)
    session = (await post(proxy, requests[0])).headers["X-Ruyi-Session"]
    for request in requests[1:]:
        await proxy.close()  # a restart: the next Ruyi knows only what the store kept
        proxy = await make_proxy(**TINY)
        assert (await post(proxy, request)).headers["X-Ruyi-Session"] == session
    sent = fake.last().json["messages"]
    writes = sent[2]["tool_calls"]
    assert all("[ruyi:" in c["function"]["arguments"] for c in writes), "both writes' inputs are replaced"
    history = await reports(proxy, session)
    decided, in_force = decided_and_in_force(history)
    assert decided == in_force, "nothing decided twice"
    assert [r["strategies"].get("supersede", {}).get("items", 0) for r in history] == [1, 1, 0, 0]
    await proxy.close()
    store = SQLiteStore(data_dir / "ruyi.db")
    stored = store.load_session("a", session).decisions  # type: ignore[union-attr]
    store.close()
    on_writes = stored[chain_of(requests[-1]).links[2]]
    assert sorted(d["target"] for d in on_writes) == ["args:call_wa", "args:call_wb"]


WINDOW = {"models": {"gpt-4o*": 12000, "llama*": 12000}}
FILE = "\n".join(f"def function_{i}(x):\n    return x * {i}  # a line of the module" for i in range(120))


def rereads(turns: int) -> list[dict[str, Any]]:
    """An agent re-reading one file (dedup fodder): over the prune tier of a 12k window from 11 turns on."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix module.py"}]
    for t in range(turns):
        command = "cat /testbed/module.py" if t % 2 == 0 else f"ls /testbed/dir{t}"
        messages.append({"role": "assistant", "content": f"Step {t}.", "tool_calls": [call(f"call_{t}", "bash", command=command)]})
        output = FILE if t % 2 == 0 else f"file_{t}.py"
        messages.append({"role": "tool", "tool_call_id": f"call_{t}", "content": f"<returncode>0</returncode>\n<output>\n{output}\n</output>"})
    return messages


async def send(proxy: Any, messages: list[dict[str, Any]], agent: str = "a", mode: str = "on") -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            base_url(proxy) + "/v1/chat/completions",
            json={"model": "gpt-4o", "messages": messages},
            headers={"X-Ruyi-Agent": agent, "X-Ruyi-Mode": mode},
        )
        await resp.read()
        assert resp.status == 200
        return resp


async def stats(proxy: Any) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http:
        async with http.get(base_url(proxy) + "/ruyi/v1/stats") as r:
            return dict(await r.json())


async def test_dry_run_records_nothing_that_changes_later_forwarding(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window=WINDOW, pruning={"economic": False})
    for turns in range(1, 14):
        resp = await send(proxy, rereads(turns), mode="dry-run")
        assert fake.last().json["messages"] == rereads(turns)
    session = resp.headers["X-Ruyi-Session"]
    await send(proxy, rereads(14))  # switched on
    switched = fake.last().body
    *dry, on = await reports(proxy, session)
    assert on["in_force"]["items"] == 0, "nothing decided in dry-run was in force"
    await send(proxy, rereads(14), agent="b")  # a session that never ran in dry-run
    assert switched == fake.last().body
    assert dry[-1]["mode"] == "dry-run" and dry[-1]["tokens_after"] < dry[-1]["tokens_before"]  # it computed and reported
    assert all(r["applied"] is False for r in dry)


def lock(db: Path) -> sqlite3.Connection:
    """Another process holding the write lock: every write of a Ruyi with busy_timeout_ms 0 fails."""
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


async def test_a_failed_durable_write_forwards_the_clients_bytes_and_keeps_no_decision(
    make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Path
) -> None:
    proxy = await make_proxy(window=WINDOW, pruning={"economic": False}, store={"busy_timeout_ms": 0})
    body = {"model": "gpt-4o", "messages": rereads(13)}
    raw = json.dumps(body).encode()
    other = lock(data_dir / "ruyi.db")
    async with aiohttp.ClientSession() as http:
        async with http.post(
            base_url(proxy) + "/v1/chat/completions", data=raw, headers={"X-Ruyi-Agent": "a", "Content-Type": "application/json"}
        ) as r:
            assert r.status == 200
            assert r.headers["X-Ruyi-Tokens-After"] == r.headers["X-Ruyi-Tokens-Before"]
    assert fake.last().body == raw, "the client's own bytes"
    counts = await stats(proxy)
    assert counts["failed_open"]["store_write"] == 1 and counts["store_writes"]["failed"] >= 1
    other.execute("ROLLBACK")
    resp = await send(proxy, rereads(13))
    assert fake.last().json["messages"] != rereads(13), "the store is back: the rewrite goes out"
    latest = (await reports(proxy, resp.headers["X-Ruyi-Session"]))[-1]
    assert latest["in_force"]["items"] == 0 and latest["strategies"], "decided now, not before"
    decided, in_force = decided_and_in_force(await reports(proxy, resp.headers["X-Ruyi-Session"]))
    assert decided == in_force


class DropsTheLastMessageOnce:
    """A step whose rewrite the Ollama dialect cannot carry back (one message fewer), on the first request only."""

    name = "drops_the_last_message_once"

    def __init__(self) -> None:
        self.done = False

    def apply(self, messages: list[dict[str, Any]], ctx: RequestContext) -> list[dict[str, Any]]:
        if self.done:
            return messages
        self.done = True
        return messages[:-1]


def ollama_native(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    native = [{k: v for k, v in m.items() if k != "tool_call_id"} for m in copy.deepcopy(messages)]
    for m in native:
        for c in m.get("tool_calls") or []:
            c.pop("id"), c.pop("type")
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return native


async def test_a_failed_dialect_rewrite_forwards_the_clients_bytes_and_keeps_no_decision(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    cfg = config_for("http://127.0.0.1:1", "ollama", window=WINDOW, pruning={"economic": False})
    proxy = await make_proxy("ollama", window=WINDOW, pruning={"economic": False}, steps=[*default_steps(cfg), DropsTheLastMessageOnce()])
    raw = json.dumps({"model": "llama3", "messages": ollama_native(rereads(13)), "stream": False}).encode()
    async with aiohttp.ClientSession() as http:
        for _ in range(2):
            async with http.post(base_url(proxy) + "/api/chat", data=raw, headers={"Content-Type": "application/json"}) as r:
                assert r.status == 200
                session = r.headers["X-Ruyi-Session"]
            if _ == 0:
                assert fake.last("/api/chat").body == raw, "the client's own bytes, not even num_ctx added"
    assert fake.last("/api/chat").body != raw, "the next request is rewritten"
    assert (await stats(proxy))["failed_open"] == {"dialect": 1}
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base_url(proxy)}/ruyi/v1/sessions/{session}/report") as r:
            first, second = (await r.json())["reports"]
    assert first["applied"] is False and second["in_force"]["items"] == 0 and second["strategies"]


async def test_the_unsaved_backlog_is_bounded_while_the_store_fails(make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Path) -> None:
    proxy = await make_proxy(store={"busy_timeout_ms": 0, "unsaved_max": 20}, sessions={"max": 5})
    measurer = proxy.app[appkeys.MEASURER]
    other = lock(data_dir / "ruyi.db")
    for i in range(30):  # thirty new sessions, each adding links, a tip and a session row (written in the background)
        await send(proxy, [{"role": "user", "content": f"task {i}"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}])
    await measurer.drain()  # the background writer tried the last of them
    writes = (await stats(proxy))["store_writes"]
    assert writes["failed"] >= 1 and writes["dropped"] > 0 and writes["unsaved"] <= 20
    other.execute("ROLLBACK")
    resp = await send(
        proxy,
        [
            {"role": "user", "content": "task 29"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "thanks"},
        ],
    )
    assert resp.headers["X-Ruyi-Session"]
    await measurer.drain()
    for _ in range(200):  # the background writer retries what waits (backing off while the store was held): it lands
        after = (await stats(proxy))["store_writes"]
        if after["unsaved"] == 0:
            break
        await asyncio.sleep(0.05)
    # a retry may have failed once more between the two reads, before the lock was let go
    assert after["unsaved"] == 0 and after["failed"] >= writes["failed"] and after["dropped"] >= writes["dropped"]


async def test_one_scale_with_an_upstream_that_counts_fewer_tokens(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    """An upstream counting 0.71× our estimate: what Ruyi says it sent is what the upstream counts it received,
    and the tier (and the batch trigger) read that same scale."""
    fake.prompt_scale = 0.71
    proxy = await make_proxy(window=WINDOW, pruning={"economic": False})
    usable = 12000 - 2000  # the window less the answer's reserve
    pruned = 0
    for turns in range(1, 22):
        async with aiohttp.ClientSession() as http:
            async with http.post(
                base_url(proxy) + "/v1/chat/completions", json={"model": "gpt-4o", "messages": rereads(turns)}, headers={"X-Ruyi-Agent": "a"}
            ) as r:
                reported = (await r.json())["usage"]["prompt_tokens"]
                before, after = int(r.headers["X-Ruyi-Tokens-Before"]), int(r.headers["X-Ruyi-Tokens-After"])
                tier = r.headers["X-Ruyi-Tier"]
        pruned += after < before
        assert 0 <= after <= before
        if turns > 1:  # calibrated by the first answer
            assert abs(after - reported) <= 0.01 * reported + 2, (turns, after, reported)
        assert tier == tier_for(after / usable, TierOptions()).value
    assert pruned >= 5
