"""Archive and restart at the red line: when, which turns go, and the sticky record a session restarts from."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from hashlib import blake2b
from typing import Any

from conversation.task import instructions
from memory.chain import SYSTEM_ROLES
from proxy.know.options import TierOptions
from proxy.know.window import Budget
from proxy.longctx.block import ChunkLine, archive_block
from proxy.longctx.chunks import Chunk
from proxy.longctx.options import ArchiveOptions
from proxy.longctx.restart import AFTER_HEAD, BLOCK_SEPARATOR, INSERTED, head_size, restarted_head
from redaction.redact import redact
from summaries.codemap import code_map
from summaries.extractive import text_of
from summaries.recent import recent_work, said

Messages = list[dict[str, Any]]
NEW_MESSAGE_TOKENS = 4
FRAMING_TOKENS = 220
LINE_TOKENS = 45
PLAN_AHEAD = 0.25
"""An archive is planned (its summary prepared in the background) from this share of the window before it is expected."""
LEAD_FLOOR = 0.1
"""An archive past the point it was planned for keeps at most this share of the window more than it aimed at."""


@dataclass(frozen=True)
class Summary:
    """What the archived messages become: S1 text, the S2 chunks covering them (those made now among them)."""

    text: str
    chunks: tuple[Chunk, ...]
    new: tuple[Chunk, ...]
    chinese: bool
    source: str
    """``extractive``, ``llm``, or ``extractive_fallback`` (an LLM summary was wanted and not ready or not good)."""


Summarize = Callable[[int, int], Summary]
"""(first, last) client positions → their summary."""


@dataclass(frozen=True)
class Archived:
    """An archive made for this request: the record to keep, the request restarted from it, and its summary."""

    record: dict[str, Any]
    messages: Messages
    positions: tuple[int, ...]
    """Each message's position in the client's request (INSERTED for an added system message)."""
    tokens: int
    raw_tokens: int
    summary: Summary


def reason_for(tokens: int, budget: Budget, tiers: TierOptions, current: Mapping[str, Any] | None, requested: bool) -> str | None:
    """Why this request archives at once (``requested``, ``over_window``, ``archive_tier``), or None (``economic``, earlier
    where it pays, is decided by the archive step, which knows what the archive would restart at)."""
    if requested:
        return "requested"
    if tokens > budget.usable:
        return "over_window"
    if tokens >= tiers.archive * budget.usable and regrown(tokens, current):
        return "archive_tier"
    return None


def regrown(tokens: int, current: Mapping[str, Any] | None) -> bool:
    """Whether the session grew enough since the archive in force for another one at the archive tier (no compaction
    loop): ``tier_at``, the wait measured against the room the archive made (``next_at``, the restart doubled, at most
    ``regrow`` of the window past it, is when an early, economic archive may come; records made before ``tier_at``
    existed use it for both)."""
    return current is None or tokens >= int(current.get("tier_at", current.get("next_at")) or 0)


def early_point(restart: float, growth: float, cache_read_ratio: float, kept: float = 0.0) -> float:
    """Where archiving down to ``restart`` starts to pay, given prefix caching (inf when the session does not grow).

    A session that restarts at R and archives again at A pays, per request, about g + M·g/(A − R) (its new tokens,
    and the archive's cache miss spread over the (A − R)/g requests of a cycle) + c·(R + A)/2 (its cached prefix,
    at c of the price): lowest at A = R + sqrt(2·M·g/c). M, what an archive sends uncached, is the restart less
    ``kept``, the head that stays byte for byte before the block (the system prompt and the task, with the block
    after the task). A session grows a request at a time, so the point is g sooner: the cheapest whole number of
    requests in a cycle is about half a request fewer, and the archive comes at the first request past the point,
    on average half a request's growth past it (BENCHMARKS.md, "one miss, not two"). At least one request a cycle."""
    if growth <= 0:
        return math.inf
    missed = max(1.0, restart - kept)
    return restart + max(growth, math.sqrt(2 * missed * growth / max(cache_read_ratio, 1e-6)) - growth)


