"""Slow clients never hold a connection for ever: a head trickled byte by byte is cut at limits.header_timeout_seconds,
a body at limits.body_timeout_seconds (408 in the client's format); many small headers get an answer, not the HTTP
parser's plain-text 400; a taken port is one clear line and exit status 2."""

from __future__ import annotations

import asyncio
import json
import socket
import sys

import aiohttp
import pytest

from tests.conftest import MakeProxy, base_url


async def closed_by_server(reader: asyncio.StreamReader, within: float) -> bytes:
    """What the server sent before closing, waiting at most ``within`` seconds (fails rather than hangs)."""
    return await asyncio.wait_for(reader.read(), within)


async def test_a_client_trickling_its_head_is_disconnected(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(limits={"header_timeout_seconds": 1.0})
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
    await writer.drain()
    trickle = asyncio.create_task(_trickle(writer))
    try:
        assert await closed_by_server(reader, within=10) == b""  # closed, nothing answered
    finally:
        trickle.cancel()
        writer.close()


async def _trickle(writer: asyncio.StreamWriter) -> None:
    for n in range(100):
        writer.write(f"X-Slow-{n}: a\r\n".encode())
        await writer.drain()
        await asyncio.sleep(0.2)


async def test_a_client_trickling_its_body_gets_408_in_its_format(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(limits={"body_timeout_seconds": 1.0})
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"model"')
    await writer.drain()
    try:
        answer = await asyncio.wait_for(reader.read(4096), 10)
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408")
    assert json.loads(body)["error"]["code"] == "body_timeout"


async def test_two_hundred_small_headers_are_served(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    headers = {f"X-Extra-{n}": "v" for n in range(200)}
    async with aiohttp.ClientSession() as http:  # Ruyi's own endpoint: an upstream has header limits of its own
        async with http.get(base_url(proxy) + "/ruyi/v1/stats", headers=headers) as resp:
            assert resp.status == 200, await resp.text()


async def test_too_many_headers_get_431_in_the_clients_format(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    headers = {f"X-Extra-{n}": "v" * 40 for n in range(1000)}  # 50 KB of head: over limits.max_header_bytes
    async with aiohttp.ClientSession() as http:
        async with http.post(base_url(proxy) + "/v1/chat/completions", json={"model": "m"}, headers=headers) as resp:
            assert resp.status == 431
            assert (await resp.json())["error"]["code"] == "headers_too_large"


@pytest.mark.parametrize("host", ["127.0.0.1"])
async def test_a_taken_port_is_one_clear_line_and_status_2(host: str) -> None:
    with socket.socket() as holder:
        holder.bind((host, 0))
        holder.listen()
        port = holder.getsockname()[1]
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "proxy.cli",
            "serve",
            "--host",
            host,
            "--port",
            str(port),
            "--upstream",
            "http://127.0.0.1:9",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            if proc.returncode is None:
                proc.kill()
    assert proc.returncode == 2
    text = (out + err).decode()
    assert "already in use" in text and "Traceback" not in text and '"serving"' not in text and "serving " not in text
