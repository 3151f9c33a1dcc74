"""The configuration schema: one frozen dataclass per section, validated once at start-up."""

from __future__ import annotations

import fnmatch
import functools
import ipaddress
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from memory.cards.options import AgentSettings, CardsOptions, WorkspaceOptions
from memory.identity import agent_of_key
from memory.session import SessionOptions
from memory.store.options import StoreOptions
from proxy.keep.options import NotebookOptions
from proxy.know.options import CalibrationOptions, OllamaOptions, TierOptions, TokenOptions, WindowOptions
from proxy.layout.options import LayoutOptions
from proxy.longctx.options import ArchiveOptions, RetrievalOptions, S0Options
from proxy.observe.options import AuditOptions, MetricsOptions
from proxy.rewrite.options import PruningOptions
from redaction.secrets import resolve_secret
from summaries.options import SummarizerOptions

UpstreamKind = Literal["openai", "ollama", "anthropic"]


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"expected an http(s) URL such as http://127.0.0.1:11434, got {url!r}")


def _check_secret(value: str | None, what: str) -> None:
    if value is not None and value.startswith("env:") and not value[4:]:
        raise ValueError(f"{what}: 'env:' needs a variable name, as in env:OPENAI_API_KEY")


@dataclass(frozen=True)
class Route:
    """Where requests for some models go."""

    model: str = "*"
    """Glob matched against the request's model name (``gpt-*``, ``llama3*``, ``*``)."""
    url: str = "http://127.0.0.1:11434"
    """Base URL of the upstream; for OpenAI-style servers include the version (``…/v1``)."""
    kind: UpstreamKind = "ollama"
    """Wire format the upstream speaks: ``openai``, ``ollama`` or ``anthropic`` (Messages API, ``/v1/messages``)."""
    api_key: str | None = None
    """Key sent to the upstream (literal or ``env:NAME``; as ``x-api-key`` to an ``anthropic`` upstream, else as a
    bearer); when unset the client's own is forwarded."""
    translate: bool = False
    """Let litellm translate between dialects: an OpenAI client's request to an ``anthropic`` route, an Anthropic
    client's to an ``openai`` or ``ollama`` route (streaming included). Off: such a request is answered 400."""

    def check(self) -> None:
        _check_url(self.url)
        _check_secret(self.api_key, "api_key")

    def matches(self, model: str) -> bool:
        return fnmatch.fnmatchcase(model, self.model)

    @property
    def key(self) -> str | None:
        return resolve_secret(self.api_key)


@dataclass(frozen=True)
class ServerOptions:
    host: str = "127.0.0.1"
    """Interface to listen on (``0.0.0.0`` in a container)."""
    port: int = 8787
    """TCP port to listen on."""
    worker_threads: int = 16
    """Threads that rewrite requests and talk to the store, off the event loop. Requests of different sessions
    are rewritten side by side (up to this many at once); requests of one session take turns."""
    loop_rewrite_bytes: int = 32768
    """A request body up to this size is measured and rewritten on the event loop, skipping two thread hops,
    when that needs nothing from the store (its session is in memory), no other thread holds the session registry,
    and the request's decisions need no durable write; otherwise, or when larger, in a worker thread. At 32 KiB
    that is a few ms of CPU at most for a session's first request, well under 1 ms later. 0: always a thread."""
    shutdown_grace_seconds: float = 20.0
    """On SIGTERM/SIGINT, how long in-flight requests and streams may take to finish; then streams still open end
    with an error event (SSE) or error line (NDJSON), requests not yet answered get 503, and the store drains."""
    workers: int = 1
    """Processes serving the port (SO_REUSEPORT: the kernel spreads connections over them), each with its own event
    loop and worker threads, sharing the store (``store.shared`` turns on by itself). Needs a store every process
    can open: SQLite (one file, per-session locks beside it) or PostgreSQL; refused with ``store.backend: memory``."""

    def check(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"port must be between 1 and 65535, got {self.port}")
        if self.worker_threads < 1:
            raise ValueError("worker_threads must be at least 1")
        if not 0 <= self.loop_rewrite_bytes <= 1 << 20:
            raise ValueError(f"loop_rewrite_bytes must be between 0 and 1048576, got {self.loop_rewrite_bytes}")
        if self.shutdown_grace_seconds < 0:
            raise ValueError("shutdown_grace_seconds must be >= 0")
        if not 1 <= self.workers <= 256:
            raise ValueError(f"workers must be between 1 and 256, got {self.workers}")


