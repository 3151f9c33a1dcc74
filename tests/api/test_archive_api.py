"""A session's archives over the API: read, search, the expanded form from raw turns; archive, prune, reset now."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.longctx.sessions import session, turn
from tests.longctx.test_archive import CONFIG, forwarded, post

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2


async def api(proxy: Any, method: str, path: str, agent: str = "a", **params: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http:
        resp = await http.request(method, base_url(proxy) + path, params=params, headers={"X-Ruyi-Agent": agent})
        return resp.status, await resp.json()


async def archived_session(proxy: Any) -> tuple[str, list[dict[str, Any]]]:
    client = session(40)
    client[5]["content"] += f"\nexport OPENAI_API_KEY={SECRET}"
    for turns in (38, 39, 40):  # a history far over the window, then two more requests
        resp = await post(proxy, client[: 2 + 2 * turns])
    return resp.headers["X-Ruyi-Session"], client


async def test_archives_chunks_search_and_the_expanded_form(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    sid, client = await archived_session(proxy)
    status, body = await api(proxy, "GET", f"/ruyi/v1/sessions/{sid}/archive")
    assert status == 200 and [a["number"] for a in body["archives"]] == [1] and body["in_force"][0]["number"] == 1
    archive = body["archives"][0]
    compact, normal = archive["forms"]["compact"], archive["forms"]["normal"]  # seed 000: < 500, and its own longer text
    assert len(compact) < 500 and compact.startswith("[Task]") and "## Progress" in normal and len(normal) > len(compact)
    assert "block" not in archive and body["chunks"] and all(c["summary"] for c in body["chunks"])
    status, found = await api(proxy, "GET", f"/ruyi/v1/sessions/{sid}/archive", q="module_3.py")
    assert status == 200 and found["hits"][0]["kind"] == "chunk" and "/repo/src/module_3.py" in found["hits"][0]["summary"]
    status, one = await api(proxy, "GET", f"/ruyi/v1/sessions/{sid}/archive", chunk="ruyi:" + found["hits"][0]["chunk_id"])
    assert status == 200 and one["chunk_id"] == found["hits"][0]["chunk_id"]
    status, expanded = await api(proxy, "GET", f"/ruyi/v1/sessions/{sid}/archive", number="1", form="expanded")
    positions = [t["turn"] for t in expanded["turns"]]
    assert positions == list(range(archive["head"], archive["end"] + 1))
    texts = " ".join(str(t["message"].get("content")) for t in expanded["turns"])
    assert SECRET not in texts and "[REDACTED" in texts
    assert (await api(proxy, "GET", f"/ruyi/v1/sessions/{sid}/archive", agent="b"))[0] == 404
    async with aiohttp.ClientSession() as http:
        resp = await http.get(base_url(proxy) + f"/ruyi/v1/sessions/{sid}/report", params={"format": "markdown"}, headers={"X-Ruyi-Agent": "a"})
        assert "### Archived (archive + restart)" in await resp.text()


async def test_raw_turns_are_kept_once_whatever_is_resent(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    client = session(3)
    for _ in range(3):
        resp = await post(proxy, client)  # retried: the same turns
    sid = resp.headers["X-Ruyi-Session"]
    await post(proxy, client + [{"role": "assistant", "content": fake.reply}, {"role": "user", "content": "go on"}])
    status, expanded = await api(proxy, "GET", f"/ruyi/v1/sessions/{sid}/archive", q="Hello from the fake upstream")
    assert status == 200 and sorted(h["turn"] for h in expanded["hits"]) == [len(client), len(client) + 2]  # each answer once


async def test_archive_now_prune_now_and_reset(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    client = session(8)
    resp = await post(proxy, client)
    sid = resp.headers["X-Ruyi-Session"]
    assert "X-Ruyi-Archived" not in resp.headers
    status, body = await api(proxy, "POST", f"/ruyi/v1/sessions/{sid}/archive")
    assert status == 200 and body["next_request"] == "archive"
    client += turn(8)
    resp = await post(proxy, client)
    assert resp.headers["X-Ruyi-Archived"] == "1" and len(forwarded(fake)) < len(client)
    assert (await api(proxy, "POST", f"/ruyi/v1/sessions/{sid}/prune"))[0] == 200
    client += turn(9)
    await post(proxy, client)
    status, report = await api(proxy, "GET", f"/ruyi/v1/sessions/{sid}/report")
    assert report["reports"][-1]["batch"] == "requested"
    assert (await api(proxy, "POST", f"/ruyi/v1/sessions/{sid}/reset"))[0] == 200
    client += turn(10)
    resp = await post(proxy, client)
    assert forwarded(fake) == client and "X-Ruyi-Archived" not in resp.headers  # as sent
    status, body = await api(proxy, "GET", f"/ruyi/v1/sessions/{sid}/archive")
    assert body["in_force"] == [] and [a["number"] for a in body["archives"]] == [1]  # the history stays
    assert (await api(proxy, "POST", f"/ruyi/v1/sessions/{sid}/reset", agent="b"))[0] == 404


async def test_the_raw_turns_of_a_large_request_are_kept_from_a_worker_thread(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    """A request past server.loop_rewrite_bytes is observed off the loop (its raw turns are redacted and hashed
    there): they are kept all the same, each once."""
    proxy = await make_proxy(**CONFIG, server={"loop_rewrite_bytes": 1024})
    client = session(3)
    for _ in range(2):
        resp = await post(proxy, client)
    sid = resp.headers["X-Ruyi-Session"]
    status, expanded = await api(proxy, "GET", f"/ruyi/v1/sessions/{sid}/archive", q="Hello from the fake upstream")
    assert status == 200 and [h["turn"] for h in expanded["hits"]] == [len(client)]
