"""Cache-stable pruning: sticky per-session decisions, truncation on arrival, batches at the prune tier."""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memory.lru import LRU
from proxy.know.options import TierOptions
from proxy.know.tiers import tier_for
from proxy.know.window import Budget
from proxy.rewrite.options import PruningOptions
from strategies.base import Replacement, StrategyContext
from strategies.conversation import Conversation, analyze
from strategies.pipeline import LAST_RESORT, apply_replacements, propose_all
from strategies.prefix import Prefix
from strategies.protection import protected_indices

Messages = list[dict[str, Any]]
MEMO_MAX = 100_000
PREFIXES_MAX = 256
"""Analyses kept for the next request of a session: each a key per message (texts as hashes) and the calls'
classifications (as the memo holds them), never the messages or outputs."""
ARCHIVE_SLACK = 5
"""Requests a saving is credited for past the point where the session's next archive is expected: the archive comes
when its own plan pays, a request or a few after that point. 2 to 8 chose the same batches on the public traces; 0
cost 16k 0.6 point of next-step evidence (bench/savings/evidence.py)."""


@dataclass
class Outcome:
    """What pruning did to one request: the messages to send, what to remember, and the DCP report."""

    messages: Messages
    decisions: dict[str, list[dict[str, Any]]]
    """New decisions by chain link (to store before forwarding)."""
    refs: dict[str, str]
    """ref id → original text (secrets redacted), for /ruyi/v1/refs/<id>."""
    tokens_after: int
    """The prompt as rewritten, on the upstream's scale (our estimate × the calibration ratio), like the report."""
    batch_retry_at: int | None
    """On our estimate's scale, like the ``tokens_before`` the next request passes."""
    clear_batch_retry: bool
    report: dict[str, Any]
    raw_tokens_after: int = 0
    """The prompt as rewritten, on our estimate's scale (what calibration compares the upstream's count with)."""

    def copy(self) -> Outcome:
        """A copy for a later step to add to (its decisions, refs and report copied one level), this one left as it was."""
        return replace(self, decisions=dict(self.decisions), refs=dict(self.refs), report=dict(self.report))

    def shrunk(self, raw_tokens: int, tokens: int, budget: Budget, tiers: TierOptions) -> None:
        """What the request comes to once a later step (an archive, a cut to fit) made it smaller: its size on our scale
        and the upstream's, and the report's size, usage and tier (the archive tier's meaning, as the later steps use)."""
        self.raw_tokens_after, self.tokens_after = raw_tokens, tokens
        usage = budget.usage(tokens)
        self.report.update(tokens_after=tokens, usage_after=round(usage, 4), tier_after=tier_for(usage, tiers, True).value)


