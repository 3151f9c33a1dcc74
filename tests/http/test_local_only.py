"""With no keys, the admin API and Ollama's model management answer loopback (and trusted networks) only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import ollama
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from config.schema import Config
from proxy.http.app import make_app
from proxy.http.auth import is_local
from tests.conftest import base_url, config_for
from tests.fake_upstream import FakeUpstream

MANAGEMENT = [
    ("POST", "/api/pull"),
    ("POST", "/api/push"),
    ("POST", "/api/create"),
    ("POST", "/api/copy"),
    ("DELETE", "/api/delete"),
    ("HEAD", "/api/blobs/sha256:0a1b"),
    ("POST", "/api/p%75ll"),
    ("POST", "/api/pull/"),
    ("POST", "/api/pull/./"),
    ("POST", "/api/Pull/"),
    ("POST", "/api/pull;x"),
    ("POST", "/api/PUSH"),
    ("POST", "/api/blobs;x/sha256:0a1b"),
]


async def over_unix_socket(config: Config, path: Path) -> AsyncIterator[aiohttp.ClientSession]:
    """Ruyi served on a Unix socket: its peer has no IP address, so it is not a loopback caller."""
    runner = web.AppRunner(make_app(config, probe_upstream=False))
    await runner.setup()
    await web.UnixSite(runner, str(path)).start()
    try:
        async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(path))) as http:
            yield http
    finally:
        await runner.cleanup()


@pytest.fixture
async def remote(upstream: TestServer, tmp_path: Path, request: Any) -> AsyncIterator[aiohttp.ClientSession]:
    sections = getattr(request, "param", {})
    async for http in over_unix_socket(config_for(base_url(upstream), "ollama", **sections), tmp_path / "ruyi.sock"):
        yield http


@pytest.mark.parametrize(("method", "path"), MANAGEMENT)
async def test_model_management_refuses_callers_that_are_not_local(remote: aiohttp.ClientSession, fake: FakeUpstream, method: str, path: str) -> None:
    async with remote.request(method, "http://ruyi" + path, json={"model": "llama3.1:8b"}) as resp:
        assert resp.status == 403
        if method != "HEAD":
            assert "loopback" in (await resp.json())["error"]
    assert fake.received == []


async def test_the_rest_of_the_api_still_answers_callers_that_are_not_local(remote: aiohttp.ClientSession, fake: FakeUpstream) -> None:
    async with remote.get("http://ruyi/api/tags") as resp:
        assert resp.status == 200
    async with remote.post("http://ruyi/api/chat", json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False}) as resp:
        assert resp.status == 200


async def test_the_admin_api_refuses_callers_that_are_not_local(remote: aiohttp.ClientSession) -> None:
    for path in ("/ruyi/v1/sessions", "/ruyi/v1/stats", "/ruyi/v1/refs/r000000000000"):
        async with remote.get("http://ruyi" + path) as resp:
            assert resp.status == 403


@pytest.mark.parametrize("remote", [{"auth": {"keys": ["k-remote-0001"], "admin_key": "ruyi-admin-0003"}}], indirect=True)
async def test_keys_admit_callers_from_anywhere(remote: aiohttp.ClientSession, fake: FakeUpstream) -> None:
    async with remote.get("http://ruyi/ruyi/v1/sessions", headers={"X-Ruyi-Key": "k-remote-0001"}) as resp:
        assert resp.status == 200
    async with remote.post("http://ruyi/api/pull", json={"model": "x"}, headers={"X-Ruyi-Key": "k-remote-0001"}) as resp:
        assert resp.status == 200
    async with remote.post("http://ruyi/api/pull", json={"model": "x"}) as resp:
        assert resp.status == 401


async def test_loopback_callers_manage_models_through_ruyi(make_proxy: Any, fake: FakeUpstream) -> None:
    proxy = await make_proxy("ollama")
    progress = [p async for p in await ollama.AsyncClient(host=base_url(proxy)).pull("llama3.1:8b", stream=True)]
    assert progress[-1]["status"] == "success" and fake.last().path == "/api/pull"


def test_what_counts_as_local() -> None:
    bare = config_for("http://127.0.0.1:1").auth
    docker = config_for("http://127.0.0.1:1", auth={"trusted_networks": ["172.16.0.0/12", "192.168.0.0/16"]}).auth
    for address in ("127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1"):
        assert is_local(address, bare)
    for address in ("10.0.0.5", "172.18.0.1", "192.168.65.1", "", None, "not an address", "fe80::1%eth0"):
        assert not is_local(address, bare)
    assert is_local("172.18.0.1", docker) and is_local("192.168.65.1", docker) and not is_local("10.0.0.5", docker)


async def test_readyz_names_the_upstream_only_to_local_callers(remote: aiohttp.ClientSession, upstream: TestServer) -> None:
    async with remote.get("http://ruyi/readyz") as resp:
        body = await resp.text()
    assert resp.status == 200 and "ready" in body
    assert "upstream" not in body and str(upstream.port) not in body and "127.0.0.1" not in body


async def test_a_404_does_not_echo_the_path(remote: aiohttp.ClientSession) -> None:
    async with remote.get("http://ruyi/ruyi/v1/<script>alert(1)</script>") as resp:
        body = await resp.text()
    assert resp.status in (403, 404) and "script" not in body
    async with remote.get("http://ruyi/ruyi/nothing-here-xyz") as resp:
        body = await resp.text()
    assert "nothing-here-xyz" not in body


async def test_the_dashboard_refuses_callers_that_are_not_local(remote: aiohttp.ClientSession) -> None:
    for path in ("/ruyi/ui", "/ruyi/ui/static/app.js", "/ruyi/v1/agents", "/ruyi/v1/overview"):
        async with remote.get("http://ruyi" + path) as resp:
            assert resp.status == 403, path
