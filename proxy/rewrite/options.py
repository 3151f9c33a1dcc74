"""Pruning's options (config ``pruning``, the strategies' own inside it): a leaf the config composes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

from conversation.actions.classify import ToolSpec, tools_from_mapping
from strategies.pipeline import PipelineOptions
from strategies.protection import Protection


@dataclass(frozen=True)
class ToolEntry:
    """One tool added to the classification table (or replacing a built-in entry of the same name)."""

    name: str
    """The tool's name as the agent calls it."""
    kind: Literal["read", "write", "edit", "search", "list", "shell", "other"]
    """What its calls do; ``shell`` means its command argument is parsed like a shell line."""
    path: tuple[str, ...] = ()
    """Arguments that may hold the path, first present wins."""
    command: str | None = None
    """For shell tools: the argument holding the command line."""
    pattern: str | None = None
    """For search and list tools: the argument holding the pattern."""
    offset: str | None = None
    """For reads: the argument holding the first line."""
    limit: str | None = None
    """For reads: the argument holding the number of lines."""
    offset_base: int = 1
    """Whether ``offset`` counts from 0 or 1."""


@dataclass(frozen=True)
class PruningOptions:
    """When and how hard Ruyi prunes (the strategies' own options are under ``strategies``)."""

    enabled: bool = True
    """Turn all pruning off (measuring and reporting go on)."""
    clear_at_least: float = 0.30
    """A batch at the prune tier frees at least this share of the window: what the strategies find
    redundant, then (``discard``) the oldest outputs, as many as that needs; a batch that still falls
    short is not applied and is retried after that much growth, unless the request is over the usable
    window: then a batch aims below the prune tier and frees what it can toward it. 0.30 gave the
    lowest cost with caching on the public traces."""
    protected_turns: int = 4
    """The newest turns no batch touches."""
    overflow_protected_turns: int = 2
    """Protected turns of the harder batch run after an upstream context-overflow error."""
    min_saving_tokens: int = 20
    """A replacement saving fewer tokens than this is not worth a cache miss."""
    economic: bool = True
    """Below the prune tier, also apply proposals whose saving pays for the cache miss they cause."""
    cache_read_ratio: float = 0.1
    """Price of a cached prompt token relative to an uncached one (Anthropic, DeepSeek, GPT-5: 0.1)."""
    horizon_share: float = 0.75
    """Future requests a saving is credited for, as a share of the requests the session has made: a
    session is expected to last about as long again; 0.75 hedges that guess, and with it no public
    trace costs more than sending everything (1.0 made the two shortest cost 1.08× and 1.10×)."""
    horizon_max: int = 40
    """Most future requests a saving is credited for; 40 gave the lowest cost with caching on the public traces. Never
    past the session's next expected archive (and a few requests' slack): the archive replaces what was pruned."""
    reports_kept: int = 100
    """DCP reports kept per session for /ruyi/v1/sessions/<id>/report."""
    protection: Protection.Options = field(default_factory=Protection.Options)
    """What no strategy touches: messages citing anchors, calls on protected paths and of protected tools."""
    strategies: PipelineOptions = field(default_factory=PipelineOptions)
    """Which strategies run, and each one's options (keys: the strategy names)."""
    tools: tuple[ToolEntry, ...] = ()
    """Tools to add to the built-in table (Claude Code, opencode, OpenHands, SWE-agent, Codex, bash, …)."""

    def tool_table(self) -> Mapping[str, ToolSpec]:
        """The built-in classification table with this config's entries added."""
        return tools_from_mapping({t.name: {k: v for k, v in asdict(t).items() if k != "name"} for t in self.tools})

    def check(self) -> None:
        if not 0.0 <= self.cache_read_ratio <= 1.0:
            raise ValueError(f"cache_read_ratio must be in [0, 1], got {self.cache_read_ratio}")
        if self.horizon_share < 0.0:
            raise ValueError(f"horizon_share must be >= 0, got {self.horizon_share}")
        if not 0.0 <= self.clear_at_least <= 1.0:
            raise ValueError(f"clear_at_least must be a fraction of the window in [0, 1], got {self.clear_at_least}")
        if self.protected_turns < 0 or self.overflow_protected_turns < 0:
            raise ValueError("protected turns must be >= 0")
        self.tool_table()  # a bad entry stops start-up, naming the tool
