"""``count_tokens`` counts what Ruyi would forward: the client's body and the layout's sections (notebook, rules), nothing recorded."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import anthropic

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.layout.test_dialects import MODEL, add_note

PINNED = {"calibration": {"min_ratio": 0.999, "max_ratio": 1.001}}  # Ruyi's estimate and the upstream's on one scale
MESSAGES = [{"role": "user", "content": "Fix the flaky test in tests/test_cache.py, please."}]


def client(url: str, agent: str = "c") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0, default_headers={"X-Ruyi-Agent": agent})


def rows(data_dir: Path, table: str) -> int:
    if not (data_dir / "ruyi.db").exists():
        return 0
    with sqlite3.connect(data_dir / "ruyi.db") as db:
        return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


async def test_the_count_includes_the_layouts_sections_and_records_nothing(
    make_proxy: MakeProxy, fake: FakeUpstream, upstream: Any, tmp_path: Path, data_dir: Path
) -> None:
    (tmp_path / "AGENTS.md").write_text("# Rules\n" + "\n".join(f"- rule {i}: keep the change small and tested" for i in range(40)), encoding="utf-8")
    proxy = await make_proxy("anthropic", workspace={"root": str(tmp_path)}, **PINNED)
    await add_note(proxy, "runs Python 3.12 in a virtualenv", agent="c")
    own = await asyncio.to_thread(client(base_url(upstream)).messages.count_tokens, model=MODEL, messages=MESSAGES)
    sessions, audits = rows(data_dir, "sessions"), rows(data_dir, "audit")
    raw = await asyncio.to_thread(client(base_url(proxy)).messages.with_raw_response.count_tokens, model=MODEL, messages=MESSAGES)
    counted, layout = raw.parse().input_tokens, int(raw.headers["X-Ruyi-Layout-Tokens"])
    assert counted == own.input_tokens + layout and raw.headers["X-Ruyi-Token-Count"] == "upstream"
    assert rows(data_dir, "sessions") == sessions and rows(data_dir, "audit") == audits  # counting decided and kept nothing
    sent = await asyncio.to_thread(client(base_url(proxy)).messages.with_raw_response.create, model=MODEL, max_tokens=50, messages=MESSAGES)
    forwarded = fake.last("/v1/messages").json
    text = str(forwarded)
    assert "rule 39: keep the change small" in text and "runs Python 3.12 in a virtualenv" in text
    added = int(sent.headers["X-Ruyi-Tokens-After"]) - int(sent.headers["X-Ruyi-Tokens-Before"])  # what the layout added, as Ruyi counts
    assert added > 100 and abs(layout - added) <= 2
    off = await asyncio.to_thread(
        client(base_url(proxy)).messages.with_raw_response.count_tokens, model=MODEL, messages=MESSAGES, extra_headers={"X-Ruyi-Mode": "off"}
    )
    assert off.parse().input_tokens == own.input_tokens and "X-Ruyi-Layout-Tokens" not in off.headers  # nothing added: the client's count


async def test_without_memory_or_workspace_the_count_is_the_upstreams(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.prompt_tokens = 1234
    proxy = await make_proxy("anthropic")
    raw = await asyncio.to_thread(client(base_url(proxy)).messages.with_raw_response.count_tokens, model=MODEL, messages=MESSAGES)
    assert raw.parse().input_tokens == 1234 and "X-Ruyi-Layout-Tokens" not in raw.headers


async def test_the_count_of_an_archived_session_is_what_ruyi_would_forward_and_decides_nothing(
    make_proxy: MakeProxy, fake: FakeUpstream, upstream: Any
) -> None:
    import aiohttp

    from tests.rewrite.test_anthropic_session import WINDOW, conversation

    proxy = await make_proxy("anthropic", window=WINDOW, **PINNED)
    headers = {"X-Ruyi-Agent": "cc"}
    async with aiohttp.ClientSession() as http:
        for turns in range(1, 60):
            async with http.post(base_url(proxy) + "/v1/messages", json=conversation(turns), headers=headers) as resp:
                assert resp.status == 200
                if "X-Ruyi-Archived" in resp.headers:
                    break
        sid = resp.headers["X-Ruyi-Session"]
        async with http.get(base_url(proxy) + f"/ruyi/v1/sessions/{sid}", headers=headers) as got:
            requests = (await got.json())["requests"]
        body = {k: v for k, v in conversation(turns + 1).items() if k in ("model", "system", "tools", "messages", "thinking")}
        async with http.post(base_url(proxy) + "/v1/messages/count_tokens", json=body, headers=headers) as counted:
            assert counted.status == 200 and counted.headers["X-Ruyi-Count-Of"] == "forwarded"
            simulated = (await counted.json())["input_tokens"]
        async with http.post(base_url(upstream) + "/v1/messages/count_tokens", json=body) as own:
            full = (await own.json())["input_tokens"]
        assert simulated < 0.8 * full  # the archive and pruning in force, not the history the client holds
        async with http.get(base_url(proxy) + f"/ruyi/v1/sessions/{sid}", headers=headers) as got:
            assert (await got.json())["requests"] == requests  # counting decided nothing
        fresh = {**body, "messages": [{"role": "user", "content": "A new task."}]}
        async with http.post(base_url(proxy) + "/v1/messages/count_tokens", json=fresh, headers=headers) as counted:
            assert counted.headers["X-Ruyi-Count-Of"] == "sent"
