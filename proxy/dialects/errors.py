"""Errors for the client, in its dialect's shape (each dialect module says its own): ``ProxyError`` and its responses."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from proxy.dialects import anthropic, ollama, openai_chat, responses
from proxy.dialects.base import Wire


class ProxyError(Exception):
    """An error meant for the client: a status, a short code and a message that says what to do."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def wire_for_path(path: str) -> Wire:
    if path.startswith("/api/"):
        return "ollama"
    if path == "/v1/responses":
        return "responses"
    return "anthropic" if path == "/v1/messages" or path.startswith("/v1/messages/") else "openai"


def _module(wire: Wire) -> Any:
    return {"ollama": ollama, "anthropic": anthropic, "responses": responses}.get(wire, openai_chat)


def error_body(wire: Wire, status: int, code: str, message: str) -> dict[str, object]:
    """The error in the shape of the client's dialect."""
    return _module(wire).error_body(status, code, message)  # type: ignore[no-any-return]


def error_response(wire: Wire, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(error_body(wire, status, code, message), status=status, headers=headers)


def stream_error_bytes(wire: Wire, code: str, message: str, status: int = 502) -> bytes:
    """What ends a broken stream cleanly: an SSE error event, or an NDJSON error line."""
    body = json.dumps(error_body(wire, status, code, message)).encode()
    return _module(wire).stream_error(body)  # type: ignore[no-any-return]
