"""The long-context steps of the pipeline: restart from the archive in force, archive at the red line, prepare ahead."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from proxy.context import RequestContext
from proxy.know.options import TierOptions
from proxy.know.tiers import tier_for
from proxy.longctx.archive import (
    LEAD_FLOOR,
    PLAN_AHEAD,
    Plan,
    archive,
    early_point,
    plan,
    reason_for,
    sized_for,
    with_record,
    worth,
)
from proxy.longctx.chunks import chunk_id
from proxy.longctx.local_recall import recall_from_request
from proxy.longctx.options import ArchiveOptions, RetrievalOptions
from proxy.longctx.restart import ARCHIVES, REQUESTED, archives_of, head_size, in_force, requested, restart
from proxy.longctx.retrieval import ALL_AGENTS, cited, query_of, recall, with_recall
from proxy.rewrite.pruning import Outcome
from proxy.rewrite.results import Archiving, Recalled, Restarted

RECALL_SHARE = 0.15
"""A recalled block is at most this share of the usable window (window less the answer's reserve)."""

Messages = list[dict[str, Any]]
ACTIONS = ("archive", "prune", "pass")


def requested_action(decisions: Mapping[str, Any]) -> str | None:
    """What a person asked for the session's next request (POST /ruyi/v1/sessions/<id>/archive|prune|reset)."""
    value = decisions.get(REQUESTED)
    action = value[-1].get("action") if isinstance(value, list) and value and isinstance(value[-1], Mapping) else None
    return action if action in ACTIONS else None


def pruned_tokens(tokens: Sequence[int], links: Sequence[str], *decided: Mapping[str, Any]) -> list[int]:
    """Each message's raw tokens once the decisions on it (sticky and new) are applied."""
    out = list(tokens)
    for i, link in enumerate(links):
        for decisions in decided:
            for d in decisions.get(link, ()) if link in decisions else ():
                if isinstance(d, Mapping):
                    out[i] -= int(d.get("tokens_saved", 0))
    return [max(0, n) for n in out]


class Cycle(NamedTuple):
    """A session between archives, as the early archive's point needs it."""

    growth: float
    """Tokens the session grows by per request."""
    restart: float
    """What its next archive would restart at."""
    regrew: int
    """The tokens it must have regrown to before an early archive."""
    kept: float
    """The head an archive leaves cached (system prompt and task, before the block)."""


class RestartStep:
    """A session that was archived continues from its restarted prefix, byte for byte, until the next archive."""

    name = "restart"

    def apply(self, messages: Messages, ctx: RequestContext) -> Restarted:
        m, mem = ctx.measurement, ctx.longctx
        if m is None or mem is None:
            return Restarted(messages)
        asked = requested_action(m.session.decisions)
        done = {REQUESTED: requested(None)} if asked is not None else {}  # done once: the next request goes on as usual
        if asked == "pass":
            return Restarted(messages, asked, None, done)
        current = in_force(m.session.decisions, m.links)
        if current is None:
            return Restarted(messages, asked, None, done)
        view = restart(messages, m.links, m.shared, m.message_tokens, m.raw_tokens, m.tokens, current)
        return Restarted(view.messages, asked, view, done)


class ArchiveStep:
    """At the archive tier (or when a request would not fit at all, or earlier where it pays given prefix caching)
    the oldest turns after the task become one summary in the system prompt; from the prepare_summary tier (or
    once an early archive is due) the archive is planned and its summary prepared ahead (in the background), so
    the archiving request finds it made."""

    name = "archive"

    def __init__(self, options: ArchiveOptions, tiers: TierOptions, cache_read_ratio: float = 0.1) -> None:
        self.options = options
        self.tiers = tiers
        self.cache_read_ratio = cache_read_ratio
        """The price of a cached prompt token relative to an uncached one (pruning's): when an early archive pays."""
        self.ahead = replace(options, newest_turns=max(1, options.newest_turns - 1))
        """A plan made one request ahead keeps one turn fewer: the next request brings one, and keeps the same end."""

    def apply(self, messages: Messages, ctx: RequestContext, restarted: Restarted, outcome: Outcome | None) -> Archiving:
        """The request archived when it is due (``messages``: as pruned), else as it was, with the plan made ahead; what
        it adds to ``outcome`` goes to a copy."""
        m, mem = ctx.measurement, ctx.longctx
        if m is None or mem is None or outcome is None or m.count_text is None:
            return Archiving(messages, outcome)  # an archive is kept with the pruning outcome's decisions: without one, none is made
        outcome = outcome.copy()  # what the archive adds goes to its own copy
        outcome.decisions.update(restarted.decisions)  # a person's request done
        if not self.options.enabled or restarted.requested == "pass":
            return Archiving(messages, outcome)
        small = m.budget.usable  # the summary's budget scaled to a small window (archive.py: sized_for), the same in every process
        options, ahead_options = sized_for(self.options, small), sized_for(self.ahead, small)
        before, after = outcome.report.get("usage_before"), outcome.report.get("usage_after")  # tiers keep their meaning
        if isinstance(before, float) and isinstance(after, float):
            outcome.report.update(tier_before=tier_for(before, self.tiers, True).value, tier_after=tier_for(after, self.tiers, True).value)
        view, s = restarted.restart, m.session
        links = view.links if view is not None else m.links
        positions = view.positions if view is not None else tuple(range(len(messages)))
        base = view.message_tokens if view is not None else m.message_tokens
        if len(links) != len(messages) or len(base) != len(messages):
            return Archiving(messages, outcome)  # an earlier step changed the list in a way this one cannot follow
        per = pruned_tokens(base, links, s.decisions, outcome.decisions)
        ratio = m.scale
        raw_total = outcome.raw_tokens_after or (view.raw_tokens if view is not None else m.raw_tokens)
        tokens = m.calibrated(raw_total)
        current = view.archive if view is not None else None
        reason = "overflow" if mem.overflow else reason_for(tokens, m.budget, self.tiers, current, restarted.requested == "archive")
        archives = archives_of(s.decisions)
        number = 1 + max((int(a.get("number", 0)) for a in archives), default=0)
        service, client = mem.service, mem.messages
        base = current.get("spans", ()) if current is not None else ()
        cycle = self._cycle(m, client, tokens, current)
        at = self._archive_point(cycle, m.budget.usable)
        usable = m.budget.usable
        if reason is None:
            if tokens < min(self.tiers.prepare_summary * usable, at - PLAN_AHEAD * usable):
                return Archiving(messages, outcome)  # nothing to plan yet

            def planned(opts: ArchiveOptions, lead: float) -> Plan | None:
                return plan(
                    opts,
                    m.budget,
                    client,
                    m.message_tokens,
                    messages,
                    positions,
                    per,
                    raw_total,
                    ratio,
                    current,
                    self.tiers.prune,
                    lead,
                    self.tiers.compact,
                )

            # the point from what this archive would really restart at, not only what it aims at: the same point at
            # every request of the cycle, so the turns a plan made ahead keeps are those kept when the archive comes
            first = planned(options, self._lead(at, tokens, usable, ratio)) if self.options.early else None
            if first is not None:
                at = self._archive_point(cycle, usable, max(cycle.restart, first.estimate * ratio))
            lead = self._lead(at, tokens, usable, ratio)
            # a batch at the prune tier misses the cache now, and the archive would come a request or a few later with
            # its own miss: archived now instead where that keeps the newest turns, the one miss replaces both
            arrived = outcome.report.get("tokens_before")  # the batch's request as it came, before its cut
            batched = outcome.report.get("batch") == "applied" and isinstance(arrived, int) and arrived >= cycle.regrew
            p = planned(options, lead) if self.options.early and (tokens >= at or batched) else None
            if p is not None and tokens < at and not p.keeps_newest:
                p = None
            if p is not None and worth(p, "economic", raw_total, ratio, m.budget, self.tiers):
                reason = "economic"
            else:  # planned for the next request: its summary made in the background, for the archive to find
                ahead = planned(ahead_options, lead)
                if ahead is not None and not service.is_prepared(s.agent_id, s.session_id, m.links, ahead.head, ahead.end, base):
                    return Archiving(messages, outcome, prepare_until=ahead.end, prepare_number=number)
                return Archiving(messages, outcome)
        lead = self._lead(at, tokens, usable, ratio) if reason in ("economic", "archive_tier") else 0.0

        prepared: list[bool] = []

        def summarize(first: int, last: int):  # the service's Summary
            prepared.append(service.is_prepared(s.agent_id, s.session_id, m.links, first, last, base))
            return service.summarize(
                s.agent_id, s.session_id, client, m.links, m.message_tokens, first, last, m.count_text, base, options.summary_tokens
            )

        # after an upstream said too long, the window is smaller than Ruyi thought: aim at a share of what was sent
        budget = replace(m.budget, window=tokens + m.budget.reserve) if mem.overflow else m.budget
        done = archive(
            options,
            budget,
            self.tiers,
            reason,
            number,
            s.requests,
            client,
            m.links,
            m.message_tokens,
            messages,
            positions,
            per,
            raw_total,
            ratio,
            current,
            summarize,
            m.count_text,
            lead,
            ctx.recall_tool,
        )
        if done is None:
            return Archiving(messages, outcome)
        kept = with_record(archives, done.record, self.options.kept)
        outcome.decisions[ARCHIVES] = kept
        outcome.shrunk(done.raw_tokens, done.tokens, m.budget, self.tiers)
        outcome.report["archive"] = archive_report(done.record, len(done.summary.chunks))
        # whether its summary was made ahead of need: audit only, timing-dependent
        return Archiving(done.messages, outcome, done, bool(prepared and prepared[0]), decisions={ARCHIVES: kept})

    def requests_left(self, ctx: RequestContext, restarted: Restarted, raw_tokens: int) -> float | None:
        """About how many requests this session makes before its next archive is expected (``raw_tokens``: the request
        as the restart left it, before pruning), from the restart it aims at (one that comes out bigger archives a
        little later); None when archiving is off or the session does not grow. Pruning credits a saving over these
        only: the archive replaces what it pruned and restarts the cached prefix anyway."""
        m, mem = ctx.measurement, ctx.longctx
        if m is None or mem is None or not self.options.enabled:
            return None
        view = restarted.restart
        tokens = m.calibrated(raw_tokens)
        cycle = self._cycle(m, mem.messages, tokens, view.archive if view is not None else None)
        if cycle.growth <= 0:
            return None
        return max(0.0, (self._archive_point(cycle, m.budget.usable) - tokens) / cycle.growth)

    def _cycle(self, m: Any, client: Messages, tokens: int, current: Mapping[str, Any] | None) -> Cycle:
        """The session's cycle: since the archive in force, else since its task."""
        usable = m.budget.usable
        head = m.calibrated(sum(m.message_tokens[: head_size(client)]))
        kept = head if self.options.block == "after_task" else 0  # appended to the system prompt, the block misses it all
        if current is not None:
            after = int(current.get("tokens_after", 0))
            growth = (tokens - after) / max(1, m.session.requests - int(current.get("request", 0)))
            return Cycle(growth, max(self.options.aim(usable), after), int(current.get("next_at") or 0), kept)
        return Cycle((tokens - head) / max(1, m.session.requests), self.options.aim(usable), 0, kept)

    def _archive_point(self, cycle: Cycle, usable: int, restart: float | None = None) -> float:
        """The tokens at which this session's next archive is expected: the red line, or earlier where restarting
        at ``restart`` (the cycle's, unless given) pays (``archive.early``), never before the session regrew."""
        red = self.tiers.archive * usable
        if not self.options.early:
            return red
        at = early_point(cycle.restart if restart is None else restart, cycle.growth, self.cache_read_ratio, cycle.kept)
        return max(self.options.early_from * usable, cycle.regrew, min(red, at))

    @staticmethod
    def _lead(at: float, tokens: int, usable: int, ratio: float) -> float:
        """Raw tokens the session grows by before its archive is expected (a plan made ahead aims that much lower)."""
        return max(at - tokens, -LEAD_FLOOR * usable) / (ratio or 1.0)


class RecallStep:
    """Once a session is archived, a chunk the newest input names (``ruyi:c…``) or matches strongly is appended to
    that input as one marked block: never a message of its own, never kept in the next request's history."""

    name = "recall"

    def __init__(self, options: RetrievalOptions) -> None:
        self.options = options

    def apply(self, messages: Messages, ctx: RequestContext, restarted: Restarted, archiving: Archiving, outcome: Outcome | None) -> Recalled:
        """The request with a recalled block once archived (the archive made now, else the one in force), and what
        recall did; ``outcome`` counts the block (in a copy)."""
        m, mem = ctx.measurement, ctx.longctx
        index = mem.service.recall if mem is not None else None
        if not self.options.enabled or m is None or mem is None or index is None or m.count_text is None or restarted.requested == "pass":
            return Recalled(messages, outcome)
        done, view = archiving.archived, restarted.restart
        archive = done.record if done is not None else view.archive if view is not None else None
        query = query_of(messages) if archive is not None else None
        if archive is None or query is None:
            return Recalled(messages, outcome)
        s, (text, at) = m.session, query
        everyone = self.options.cross_agent and mem.scope == ALL_AGENTS

        links = m.links

        def ours(hit: Any) -> bool:  # a chunk of this conversation's own history, in whichever session it was made
            row = hit.row if hasattr(hit, "row") else hit
            last = row.get("last", len(links))
            return last < len(links) and chunk_id(int(row.get("first", -1)), links[last]) == row.get("chunk_id")

        def search(text: str, kinds: Sequence[str], agents: Sequence[str] | None) -> list[Any]:
            if agents:
                return index.search(s.agent_id, None, text, 3, kinds, agents)
            if kinds == ("turn",):
                return index.search(s.agent_id, s.session_id, text, 3, kinds)
            return [h for h in index.search(s.agent_id, None, text, 6, kinds) if ours(h)][:3]

        def chunk(wanted: str) -> Mapping[str, Any] | None:
            return next((row for row in index.chunk(s.agent_id, wanted) if ours(row)), None)

        usable = m.budget.usable  # a small window gets a smaller block (2,000 tokens from 16k up); never calibrated: every process alike
        options = replace(self.options, max_tokens=min(self.options.max_tokens, max(50, int(RECALL_SHARE * usable))))
        if everyone or cited(text):  # named chunks, other agents' archives: from the store
            block, did = recall(search, chunk, text, int(archive["end"]), options, m.count_text, None, ["*"] if everyone else None)
        else:  # a function of this request and the archive in force only (proxy.longctx.local_recall)
            block, did = recall_from_request(mem.messages, archive, text, options, m.count_text)
        if block is None:
            return Recalled(messages, outcome, did)
        out = list(messages)
        out[at] = with_recall(messages[at], block)
        if outcome is not None:
            outcome = outcome.copy()
            outcome.raw_tokens_after += m.count_text(block) + 2
            outcome.tokens_after = m.calibrated(outcome.raw_tokens_after)
            outcome.report["recall"] = {**{k: v for k, v in did.items() if k != "latency_ms"}, "blocks": 1, "tokens": m.count_text(block)}
        return Recalled(out, outcome, did)


def archive_report(record: Mapping[str, Any], chunks: int) -> dict[str, Any]:
    """What an archive did, for the DCP report, the log event and ``ruyi replay`` (how many of its chunks were new
    depends on what the background had made first: the audit record's s2_written_count says it)."""
    return {
        "number": record["number"],
        "messages": [record["head"], record["end"]],
        "turns": record["turns"],
        "reason": record["reason"],
        "tokens_before": record["tokens_before"],
        "tokens_after": record["tokens_after"],
        "summary_source": record["summary_source"],
        "chunks": chunks,
    }
