"""Reference point for bench/serve/overhead.py and the soak: the smallest sensible aiohttp streaming passthrough.

python bench/serve/minimal_passthrough.py UPSTREAM PORT [uvloop]   # uvloop: on the loop `ruyi serve` runs on
"""

from __future__ import annotations

import sys

import aiohttp
from aiohttp import web

UPSTREAM = sys.argv[1]
PORT = int(sys.argv[2])
SESSION = web.AppKey("session", aiohttp.ClientSession)


async def forward(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    async with request.app[SESSION].post(UPSTREAM + request.path, data=body, headers={"Content-Type": "application/json"}) as up:
        out = web.StreamResponse(status=up.status, headers={"Content-Type": up.headers.get("Content-Type", "application/json")})
        await out.prepare(request)
        async for chunk in up.content.iter_any():
            await out.write(chunk)
        await out.write_eof()
        return out


async def session_ctx(app: web.Application):  # type: ignore[no-untyped-def]
    app[SESSION] = aiohttp.ClientSession()
    yield
    await app[SESSION].close()


app = web.Application()
app.cleanup_ctx.append(session_ctx)
app.router.add_post("/{tail:.*}", forward)
loop = None
if sys.argv[3:] == ["uvloop"]:
    import uvloop

    loop = uvloop.new_event_loop()
web.run_app(app, host="127.0.0.1", port=PORT, access_log=None, print=None, loop=loop)
