"""Archive and restart through the real proxy: at the red line, at once when far over, sticky, valid, told, never a loop."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from proxy.know.options import TierOptions
from proxy.know.window import Budget
from proxy.longctx.archive import early_point, regrow_wait, tier_point
from proxy.longctx.options import ArchiveOptions
from proxy.replay.run import Cl100kCounter
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.longctx.sessions import SYSTEM, TASK, archive_message, assert_paired, block_after, edited_files, session, turn

WINDOW = 8000
UNCALIBRATED = {"min_ratio": 0.999, "max_ratio": 1.001}
"""The fake upstream counts 4 characters a token: left uncalibrated, Ruyi's counts are tiktoken's, as checked here."""
CONFIG = {"window": {"models": {"gpt-4o*": WINDOW, "llama*": WINDOW}}, "calibration": UNCALIBRATED}
COUNT = Cl100kCounter()


async def post(proxy: Any, messages: list[dict[str, Any]], path: str = "/v1/chat/completions", **extra: Any) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        body = {"model": "gpt-4o", "messages": messages, "stream": False, **extra}
        resp = await http.post(base_url(proxy) + path, json=body, headers={"X-Ruyi-Agent": "a"})
        await resp.read()
        return resp


def forwarded(fake: FakeUpstream) -> list[dict[str, Any]]:
    return fake.last().json["messages"]


async def test_a_session_at_the_red_line_is_archived_then_continues_from_the_same_bytes(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    archived_at, sent = None, []
    for turns in range(1, 40):
        client = session(turns)
        resp = await post(proxy, client)
        sent.append(forwarded(fake))
        assert int(resp.headers["X-Ruyi-Tokens-After"]) <= WINDOW and COUNT(sent[-1], None).total <= WINDOW
        assert_paired(sent[-1])
        if "X-Ruyi-Archived" in resp.headers and archived_at is None:
            archived_at = turns
            assert resp.headers["X-Ruyi-Archived"] == "1"
            assert resp.headers["X-Ruyi-Tier"] != "archive"
            system, task = sent[-1][0], sent[-1][1]
            assert system == client[0] and archive_message(sent[-1]) == 1  # the system message as sent: the cache holds it
            summary = block_after(task, client[1])  # the task as sent, then the block: no message added between turns
            assert summary.startswith('<ruyi-archive n="1"')
            tail = len(sent[-1]) - 2
            assert sent[-1][2:] == client[-tail:]  # the newest turns, verbatim
            assert tail >= 8  # at least the last 4 turns
            assert all(path in summary for path in edited_files(turns - tail // 2)), "every file the archived turns edited"
            assert "ValueError: empty input in case" in summary and TASK[:60] in summary
        elif archived_at is not None and turns < archived_at + 3:
            previous = sent[-2]
            assert sent[-1][: len(previous)] == previous  # sticky: the restarted prefix, byte for byte
            assert "X-Ruyi-Archived" not in resp.headers
    assert archived_at is not None


async def test_a_history_far_over_the_window_is_brought_under_it_in_the_same_request(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    client = session(60)
    assert COUNT(client, None).total > 3 * WINDOW
    resp = await post(proxy, client)
    assert resp.status == 200 and resp.headers["X-Ruyi-Archived"] == "1"
    out = forwarded(fake)
    assert COUNT(out, None).total <= WINDOW - 2000  # within window − reserve
    assert out[0] == client[0] and block_after(out[1], client[1]) and out[-2:] == client[-2:]
    assert_paired(out)
    again = await post(proxy, client + turn(60))
    assert "X-Ruyi-Archived" not in again.headers and forwarded(fake)[: len(out)] == out


async def test_an_ollama_session_is_archived_in_its_native_form(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("ollama", **CONFIG)
    native = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    for m in session(50)[2:]:
        if m["role"] == "assistant":
            native.append(
                {
                    "role": "assistant",
                    "content": m["content"],
                    "tool_calls": [{"function": {"name": "bash", "arguments": json.loads(c["function"]["arguments"])}} for c in m["tool_calls"]],
                }
            )
        else:
            native.append({"role": "tool", "content": m["content"], "tool_name": "bash"})
    resp = await post(proxy, native, path="/api/chat")
    assert resp.status == 200 and resp.headers["X-Ruyi-Archived"] == "1"
    out = forwarded(fake)
    assert out[0] == native[0] and block_after(out[1], native[1]).startswith("<ruyi-archive")  # the block after the task
    assert out[-6:] == native[-6:]  # native messages untouched, arguments still objects
    assert len(out) < len(native)


async def test_a_session_hovering_near_the_red_line_is_not_archived_over_and_over(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    window = 16000
    proxy = await make_proxy(window={"models": {"gpt-4o*": window}}, calibration=UNCALIBRATED)
    big_system = SYSTEM + "\n" + "\n".join(f"Rule {i}: keep module {i} importable and its docstring accurate." for i in range(600))
    at: list[int] = []
    red = 0.95 * (window - max(0.15 * window, 2000))  # the archive tier of the usable window
    for turns in range(1, 60):
        client = session(turns, system=big_system, lines=6)
        resp = await post(proxy, client)
        after = int(resp.headers["X-Ruyi-Tokens-After"])
        assert after <= window
        if "X-Ruyi-Archived" in resp.headers:
            at.append(turns)
        elif at:
            assert after <= red  # after the first archive (early: the head stays cached) the next ones come by the archive tier, not at overflow
    # a big fixed prefix leaves little room: archives come at the archive tier, but never one right after another
    assert len(at) >= 2 and all(b - a >= 5 for a, b in zip(at, at[1:])), at


async def test_the_audit_record_of_an_archiving_request_says_what_it_did(make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Any) -> None:
    from memory.store.sqlite_store import SQLiteStore

    proxy = await make_proxy(**CONFIG)
    resp = await post(proxy, session(40))
    sid = resp.headers["X-Ruyi-Session"]
    async with aiohttp.ClientSession() as http:  # the report drains the background queue: the audit record is in
        await http.get(base_url(proxy) + f"/ruyi/v1/sessions/{sid}/report", headers={"X-Ruyi-Agent": "a"})
    store = SQLiteStore(data_dir / "ruyi.db")
    try:
        record = store.audit("a", sid)[-1]
    finally:
        store.close()
    assert record["compaction"] is True and record["archive"]["number"] == 1 and record["archive"]["reason"] == "over_window"
    assert record["s2_written_count"] >= 1 and record["retrieval_path"] == ["s1"] and record["est_after"] < record["est_before"]
    assert {"rag_chunks", "latency_retrieval_ms", "drop_reason", "latency_llm_ms"} <= set(record)


async def test_an_upstream_that_says_too_long_gets_an_archive_on_the_one_retry(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window={"models": {"gpt-4o*": 200_000}}, pruning={"enabled": False})  # Ruyi thinks it fits
    client = session(30)
    fake.max_prompt_chars = len(json.dumps(client)) // 2
    resp = await post(proxy, client)
    chats = [r.json["messages"] for r in fake.received if r.path == "/v1/chat/completions"]
    assert resp.status == 200 and len(chats) == 2 and resp.headers["X-Ruyi-Archived"] == "1"
    assert chats[1][0] == client[0] and archive_message(chats[1]) == 1 and len(json.dumps(chats[1])) <= fake.max_prompt_chars
    assert_paired(chats[1])
    fake.max_prompt_chars = None
    await post(proxy, client + turn(30))  # the retry was accepted: its archive is kept, the session goes on from it
    assert forwarded(fake)[: len(chats[1])] == chats[1]


def test_an_early_archive_pays_later_the_cheaper_a_cached_token_and_never_in_a_session_that_does_not_grow() -> None:
    assert early_point(4000, 0, 0.1) == float("inf")
    cached, uncached = early_point(4000, 300, 0.1), early_point(4000, 300, 1.0)
    assert 4000 < uncached < cached  # without a cache a smaller request is cheaper at once; with one, the prefix is cheap
    assert round(cached) == 4000 + round((2 * 4000 * 300 / 0.1) ** 0.5) - 300  # a request's growth sooner: it comes a request at a time
    assert early_point(4000, 300, 0.1, kept=3999) == 4300  # at least one request a cycle


def test_an_early_archive_comes_sooner_the_more_of_its_restart_stays_cached() -> None:
    """The miss an archive causes is its restart less the head it leaves cached (system prompt and task, before the
    block): with 1,500 of 4,000 tokens kept, the cycle's miss is 2,500 and the point comes that much sooner."""
    whole, head_kept = early_point(4000, 300, 0.1), early_point(4000, 300, 0.1, kept=1500)
    assert 4000 < head_kept < whole and round(head_kept) == 4000 + round((2 * 2500 * 300 / 0.1) ** 0.5) - 300
    assert 4000 < early_point(4000, 300, 0.1, kept=4000) < head_kept  # all of it cached: still a cycle of some length