@dataclass(frozen=True)
class Plan:
    """Which messages an archive of this request would replace: client positions head..end, view messages from ``kept`` on stay."""

    head: int
    end: int
    kept: int
    fixed: int
    """Raw tokens of what stays besides the newest turns (head, tools, kept system messages), the block excluded."""
    suffix: int
    """Raw tokens of the newest turns kept."""
    keep: tuple[int, ...]
    """Positions of system messages and of the person's later instructions among the archived ones (they stay)."""
    estimate: int
    """Raw tokens of the restarted request, its block estimated."""
    recent: int = 0
    """Tokens the block's verbatim messages of the agent may take: ``archive.recent_tokens``, none behind a crowded
    prefix (there the room after the newest turns is what keeps the next archive from coming at overflow)."""
    map: int = 0
    """Tokens the block's map of the code the agent saw may take: ``archive.map_tokens``, none behind a crowded prefix."""
    keeps_newest: bool = True
    """Whether the newest ``archive.newest_turns`` turns all stay (a crowded prefix or the cap may keep fewer)."""


def plan(
    options: ArchiveOptions,
    budget: Budget,
    client: Sequence[Mapping[str, Any]],
    client_tokens: Sequence[int],
    view: Sequence[Mapping[str, Any]],
    positions: Sequence[int],
    view_tokens: Sequence[int],
    raw_total: int,
    ratio: float,
    current: Mapping[str, Any] | None,
    cap_share: float = 0.85,
    lead: float = 0.0,
    crowded_share: float | None = None,
) -> Plan | None:
    """The earliest turn start from which the newest turns fit ``target`` with the head and a summary, but the
    ``newest_turns`` whenever they fit below ``cap_share`` of the window (the prune tier), and at least the newest
    turn, whole; None when no turn after the task (and after the archive in force) can go.

    ``crowded_share`` (the compact tier) takes the cap's place when the fixed prefix (system text, tools, task) takes
    at least ``PREFIX_CROWDED`` of the usable window: behind an agent's big prefix (Claude Code's 19,000 tokens in a 64k
    window), turns kept up to the prune tier left the restart at its door, so the next request was pruned or archived
    again; below the compact tier such a session has room to grow. A small prefix keeps its newest turns to the prune
    tier (what the model reads next: needles and next-step evidence on the public traces).

    ``lead``: raw tokens the session is expected to grow by before the archive comes (negative: grew past it).
    A plan made ahead aims that much lower, so that the turns it keeps are those kept when the archive comes:
    what it keeps depends on the tokens before a turn, which later requests do not change, so the summary
    prepared for it ahead is the one the archive uses."""
    h = head_size(client)
    floor = max(h, int(current["end"]) + 1 if current is not None else h)
    head = sum(client_tokens[:h]) + raw_total - sum(view_tokens)
    crowded = head >= PREFIX_CROWDED * budget.usable / (ratio or 1.0)
    recent = 0 if crowded else options.recent_tokens
    seen_map = 0 if crowded else options.map_tokens
    block_estimate = options.summary_tokens + recent + seen_map + FRAMING_TOKENS + LINE_TOKENS * options.chunks_listed // 2
    target = options.aim(budget.usable) / (ratio or 1.0) - lead
    system_in = sorted(
        {p for p in range(h, len(client)) if client[p].get("role") in SYSTEM_ROLES}
        | set(kept_instructions(client, h, client_tokens, budget.usable / (ratio or 1.0)))
    )
    starts = [k for k in range(len(view)) if positions[k] >= floor + 1 and turn_start(view, k)]
    if not starts:
        return None
    suffix = [0] * (len(view) + 1)
    for i in range(len(view) - 1, starts[0] - 1, -1):
        suffix[i] = suffix[i + 1] + view_tokens[i]
    chosen = starts[-1]
    cap = cap_share * budget.usable / (ratio or 1.0)
    if crowded_share is not None and crowded:
        cap = min(cap, crowded_share * budget.usable / (ratio or 1.0))
    newest = starts[-options.newest_turns] if len(starts) >= options.newest_turns else starts[0]

    def size(k: int) -> int:
        return head + block_estimate + sum(client_tokens[p] for p in system_in if p < positions[k]) + suffix[k]

    for k in starts:
        if size(k) <= target or (k >= newest and size(k) <= cap):  # the newest turns stay whenever they fit below the cap
            chosen = k
            break
    keep = tuple(p for p in system_in if p < positions[chosen])
    fixed = head + sum(client_tokens[p] for p in keep)
    kept_turns = len(starts) - starts.index(chosen)
    estimate = fixed + block_estimate + suffix[chosen]
    return Plan(h, positions[chosen] - 1, chosen, fixed, suffix[chosen], keep, estimate, recent, seen_map, kept_turns >= options.newest_turns)


