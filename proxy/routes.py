"""A route's upstream URL for a client's path: the one place that joins them, never outside the route's base; which route a body's model takes."""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from config.schema import Config, Route
from proxy.dialects.errors import ProxyError

_PCHAR_SAFE = "!$&'()*+,;=:@~"
"""What a path segment may hold unencoded besides letters, digits and `_.-~` (RFC 3986 pchar)."""


@functools.lru_cache(maxsize=1024)
def normalized_path(raw_path: str) -> str:
    """The client's raw path, canonical: each segment decoded once and encoded again, `.` and empty
    segments dropped, `..` resolved. 400 when a segment hides a separator (`%2f`, `%5c`, a backslash)
    or when `..` would climb out of the endpoint's first segment (`/v1`, `/api`): no path, however
    encoded, reaches the upstream outside the route's base path."""
    out: list[str] = []
    for segment in raw_path.split("/")[1:]:
        decoded = unquote(segment, errors="surrogateescape")
        if "/" in decoded or "\\" in decoded or "\x00" in decoded:
            raise ProxyError(400, "invalid_path", "the path holds an encoded separator (%2f, %5c) or a backslash")
        if decoded in ("", "."):
            continue
        if decoded == "..":
            if len(out) <= 1:
                raise ProxyError(400, "invalid_path", "the path climbs out of the endpoint with '..'")
            out.pop()
            continue
        out.append(quote(decoded, safe=_PCHAR_SAFE, errors="surrogateescape"))
    trailing = "/" if raw_path.endswith("/") and len(out) > 1 else ""
    return "/" + "/".join(out) + trailing


def upstream_url(route: Route, path: str, query: str = "") -> str:
    """The route's base URL joined with the client's raw path (normalized_path: never outside the base)
    and raw query string (kept byte for byte: `s=%23h` stays `s=%23h`), without doubling a ``/v1``."""
    return _joined(route.url, path) + (f"?{query}" if query else "")


@functools.lru_cache(maxsize=1024)
def _joined(url: str, path: str) -> str:
    base = url.rstrip("/")
    path = normalized_path(path)
    if urlsplit(base).path.endswith("/v1") and (path == "/v1" or path.startswith("/v1/")):
        path = path[3:]
    return f"{base}{path}"


def route_of(body: dict[str, Any], config: Config) -> tuple[str, Route]:
    """The body's model and the route that serves it; 400 without a model."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ProxyError(400, "missing_model", 'the request body needs a "model" string')
    return model, config.route_for(model)


DIALECTS = {
    "openai": "OpenAI chat (/v1/chat/completions)",
    "ollama": "Ollama (/api/chat, /api/generate)",
    "anthropic": "Anthropic Messages (/v1/messages)",
    "responses": "OpenAI Responses (/v1/responses)",
}
SERVED_BY = {"openai": ("openai", "ollama"), "ollama": ("ollama",), "anthropic": ("anthropic",), "responses": ("openai",)}
"""Which upstream kinds speak a client dialect natively (Ollama serves OpenAI chat on its /v1 too)."""
TRANSLATED = frozenset(
    {
        ("anthropic", "openai"),
        ("anthropic", "ollama"),
        ("openai", "anthropic"),
        ("ollama", "anthropic"),
        ("ollama", "openai"),
        ("responses", "ollama"),
    }
)
"""(client dialect, upstream kind) pairs litellm translates when the route says ``translate: true``."""


def check_kind(route: Route, wire: str, model: str) -> bool:
    """Whether the request goes through litellm's translation (its route speaks another dialect and allows it);
    400 naming the route and both dialects when the route speaks another dialect and translation is not on."""
    if wire == "responses" and route.translate and route.kind in ("openai", "ollama"):
        return True  # a chat-only server (llama.cpp, vLLM, Ollama's /v1): proxy/translate/responses_chat.py
    if route.kind in SERVED_BY[wire]:
        return False
    if (wire, route.kind) in TRANSLATED and route.translate:
        return True
    name = "the default route" if route.model == "*" else f"the route for {route.model!r}"
    fix = (
        ("set translate: true on it, or send it as " + DIALECTS[route.kind])
        if (wire, route.kind) in TRANSLATED
        else f"send it as {DIALECTS[route.kind]}"
    )
    raise ProxyError(
        400,
        "route_kind_mismatch",
        f"model {model!r} is routed to {name} (kind {route.kind}), which speaks {DIALECTS[route.kind]}; this request speaks {DIALECTS[wire]}: {fix}",
    )
