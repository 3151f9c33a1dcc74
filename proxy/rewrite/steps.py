"""The pipeline's steps in order: what rewrites a request, in what order, and what each step hands the later ones."""

from __future__ import annotations

from typing import Any

from config.schema import Config
from memory.session import How
from proxy.context import RequestContext
from proxy.layout.options import LayoutOptions
from proxy.layout.step import LayoutState, layout_steps, snapshot_after_system
from proxy.rewrite.archiving import ArchiveStep, RecallStep, RestartStep
from proxy.rewrite.fit import FitStep
from proxy.rewrite.pipeline import Guard, PipelineStep
from proxy.rewrite.pruning import Outcome, Pruner
from proxy.rewrite.results import Archiving, Fitted, Noted, Placed, Positions, Recalled, Restarted, Rewritten

Messages = list[dict[str, Any]]


class NoteStep:
    """Notes the messages new in this request, for what is learned from them after the answer; changes nothing."""

    name = "note"

    def apply(self, messages: Messages, ctx: RequestContext) -> Noted | None:
        m = ctx.measurement
        if m is not None and ctx.mode == "on":
            return Noted(messages[m.shared :], messages)
        return None


class PruneStep:
    """Dynamic context pruning, cache-stable: sticky decisions, truncation on arrival, batches."""

    name = "prune"

    def __init__(self, pruner: Pruner, archive: ArchiveStep | None = None) -> None:
        self.pruner = pruner
        self.archive = archive
        """The archive step, to know how soon the session's next archive is expected (None: never)."""
        self.forget_idle = pruner.forget_idle
        """What the app calls to forget what no session used for ``sessions.idle_s`` (proxy/know/measure.py)."""

    def apply(self, restarted: Restarted, plan: LayoutState | None, ctx: RequestContext) -> Outcome | None:
        """The outcome of pruning the restarted request, the layout's planned sections counted toward the window
        (None: not pruned)."""
        m, messages = ctx.measurement, restarted.messages
        if m is None or m.count_text is None:
            return None
        harder = ctx.overflow_retry
        if restarted.requested == "pass":
            return None
        view = restarted.restart  # the archive in force: the request as its session restarted it
        links, shared = (view.links, view.shared) if view is not None else (m.links, m.shared)
        raw, message_tokens = (view.raw_tokens, view.message_tokens) if view is not None else (m.raw_tokens, m.message_tokens)
        forced = restarted.requested == "prune"
        # a saving is credited over the requests the session is expected to go on for: after an archive, the
        # session restarted (what is pruned now goes with the next archive), so its age counts from there
        seen = m.session.requests - int(view.archive.get("request", 0)) if view is not None else m.session.requests
        raw += plan.planned if plan is not None else 0  # what the layout adds counts toward the window
        left = self.archive.requests_left(ctx, restarted, raw) if self.archive is not None else None
        return self.pruner.rewrite(
            messages,
            links,
            shared,
            m.session.decisions,
            m.session.batch_retry_at,
            raw,
            m.budget,
            m.count_text,
            message_tokens,
            max(1, seen),
            harder=harder,
            scale=m.scale,
            forced=forced,
            recall_tool=ctx.recall_tool,
            requests_left=left,
        )


class SnapshotStep:
    """A sub-agent's first request gets an immutable snapshot of its parent (compact form, active anchors), and every later
    one the same bytes: at the head of the prompt, so parallel children share a cached prefix."""

    name = "snapshot"

    def __init__(self, layout: LayoutOptions | None = None) -> None:
        self.layout = layout or LayoutOptions()

    def apply(self, messages: Messages, ctx: RequestContext, plan: LayoutState | None, positions: Positions | None) -> Placed:
        """The request with the snapshot placed (``positions``: the messages' positions in the client's request so far)."""
        m, keeper = ctx.measurement, ctx.keeper
        if m is None or keeper is None or ctx.mode != "on" or self.layout.mode == "off":
            return Placed(messages)
        snapshot = keeper.snapshot_for(m.session.agent_id, m.session.session_id, m.how == How.NEW, messages, ctx.parent_id)
        if snapshot is None:
            return Placed(messages)
        if ctx.wire == "anthropic" and plan is not None:  # system blocks are never rewritten: it follows them
            return Placed(*snapshot_after_system(messages, snapshot, positions))
        return Placed(keeper.inject(messages, snapshot))


