"""A way to forget: DELETE /ruyi/v1/sessions/<id> and `ruyi store forget` remove everything stored, from every file."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from memory.store.sqlite_store import SQLiteStore
from tests.conftest import MakeProxy, base_url
from tests.stored_bytes import stored_bytes

PRUNE = {"pruning": {"strategies": {"truncation": {"max_tool_output_tokens": 150}}}}


def conversation(marker: str, turns: int = 2) -> list[dict[str, Any]]:
    """Tool outputs long enough to be truncated, each line carrying a marker (kept in refs and decisions)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": f"task {marker}"}]
    for i in range(turns):
        call = {
            "id": f"call_{marker}_{i}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": f"cat {marker}.log"})},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "\n".join(f"{marker} row {n}" for n in range(300))},
        ]
    return messages


async def replay(http: aiohttp.ClientSession, proxy: TestServer, marker: str, agent: str) -> str:
    """Every prefix of the conversation as its agent sent it; the session's id."""
    messages = conversation(marker)
    for end in (4, len(messages)):
        async with http.post(
            base_url(proxy) + "/v1/chat/completions", json={"model": "gpt-4o", "messages": messages[:end]}, headers={"X-Ruyi-Agent": agent}
        ) as resp:
            assert resp.status == 200
            session = resp.headers["X-Ruyi-Session"]
    return session


def files_holding(data_dir: Path, text: str) -> list[str]:
    return [name for name, data in stored_bytes(data_dir).items() if text.encode() in data]  # packed bodies included


async def test_delete_a_session_removes_everything_stored_for_it(make_proxy: MakeProxy, data_dir: Path) -> None:
    proxy = await make_proxy(**PRUNE)
    async with aiohttp.ClientSession() as http:
        gone = await replay(http, proxy, "FORGETME-7731", "agent-a")
        kept = await replay(http, proxy, "KEEPME-5510", "agent-a")
        async with http.get(base_url(proxy) + f"/ruyi/v1/sessions/{gone}/report", headers={"X-Ruyi-Agent": "agent-a"}) as resp:
            assert resp.status == 200  # reports and audit records are written by now
        assert files_holding(data_dir, "FORGETME-7731")
        async with http.delete(base_url(proxy) + f"/ruyi/v1/sessions/{gone}", headers={"X-Ruyi-Agent": "agent-a"}) as resp:
            assert resp.status == 200
            removed = (await resp.json())["removed"]
        assert removed["sessions"] == 1 and removed["decisions"] > 0 and removed["refs"] > 0
        assert removed["reports"] == 2 and removed["audit"] == 2 and removed["chain"] > 0
        for path in (f"/sessions/{gone}", f"/sessions/{gone}/report"):
            async with http.get(base_url(proxy) + "/ruyi/v1" + path, headers={"X-Ruyi-Agent": "agent-a"}) as resp:
                assert resp.status == 404
        async with http.delete(base_url(proxy) + f"/ruyi/v1/sessions/{gone}", headers={"X-Ruyi-Agent": "agent-a"}) as resp:
            assert resp.status == 404
        async with http.delete(base_url(proxy) + f"/ruyi/v1/sessions/{kept}", headers={"X-Ruyi-Agent": "agent-b"}) as resp:
            assert resp.status == 404  # another agent's session is not found, let alone removed
        async with http.get(base_url(proxy) + f"/ruyi/v1/sessions/{kept}", headers={"X-Ruyi-Agent": "agent-a"}) as resp:
            assert resp.status == 200
    assert files_holding(data_dir, "FORGETME-7731") == []  # database, WAL: nothing left, not even in free pages