PREFIX_CROWDED = 0.4
"""A fixed prefix (system text, tools, task) at least this share of the usable window keeps newest turns only below the
compact tier after an archive (``plan``'s ``crowded_share``)."""


def turn_start(view: Sequence[Mapping[str, Any]], k: int) -> bool:
    """Whether a turn starts at view message ``k``: an answer, or a user message right after another one (a text-mode
    agent that dropped its failed replies sends observations only: each is a turn an archive may take)."""
    role = view[k].get("role")
    return role == "assistant" or (role == "user" and k > 0 and view[k - 1].get("role") == "user")


INSTRUCTIONS_KEPT = 5
"""The newest later instructions of the person an archive keeps verbatim (beside the task)."""
INSTRUCTION_SHARE = 0.05
"""A later instruction is kept verbatim up to this share of the usable window (a bigger one is summarized)."""


def kept_instructions(client: Sequence[Mapping[str, Any]], head: int, client_tokens: Sequence[int], usable_raw: float) -> list[int]:
    """Positions after the head of the person's later instructions (not tool results in text form) that an archive
    keeps where they are: the newest INSTRUCTIONS_KEPT, each below INSTRUCTION_SHARE of the window."""
    found = [p for p in instructions(client, head) if client_tokens[p] <= INSTRUCTION_SHARE * usable_raw]
    return found[-INSTRUCTIONS_KEPT:]


def worth(p: Plan, reason: str, raw_total: int, ratio: float, budget: Budget, tiers: TierOptions) -> bool:
    """Whether archiving as planned is worth a cache miss: it must shrink the request, and at the archive tier
    or early (where the request still fits) bring it below the prune tier, or the next request would be archived again."""
    if p.estimate >= raw_total:
        return False
    return (
        reason not in ("archive_tier", "economic") or p.estimate * ratio <= tiers.prune * budget.usable
    )  # overflow, over_window, requested: any gain


def archive(
    options: ArchiveOptions,
    budget: Budget,
    tiers: TierOptions,
    reason: str,
    number: int,
    request: int,
    client: Sequence[Mapping[str, Any]],
    links: Sequence[str],
    client_tokens: Sequence[int],
    view: Messages,
    positions: Sequence[int],
    view_tokens: Sequence[int],
    raw_total: int,
    ratio: float,
    current: Mapping[str, Any] | None,
    summarize: Summarize,
    count: Callable[[str], int],
    lead: float = 0.0,
    tool: str | None = None,
) -> Archived | None:
    """Archive the oldest turns after the task so the request comes to about ``target`` of the window (``tool``: the name
    the request offers Ruyi's recall tool under, which the block then says to call).

    ``view`` is the request as pruning left it (the archive in force applied), ``positions`` each of its messages'
    position in the client's request, ``view_tokens`` their raw tokens; None when no turn can go."""
    p = plan(options, budget, client, client_tokens, view, positions, view_tokens, raw_total, ratio, current, tiers.prune, lead, tiers.compact)
    if p is None or not worth(p, reason, raw_total, ratio, budget, tiers):
        return None
    h, end = p.head, p.end
    summary = summarize(h, end)
    carrier = AFTER_HEAD if options.block == "after_task" else max((i for i in range(h) if client[i].get("role") in SYSTEM_ROLES), default=INSERTED)
    turns = sum(1 for m in client[h : end + 1] if m.get("role") == "assistant")
    block = block_of(replace(options, recent_tokens=p.recent, map_tokens=p.map), client, number, h, end, summary, tool, budget.usable)
    block_tokens = count(block) + (NEW_MESSAGE_TOKENS if carrier in (INSERTED, AFTER_HEAD) else count(BLOCK_SEPARATOR))
    raw_after = p.fixed + block_tokens + p.suffix
    tokens_after = round(raw_after * ratio)
    record = {
        "id": "a" + blake2b(f"{number}\x00{links[end]}".encode(), digest_size=6).hexdigest(),
        "number": number,
        "request": request,
        "head": h,
        "end": end,
        "end_link": links[end],
        "system": carrier,
        "keep": list(p.keep),
        "block": block,
        "block_tokens": block_tokens,
        "tokens_before": round(raw_total * ratio),
        "tokens_after": tokens_after,
        "next_at": tokens_after + min(round(options.regrow * budget.window), tokens_after),
        "tier_at": tier_point(options, budget, tiers, tokens_after),
        "reason": reason,
        "turns": turns,
        "chunks": [c.chunk_id for c in summary.chunks],
        "spans": [[c.first, c.last] for c in summary.chunks],
        "summary_source": summary.source,
    }
    restarted, head_positions = restarted_head(client, record)
    messages = restarted + [dict(client[q]) for q in p.keep] + list(view[p.kept :])
    final = (*head_positions, *p.keep, *positions[p.kept :])
    return Archived(record, messages, final, tokens_after, raw_after, summary)