class Rewrite:
    """The default steps, in the order they depend on each other: each takes what the steps before it returned and
    returns its own typed result (``proxy/rewrite/results.py``); one that raises is skipped (``guard``: its result is
    what it was given), logged and counted. What the long-context service does after the rewrite (keep an archive,
    prepare ahead, S0 after the answer) is told through the request's ``RequestMemory``, written here only."""

    name = "rewrite_steps"

    def __init__(self, config: Config) -> None:
        self.note = NoteStep()
        self.restart = RestartStep()
        self.plan, self.layout = layout_steps(config.layout, config)
        self.archive = ArchiveStep(config.archive, config.tiers, config.pruning.cache_read_ratio)
        self.prune = PruneStep(Pruner(config.pruning, config.tiers), self.archive)
        self.recall = RecallStep(config.retrieval)
        self.snapshot = SnapshotStep(config.layout)
        self.fit = FitStep(config.window, config.tiers, config.pruning.enabled, config.archive.enabled)
        self.steps = (self.note, self.restart, self.plan, self.prune, self.archive, self.recall, self.snapshot, self.layout, self.fit)
        """In the order ``run`` takes them (what ``Pipeline.each_step`` lists)."""

    def run(self, messages: Messages, ctx: RequestContext, guard: Guard) -> Rewritten:
        noted = guard("note", lambda: self.note.apply(messages, ctx), None)
        restarted = guard("restart", lambda: self.restart.apply(messages, ctx), Restarted(messages))
        # the layout's sections are planned before pruning, so the window counts them
        plan = guard("layout_plan", lambda: self.plan.apply(restarted.messages, ctx, restarted.archive_number), None)
        pruned = guard("prune", lambda: self.prune.apply(restarted, plan, ctx), None)
        # from here on each step that changes the pruning outcome returns its own copy of it, with what it added
        given = pruned.messages if pruned is not None else restarted.messages
        archiving = guard("archive", lambda: self.archive.apply(given, ctx, restarted, pruned), Archiving(given, pruned))
        recalled = guard(
            "recall",
            lambda: self.recall.apply(archiving.messages, ctx, restarted, archiving, archiving.outcome),
            Recalled(archiving.messages, archiving.outcome),
        )
        kept = archiving.archived.positions if archiving.archived is not None else restarted.positions
        snapped = guard("snapshot", lambda: self.snapshot.apply(recalled.messages, ctx, plan, kept), Placed(recalled.messages))
        placed = snapped.positions if snapped.positions is not None else kept
        number = int(archiving.archived.record["number"]) if archiving.archived is not None else None
        laid = guard(
            "layout",
            lambda: Placed(*self.layout.apply(snapped.messages, ctx, plan, placed, number, recalled.outcome)),
            Placed(snapped.messages, None, recalled.outcome),
        )
        # last: what every step before it added counts
        fitted = guard("fit", lambda: self.fit.apply(laid.messages, ctx, laid.outcome, restarted.requested), Fitted(laid.messages, laid.outcome))
        mem = ctx.longctx
        if mem is not None:  # for the long-context service after the rewrite and the answer, and the audit record
            mem.restart, mem.archived, mem.prepared = restarted.restart, archiving.archived, archiving.prepared
            mem.prepare_until, mem.prepare_number, mem.recall = archiving.prepare_until, archiving.prepare_number, recalled.recall
        return Rewritten(
            fitted.messages,
            fitted.outcome,
            laid.positions if laid.positions is not None else placed,
            {**restarted.decisions, **archiving.decisions},
            noted,
            fitted.unfit,
            plan.num_ctx if plan is not None else None,
        )


def default_steps(config: Config) -> list[PipelineStep]:
    return [Rewrite(config)]
