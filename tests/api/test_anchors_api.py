"""The anchors API over real sockets: create, list, read, patch, delete, export; bad input; one agent never sees another's."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.conftest import MakeProxy, base_url

FIELDS = {
    "alternatives": "Postgres",
    "why": "nothing to install",
    "impact": "memory/store",
    "verification": "pytest tests/memory",
    "rollback": "store.backend: memory",
}


async def call(http: aiohttp.ClientSession, method: str, url: str, agent: str = "alpha", **kw: Any) -> tuple[int, Any]:
    async with http.request(method, url, headers={"X-Ruyi-Agent": agent, **kw.pop("headers", {})}, **kw) as resp:
        body = await resp.json() if resp.content_type == "application/json" else await resp.text()
        return resp.status, body


async def test_an_anchor_is_made_read_patched_exported_and_deleted(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    url = base_url(proxy) + "/ruyi/v1/anchors"
    async with aiohttp.ClientSession() as http:
        status, made = await call(http, "POST", url, json={"type": "D", "title": "Use SQLite for the default store", "fields": FIELDS})
        assert status == 201 and made["id"] == "D001" and made["anchor"]["status"] == "active"
        status, pending = await call(http, "POST", url, json={"type": "C", "title": "Redact everything written", "status": "pending"})
        assert (
            status == 201
            and pending["id"] == "C001"
            and pending["anchor"]["missing"] == ["alternatives", "why", "impact", "verification", "rollback"]
        )
        status, listed = await call(http, "GET", url + "?status=pending")
        assert [a["id"] for a in listed["anchors"]] == ["C001"]
        status, one = await call(http, "GET", url + "/D001")
        assert one["compact"].splitlines()[0] == "[D001] Use SQLite for the default store" and "### Rollback" in one["full"]
        status, obsolete = await call(http, "PATCH", url + "/D001", json={"status": "obsolete"})
        assert status == 200 and obsolete["status"] == "obsolete"
        status, md = await call(http, "GET", base_url(proxy) + "/ruyi/v1/anchors.md")
        assert status == 200 and md.startswith("# Anchors of alpha") and "## [D001] Use SQLite for the default store" in md
        assert (await call(http, "DELETE", url + "/C001"))[0] == 200
        assert (await call(http, "GET", url + "/C001"))[0] == 404


async def test_bad_input_says_what_was_wrong_and_writes_nothing(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    url = base_url(proxy) + "/ruyi/v1/anchors"
    async with aiohttp.ClientSession() as http:
        status, err = await call(http, "POST", url, json={"type": "D", "title": "Use SQLite", "fields": {"why": "cheap"}})
        assert status == 400 and err["error"]["code"] == "anchor_fields_missing"
        assert err["error"]["missing"] == ["alternatives", "impact", "verification", "rollback"]
        status, err = await call(http, "POST", url, json={"type": "X", "title": "t"})
        assert status == 400 and "D, C, I, P, M, U, CK, DN" in err["error"]["message"]
        status, err = await call(http, "GET", url + "/D1")
        assert status == 400 and "D001 or CK012" in err["error"]["message"]
        assert (await call(http, "PATCH", url + "/D009", json={"status": "active"}))[0] == 404
        status, err = await call(http, "POST", url, data=b"[1, 2", headers={"Content-Type": "application/json"})
        assert status == 400 and err["error"]["code"] == "invalid_json"
        await call(http, "POST", url, json={"type": "D", "title": "Pending one", "status": "pending"})
        status, err = await call(http, "PATCH", url + "/D001", json={"status": "active"})
        assert status == 400 and err["error"]["missing"] == ["alternatives", "why", "impact", "verification", "rollback"]
        status, listed = await call(http, "GET", url)
        assert [(a["id"], a["status"]) for a in listed["anchors"]] == [("D001", "pending")]


async def test_one_agent_never_reads_lists_or_changes_anothers(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(auth={"keys": [{"key": "key-a", "agent": "a"}, {"key": "key-b", "agent": "b"}]})
    url = base_url(proxy) + "/ruyi/v1/anchors"
    async with aiohttp.ClientSession() as http:
        a, b = {"X-Ruyi-Key": "key-a"}, {"X-Ruyi-Key": "key-b"}
        assert (await call(http, "POST", url, headers=a, json={"type": "D", "title": "A's", "fields": FIELDS}))[0] == 201
        assert (await call(http, "GET", url, headers=b))[1]["anchors"] == []
        assert (await call(http, "GET", url + "/D001", headers=b))[0] == 404
        assert (await call(http, "PATCH", url + "/D001", headers=b, json={"status": "obsolete"}))[0] == 404
        assert (await call(http, "DELETE", url + "/D001", headers=b))[0] == 404
        assert (await call(http, "GET", url + "/D001", headers=a))[1]["status"] == "active"
        assert (await call(http, "GET", url, headers={}))[0] == 401