class Pruner:
    """Decides, per request and session, which messages carry which replacement bytes."""

    def __init__(self, options: PruningOptions, tiers: TierOptions) -> None:
        self.options = options
        self.tiers = tiers
        self.tools = options.tool_table()
        self.without_last_resort = replace(options.strategies, enabled=tuple(n for n in options.strategies.enabled if n not in LAST_RESORT))
        """The strategies for requests below the prune tier: no batch, so nothing is cleared for room."""
        self.memo: LRU[Any, Any] = LRU(MEMO_MAX)
        """Classifications of calls and placeholders already built (pure by key), so a request costs its new calls
        only; past MEMO_MAX entries the least recently used go, one at a time."""
        self.prefixes: LRU[str, Prefix] = LRU(PREFIXES_MAX)
        """The last analysis of recent requests, by their last chain link: the next request of a session
        analyses only what it does not share with one (least recently used dropped past PREFIXES_MAX)."""

    def forget_idle(self, now: float, idle_s: float, limit: int) -> int:
        """Forget up to ``limit`` classifications and analyses not used for ``idle_s`` (see `LRU.forget_idle`)."""
        return self.memo.forget_idle(now, idle_s, limit) + self.prefixes.forget_idle(now, idle_s, limit)

    def rewrite(
        self,
        messages: Messages,
        links: Sequence[str],
        shared: int,
        decisions: Mapping[str, Sequence[Mapping[str, Any]]],
        batch_retry_at: int | None,
        tokens_before: int,
        budget: Budget,
        count_text: Callable[[str], int],
        message_tokens: Sequence[int] = (),
        requests_seen: int = 1,
        harder: bool = False,
        scale: float = 1.0,
        forced: bool = False,
        recall_tool: str | None = None,
        requests_left: float | None = None,
    ) -> Outcome:
        """The messages to send. ``shared``: leading messages the session sent before (the rest are new);
        ``tokens_before`` and ``message_tokens``: the whole prompt and each message as the client sent it;
        ``harder``: after an overflow; ``forced``: a person asked for a batch now (POST /ruyi/v1/sessions/<id>/prune);
        ``requests_left``: about how many requests before the session's next archive is expected (None: none is).

        One scale throughout: every count here is our estimate (tokens_before, message_tokens, the savings
        ``count_text`` measures, batch_retry_at), and the window is brought to it by ``scale``, the model's
        calibration ratio (reported / estimated); what is reported (tokens_after, the report) is brought
        back to the upstream's scale, where the tiers and the window's headers live."""
        opts = self.options
        scale = scale if scale > 0 else 1.0
        window, usable = round(budget.window / scale), budget.usable / scale
        sticky = [_replacement(i, d) for i, link in enumerate(links) for d in decisions.get(link, ())]
        current = apply_replacements(messages, sticky) if sticky else messages
        sent_tokens = list(message_tokens) or [0] * len(messages)
        for r in sticky:
            sent_tokens[r.index] -= r.tokens_saved
        in_force = sum(r.tokens_saved for r in sticky)
        tokens = max(0, tokens_before - in_force)
        taken = {(r.index, r.target) for r in sticky}
        new: list[Replacement] = []
        failures: Counter[str] = Counter()
        base = StrategyContext(
            count_text,
            window,
            window,
            protected_turns=0,
            protection=opts.protection,
            tools=self.tools,
            min_saving_tokens=opts.min_saving_tokens,
            memo=self.memo,
            usable_tokens=budget.usable,
            recall_tool=recall_tool,
        )  # never the calibration:
        # the same request gets the same caps in every process (a restart, a replica), whatever each has learnt
        analysis = None
        prunable = opts.protection.observations_in_user_messages or _any_tool_part(messages)
        if opts.enabled and prunable:
            analysis = _analyze(current, base, self._known(links))
        if opts.enabled and prunable and "truncation" in opts.strategies.enabled and shared < len(messages):
            arrival = replace(opts.strategies, enabled=("truncation",))  # absolute caps only: the agent asked for it
            if analysis is not None:  # only new messages are truncated on arrival: the others count as protected
                arrival_ctx = replace(base, conversation=replace(analysis, protected=analysis.protected.union(range(shared))))
            else:
                arrival_ctx = base
            new = [r for r in propose_all(current, arrival_ctx, arrival, failures) if r.index >= shared and (r.index, r.target) not in taken]
            tokens -= sum(r.tokens_saved for r in new)
        batch, retry_at, clear_retry = "none", None, False
        threshold = self.tiers.prune * usable
        over = tokens > usable
        due = forced or (tokens >= threshold and (over or batch_retry_at is None or tokens >= batch_retry_at))
        has_calls = prunable and (analysis is None or bool(analysis.calls))
        if opts.enabled and has_calls and (due or harder or opts.economic):
            taken |= {(r.index, r.target) for r in new}
            turns = opts.overflow_protected_turns if harder else opts.protected_turns
            ctx = replace(base, remaining_tokens=max(0, round(usable - tokens)), protected_turns=turns)
            batch_messages = apply_replacements(current, new) if new else current
            if analysis is not None and not new:  # the same messages: reuse the analysis, re-derive protection
                ctx = replace(ctx, conversation=replace(analysis, protected=protected_indices(analysis, turns, opts.protection)))
            elif analysis is not None:  # truncated on arrival: analyse again what changed
                analysis = _analyze(batch_messages, ctx, analysis.prefix)
                ctx = replace(ctx, conversation=analysis)
            strategies = opts.strategies if due or harder else self.without_last_resort
            proposals = [r for r in propose_all(batch_messages, ctx, strategies, failures) if (r.index, r.target) not in taken]
            last_resort = [r for r in proposals if r.strategy in LAST_RESORT]
            proposals = [r for r in proposals if r.strategy not in LAST_RESORT]
            need = max(opts.clear_at_least * window, tokens - threshold if over else 0)  # over the window: under the prune tier
            chosen: list[Replacement] = []
            if due or harder:
                batch_items = proposals + _oldest_until(last_resort, need - sum(r.tokens_saved for r in proposals))
                if batch_items and (harder or over or forced or sum(r.tokens_saved for r in batch_items) >= need):
                    chosen = batch_items
                    batch, clear_retry = ("overflow" if harder else "requested" if forced else "applied"), True
            if not chosen:
                if forced:
                    batch = "requested"  # asked for: it ran, whatever it found
                elif due:
                    batch, retry_at = "too_small", int(tokens + max(need, 1))
                if opts.economic and proposals:
                    chosen = self._paying(proposals, sent_tokens, shared, requests_seen, requests_left)
                    batch = "economic" if chosen else batch
            new += chosen
            tokens -= sum(r.tokens_saved for r in chosen)
        if batch == "none" and tokens >= threshold:
            batch = "waiting"
        if analysis is not None and analysis.prefix is not None and len(links) == len(messages) and links:
            self._keep(links[-1], analysis.prefix)
        out = apply_replacements(current, new) if new else current
        new_decisions: dict[str, list[dict[str, Any]]] = {}
        for r in new:
            new_decisions.setdefault(links[r.index], []).append(_decided(r))
        refs = {r.ref_id: r.kept_original for r in new}
        report = self._report(tokens_before, tokens, in_force, budget, batch, new, len(sticky), failures, harder, scale)
        return Outcome(out, new_decisions, refs, round(tokens * scale), retry_at, clear_retry, report, tokens)

    def _known(self, links: Sequence[str]) -> Prefix | None:
        """The kept analysis of the longest request this one extends (or repeats)."""
        for link in reversed(links):
            prefix: Prefix | None = self.prefixes.get(link)  # worker threads share the pruner: LRU tolerates that
            if prefix is not None:
                return prefix
        return None

    def _keep(self, link: str, prefix: Prefix) -> None:
        self.prefixes[link] = prefix

    def _paying(
        self, proposals: list[Replacement], sent_tokens: Sequence[int], shared: int, requests_seen: int, requests_left: float | None = None
    ) -> list[Replacement]:
        """The proposals from some index on whose saving, over the requests expected ahead, exceeds the
        cache miss of resending everything after that index (the benchmark's own cost model). Ahead ends at the
        session's next archive (give or take ``ARCHIVE_SLACK``): it replaces the pruned messages and resends its
        restart whole, so a miss paid just before it buys a few requests at most."""
        r = self.options.cache_read_ratio
        horizon = min(max(requests_seen, 1) * self.options.horizon_share, self.options.horizon_max)
        if requests_left is not None:
            horizon = min(horizon, requests_left + ARCHIVE_SLACK)
        ordered = sorted(proposals, key=lambda p: p.index, reverse=True)
        best, best_net, saved, k = 0, 0.0, 0, 0
        suffix, cursor = 0, min(shared, len(sent_tokens))
        while k < len(ordered):
            index = ordered[k].index
            while k < len(ordered) and ordered[k].index == index:
                saved += ordered[k].tokens_saved
                k += 1
            while cursor > index:
                cursor -= 1
                suffix += sent_tokens[cursor]
            net = saved * (1 + r * horizon) - (1 - r) * suffix
            if net > best_net:
                best, best_net = k, net
        return ordered[:best]

    def _report(
        self,
        before: int,
        after: int,
        in_force: int,
        budget: Budget,
        batch: str,
        new: list[Replacement],
        sticky: int,
        failures: Counter[str],
        harder: bool,
        scale: float,
    ) -> dict[str, Any]:
        """The DCP report, every count on the upstream's scale."""
        per: dict[str, dict[str, int]] = OrderedDict()
        for r in new:
            row = per.setdefault(r.strategy, {"items": 0, "tokens_saved": 0})
            row["items"] += 1
            row["tokens_saved"] += r.tokens_saved
        for row in per.values():
            row["tokens_saved"] = round(row["tokens_saved"] * scale)
        before, after, in_force = round(before * scale), round(after * scale), round(in_force * scale)
        return {
            "tokens_before": before,
            "tokens_after": after,
            "usage_before": round(budget.usage(before), 4),
            "usage_after": round(budget.usage(after), 4),
            "tier_before": tier_for(budget.usage(before), self.tiers).value,
            "tier_after": tier_for(budget.usage(after), self.tiers).value,
            "batch": batch,
            "strategies": per,
            "in_force": {"items": sticky, "tokens_saved": in_force},
            "protected_turns": self.options.overflow_protected_turns if harder else self.options.protected_turns,
            "failed_strategies": dict(failures),
        }