ROOM_SHARE = 0.5
"""After an archive the next one waits for the session to regrow by at most this share of the room the archive made
below the archive tier (and at most ``archive.regrow`` of the window): with a big fixed prefix (Claude Code's system
prompt and tools) a third of the window is more than the room left, and the next archive would wait for overflow."""

MIN_WAIT = 0.1
"""…but at least this share of the usable window (not of the window: Claude Code reserves half of it for its answer):
an archive that made little room is not followed by another at once."""


def regrow_wait(options: ArchiveOptions, budget: Budget, tiers: TierOptions, tokens_after: int) -> int:
    """Tokens a session must regrow by after an archive before the next one at the archive tier."""
    room = max(0.0, tiers.archive * budget.usable - tokens_after)
    return round(min(options.regrow * budget.window, max(ROOM_SHARE * room, MIN_WAIT * budget.usable)))


def tier_point(options: ArchiveOptions, budget: Budget, tiers: TierOptions, tokens_after: int) -> int:
    """The tokens from which the next archive may come at the archive tier: the regrow wait after the restart, never
    past the archive tier itself. An archive that could only restart near the red line (an agent's fixed prefix and
    its newest turn fill the window: Qwen Code's 17,000 tokens at a 32k window) would else push the next one out to a
    request that does not fit at all; at the archive tier the next archive still has to bring the request below the
    prune tier (``worth``), so this is no compaction loop."""
    return min(tokens_after + regrow_wait(options, budget, tiers, tokens_after), round(tiers.archive * budget.usable))


SUMMARY_SHARE = 0.045
"""The active summary (S1) is at most this share of the usable window: at 4,096 tokens about 100, at 8k about 270;
from 16k up ``archive.summary_tokens`` (600) is the smaller. An archive must leave room for the turns it keeps."""
SUMMARY_MIN = 100


RECENT_SHARE = 0.1
RECENT_FLOOR = 6000
SMALL_SHARE = 0.065
"""The agent's own archived messages the block keeps verbatim take RECENT_SHARE of the usable window past its first
RECENT_FLOOR tokens, and at least SMALL_SHARE of it (about 880 at 16k, from 32k up ``archive.recent_tokens``); below 16k
more (``small_share``). Chosen by what they name per character, a few hundred tokens of them at 8k keep more of
what the next step uses than the one more verbatim turn they take the room of (BENCHMARKS.md, "sixth pass": 8k
70.1 → 83.6 % with the map's as much; none there before, when they were the newest lines)."""

SMALL_RECENT_SHARE = 0.13
SMALL_MAP_SHARE = 0.07
"""At a usable window of RECENT_FLOOR tokens or less (8k) the agent's lines take at least SMALL_RECENT_SHARE of it
(about 780 tokens at 8k) and the map SMALL_MAP_SHARE (about 420), tapering to SMALL_SHARE at twice RECENT_FLOOR
(16k's 13,600 are past it: unchanged there); the block lists its chunks by id only up to 16k (``small_window``). At 8k
the chunk list's descriptions (~250 tokens) kept less of what the next step used than as many of the agent's lines
(BENCHMARKS.md, "seventh pass": 8k 83.6 → 90.4 %, cost 0.50× either way, needles 91.3 → 89.5 %)."""