async def test_an_early_archive_over_http_finds_its_summary_made_in_the_background(make_proxy: MakeProxy, fake: FakeUpstream, data_dir: Any) -> None:
    from memory.store.sqlite_store import SQLiteStore

    window = 16000
    proxy = await make_proxy(window={"models": {"gpt-4o*": window}}, calibration=UNCALIBRATED)
    archived = None
    async with aiohttp.ClientSession() as http:
        for turns in range(1, 80):
            resp = await post(proxy, session(turns, lines=20))
            sid = resp.headers["X-Ruyi-Session"]
            if "X-Ruyi-Archived" in resp.headers:
                archived = int(resp.headers["X-Ruyi-Tokens-Before"])
                break
            async with http.get(base_url(proxy) + f"/ruyi/v1/sessions/{sid}/archive", headers={"X-Ruyi-Agent": "a"}) as done:
                assert done.status == 200  # it waits for the background work: what a session's pause between requests allows
        async with http.get(base_url(proxy) + f"/ruyi/v1/sessions/{sid}/report", headers={"X-Ruyi-Agent": "a"}):
            pass
    assert archived is not None and archived < 0.95 * (window - 2400)  # before the red line: it pays
    store = SQLiteStore(data_dir / "ruyi.db")
    try:
        record = store.audit("a", sid)[-1]
    finally:
        store.close()
    assert record["archive"]["reason"] == "economic" and record["archive"]["prepared"] is True


