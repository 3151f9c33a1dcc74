"""Reading a request's body holds it once: the bytes a client sent, not a growing buffer and a copy of it."""

from __future__ import annotations

import tracemalloc

import aiohttp
from aiohttp import web

from proxy.http.app import make_app
from proxy.http.request_body import read_body
from tests.conftest import base_url, config_for


async def test_an_8_mib_body_is_read_into_one_copy(aiohttp_server: object) -> None:
    size = 8 * 2**20
    peaks: list[int] = []

    async def handler(request: web.Request) -> web.Response:
        tracemalloc.start()
        try:
            raw = await read_body(request)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        return web.json_response({"bytes": len(raw), "same": raw == payload})

    app = make_app(config_for("http://127.0.0.1:9/v1"), probe_upstream=False)
    app.router.add_post("/t", handler)
    server = await aiohttp_server(app)  # type: ignore[operator]
    payload = b'{"x": "' + b"y" * (size - 9) + b'"}'
    async with aiohttp.ClientSession() as http, http.post(base_url(server) + "/t", data=payload) as resp:
        assert await resp.json() == {"bytes": size, "same": True}
    # before: the bytearray grown from the chunks, then bytes(raw) beside it (2 copies at once)
    assert peaks[0] < 1.5 * size, f"peak {peaks[0]:,} bytes for a {size:,}-byte body"