async def ruyi(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "proxy.cli", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=dict(os.environ)
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def test_ruyi_store_forget_removes_an_agent_or_one_session(make_proxy: MakeProxy, data_dir: Path) -> None:
    proxy = await make_proxy(**PRUNE)
    async with aiohttp.ClientSession() as http:
        first = await replay(http, proxy, "ALPHA-1111", "agent-a")
        await replay(http, proxy, "BRAVO-2222", "agent-a/planner")
        await replay(http, proxy, "CHARLIE-3333", "agent-b")
    await proxy.close()
    code, out = await ruyi("store", "forget", "--agent", "agent-a", "--session", first)
    assert code == 0 and f"agent agent-a, session {first}" in out and "1 sessions" in out and "refs" in out
    assert files_holding(data_dir, "ALPHA-1111") == [] and files_holding(data_dir, "BRAVO-2222")
    code, out = await ruyi("store", "forget", "--agent", "agent-a")
    assert code == 0 and "1 sessions" in out  # the sub-agent agent-a/planner's
    assert files_holding(data_dir, "BRAVO-2222") == [] and files_holding(data_dir, "CHARLIE-3333")
    code, out = await ruyi("store", "forget", "--agent", "agent-a")
    assert code == 0 and "nothing stored" in out
    store = SQLiteStore(data_dir / "ruyi.db")
    assert store.session_ids("agent-a") == [] and len(store.session_ids("agent-b")) == 1
    store.close()


async def test_forgetting_without_a_store_empties_memory(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(store={"backend": "memory"}, **PRUNE)
    async with aiohttp.ClientSession() as http:
        session = await replay(http, proxy, "MEMORY-4444", "agent-a")
        async with http.delete(base_url(proxy) + f"/ruyi/v1/sessions/{session}", headers={"X-Ruyi-Agent": "agent-a"}) as resp:
            removed = (await resp.json())["removed"]
        assert removed["sessions"] == 1 and removed["refs"] > 0 and removed["reports"] == 2
        async with http.get(base_url(proxy) + "/ruyi/v1/sessions", headers={"X-Ruyi-Agent": "agent-a"}) as resp:
            assert (await resp.json())["sessions"] == []


def rows_holding(url: str, text: str) -> dict[str, int]:
    """Rows of every table of the store's schema whose text (bytea as hex) holds ``text``."""
    import psycopg

    found: dict[str, int] = {}
    with psycopg.connect(url) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()]
        for table in tables:
            row = conn.execute(
                f'SELECT count(*) FROM "{table}" t WHERE t::text LIKE %s OR t::text LIKE %s', (f"%{text}%", f"%{text.encode().hex()}%")
            ).fetchone()
            if row[0]:
                found[table] = row[0]
    return found


async def test_on_postgres_delete_and_ruyi_store_forget_leave_no_row_holding_it(make_proxy: MakeProxy, pg_url: str, monkeypatch: Any) -> None:
    store = {"backend": "postgres", "url": pg_url}
    proxy = await make_proxy(store=store, **PRUNE)
    async with aiohttp.ClientSession() as http:
        gone = await replay(http, proxy, "PGFORGET-8812", "agent-a")
        await replay(http, proxy, "PGKEEP-4471", "agent-a")
        await replay(http, proxy, "PGAGENT-9090", "agent-c")
        async with http.get(base_url(proxy) + f"/ruyi/v1/sessions/{gone}/report", headers={"X-Ruyi-Agent": "agent-a"}) as resp:
            assert resp.status == 200
        assert {"refs", "decisions"} <= set(rows_holding(pg_url, "PGFORGET-8812"))
        async with http.delete(base_url(proxy) + f"/ruyi/v1/sessions/{gone}", headers={"X-Ruyi-Agent": "agent-a"}) as resp:
            assert resp.status == 200
            removed = (await resp.json())["removed"]
        assert removed["sessions"] == 1 and removed["refs"] > 0 and removed["reports"] == 2
    await proxy.close()
    assert rows_holding(pg_url, "PGFORGET-8812") == {} and rows_holding(pg_url, "PGKEEP-4471")
    monkeypatch.setenv("RUYI_STORE__BACKEND", "postgres")
    monkeypatch.setenv("RUYI_STORE__URL", pg_url)
    code, out = await ruyi("store", "forget", "--agent", "agent-c")
    assert code == 0 and "1 sessions" in out, out
    assert rows_holding(pg_url, "PGAGENT-9090") == {} and rows_holding(pg_url, "PGKEEP-4471")
