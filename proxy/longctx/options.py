"""The options of long context (config ``archive``, ``s0``, ``retrieval``): a leaf the config composes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

BlockPlace = Literal["after_task", "system"]
PLACES: tuple[str, ...] = ("after_task", "system")


@dataclass(frozen=True)
class S0Options:
    """Raw turns (S0): every request's new messages and the assembled answer, kept for recall and the expanded form."""

    enabled: bool = True
    """false: keep no raw turns (archives and S2 chunks are still kept)."""
    retention_days: float | None = None
    """Raw turns older than this are removed (null: as long as their session, ``sessions.ttl_days``)."""

    def check(self) -> None:
        if self.retention_days is not None and self.retention_days <= 0:
            raise ValueError(f"retention_days must be positive (or null for the sessions' ttl), got {self.retention_days}")


@dataclass(frozen=True)
class ArchiveOptions:
    """Archive and restart at the red line (the ``archive`` tier), or whenever a request would not fit."""

    enabled: bool = True
    """false: never archive (requests over the window go as pruning left them)."""
    target: float = 0.25
    """An archive brings the request to about this share of (window − reserve), at most ``target_max_tokens``: system
    messages, the task and the summary first, then the newest turns that fit (at least the newest one, whole). Aim
    low: archives stay rare."""
    target_max_tokens: int | None = 4096
    """The most tokens an archive aims to restart at, whatever the window: what the agent's next steps need after an
    archive (the task, the block, the newest turns) does not grow with the window, while every request until the next
    archive reads the restart again from the cache. A restart whose task, block and newest turns hold more is that
    size; the early archive's point is computed from it. null: ``target`` of the window only."""
    regrow: float = 0.34
    """After an archive, the next one at the archive tier waits until the session has grown again by this share
    of the window, so a session hovering near the red line is not archived over and over (a request that would
    not fit at all is archived at once); an early archive waits for the session to regrow by what the last one
    restarted at, at most this share of the window."""
    newest_turns: int = 4
    """The newest turns an archive keeps verbatim whenever they fit below the compact tier (the model's working memory)."""
    summary_tokens: int = 300
    """Budget of the active summary (S1) the archive block carries (seed 002's s1TargetTokens is 600: half of it goes
    to ``map_tokens``' code map instead, which keeps more of what the agent's next steps use for less; BENCHMARKS.md,
    "Next-step evidence, third pass")."""
    recent_tokens: int = 2000
    """Budget of the agent's own archived messages the block keeps verbatim after the summary: their words and their
    calls' arguments, line by line, a line kept only where it names something (an identifier, a path, a printed range
    like ``870p``) that no other kept line, the summary, the task or the newest turns name; the lines naming the most
    such things for their length are chosen first (a name counting more the more archived messages name it), newer
    messages first among equals (each message back weighs 0.98), shown grouped by message in their order; each message
    is redacted whole before it is cut into lines. The scripts and commands its next steps reuse; counted in what the
    archive restarts at, so fewer older turns stay verbatim. Scaled down below 32k (about 780 at 8k). 0: none."""
    map_tokens: int = 1000
    """Budget of the map of the code the agent saw in the archived stretch (``summaries.codemap``, ``<code-map>``):
    per file its outputs showed (a read, an editor's view, ``grep -n`` hits, a traceback's frames), the definitions
    they held (classes, functions, ``Class.method``, module-level names, imports) with their line numbers and the
    names each shown body used, one line per file, the files the agent looked at and named most first, a name listed
    only where the request names it nowhere else. Counted in what the archive restarts at, like ``recent_tokens``;
    scaled down below 32k (about 880 at 16k, 420 at 8k). 0: none."""
    chunk_tokens: int = 800
    """Budget of one S2 chunk's summary (seed 002's s2TargetTokens)."""
    chunk_source_tokens: int = 6000
    """An S2 chunk covers about this many tokens of history, in whole turns: the unit that is recalled later."""
    chunks_listed: int = 6
    """The newest S2 chunks the archive block lists by id (older ones are found by search); up to a 16k window by id
    and messages only, without what each holds."""
    kept: int = 4
    """A session's newest archives remembered for restarting (a rewound client may still carry an older one)."""
    early: bool = True
    """Archive before the red line once it pays, given prefix caching: when the request has grown past what an
    archive would restart it at by sqrt(2 × (restart − the head it leaves cached) × growth per request ÷
    cache_read_ratio), less a request's growth, each later request costs more in cached prefix than the archive's
    cache miss saves, over the requests to come (never below ``early_from``, never before the session regrew); and
    at a request a batch at the prune tier would cut, where the archive keeps the newest turns (one miss, not two)."""
    early_from: float = 0.3
    """The least share of (window − reserve) at which an archive may come early."""
    block: BlockPlace = "after_task"
    """Where the archive block goes. ``after_task``: right after the head (the system messages, the agent's preambles,
    the task): a message of its own in what the steps see, on the wire at the end of the task's own message (a text
    block after its last block for Anthropic, an input_text part for the Responses API), so no message is added
    between turns and the system prompt and the task stay byte for byte what the provider cached before the archive;
    the layout's stable part, rebuilt at an archive, follows it there. ``system``: appended to the head's last system
    message, as before (every archive then changes the system prompt, and the whole request misses the cache)."""

    def aim(self, usable: float) -> float:
        """Tokens an archive aims to restart at, in a window of ``usable`` tokens (window − reserve)."""
        share = self.target * usable
        return share if self.target_max_tokens is None else min(share, float(self.target_max_tokens))

    def check(self) -> None:
        if self.block not in PLACES:
            raise ValueError(f"block must be one of {', '.join(PLACES)}, got {self.block!r}")
        if not 0.05 <= self.early_from <= 1.0:
            raise ValueError(f"early_from must be a share of the window in [0.05, 1], got {self.early_from}")
        if not 0.05 <= self.target <= 0.9:
            raise ValueError(f"target must be a share of the window in [0.05, 0.9], got {self.target}")
        if self.target_max_tokens is not None and self.target_max_tokens < 256:
            raise ValueError(f"target_max_tokens must be at least 256 or null, got {self.target_max_tokens}")
        if not 0.0 <= self.regrow <= 1.0:
            raise ValueError(f"regrow must be in [0, 1], got {self.regrow}")
        if min(self.summary_tokens, self.chunk_tokens, self.chunk_source_tokens) < 50:
            raise ValueError("summary_tokens, chunk_tokens and chunk_source_tokens must be at least 50")
        if self.recent_tokens < 0 or self.map_tokens < 0:
            raise ValueError(f"recent_tokens and map_tokens must be >= 0, got {self.recent_tokens}, {self.map_tokens}")
        if self.chunks_listed < 0 or self.kept < 1 or self.newest_turns < 1:
            raise ValueError("chunks_listed must be >= 0, kept and newest_turns >= 1")


@dataclass(frozen=True)
class RetrievalOptions:
    """Recall of archived history into the request that needs it."""

    enabled: bool = True
    """false: never add recalled chunks to a request (search stays available by API)."""
    max_tokens: int = 2000
    """Most tokens a recalled block adds to a request (seed 002's ragCapTokens)."""
    min_terms: int = 3
    """A chunk is recalled when the newest input (a user's words, or the calls behind the newest tool results)
    shares this much with it (each distinct term 1, a path or dotted name 2), or names it."""
    cross_agent: bool = False
    """Let a request that asks (``X-Ruyi-Recall: all-agents``) recall other agents' archives too. Off: each agent
    recalls only its own session's (seed 002: cross-agent retrieval only when explicitly allowed)."""

    def check(self) -> None:
        if self.max_tokens < 50 or self.min_terms < 1:
            raise ValueError("max_tokens must be at least 50 and min_terms at least 1")