MAP_SHARE = 0.1
"""The map of the code the agent saw takes MAP_SHARE of the usable window past its first RECENT_FLOOR tokens, and at
least SMALL_SHARE of it (more below 16k: ``small_share``), at most ``archive.map_tokens``."""


def small_share(usable: float, most: float) -> float:
    """The least share of a usable window the agent's lines (``most``: SMALL_RECENT_SHARE) or the map (SMALL_MAP_SHARE)
    take: ``most`` up to RECENT_FLOOR tokens, falling linearly to SMALL_SHARE at twice RECENT_FLOOR, SMALL_SHARE past it."""
    if usable <= RECENT_FLOOR:
        return most
    if usable >= 2 * RECENT_FLOOR:
        return SMALL_SHARE
    return most + (SMALL_SHARE - most) * (usable - RECENT_FLOOR) / RECENT_FLOOR


def small_window(usable: float | None) -> bool:
    """Whether a usable window is small enough (under three times RECENT_FLOOR tokens: 8k, 16k) that the block lists
    its chunks by id and messages only (``archive_block``'s ``ids_only``): at 16k what each holds kept nothing the next
    step used that the request held nowhere else (BENCHMARKS.md, "one miss, not two"), and a chunk is still recalled by
    its id, by a file it names, with the recall tool, or searched."""
    return usable is not None and usable < 3 * RECENT_FLOOR


def sized_for(options: ArchiveOptions, usable: float) -> ArchiveOptions:
    """The options with the summary's and the verbatim messages' budgets scaled to a small usable window (the same
    object when nothing changes)."""
    tokens = min(options.summary_tokens, max(SUMMARY_MIN, int(SUMMARY_SHARE * usable)))
    recent = min(options.recent_tokens, max(int(small_share(usable, SMALL_RECENT_SHARE) * usable), int(RECENT_SHARE * (usable - RECENT_FLOOR))))
    seen_map = min(options.map_tokens, max(int(small_share(usable, SMALL_MAP_SHARE) * usable), int(MAP_SHARE * (usable - RECENT_FLOOR))))
    if (tokens, recent, seen_map) == (options.summary_tokens, options.recent_tokens, options.map_tokens):
        return options
    return replace(options, summary_tokens=tokens, recent_tokens=recent, map_tokens=seen_map)


def block_of(
    options: ArchiveOptions,
    client: Sequence[Mapping[str, Any]],
    number: int,
    head: int,
    end: int,
    summary: Summary,
    tool: str | None = None,
    usable: float | None = None,
) -> str:
    """The block of archive ``number`` replacing messages head..end with ``summary`` (the same bytes ahead of need and
    on the path); ``usable``: the usable window (a small one lists the chunks by id only)."""
    turns = sum(1 for m in client[head : end + 1] if m.get("role") == "assistant")
    lines = [ChunkLine(c.chunk_id, c.first, c.last, c.line) for c in summary.chunks]
    known = "\n".join([summary.text, *(said(m) if m.get("role") == "assistant" else text_of(m) for m in [*client[:head], *client[end + 1 :]])])
    # redacted like the summary: the block is a decision, kept in the store (and a secret the agent once typed has no
    # business in every later request)
    recent = redact(recent_work(client[head : end + 1], head, options.recent_tokens, known, redact)) if options.recent_tokens else ""
    seen = redact(code_map(client[head : end + 1], head, options.map_tokens, known + "\n" + recent)) if options.map_tokens else ""
    return archive_block(
        number, head, end, turns, summary.text, lines, options.chunks_listed, summary.chinese, tool, recent, seen, small_window(usable)
    )


def with_record(archives: Sequence[Mapping[str, Any]], record: Mapping[str, Any], kept: int) -> list[dict[str, Any]]:
    """A session's archives with a new one (the newest ``kept``): decisions on the one target ``archive``, so the
    new list replaces the old one whole when decisions are merged."""
    records = [dict(a) for a in archives][-(kept - 1) :] + [dict(record)] if kept > 1 else [dict(record)]
    return [{**r, "target": "archive", "strategy": "archive"} for r in records]
