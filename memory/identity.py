"""Who is asking: the agent (the client key's, or X-Ruyi-Agent when no keys are set) and an explicit session id."""

from __future__ import annotations

from collections.abc import Mapping
from hashlib import blake2b

from multidict import CIMultiDict, CIMultiDictProxy

from redaction.redact import redact

AGENT_HEADER = "x-ruyi-agent"
SESSION_HEADER = "x-ruyi-session"
SUB_AGENT = "/"
"""With client keys, X-Ruyi-Agent names a sub-agent inside the key's agent: `agent-a` + `planner` is
`agent-a/planner`. Configured agents hold no slash, so no sub-agent of one key is another key's agent."""
_KEY_HEADERS = ("authorization", "x-api-key", "api-key", "x-ruyi-key")
_MAX_ID_CHARS = 128
_CASE_INSENSITIVE = (CIMultiDict, CIMultiDictProxy)
"""Header maps that find a name in any case (aiohttp's): a miss there is a miss."""


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None and not isinstance(headers, _CASE_INSENSITIVE):  # plain dicts are case-sensitive
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    value = value.strip() if isinstance(value, str) else None
    return value or None


def _short_hash(text: str) -> str:
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def _bounded(value: str) -> str:
    """An id as the client named it, unless it is long, unprintable or looks like a secret (a key sent as
    X-Ruyi-Session): then a short hash of it, so no key is ever stored or logged as an id."""
    if len(value) <= _MAX_ID_CHARS and value.isprintable() and redact(value) == value:
        return value
    return "h-" + _short_hash(value)


def agent_of_key(key: str) -> str:
    """The agent a client key speaks for when the config names none: a short hash of it (never the key)."""
    return "k-" + _short_hash(key.removeprefix("Bearer ").strip())


def agent_id_for(headers: Mapping[str, str], key_agent: str | None = None) -> str:
    """The agent of a request.

    With a client key (``key_agent``, the agent that key speaks for): that agent, or the sub-agent
    ``<key_agent>/<X-Ruyi-Agent>`` when the header is sent; never another key's agent. Without client
    keys: X-Ruyi-Agent, else a short hash of whatever key the client sent (never the key), else `default`.
    """
    agent = _header(headers, AGENT_HEADER)
    if key_agent is not None:
        return f"{key_agent}{SUB_AGENT}{_bounded(agent)}" if agent else key_agent
    if agent:
        return _bounded(agent)
    for name in _KEY_HEADERS:
        key = _header(headers, name)
        if key:
            return agent_of_key(key)
    return "default"


def named_agent(headers: Mapping[str, str]) -> str | None:
    """The agent X-Ruyi-Agent names in full (for the admin key, which reads any agent)."""
    agent = _header(headers, AGENT_HEADER)
    return _bounded(agent) if agent else None


def session_header(headers: Mapping[str, str]) -> str | None:
    """The explicit X-Ruyi-Session, if the client sent one."""
    value = _header(headers, SESSION_HEADER)
    return _bounded(value) if value else None