@dataclass(frozen=True)
class UpstreamOptions:
    connect_timeout_seconds: float = 10.0
    """Give up connecting to an upstream after this long (answered with 504)."""
    read_timeout_seconds: float = 600.0
    """Give up when an upstream sends nothing for this long (answered with 504)."""
    max_connections: int = 1000
    """Upstream requests in flight at once, over all upstreams. A streaming request holds its connection until
    its last token, so size it for the agents (sub-agents included) that stream at the same time, with headroom;
    each takes two file descriptors (Ruyi raises its soft limit to fit at start-up)."""
    pool_wait_seconds: float = 10.0
    """How long a request waits for a free connection when all are in use; then it is answered 503 (Retry-After)."""

    def check(self) -> None:
        if self.connect_timeout_seconds <= 0 or self.read_timeout_seconds <= 0:
            raise ValueError("timeouts must be positive")
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        if self.pool_wait_seconds <= 0:
            raise ValueError("pool_wait_seconds must be positive")


@dataclass(frozen=True)
class LimitOptions:
    max_body_bytes: int = 32 * 1024 * 1024
    """Largest request body Ruyi reads into memory (answered with 413 beyond it)."""
    max_header_bytes: int = 32 * 1024
    """Largest request head, request line and headers together (answered with 431 in the client's format
    beyond it; the HTTP parser itself stops a single line at four times this)."""
    header_timeout_seconds: float = 15.0
    """A client connection must send a whole request head within this long of connecting (or of its previous
    answer, when it keeps the connection alive): a client trickling its headers is disconnected."""
    body_timeout_seconds: float = 60.0
    """A request's whole body must arrive within this long of its head (408 in the client's format otherwise)."""

    def check(self) -> None:
        if self.max_body_bytes < 1024:
            raise ValueError("max_body_bytes must be at least 1024")
        if self.max_header_bytes < 8192:
            raise ValueError("max_header_bytes must be at least 8192")
        if self.header_timeout_seconds <= 0 or self.body_timeout_seconds <= 0:
            raise ValueError("header_timeout_seconds and body_timeout_seconds must be positive")


@dataclass(frozen=True)
class ClientKey:
    """A client key and the agent it speaks for."""

    key: str
    """The key clients send as ``X-Ruyi-Key`` (literal or ``env:NAME``)."""
    agent: str | None = None
    """The agent this key is: its sessions, refs and reports. Naming it lets a new key take over the agent
    (and its memory) when keys rotate; unset, the agent is derived from the key (``k-`` and a hash)."""

    def check(self) -> None:
        _check_secret(self.key, "key")
        if self.agent is not None:
            _check_agent(self.agent)


def _check_agent(agent: str) -> None:
    if not agent or len(agent) > 64 or not agent.isprintable() or any(c in agent for c in " /\\"):
        raise ValueError(f"agent must be 1 to 64 printable characters without spaces or slashes, got {agent!r}")


