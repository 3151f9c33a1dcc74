"""Through the proxy: anchors an assistant defines are captured as pending, once, into the caller's agent only; prune
batches leave a line in the dynamic pool."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.api.test_anchors_api import call
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.rewrite.test_pruning import WINDOW, conversation, post

DEFINED = "Decided.\n[D004] Use SQLite for the default store — why: nothing to install; rollback: store.backend: memory\nNext."


def history(extra: int = 0) -> list[dict[str, Any]]:
    msgs = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Pick a store."},
        {"role": "assistant", "content": DEFINED},
        {"role": "user", "content": "ok, go on"},
    ]
    for i in range(extra):
        msgs += [{"role": "assistant", "content": f"step {i}"}, {"role": "user", "content": f"and {i}"}]
    return msgs


async def anchors(proxy: Any, agent: str) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http:
        return (await call(http, "GET", base_url(proxy) + "/ruyi/v1/anchors", agent=agent))[1]["anchors"]


async def test_a_defining_line_is_captured_pending_once_with_what_it_lacks(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    for extra in range(3):  # the same line in every later request
        resp = await post(proxy, history(extra), headers={"X-Ruyi-Agent": "alpha"})
        assert resp.status == 200
    [d4] = await anchors(proxy, "alpha")
    assert (d4["id"], d4["status"], d4["source"]) == ("D004", "pending", "captured")
    assert d4["fields"]["why"] == "nothing to install" and d4["missing"] == ["alternatives", "impact", "verification"]
    assert await anchors(proxy, "beta") == []


async def test_the_answer_itself_is_read_and_the_write_rule_waits_for_promotion(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.reply = "[C001] Never log prompts at info level — why: they carry secrets"
    proxy = await make_proxy()
    for stream in (False, True):
        assert (await post(proxy, [{"role": "user", "content": "rules?"}], headers={"X-Ruyi-Agent": "alpha"}, stream=stream)).status == 200
    [c1] = await anchors(proxy, "alpha")
    assert c1["id"] == "C001" and c1["status"] == "pending"
    async with aiohttp.ClientSession() as http:
        url = base_url(proxy) + "/ruyi/v1/anchors/C001"
        status, err = await call(http, "PATCH", url, json={"status": "active"})
        assert status == 400 and err["error"]["missing"] == ["alternatives", "impact", "verification", "rollback"]
        fields = {"alternatives": "debug level", "impact": "proxy/http/log.py", "verification": "grep the log", "rollback": "none"}
        status, done = await call(http, "PATCH", url, json={"status": "active", "fields": fields})
        assert status == 200 and done["status"] == "active"


async def test_nothing_is_captured_with_ruyi_off_or_in_dry_run(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    for mode in ("off", "dry-run"):
        await post(proxy, history(), headers={"X-Ruyi-Agent": "alpha", "X-Ruyi-Mode": mode})
    assert await anchors(proxy, "alpha") == []


async def test_a_prune_batch_leaves_a_line_in_the_dynamic_pool(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(window=WINDOW, pruning={"economic": False})
    for turns in range(1, 12):
        await post(proxy, conversation(turns))
    async with aiohttp.ClientSession() as http:
        status, nb = await call(http, "GET", base_url(proxy) + "/ruyi/v1/notebook", agent="a")
        pool = nb["sections"]["dynamic"]["entries"]
        assert pool and all(e["by"] == "ruyi" and "prune batch (applied)" in e["text"] for e in pool)
        assert (await call(http, "GET", base_url(proxy) + "/ruyi/v1/notebook", agent="b"))[1]["version"] == 0
