"""Who is asking: the agent (X-Ruyi-Agent, else a hash of the client's key) and an explicit session id."""

from __future__ import annotations

from collections.abc import Mapping
from hashlib import blake2b

AGENT_HEADER = "x-ruyi-agent"
SESSION_HEADER = "x-ruyi-session"
_KEY_HEADERS = ("authorization", "x-api-key", "api-key")
_MAX_ID_CHARS = 128


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:  # plain dicts are case-sensitive; aiohttp's CIMultiDict is not
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    value = value.strip() if isinstance(value, str) else None
    return value or None


def _short_hash(text: str) -> str:
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def _bounded(value: str) -> str:
    return value if len(value) <= _MAX_ID_CHARS and value.isprintable() else "h-" + _short_hash(value)


def agent_id_for(headers: Mapping[str, str]) -> str:
    """X-Ruyi-Agent, else a short hash of the client's key (never the key), else `default`."""
    agent = _header(headers, AGENT_HEADER)
    if agent:
        return _bounded(agent)
    for name in _KEY_HEADERS:
        key = _header(headers, name)
        if key:
            return "k-" + _short_hash(key.removeprefix("Bearer ").strip())
    return "default"


def session_header(headers: Mapping[str, str]) -> str | None:
    """The explicit X-Ruyi-Session, if the client sent one."""
    value = _header(headers, SESSION_HEADER)
    return _bounded(value) if value else None