@dataclass(frozen=True)
class AuthOptions:
    keys: tuple[str | ClientKey, ...] = ()
    """Client keys (``X-Ruyi-Key``, or bearer on routes with their own key); empty = no client auth.
    Each a key, or ``{key: env:K1, agent: agent-a}``; the key decides the agent."""
    admin_key: str | None = None
    """Key for the ``/ruyi/v1`` admin API that reads every agent (``X-Ruyi-Agent`` names which); client
    keys read their own agent only."""
    trusted_networks: tuple[str, ...] = ()
    """Networks (CIDR) whose callers count as local while no client keys are set: the admin API and
    Ollama's model management answer them as they answer loopback, and serving beyond loopback is then
    intended (no start-up warning). In a container: Docker's bridges, [172.16.0.0/12, 192.168.0.0/16]."""

    def check(self) -> None:
        for entry in self.keys:
            if isinstance(entry, str):
                _check_secret(entry, "keys")
        _check_secret(self.admin_key, "admin_key")
        for network in self.trusted_networks:
            try:
                ipaddress.ip_network(network, strict=False)
            except ValueError:
                raise ValueError(f"trusted_networks: {network!r} is not a network such as 172.16.0.0/12 or ::1/128") from None
        admin = self.resolved_admin_key
        if admin is not None and admin in self.key_agents:
            raise ValueError("admin_key must differ from every client key")

    @functools.cached_property
    def key_agents(self) -> dict[str, str]:
        """Each configured client key (resolved; unset env: keys left out) → the agent it speaks for."""
        out: dict[str, str] = {}
        for entry in self.keys:
            named = entry if isinstance(entry, ClientKey) else ClientKey(entry)
            key = resolve_secret(named.key)
            if key:
                out[key] = named.agent or agent_of_key(key)
        return out

    @property
    def resolved_keys(self) -> frozenset[str]:
        return frozenset(self.key_agents)

    @property
    def resolved_admin_key(self) -> str | None:
        return resolve_secret(self.admin_key)

    @functools.cached_property
    def networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        return tuple(ipaddress.ip_network(n, strict=False) for n in self.trusted_networks)


@dataclass(frozen=True)
class LoggingOptions:
    level: Literal["debug", "info", "warning", "error"] = "info"
    """Lowest level written."""
    format: Literal["auto", "json", "console"] = "auto"
    """``auto``: readable on a terminal, JSON lines otherwise."""


@dataclass(frozen=True)
class Config:
    server: ServerOptions = field(default_factory=ServerOptions)
    upstream: UpstreamOptions = field(default_factory=UpstreamOptions)
    default_route: Route = field(default_factory=Route)
    """Where a request goes when no entry of ``routes`` matches its model."""
    routes: tuple[Route, ...] = ()
    """Routes by model name, first match wins; a request no route matches goes to ``default_route``."""
    limits: LimitOptions = field(default_factory=LimitOptions)
    auth: AuthOptions = field(default_factory=AuthOptions)
    logging: LoggingOptions = field(default_factory=LoggingOptions)
    window: WindowOptions = field(default_factory=WindowOptions)
    ollama: OllamaOptions = field(default_factory=OllamaOptions)
    tiers: TierOptions = field(default_factory=TierOptions)
    tokens: TokenOptions = field(default_factory=TokenOptions)
    calibration: CalibrationOptions = field(default_factory=CalibrationOptions)
    sessions: SessionOptions = field(default_factory=SessionOptions)
    store: StoreOptions = field(default_factory=StoreOptions)
    pruning: PruningOptions = field(default_factory=PruningOptions)
    archive: ArchiveOptions = field(default_factory=ArchiveOptions)
    s0: S0Options = field(default_factory=S0Options)
    retrieval: RetrievalOptions = field(default_factory=RetrievalOptions)
    summarizer: SummarizerOptions = field(default_factory=SummarizerOptions)
    notebook: NotebookOptions = field(default_factory=NotebookOptions)
    layout: LayoutOptions = field(default_factory=LayoutOptions)
    workspace: WorkspaceOptions = field(default_factory=WorkspaceOptions)
    cards: CardsOptions = field(default_factory=CardsOptions)
    agents: dict[str, AgentSettings] = field(default_factory=dict)
    """Per-agent settings (``{agent-a: {workspace_root: …, cards_dir: …}}``) over ``workspace`` and ``cards``; an agent's
    sub-agents (``agent-a/x``) share its entry unless they have their own."""
    metrics: MetricsOptions = field(default_factory=MetricsOptions)
    audit: AuditOptions = field(default_factory=AuditOptions)

    def __post_init__(self) -> None:
        for agent in self.agents:
            try:
                _check_agent(agent.split("/", 1)[0])
                _check_agent(agent.split("/", 1)[-1])
            except ValueError as exc:
                raise ValueError(f"agents: {exc}") from None

    def route_for(self, model: str | None) -> Route:
        """First route whose pattern matches the model, else the default route."""
        if model:
            for route in self.routes:
                if route.matches(model):
                    return route
        return self.default_route
