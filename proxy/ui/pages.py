"""Serving the dashboard: ``/ruyi/ui`` (the page) and ``/ruyi/ui/static/<file>`` (its script and style).

Files of the package. The page holds no data: every figure comes from the ``/ruyi/v1`` API, guarded as always (a key the person types
is sent as ``X-Ruyi-Key`` from the page, kept in the tab's session storage, never in a URL)."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from proxy import appkeys
from proxy.http.auth import is_local

STATIC = Path(__file__).resolve().parent / "static"
TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
"""The page runs only its own files and talks only to this Ruyi; no other site may frame it."""


def _allowed(request: web.Request) -> None:
    """With no keys, the page answers who the admin API answers (loopback, trusted networks); with keys, anyone may
    load the empty page, which asks for a key before it shows anything."""
    auth = request.app[appkeys.CONFIG].auth
    if not auth.key_agents and auth.resolved_admin_key is None and not is_local(request.remote, auth):
        raise web.HTTPForbidden(text="the dashboard answers loopback callers and auth.trusted_networks (no auth.keys set)")


async def page(request: web.Request) -> web.StreamResponse:
    _allowed(request)
    return web.FileResponse(STATIC / "index.html", headers={**HEADERS, "Content-Type": "text/html; charset=utf-8"})


async def static(request: web.Request) -> web.StreamResponse:
    _allowed(request)
    name = request.match_info["name"]
    path = STATIC / name
    if "/" in name or name.startswith(".") or path.suffix not in TYPES or not path.is_file():
        raise web.HTTPNotFound()
    return web.FileResponse(path, headers={**HEADERS, "Content-Type": TYPES[path.suffix] + "; charset=utf-8"})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/ruyi/ui", page)
    app.router.add_get("/ruyi/ui/", page)
    app.router.add_get("/ruyi/ui/static/{name}", static)