def test_after_an_archive_that_restarts_near_the_red_line_the_next_may_come_at_the_archive_tier() -> None:
    """An agent whose fixed prefix and newest turn fill the window (Qwen Code at 32k) restarts near the red line: the
    regrow wait never pushes its next archive out past the archive tier, to a request that does not fit at all."""
    budget, tiers, options = Budget(32000, 8000), TierOptions(), ArchiveOptions()
    red = round(tiers.archive * budget.usable)
    assert tier_point(options, budget, tiers, int(0.9 * budget.usable)) == red
    assert tier_point(options, budget, tiers, red + 500) == red
    roomy = int(0.4 * budget.usable)  # an archive that made room: the wait, measured against that room, holds
    assert tier_point(options, budget, tiers, roomy) == roomy + regrow_wait(options, budget, tiers, roomy) < red


async def test_an_archive_behind_a_big_fixed_prefix_restarts_below_the_compact_tier(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    """An agent's big fixed prefix (a third of the window here, like Claude Code's system prompt and tools) leaves
    the newest turns room below the prune tier but not much: an archive keeps them only while the restart stays
    below the compact tier, so the session grows a while before it is pruned or archived again."""
    window = 16000
    usable = window - 2400
    proxy = await make_proxy(window={"models": {"gpt-4o*": window}}, calibration=UNCALIBRATED, archive={"early": False})
    big_system = SYSTEM + "\n" + "\n".join(f"Rule {i}: keep module {i} importable and its docstring accurate." for i in range(340))
    for turns in range(1, 40):
        resp = await post(proxy, session(turns, system=big_system, lines=80))
        if "X-Ruyi-Archived" in resp.headers:
            break
    else:
        raise AssertionError("never archived")
    sent = forwarded(fake)
    after = int(resp.headers["X-Ruyi-Tokens-After"])
    assert COUNT.text(big_system) > 0.3 * usable
    assert sent[-1]["role"] == "tool" and sent[-2].get("tool_calls")  # the newest turn stays, whole
    assert after <= 0.7 * usable, (after, usable)
