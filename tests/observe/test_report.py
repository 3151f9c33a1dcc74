"""``ruyi report`` on a store filled by real requests through the proxy: markdown and JSON, ``--since``, ``--agent``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest

from proxy.cli import main
from proxy.observe.command import parse_since
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.longctx.sessions import session
from tests.rewrite.test_decisions import rereads

LONG = {"window": {"models": {"gpt-4o*": 8000}}, "calibration": {"min_ratio": 0.999, "max_ratio": 1.001}}


async def chat(proxy: Any, messages: list[dict[str, Any]], agent: str) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            base_url(proxy) + "/v1/chat/completions", json={"model": "gpt-4o", "messages": messages}, headers={"X-Ruyi-Agent": agent}
        )
        await resp.read()
        assert resp.status == 200
        return resp


def report(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["report", "--format", "json", *args]) == 0
    return dict(json.loads(capsys.readouterr().out))


async def test_the_report_of_a_store_filled_by_real_requests(make_proxy: MakeProxy, fake: FakeUpstream, capsys: pytest.CaptureFixture[str]) -> None:
    fake.cached_tokens = 100
    proxy = await make_proxy(**LONG)
    archived = await chat(proxy, session(60), "a")  # far over the window: archived in the same request
    assert archived.headers["X-Ruyi-Archived"] == "1"
    small = [await chat(proxy, rereads(n), "b") for n in (1, 2, 3)]
    await proxy.close()  # the background queue drained: every audit record is in
    r = report(capsys)
    assert r["requests"]["total"] == 4 and r["requests"]["sessions"] == 2 and r["requests"]["agents"] == 2 and r["requests"]["errors"] == 0
    assert r["overflows"]["client_over_window"] == 1 and r["overflows"]["prevented"] == 1 and r["overflows"]["not_prevented"] == 0
    sent = int(archived.headers["X-Ruyi-Tokens-Before"]) + sum(int(x.headers["X-Ruyi-Tokens-Before"]) for x in small)
    forwarded = int(archived.headers["X-Ruyi-Tokens-After"]) + sum(int(x.headers["X-Ruyi-Tokens-After"]) for x in small)
    assert r["tokens"] == {"before": sent, "after": forwarded, "saved": sent - forwarded, "saved_share": round((sent - forwarded) / sent, 4)}
    assert 0 < r["cost"]["with_ruyi"] < r["cost"]["without_ruyi"] and 0 < r["cost"]["ratio"] < 1
    assert r["cache"]["reported_requests"] == 4 and r["cache"]["cached_tokens"] == 400 and 0 < r["cache"]["hit_rate"] < 1
    assert r["archives"] == {"total": 1, "by_reason": {"over_window": 1}, "s2_chunks_written": r["archives"]["s2_chunks_written"]}
    assert r["archives"]["s2_chunks_written"] >= 1 and r["summarizer"]["by_source"] == {"extractive": 1}
    assert r["latency_ms"]["upstream"]["n"] == 4 and r["latency_ms"]["ruyi"]["n"] == 4 and r["latency_ms"]["ruyi"]["p50"] > 0
    top = r["top_sessions"]
    assert [s["session_id"] for s in top] == [archived.headers["X-Ruyi-Session"], small[0].headers["X-Ruyi-Session"]]
    assert top[0]["archives"] == 1 and top[0]["tokens_before"] == int(archived.headers["X-Ruyi-Tokens-Before"])
    assert report(capsys, "--agent", "b")["requests"]["total"] == 3
    assert report(capsys, "--top", "1")["top_sessions"] == top[:1]
    capsys.readouterr()
    assert main(["report"]) == 0
    text = capsys.readouterr().out
    for heading in (
        "# Ruyi health report",
        "## Requests",
        "## Overflows",
        "## Tokens and cost",
        "## Pruning and archives",
        "## Summarizer",
        "## Latency (ms)",
        "## Top sessions by tokens",
    ):
        assert heading in text
    assert archived.headers["X-Ruyi-Session"] in text and "- prevented: 1 " in text and "over_window 1" in text


async def test_since_keeps_only_the_records_from_then_on(make_proxy: MakeProxy, capsys: pytest.CaptureFixture[str]) -> None:
    first = await make_proxy()
    for n in (1, 2):
        await chat(first, rereads(n), "a")
    await first.close()  # written before the cut
    cut = datetime.now(UTC).isoformat()
    second = await make_proxy()
    for n in (1, 2, 3):
        await chat(second, rereads(n), "c")
    await second.close()
    assert report(capsys)["requests"]["total"] == 5
    since = report(capsys, "--since", cut)
    assert since["requests"]["total"] == 3 and since["since"] is not None and [s["agent_id"] for s in since["top_sessions"]] == ["c"]
    assert report(capsys, "--since", "1h")["requests"]["total"] == 5
    assert report(capsys, "--since", "2999-01-01")["requests"]["total"] == 0


def test_since_accepts_dates_times_and_durations_and_refuses_the_rest(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_since("2026-11-24") == datetime(2026, 11, 24, tzinfo=UTC).timestamp()
    assert parse_since("2026-11-24T09:00+01:00") == datetime(2026, 11, 24, 8, tzinfo=UTC).timestamp()
    assert parse_since("24h", now=100_000.0) == 100_000.0 - 86_400 and parse_since("2w", now=2e6) == 2e6 - 14 * 86_400
    assert main(["report", "--since", "last tuesday"]) == 2
    assert "--since" in capsys.readouterr().err


def test_no_store_is_said_plainly(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--data-dir", str(tmp_path / "none")]) == 1
    assert "no store under" in capsys.readouterr().err and not (tmp_path / "none").exists()
