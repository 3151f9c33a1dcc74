"""``GET /metrics`` over real HTTP after real requests through the fake upstream: counters move, labels stay bounded, guarded like the admin API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from prometheus_client.parser import text_string_to_metric_families

from proxy.context import RequestContext
from tests.conftest import MakeProxy, base_url, config_for, free_port
from tests.fake_upstream import FakeUpstream
from tests.http.test_local_only import over_unix_socket
from tests.longctx.sessions import session
from tests.rewrite.test_decisions import WINDOW, rereads
from tests.summaries.test_llm import SUMMARY, run

LONG = {"window": {"models": {"gpt-4o*": 8000}}, "calibration": {"min_ratio": 0.999, "max_ratio": 1.001}}


async def scrape(proxy: Any, headers: dict[str, str] | None = None, http: aiohttp.ClientSession | None = None) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as own:
        async with (http or own).get(base_url(proxy) + "/metrics", headers=headers or {}) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), await resp.text()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample, by name and sorted labels (parsed by prometheus-client's own parser)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def one_connection() -> aiohttp.ClientSession:
    """A client on one kept-alive connection: the server finishes a request (a stream's access event included) before
    it reads the next one, so a scrape sent after a stream sees it counted."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1))


async def chat(
    proxy: Any,
    messages: list[dict[str, Any]],
    model: str = "gpt-4o",
    agent: str = "a",
    stream: bool = False,
    headers: dict[str, str] | None = None,
    http: aiohttp.ClientSession | None = None,
) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as own:
        resp = await (http or own).post(
            base_url(proxy) + "/v1/chat/completions",
            json={"model": model, "messages": messages, "stream": stream},
            headers={"X-Ruyi-Agent": agent, **(headers or {})},
        )
        await resp.read()
        return resp


async def test_requests_tokens_batches_and_latency_are_counted(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(
        window=WINDOW, pruning={"economic": False}, routes=[{"model": "llama*", "url": "http://127.0.0.1:9/v1", "kind": "openai"}]
    )
    _, _, empty = await scrape(proxy)
    assert value(samples(empty), "ruyi_requests_total", endpoint="/v1/chat/completions", route="default", dialect="openai", status="200") == 0
    async with one_connection() as http:
        first = await chat(proxy, rereads(3), http=http)
        pruned = await chat(proxy, rereads(13), stream=True, http=http)
        assert first.status == pruned.status == 200
        status, content_type, text = await scrape(proxy, http=http)
    assert status == 200 and content_type.startswith("text/plain")
    found = samples(text)
    assert value(found, "ruyi_requests_total", endpoint="/v1/chat/completions", route="default", dialect="openai", status="200") == 2
    before = value(found, "ruyi_prompt_tokens_before_total", route="default")
    after = value(found, "ruyi_prompt_tokens_after_total", route="default")
    assert before == int(first.headers["X-Ruyi-Tokens-Before"]) + int(pruned.headers["X-Ruyi-Tokens-Before"])
    assert after == int(first.headers["X-Ruyi-Tokens-After"]) + int(pruned.headers["X-Ruyi-Tokens-After"]) and after < before
    assert value(found, "ruyi_tokens_saved_total", strategy="dedup") > 0
    assert value(found, "ruyi_batches_total", kind="applied") == 1
    assert sum(v for (name, _), v in found.items() if name == "ruyi_tier_requests_total") == 2
    assert value(found, "ruyi_upstream_latency_seconds_count", route="default") == 2
    assert value(found, "ruyi_added_latency_seconds_count", dialect="openai") == 2
    assert value(found, "ruyi_added_latency_seconds_bucket", dialect="openai", le="+Inf") == 2
    assert value(found, "ruyi_store_queue_depth", queue="records") >= 0 and ("ruyi_store_queue_written_total", (("queue", "records"),)) in found
    assert value(found, "ruyi_summarizer_configured") == 0 and ("ruyi_summarizer_breakers_open", ()) in found


async def test_labels_stay_bounded_whatever_the_clients_send(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(window=WINDOW)
    async with one_connection() as http:
        for i in range(5):  # new models, sessions, agents and paths every time
            await chat(proxy, rereads(1), model=f"gpt-4o-custom-{i}", agent=f"agent-{i}", headers={"X-Ruyi-Session": f"s-{i}"}, http=http)
            await (await http.get(base_url(proxy) + f"/v1/files/file-{i}")).read()  # relayed as it comes
            await (await http.get(base_url(proxy) + f"/nowhere/{i}")).read()
        _, _, text = await scrape(proxy, http=http)
    labels = {v for (_, pairs), _ in samples(text).items() for _, v in pairs}
    assert not any("custom" in v or "agent-" in v or "s-" == v[:2] or "file-" in v or "nowhere" in v for v in labels), labels
    found = samples(text)
    assert value(found, "ruyi_requests_total", endpoint="/v1/chat/completions", route="default", dialect="openai", status="200") == 5
    assert value(found, "ruyi_requests_total", endpoint="/v1/{tail}", route="default", dialect="openai", status="200") == 5
    assert value(found, "ruyi_requests_total", endpoint="unmatched", route="none", dialect="openai", status="404") == 5


async def test_an_archive_is_counted_with_its_reason(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(**LONG)
    resp = await chat(proxy, session(60))
    assert resp.headers["X-Ruyi-Archived"] == "1"
    found = samples((await scrape(proxy))[2])
    assert value(found, "ruyi_archives_total", reason="over_window", summary_source="extractive") == 1
    assert value(found, "ruyi_tokens_saved_total", strategy="archive") > 0


async def test_summarizer_calls_failures_and_open_breakers_are_counted(make_proxy: MakeProxy, fake: FakeUpstream, upstream: TestServer) -> None:
    fake.summary_reply = SUMMARY
    llm = {"model": "openai/ruyi-archivist", "api_base": base_url(upstream) + "/v1", "api_key": "sk-test-only"}
    answering = await make_proxy(**LONG, summarizer=llm)
    await run(answering, fake, 30)
    found = samples((await scrape(answering))[2])
    assert value(found, "ruyi_summarizer_calls_total", result="ok") >= 1 and value(found, "ruyi_summarizer_configured") == 1
    assert value(found, "ruyi_summarizer_calls_total", result="error") == 0 and value(found, "ruyi_summarizer_breakers_open") == 0
    down = await make_proxy(**LONG, summarizer={**llm, "api_base": f"http://127.0.0.1:{free_port()}/v1", "failures_to_open": 1})
    await run(down, fake, 30, agent="b")
    found = samples((await scrape(down))[2])
    assert value(found, "ruyi_summarizer_calls_total", result="error") >= 1 and value(found, "ruyi_summarizer_calls_total", result="ok") == 0
    assert value(found, "ruyi_summarizer_breakers_open") >= 1  # the session's summaries, and the agent's archive proposals


class Broken:
    name = "broken"

    def apply(self, messages: list[dict[str, Any]], ctx: RequestContext) -> list[dict[str, Any]]:
        raise RuntimeError("a bug in a rewrite step")


async def test_a_failing_step_increments_its_failure_counter(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(steps=[Broken()])
    assert value(samples((await scrape(proxy))[2]), "ruyi_failed_open_total", step="broken") == 0
    for _ in range(2):
        assert (await chat(proxy, rereads(1))).status == 200
    assert value(samples((await scrape(proxy))[2]), "ruyi_failed_open_total", step="broken") == 2


async def test_metrics_are_guarded_like_the_admin_api(make_proxy: MakeProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUYI_TEST_CLIENT", "client-key-1")
    monkeypatch.setenv("RUYI_TEST_ADMIN", "admin-key-1")
    proxy = await make_proxy(auth={"keys": ["env:RUYI_TEST_CLIENT"], "admin_key": "env:RUYI_TEST_ADMIN"})
    status, _, text = await scrape(proxy)
    assert status == 401 and "ruyi_" not in text
    status, _, _ = await scrape(proxy, {"X-Ruyi-Key": "wrong"})
    assert status == 401
    status, _, text = await scrape(proxy, {"Authorization": "Bearer admin-key-1"})  # how Prometheus sends a bearer token
    assert status == 200 and "ruyi_requests_total" in text
    status, _, _ = await scrape(proxy, {"X-Ruyi-Key": "client-key-1"})  # a client key reads /ruyi/v1/stats too
    assert status == 200


async def test_metrics_refuse_a_caller_that_is_not_local_when_no_keys_are_set(upstream: TestServer, tmp_path: Path) -> None:
    async for http in over_unix_socket(config_for(base_url(upstream)), tmp_path / "ruyi.sock"):  # its peer has no IP address
        async with http.get("http://ruyi/metrics") as resp:
            assert resp.status == 403 and "ruyi_" not in await resp.text()


async def test_metrics_can_be_switched_off(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(metrics={"enabled": False})
    assert (await chat(proxy, rereads(1))).status == 200
    assert (await scrape(proxy))[0] == 404
