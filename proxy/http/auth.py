"""Who is calling: a client key decides the agent, the admin key reads every agent, and without keys only local callers manage.

With ``auth.keys`` set, every proxy request needs a client key (``X-Ruyi-Key``, or the bearer token on routes
that bring their own upstream key), checked before the body is read; the key's agent is the request's agent
and ``X-Ruyi-Agent`` only picks a sub-agent inside it. The admin API answers the admin key for any agent and
a client key for its own. With no keys at all, the admin API and Ollama's model management answer loopback
callers (and ``auth.trusted_networks``) only.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass

from aiohttp import web

from config.schema import AuthOptions, Config, Route
from memory.identity import agent_id_for, named_agent
from proxy import appkeys
from proxy.dialects.errors import ProxyError

MODEL_MANAGEMENT = frozenset({"/api/pull", "/api/push", "/api/create", "/api/copy", "/api/delete"})
"""Ollama's endpoints that change what models the upstream holds (with /api/blobs/…, the uploads of create)."""


@dataclass(frozen=True)
class Caller:
    """Who a request is from, as far as Ruyi can tell."""

    agent_id: str | None
    """The agent it reads and writes; None only for the admin key without X-Ruyi-Agent."""
    admin: bool = False
    """Whether it showed the admin key."""
    by_bearer: bool = False
    """Known by its Authorization bearer (or ``x-api-key``), which counts only on routes that bring their own upstream key."""


def _bearer(request: web.Request) -> str | None:
    value = request.headers.get("Authorization", "")
    return value[7:].strip() if value[:7].lower() == "bearer " else None


def _agent_of(key: str | None, agents: dict[str, str]) -> str | None:
    """The agent of a presented key, comparing with every configured key in constant time."""
    if not key:
        return None
    found = None
    for known, agent in agents.items():
        if hmac.compare_digest(key.encode(), known.encode()):
            found = agent
    return found


def _is_admin(request: web.Request, auth: AuthOptions) -> bool:
    admin = auth.resolved_admin_key
    presented = (request.headers.get("X-Ruyi-Key"), _bearer(request))
    return admin is not None and any(p and hmac.compare_digest(p.encode(), admin.encode()) for p in presented)


def is_local(remote: str | None, auth: AuthOptions) -> bool:
    """Whether a peer address is loopback or in auth.trusted_networks (an unknown peer is not)."""
    try:
        ip = ipaddress.ip_address((remote or "").split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or any(ip in network for network in auth.networks)


def identify(request: web.Request) -> Caller:
    """A proxy request's caller, from its headers alone (before the body is read): 401 without a valid
    client key when keys are set."""
    config: Config = request.app[appkeys.CONFIG]
    agents = config.auth.key_agents
    if not agents:
        return Caller(agent_id_for(request.headers))
    agent = _agent_of(request.headers.get("X-Ruyi-Key"), agents)
    if agent is not None:
        return Caller(agent_id_for(request.headers, agent))
    if any(route.key for route in (config.default_route, *config.routes)):
        agent = _agent_of(_bearer(request) or request.headers.get("x-api-key"), agents)  # Anthropic clients send x-api-key
        if agent is not None:
            return Caller(agent_id_for(request.headers, agent), by_bearer=True)
    raise ProxyError(401, "invalid_ruyi_key", "this Ruyi requires a key: send it in the X-Ruyi-Key header")


def check_route(caller: Caller, route: Route) -> None:
    """A caller known by its bearer may use only routes whose own key replaces that bearer upstream."""
    if caller.by_bearer and not route.key:
        raise ProxyError(401, "invalid_ruyi_key", "this Ruyi requires a key: send it in the X-Ruyi-Key header")


def is_model_management(path: str) -> bool:
    """Whether a (normalised) path reaches Ollama's model management, however it is spelled: any case, a trailing
    slash, ``;`` parameters on a segment (``/api/Pull/``, ``/api/pull;x``, ``/api/blobs/sha256:…``)."""
    head = "/".join(segment.split(";", 1)[0] for segment in path.lower().split("/")[:3])
    return head in MODEL_MANAGEMENT or head == "/api/blobs"


def check_model_management(request: web.Request, path: str) -> None:
    """Ollama's model management (pull, push, create, copy, delete, blobs) without client keys: local
    callers and the admin key only (with keys, the caller already showed a valid one)."""
    if not is_model_management(path):
        return
    auth = request.app[appkeys.CONFIG].auth
    if auth.key_agents or _is_admin(request, auth) or is_local(request.remote, auth):
        return
    raise ProxyError(
        403,
        "not_local",
        f"{path} changes the upstream's models: with no auth.keys set it answers only loopback callers and auth.trusted_networks (or the admin key)",
    )


def admin_caller(request: web.Request) -> Caller:
    """The admin API's caller: the admin key (any agent), a client key (its own agent), or, with no keys
    set, a local caller (the agent its headers name). 401/403 otherwise."""
    auth = request.app[appkeys.CONFIG].auth
    if _is_admin(request, auth):
        return Caller(named_agent(request.headers), admin=True)
    agents = auth.key_agents
    if agents:
        agent = _agent_of(request.headers.get("X-Ruyi-Key"), agents) or _agent_of(_bearer(request), agents)
        if agent is not None:
            return Caller(agent_id_for(request.headers, agent))
    if agents or auth.resolved_admin_key is not None:
        raise ProxyError(
            401,
            "invalid_admin_key",
            "the admin API requires a key in X-Ruyi-Key: the admin key (any agent, named by X-Ruyi-Agent) or a client key (its own agent)",
        )
    if not is_local(request.remote, auth):
        raise ProxyError(403, "not_local", "with no auth.keys set the admin API answers only loopback callers and auth.trusted_networks")
    return Caller(agent_id_for(request.headers))
