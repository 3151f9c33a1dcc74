"""A replay runs the long-context steps as the proxy does: background work done between requests, LLM calls priced."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from config.load import load_config
from proxy.cli import main
from proxy.replay.offline import OfflineRuyi
from proxy.replay.run import Cl100kCounter, Prices, replay
from tests.conftest import base_url
from tests.fake_upstream import FakeUpstream
from tests.longctx.sessions import session
from tests.summaries.test_llm import SUMMARY, summarizer_requests


async def test_a_replay_prices_the_llm_summarizers_calls_like_requests(upstream: TestServer, fake: FakeUpstream) -> None:
    fake.summary_reply = SUMMARY
    llm = {"summarizer.model": "openai/ruyi-archivist", "summarizer.api_base": base_url(upstream) + "/v1", "summarizer.api_key": "sk-test"}

    def run(overrides: dict[str, str]) -> object:
        # without the layout: its reminder after an archive (tokens counted) moves a later archive by the summary's length
        ruyi = OfflineRuyi(load_config(None, {}, {"layout.mode": "off", **overrides}), "gpt-4o", 8000)
        return replay(session(30), None, ruyi, 8000, Cl100kCounter(), Prices())

    with_llm, extractive = await asyncio.to_thread(run, llm), await asyncio.to_thread(run, {})
    assert summarizer_requests(fake) and with_llm.totals.summarizer_tokens > 0 and extractive.totals.summarizer_tokens == 0
    priced = sum(Prices().cost(r.tokens_sent, r.cached) for r in with_llm.rows)
    assert abs(sum(r.cost for r in with_llm.rows) - (priced + with_llm.totals.summarizer_tokens)) < 1e-6
    assert with_llm.totals.archives >= 1 and extractive.totals.archives >= 1  # summaries of other sizes: archives elsewhere


def test_ruyi_replay_shows_the_archives_and_counts_needles_once_archived(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "long.json"
    trace.write_text(json.dumps({"model": "gpt-4o", "messages": session(40), "tools": None}))
    assert main(["replay", str(trace), "--window", "8000"]) == 0
    out = capsys.readouterr().out
    assert "new 1" in out and re.search(r"archives\s+[1-9]", out) and re.search(r"over the window\s+0 of", out)
    assert re.search(r"needles kept\s+100\.0 %", out) and re.search(r"orphans\s+0\b", out)


def test_an_archive_comes_early_where_prefix_caching_makes_it_pay_and_finds_its_summary_made() -> None:
    window, runs = 16000, {}
    for early in (True, False):
        ruyi, archives = OfflineRuyi(load_config(None, {}, {"archive.early": early}), "gpt-4o", window), []
        for turns in range(1, 80):
            ruyi(session(turns, lines=20), None)
            mem = ruyi.contexts[0].longctx
            if mem is not None and mem.archived is not None:
                usable = ruyi.contexts[0].measurement.budget.usable  # type: ignore[union-attr]
                archives.append((turns, mem.archived.record, mem.prepared, usable))
        result = replay(
            session(79, lines=20),
            None,
            OfflineRuyi(load_config(None, {}, {"archive.early": early}), "gpt-4o", window),
            window,
            Cl100kCounter(),
            Prices(),
        )
        runs[early] = archives, result.totals
    (early, early_totals), (late, late_totals) = runs[True], runs[False]
    assert early and late and early[0][0] < late[0][0]
    assert all(r["reason"] == "economic" and r["tokens_before"] < 0.95 * usable for _, r, _, usable in early)
    assert all(prepared for _, _, prepared, _ in early)  # planned at an earlier request, its summary made ahead
    assert all(r["reason"] != "economic" for _, r, _, _ in late)
    # no loop: the next early archive waits for the session to regrow by what the last restarted at (at most a third of the window)
    assert all(b["tokens_before"] - a["tokens_after"] >= min(a["tokens_after"], window // 3) for (_, a, _, _), (_, b, _, _) in zip(early, early[1:]))
    assert early_totals.cost_ratio < late_totals.cost_ratio
    assert early_totals.needles_kept == late_totals.needles_kept == 1.0 and early_totals.orphans == 0


async def test_the_llm_summarizer_is_asked_again_only_once_enough_is_new(upstream: TestServer, fake: FakeUpstream) -> None:
    """Asked after every request while an archive was planned, the summarizer cost more than the requests it served
    (299 calls for 22 archives on the public traces at 16k): now once ``summarizer.every_tokens`` of new messages came."""
    fake.summary_reply = SUMMARY
    llm = {"summarizer.model": "openai/ruyi-archivist", "summarizer.api_base": base_url(upstream) + "/v1", "summarizer.api_key": "sk-test"}

    def calls(every: int) -> int:
        fake.received.clear()
        ruyi = OfflineRuyi(load_config(None, {}, {"layout.mode": "off", "summarizer.every_tokens": every, **llm}), "gpt-4o", 8000)
        result = replay(session(30), None, ruyi, 8000, Cl100kCounter(), Prices())
        assert result.totals.archives >= 1
        return len(summarizer_requests(fake))

    each, gated, once = await asyncio.to_thread(calls, 0), await asyncio.to_thread(calls, 2000), await asyncio.to_thread(calls, 10**9)
    assert each > gated > once >= 1, (each, gated, once)


@pytest.mark.timeout(120)
def test_an_archive_restarts_small_whatever_the_window_and_the_next_waits_for_the_session_to_regrow_by_its_restart() -> None:
    """``archive.target_max_tokens``: at 64k an archive aims at 4,096 tokens, not a quarter of the window (13,600), so it
    restarts at its task, block and newest turns; the next early archive then waits for the session to regrow by what
    it restarted at, not by a third of the window. Cheaper, with every needle kept."""
    window = 64000

    def run(env: dict[str, str]) -> tuple[list[dict[str, Any]], Any]:
        ruyi, records = OfflineRuyi(load_config(None, env), "gpt-4o", window), []
        for turns in range(1, 130):
            ruyi(session(turns), None)
            mem = ruyi.contexts[0].longctx
            if mem is not None and mem.archived is not None:
                records.append(dict(mem.archived.record))
        totals = replay(session(129), None, OfflineRuyi(load_config(None, env), "gpt-4o", window), window, Cl100kCounter(), Prices()).totals
        return records, totals

    (capped, capped_totals), (share, share_totals) = run({}), run({"RUYI_ARCHIVE__TARGET_MAX_TOKENS": "null"})
    assert capped and share and all(r["reason"] == "economic" for r in capped + share)
    assert max(r["tokens_after"] for r in capped) < 0.65 * min(r["tokens_after"] for r in share)
    assert capped[0]["tokens_before"] < share[0]["tokens_before"] and len(capped) > len(share)
    assert all(a["tokens_after"] <= b["tokens_before"] - a["tokens_after"] < round(0.34 * window) for a, b in zip(capped, capped[1:]))
    assert capped_totals.cost_ratio < share_totals.cost_ratio
    assert capped_totals.needles_kept == share_totals.needles_kept == 1.0 and capped_totals.orphans == share_totals.orphans == 0