def _oldest_until(candidates: list[Replacement], need: float) -> list[Replacement]:
    """The oldest candidates that together free at least need tokens (all of them if they cannot)."""
    taken: list[Replacement] = []
    for r in sorted(candidates, key=lambda r: (r.index, r.target)):
        if need <= 0:
            break
        taken.append(r)
        need -= r.tokens_saved
    return taken


def _analyze(messages: Messages, ctx: StrategyContext, known: Prefix | None) -> Conversation | None:
    """The analysis, resumed from known where it can; None if it fails."""
    try:
        return analyze(messages, ctx, known)
    except Exception:  # noqa: BLE001 - fail open: propose_all analyses again and counts the failure
        return None


def _any_tool_part(messages: Messages) -> bool:
    """Whether any message belongs to a tool call (only those are ever pruned, unless observations are on); one loop,
    no call per message: a conversation with no tool calls is scanned whole on every request."""
    for m in messages:
        if isinstance(m, dict) and (m.get("role") == "tool" or m.get("tool_calls")):
            return True
    return False


def _decided(r: Replacement) -> dict[str, Any]:
    return {"target": r.target, "new_text": r.new_text, "ref_id": r.ref_id, "strategy": r.strategy, "tokens_saved": r.tokens_saved}


def _replacement(index: int, d: Mapping[str, Any]) -> Replacement:
    """A decision in force, as the replacement it was (its saving kept as tokens_before − tokens_after)."""
    return Replacement(index, d["target"], d["new_text"], "", int(d.get("tokens_saved", 0)), 0, d["ref_id"], d["strategy"], "sticky")
