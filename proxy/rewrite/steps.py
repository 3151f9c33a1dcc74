"""The pipeline's steps in order: the one place that says what rewrites a request, and in what order."""

from __future__ import annotations

from typing import Any

from config.schema import Config
from memory.session import How
from proxy.context import RequestContext
from proxy.layout.options import LayoutOptions
from proxy.layout.step import layout_steps, snapshot_after_system, tokens_planned
from proxy.rewrite.archiving import ArchiveStep, RecallStep, RestartStep
from proxy.rewrite.fit import FitStep
from proxy.rewrite.pipeline import Step
from proxy.rewrite.pruning import Pruner


class NoteStep:
    """Notes the messages new in this request, for what is learned from them after the answer; changes nothing."""

    name = "note"

    def apply(self, messages: list[dict[str, Any]], ctx: RequestContext) -> list[dict[str, Any]]:
        m = ctx.measurement
        if m is not None and ctx.mode == "on":
            ctx.new_messages = messages[m.shared :]
            ctx.noted_messages = messages
        return messages


class PruneStep:
    """Dynamic context pruning, cache-stable: sticky decisions, truncation on arrival, batches."""

    name = "prune"

    def __init__(self, pruner: Pruner) -> None:
        self.pruner = pruner

    def apply(self, messages: list[dict[str, Any]], ctx: RequestContext) -> list[dict[str, Any]]:
        m = ctx.measurement
        if m is None or m.count_text is None:
            return messages
        harder = ctx.overflow_retry
        mem = ctx.longctx
        if mem is not None and mem.requested == "pass":
            return messages
        view = mem.restart if mem is not None else None  # the archive in force: the request as its session restarted it
        links, shared = (view.links, view.shared) if view is not None else (m.links, m.shared)
        raw, message_tokens = (view.raw_tokens, view.message_tokens) if view is not None else (m.raw_tokens, m.message_tokens)
        forced = mem is not None and mem.requested == "prune"
        # a saving is credited over the requests the session is expected to go on for: after an archive, the
        # session restarted (what is pruned now goes with the next archive), so its age counts from there
        seen = m.session.requests - int(view.archive.get("request", 0)) if view is not None else m.session.requests
        raw += tokens_planned(ctx)  # what the layout adds counts toward the window
        outcome = self.pruner.rewrite(
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
        )
        ctx.pruning = outcome
        return outcome.messages


class SnapshotStep:
    """A sub-agent's first request gets an immutable snapshot of its parent (compact form, active anchors), and every later
    one the same bytes: at the head of the prompt, so parallel children share a cached prefix."""

    name = "snapshot"

    def __init__(self, layout: LayoutOptions | None = None) -> None:
        self.layout = layout or LayoutOptions()

    def apply(self, messages: list[dict[str, Any]], ctx: RequestContext) -> list[dict[str, Any]]:
        m, keeper = ctx.measurement, ctx.keeper
        if m is None or keeper is None or ctx.mode != "on" or self.layout.mode == "off":
            return messages
        snapshot = keeper.snapshot_for(m.session.agent_id, m.session.session_id, m.how == How.NEW, messages, ctx.parent_id)
        if snapshot is None:
            return messages
        if ctx.wire == "anthropic" and ctx.layout is not None:  # system blocks are never rewritten: it follows them
            return snapshot_after_system(messages, snapshot, ctx.layout, ctx.longctx.positions if ctx.longctx is not None else None)
        return keeper.inject(messages, snapshot)


HANDOFFS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # step: (what it reads that an earlier step wrote, what it writes for a later step or for after the answer);
    # the names are the request's values (``ctx.<name>``, ``ctx.longctx.<name>`` as ``longctx.<name>``)
    "note": ((), ("new_messages",)),  # read by the keeper after the answer
    "restart": ((), ("longctx.requested", "longctx.restart", "longctx.positions")),
    "layout_plan": (("longctx.restart",), ("layout",)),
    "prune": (("longctx.requested", "longctx.restart", "layout"), ("pruning",)),  # the layout's planned tokens count
    "archive": (("longctx.requested", "longctx.restart", "pruning"), ("longctx.archived", "longctx.positions", "pruning")),
    "recall": (("longctx.requested", "longctx.restart", "longctx.archived", "pruning"), ("longctx.recall", "pruning")),
    "snapshot": (("layout", "longctx.positions"), ("layout.positions",)),
    "layout": (("layout", "layout.positions", "longctx.archived", "longctx.positions", "pruning"), ("layout.positions",)),
    "fit": (("pruning",), ("pruning", "unfit")),  # last: what every step before it added counts
}
"""What each step hands the next through the request: the order ``default_steps`` keeps is the one these allow."""


def check_handoffs(steps: list[Step]) -> None:
    """Raise ValueError when a step comes before the step that writes what it reads (``HANDOFFS``; steps not named
    there are not checked)."""
    names = [step.name for step in steps]
    for i, name in enumerate(names):
        for value in HANDOFFS.get(name, ((), ()))[0]:
            writers = [n for n in names if value in HANDOFFS.get(n, ((), ()))[1] and n != name]
            if writers and not any(n in writers for n in names[:i]):
                raise ValueError(f"the {name!r} step reads {value!r} before any of {writers} writes it")


def default_steps(config: Config) -> list[Step]:
    plan, layout = layout_steps(config.layout, config)
    steps: list[Step] = [
        NoteStep(),
        RestartStep(),
        plan,
        PruneStep(Pruner(config.pruning, config.tiers)),
        ArchiveStep(config.archive, config.tiers, config.pruning.cache_read_ratio),
        RecallStep(config.retrieval),
        SnapshotStep(config.layout),
        layout,
        FitStep(config.window, config.tiers, config.pruning.enabled, config.archive.enabled),
    ]
    check_handoffs(steps)
    return steps
