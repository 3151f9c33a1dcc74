"""The evidence bench with the LLM summarizer on beside it off (bench/savings/llm_summarizer.py): the product's summarizer
path through litellm to the real fake upstream, its S1 in the forwarded requests, both rows and the summarizer's tally."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from bench.savings.evidence import main
from bench.savings.llm_summarizer import SummarizingRuyi, Tally
from config.load import load_config
from proxy.replay.run import Cl100kCounter, Prices, replay
from tests.conftest import base_url
from tests.fake_summary import MARK
from tests.fake_upstream import FakeUpstream, ruyis_own
from tests.longctx.sessions import session
from tests.traces import TRACES

SMALL = "swe-agent__demo_function_calling_replace_from_source__marshmallow-1867.json"
"""The smallest public trace (14 requests, one archive at 8k); a hand-made session where the traces are absent."""


def one_trace(folder: Path) -> Path:
    folder.mkdir()
    if TRACES is not None and (TRACES / SMALL).is_file():
        (folder / SMALL).write_bytes((TRACES / SMALL).read_bytes())
    else:
        (folder / "synthetic.json").write_text(json.dumps({"model": "gpt-4o", "messages": session(30), "tools": None}))
    return folder


def test_the_bench_runs_ruyi_with_the_fake_summarizer_beside_ruyi_without(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = one_trace(tmp_path / "traces")
    assert main(["--traces", str(folder), "--windows", "8000", "--only", "ruyi", "--fake-summarizer", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["8000"]
    on = report["Ruyi + LLM summarizer (fake upstream)"]
    assert set(report) == {"Ruyi", "Ruyi + LLM summarizer (fake upstream)"} and report["Ruyi"]["requests"] == on["requests"]
    s = on["summarizer"]
    assert s["requested"] == s["answered"] > 0 and s["fell_back"] == 0 and s["prompt_tokens"] > 0
    assert s["archives"].get("llm", 0) >= 1 and s["requests_carrying_llm_s1"] >= 1  # its S1 reached an archive and went out
    assert "summarizer" not in report["Ruyi"]


async def test_the_llm_s1_reaches_the_forwarded_requests_and_a_failing_model_falls_back(upstream: TestServer, fake: FakeUpstream) -> None:
    fake.summary_from_prompt = True
    llm = {"summarizer.model": "openai/ruyi-archivist", "summarizer.api_base": base_url(upstream) + "/v1", "summarizer.api_key": "sk-test"}
    sent: list[str] = []

    def run(tally: Tally) -> None:
        ruyi = SummarizingRuyi(tally, load_config(None, {}, llm), "gpt-4o", 8000)

        def rewrite(messages: list[dict[str, object]], tools: object) -> list[dict[str, object]]:
            out = ruyi(messages, None)
            sent.append("\n".join(str(m.get("content")) for m in out if m.get("role") == "system"))
            return out

        replay(session(30), None, rewrite, 8000, Cl100kCounter(), Prices())

    tally = Tally()
    await asyncio.to_thread(run, tally)
    asked = [r for r in fake.received if ruyis_own(r)]
    assert asked and tally.requested == len(asked) == tally.outcomes["ok"]
    assert any(MARK in text for text in sent) and tally.carried == sum(MARK in text for text in sent) and tally.archives["llm"] >= 1

    fake.summary_reply, fake.summary_from_prompt = "not a summary", False  # unusable: the extractive S1 instead
    failing = Tally()
    sent.clear()
    await asyncio.to_thread(run, failing)
    # each answer refused (after three the session's breaker opens: not asked again meanwhile), none of its text sent
    assert failing.outcomes["ok"] == 0 and failing.outcomes["unusable"] == failing.requested >= 1 and failing.carried == 0
    assert failing.archives["extractive_fallback"] >= 1 and "llm" not in failing.archives
