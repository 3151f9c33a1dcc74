"""A replay runs the long-context steps as the proxy does: background work done between requests, LLM calls priced."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

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
    assert summarizer_requests(fake) and with_llm.totals.summarizer_tokens > 0 and extractive.totals.summarizer_tokens == 0  # type: ignore[attr-defined]
    priced = sum(Prices().cost(r.tokens_sent, r.cached) for r in with_llm.rows)  # type: ignore[attr-defined]
    assert abs(sum(r.cost for r in with_llm.rows) - (priced + with_llm.totals.summarizer_tokens)) < 1e-6  # type: ignore[attr-defined]
    assert with_llm.totals.archives == extractive.totals.archives >= 1  # type: ignore[attr-defined]


def test_ruyi_replay_shows_the_archives_and_counts_needles_once_archived(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "long.json"
    trace.write_text(json.dumps({"model": "gpt-4o", "messages": session(40), "tools": None}))
    assert main(["replay", str(trace), "--window", "8000"]) == 0
    out = capsys.readouterr().out
    assert "new 1" in out and re.search(r"archives\s+[1-9]", out) and re.search(r"over the window\s+0 of", out)
    assert re.search(r"needles kept\s+100\.0 %", out) and re.search(r"orphans\s+0\b", out)
