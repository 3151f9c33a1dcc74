"""Recall through the proxy: an archived chunk the newest input matches or names is appended to it, never kept."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.longctx.sessions import archive_message, bash, session, turn
from tests.longctx.test_archive import CONFIG, UNCALIBRATED, forwarded, post

RECALL = "<ruyi-recall"


async def archived(proxy: Any, client: list[dict[str, Any]], agent: str = "a") -> str:
    resp = await post(proxy, client)
    assert resp.headers.get("X-Ruyi-Archived") == "1"
    sid = resp.headers["X-Ruyi-Session"]
    async with aiohttp.ClientSession() as http:  # chunks are written off the request path: wait until they are in
        await http.get(base_url(proxy) + f"/ruyi/v1/sessions/{sid}/archive", headers={"X-Ruyi-Agent": agent})
    return sid


def asking(client: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    return client + [{"role": "assistant", "content": "Done with that step."}, {"role": "user", "content": text}]


async def test_a_strong_match_is_appended_to_the_newest_message_and_never_kept(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    client = session(40)
    await archived(proxy, client)
    client = asking(client, "Did the sed on /repo/src/module_3.py replace old_3 with new_3 correctly?")
    await post(proxy, client)
    sent = forwarded(fake)
    assert sent[-1]["content"].startswith(client[-1]["content"] + "\n\n" + RECALL) and "/repo/src/module_3.py" in sent[-1]["content"]
    assert sum(RECALL in str(m.get("content")) for m in sent) == 1 and sent[-1]["role"] == "user"
    client += turn(41)
    await post(proxy, client)
    later = forwarded(fake)
    assert later[: len(sent) - 1] == sent[:-1] and later[len(sent) - 1] == client[-3]  # the question as the client sent it
    assert RECALL not in json.dumps(later[:-2]), "the block is never kept in a later request's history"


async def test_a_chunk_named_by_id_is_recalled_and_nothing_weak_is(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    client = session(40)
    await archived(proxy, client)
    sent = forwarded(fake)
    block = sent[archive_message(sent)]["content"]
    chunk_id = block.split("- ruyi:")[1].split(" ")[0]
    await post(proxy, asking(client, "What was the weather like?"))
    assert RECALL not in forwarded(fake)[-1]["content"]
    await post(proxy, asking(client, f"Show me ruyi:{chunk_id} again."))
    assert f'chunk="ruyi:{chunk_id}"' in forwarded(fake)[-1]["content"]


async def test_two_character_chinese_words_recall_a_chinese_chunk(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window={"models": {"gpt-4o*": 8000}}, calibration=UNCALIBRATED)
    client: list[dict[str, Any]] = [
        {"role": "system", "content": "你是一个编程助手。"},
        {"role": "user", "content": "修复服务里的内存泄漏，并保持接口不变。"},
    ]
    for t in range(40):
        plan = "下一步：修复缓存模块的内存泄漏，然后检查配置文件。" if t == 3 else f"第 {t} 步：继续检查日志。"
        client += [
            {"role": "assistant", "content": plan, "tool_calls": [bash(f"c{t}", f"cat /srv/log_{t}.txt")]},
            {"role": "tool", "tool_call_id": f"c{t}", "content": "\n".join(f"日志第{i}行：请求{t * 100 + i}正常" for i in range(60))},
        ]
    await archived(proxy, client)
    await post(proxy, asking(client, "内存泄漏修复了吗？缓存模块呢？"))
    assert RECALL in forwarded(fake)[-1]["content"] and "缓存模块的内存泄漏" in forwarded(fake)[-1]["content"]


async def test_other_agents_archives_only_when_allowed_and_asked(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    theirs = session(40)
    mine = json.loads(
        json.dumps(session(40, task="Refactor the widgets.")).replace("module_", "widget_").replace("old_", "prev_").replace("new_", "next_")
    )
    asked = asking(mine, "Did the sed on /repo/src/module_3.py replace old_3 with new_3 correctly?")
    for allowed in (False, True):
        proxy = await make_proxy(**CONFIG, retrieval={"cross_agent": allowed})
        owner, reader = f"owner-{allowed}", f"reader-{allowed}"
        async with aiohttp.ClientSession() as http:
            for agent, messages, extra in ((owner, theirs, {}), (reader, mine, {}), (reader, asked, {"X-Ruyi-Recall": "all-agents"})):
                resp = await http.post(
                    base_url(proxy) + "/v1/chat/completions", json={"model": "gpt-4o", "messages": messages}, headers={"X-Ruyi-Agent": agent, **extra}
                )
                sid = resp.headers["X-Ruyi-Session"]
                await http.get(base_url(proxy) + f"/ruyi/v1/sessions/{sid}/archive", headers={"X-Ruyi-Agent": agent})
        assert (RECALL in forwarded(fake)[-1]["content"]) is allowed
        await proxy.close()
