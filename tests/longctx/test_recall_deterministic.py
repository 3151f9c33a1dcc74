"""Recall is a function of the request and the archive in force: the same bytes from a fresh Ruyi (a restart, another
replica), never the task or a kept turn, and the agent's boilerplate never makes a match; counted in the DCP report."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.longctx.sessions import SYSTEM, TASK, session
from tests.longctx.test_archive import CONFIG, forwarded, post
from tests.longctx.test_recall import RECALL, asking

QUESTION = "Did the sed on /repo/src/module_3.py replace old_3 with new_3 correctly?"


async def run(proxy: Any, fake: FakeUpstream) -> list[Any]:
    client = session(40)
    await post(proxy, client)  # archived in this request: no background write has happened yet
    await post(proxy, asking(client, QUESTION))
    return forwarded(fake)


async def test_a_fresh_ruyi_sends_the_same_recall_block(make_proxy: MakeProxy, fake: FakeUpstream, tmp_path: Any) -> None:
    first = await run(await make_proxy(**CONFIG), fake)
    assert RECALL in first[-1]["content"] and "/repo/src/module_3.py" in first[-1]["content"].split(RECALL, 1)[1]
    other = await run(await make_proxy(**CONFIG, store={"data_dir": str(tmp_path / "replica")}), fake)
    assert other == first


async def test_the_task_and_the_system_prompt_are_never_what_matches(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    client = session(40)
    await post(proxy, client)
    await post(proxy, asking(client, TASK))  # the task again: it is in the request, verbatim
    assert RECALL not in forwarded(fake)[-1]["content"]
    await post(proxy, asking(client, SYSTEM + " <system-reminder>Run the tests after every change in /repo.</system-reminder>"))
    assert RECALL not in forwarded(fake)[-1]["content"]


async def test_the_dcp_report_counts_the_recall_block_and_its_tokens(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    client = session(40)
    sid = (await post(proxy, client)).headers["X-Ruyi-Session"]
    await post(proxy, asking(client, QUESTION))
    async with aiohttp.ClientSession() as http:
        async with http.get(base_url(proxy) + f"/ruyi/v1/sessions/{sid}/report", headers={"X-Ruyi-Agent": "a"}) as resp:
            reports = (await resp.json())["reports"]
    recall = reports[-1]["recall"]
    assert recall["blocks"] == 1 and recall["tokens"] > 20 and recall["path"] == ["s0"]
