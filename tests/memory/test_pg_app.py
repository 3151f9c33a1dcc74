"""A Ruyi on PostgreSQL end to end: requests, the keeper's notebook and the store's sessions land in the database, a restarted
Ruyi finds them; the URL comes from RUYI_STORE__URL; a bad one stops start-up naming it without its password."""

from __future__ import annotations

import aiohttp
import pytest

from config.load import load_config
from memory.store.base import StoreError
from memory.store.pg_store import PgStore
from proxy.http.app import make_app
from proxy.rewrite.steps import default_steps
from tests.api.test_anchors_api import call
from tests.conftest import MakeProxy, base_url, config_for
from tests.rewrite.test_pruning import post


async def test_sessions_and_the_notebook_live_in_postgres_and_outlive_the_process(make_proxy: MakeProxy, pg_url: str) -> None:
    store = {"backend": "postgres", "url": pg_url}
    proxy = await make_proxy(store=store)
    for text in ("修复内存泄漏", "then run the tests"):
        assert (await post(proxy, [{"role": "user", "content": text}], headers={"X-Ruyi-Session": "s1"})).status == 200
    async with aiohttp.ClientSession() as http:
        status, _ = await call(http, "POST", base_url(proxy) + "/ruyi/v1/notebook/user", agent="a", json={"text": "prefers 中文"})
        assert status == 201
    await proxy.close()  # drains the background writer
    reader = PgStore(pg_url)
    assert reader.session_ids("a") != []
    reader.close()
    again = await make_proxy(store=store)
    async with aiohttp.ClientSession() as http:
        status, nb = await call(http, "GET", base_url(again) + "/ruyi/v1/notebook", agent="a")
    assert status == 200 and [e["text"] for e in nb["sections"]["user"]["entries"]] == ["prefers 中文"]


def test_the_url_comes_from_the_environment() -> None:
    config = load_config(None, {"RUYI_STORE__BACKEND": "postgres", "RUYI_STORE__URL": "postgresql://ruyi@db:5432/ruyi"})
    assert (config.store.backend, config.store.url) == ("postgres", "postgresql://ruyi@db:5432/ruyi")


async def test_an_unreachable_database_stops_start_up_without_its_password(aiohttp_server: object) -> None:
    cfg = config_for("http://127.0.0.1:9/v1", store={"backend": "postgres", "url": "postgresql://ruyi:hunter2-pw@127.0.0.1:1/x"})
    app = make_app(cfg, default_steps(cfg), probe_upstream=False)
    with pytest.raises(StoreError) as err:
        await aiohttp_server(app)  # type: ignore[operator]
    assert "hunter2-pw" not in str(err.value) and "127.0.0.1:1" in str(err.value)
