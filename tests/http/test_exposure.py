"""What a listening Ruyi exposes: the start-up warning, and request heads answered in the client's format."""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from pathlib import Path

import aiohttp
import structlog

from proxy.http.exposure import exposure_warnings
from proxy.http.log import configure_logging
from tests.conftest import MakeProxy, base_url, config_for, free_port
from tests.fake_upstream import FakeUpstream


def test_serving_beyond_loopback_without_keys_is_warned_about() -> None:
    exposed = config_for(
        "http://127.0.0.1:11434",
        "ollama",
        server={"host": "0.0.0.0"},
        routes=[{"model": "gpt-*", "url": "https://api.openai.com/v1", "kind": "openai", "api_key": "sk-route-000000000001"}],
    )
    (warning,) = exposure_warnings(exposed)
    assert "0.0.0.0:8787" in warning and "https://api.openai.com" in warning and "gpt-*" in warning
    assert "admin API" in warning and "pull" in warning and "auth.keys" in warning and "auth.trusted_networks" in warning
    assert "sk-route" not in warning
    for quiet in (
        {"server": {"host": "127.0.0.1"}},
        {"server": {"host": "localhost"}},
        {"server": {"host": "0.0.0.0"}, "auth": {"keys": ["k-000000000001"]}},
        {"server": {"host": "0.0.0.0"}, "auth": {"trusted_networks": ["172.16.0.0/12"]}},
    ):
        assert exposure_warnings(config_for("http://127.0.0.1:11434", "ollama", **quiet)) == []
    unset = config_for("http://127.0.0.1:1", auth={"keys": ["env:RUYI_TEST_NEVER_SET"]})
    assert "not set" in exposure_warnings(unset)[0]


async def test_ruyi_serve_on_every_interface_says_so_loudly(tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "serve.log"
    env = {**os.environ, "RUYI_DATA_DIR": str(tmp_path / "data"), "RUYI_LOGGING__FORMAT": "json"}
    env.pop("RUYI_CONFIG", None)
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "proxy.cli",
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
            "--upstream",
            f"http://127.0.0.1:{free_port()}",
            stdout=out,
            stderr=out,
            env=env,
        )
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(600):
                try:
                    async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 60)
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    (exposed,) = [e for e in events if e["event"] == "serving_exposed"]
    assert exposed["level"] == "warning" and f"0.0.0.0:{port}" in exposed["warning"]


async def get(url: str, headers: dict[str, str]) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as resp:
        return resp.status, resp.content_type, await resp.text()


async def test_a_long_header_is_accepted(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    status, _, _ = await get(base_url(proxy) + "/v1/models", {"X-Trace-Context": "t" * 12_000})
    assert status == 200 and fake.last().headers["X-Trace-Context"] == "t" * 12_000


async def test_oversized_heads_are_answered_in_the_clients_format(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    big = {f"X-Big-{i}": "b" * 9000 for i in range(5)}
    openai = await make_proxy()
    status, ctype, body = await get(base_url(openai) + "/v1/models", big)
    assert (status, ctype) == (431, "application/json")
    assert json.loads(body)["error"]["code"] == "headers_too_large" and "limits.max_header_bytes" in body
    ollama = await make_proxy("ollama")
    status, _, body = await get(base_url(ollama) + "/api/tags", big)
    assert status == 431 and isinstance(json.loads(body)["error"], str)
    assert fake.received == []


async def test_a_head_past_the_parsers_ceiling_is_a_warning_not_an_error(make_proxy: MakeProxy) -> None:
    stream = io.StringIO()
    configure_logging("debug", "json", [], stream=stream)
    try:
        proxy = await make_proxy()
        status, _, body = await get(base_url(proxy) + "/v1/models", {"Authorization": "Bearer " + "s3cr3t" * 30_000})
    finally:
        structlog.reset_defaults()
    assert status == 400
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    unparsable = [e for e in events if str(e["event"]).startswith("request_unparsable")]
    assert unparsable and {e["level"] for e in unparsable} == {"warning"}
    assert not any("Error handling request" in str(e["event"]) for e in events)
    assert "s3cr3t" not in stream.getvalue()
