"""The layout steps: plan the sections before pruning (so the window counts them), place them after the long-context steps."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from dataclasses import replace as copied
from typing import Any, Protocol, Self, TypeVar

import structlog

from memory.forms.facts import is_chinese
from memory.forms.render import compact as compact_form
from memory.session import How
from proxy.context import RequestContext
from proxy.keep.subagents import first_user_text
from proxy.know.window import num_ctx_for
from proxy.layout.options import LayoutOptions, LayoutSettings
from proxy.layout.placement import system_text, with_block, with_system
from proxy.layout.sections import Section, anchors_text, block, core, full_system, relevant_anchors, reminder, terms
from proxy.layout.sources import NO_MEMORY, Memory, Sources
from proxy.layout.trailing import Metadata, delta, newest_input, now_with_zone, trailing_block
from summaries.extractive import text_of

log = structlog.get_logger(__name__)

Messages = list[dict[str, Any]]
Positions = tuple[int, ...]
LAYOUT = "layout"
"""The session-wide decision that holds the stable part in force (memory/sessions.py: inherited whole by a branch)."""
COMPACT_ROOM = 1000
"""The compact form and reminder go in after an archive only when the archived request leaves at least this much room
(never after the upstream said too long)."""
GAP_TOKENS = 2
"""What joining a section to the content it follows adds, beside the section's own tokens."""


@dataclass
class LayoutState:
    """One request's layout as planned before pruning: the stable part in force (``record``: kept per session), the
    per-request sections and their tokens, and the ``num_ctx`` that holds them."""

    record: dict[str, Any]
    built: bool
    trailing: dict[str, str]
    planned: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    num_ctx: int | None = None
    """Ollama's ``num_ctx`` with the sections counted (None: as measured)."""


class Tally(Protocol):
    """What the layout reads of the pruning outcome (``proxy.rewrite.pruning.Outcome``) and adds its sections to."""

    decisions: dict[str, list[dict[str, Any]]]
    report: dict[str, Any]
    tokens_after: int
    raw_tokens_after: int

    def copy(self) -> Self: ...


T = TypeVar("T", bound=Tally)


class LayoutPlanStep:
    """Before pruning: the stable part in force (kept from the session's first request or its latest archive, else
    built now for a new conversation) and this request's block; their tokens count toward the window."""

    name = "layout_plan"

    def __init__(self, options: LayoutOptions, config: LayoutSettings | None = None, sources: Sources | None = None) -> None:
        self.options = options
        self.config = config
        self.sources = sources or Sources(config)

    def apply(self, messages: Messages, ctx: RequestContext, archive: int) -> LayoutState | None:
        """The plan: the stable part in force for the archive in force (``archive``: its number, 0 for none), this
        request's sections and their tokens (None: no layout)."""
        m = ctx.measurement
        if self.options.mode == "off" or m is None or m.count_text is None or ctx.mode == "off":
            return None
        record = kept(m.session.decisions)
        if record is None:
            record = None if m.shared == 0 else {"archive": archive, "sections": {}}  # a conversation already under way
        ws = self.sources.workspace(m.session.agent_id, ctx)
        memory = self._memory(ctx, messages)
        built = record is None or int(record.get("archive", 0)) != archive or record.get("mode", self.options.mode) != self.options.mode
        words = self.keywords(messages, ws)
        if built:
            record = self.build(messages, ctx, memory, ws, archive, words)
        state = LayoutState(dict(record), built, self.trailing(ctx, record, memory, ws, words))
        count = m.count_text
        state.tokens = {name: count(text) + GAP_TOKENS for name, text in record.get("sections", {}).items()}
        blk = trailing_block(state.trailing)
        state.tokens.update({name: count(text) + GAP_TOKENS for name, text in state.trailing.items() if text})
        state.planned = (count(record["text"]) + GAP_TOKENS if record.get("text") else 0) + (count(blk) + GAP_TOKENS if blk else 0)
        if m.num_ctx is not None and state.planned and self.config is not None:  # Ollama's num_ctx holds the sections too
            state.num_ctx = num_ctx_for(m.tokens + round(state.planned * m.scale), m.requested, m.window.tokens, m.num_ctx, self.config.window)
        return state

    def preview(self, messages: Messages, ctx: RequestContext, count: Callable[[str], int], usage: float, window: int, tier: str) -> dict[str, int]:
        """``count_tokens``: the tokens of each part this request would get (``stable``: the part after the system
        prompt, ``block``: the per-request block), built now from the agent's memory, workspace and cards, as for a new
        conversation; nothing recorded, nothing kept. In a worker thread (the notebook is read from the store)."""
        o = self.options
        if o.mode == "off" or ctx.mode == "off":
            return {}
        ws = self.sources.workspace(ctx.agent_id, ctx)
        memory = self.sources.memory(ctx.keeper, ctx.agent_id, o.notebook_chars, ctx)
        words = self.keywords(messages, ws)
        record = self.build(messages, ctx, memory, ws, 0, words)
        trailing: dict[str, str] = {}
        if o.metadata or o.mode == "full":
            root = str(ws.workspace_root) if ws is not None and ws.workspace_root is not None else None
            parent = ctx.parent_id or (ctx.agent_id.rsplit("/", 1)[0] if "/" in ctx.agent_id else None)
            trailing["metadata"] = Metadata(now_with_zone(), root, ctx.agent_id, parent, ctx.model, usage, window, tier).text()
        if ws is not None:  # a conversation's first request gets the cards
            trailing["cards"] = "\n\n".join(c.render(ws.max_card_chars) for c in self.sources.cards(ws, words, ctx))
        out = {"stable": count(record["text"]) + GAP_TOKENS} if record.get("text") else {}
        blk = trailing_block(trailing)
        if blk and newest_input(messages) is not None:
            out["block"] = count(blk) + GAP_TOKENS
        return out

    def _memory(self, ctx: RequestContext, messages: Messages | None = None) -> Memory:
        """The agent's memory for this request; a sub-agent's own notebook (seed 003: its writes are its own and
        temporary), recognised now on its first request (its parent's pending task call, or X-Ruyi-Parent)."""
        m = ctx.measurement
        assert m is not None
        child = None
        if ctx.keeper is not None and messages is not None:
            try:
                if ctx.keeper.snapshot_for(m.session.agent_id, m.session.session_id, m.how == How.NEW, messages, ctx.parent_id):
                    child = m.session.session_id
            except Exception:  # noqa: BLE001 - fail open: the agent's notebook, as before
                self.sources._failed("snapshot", ctx)
        return self.sources.memory(ctx.keeper, m.session.agent_id, self.options.notebook_chars, ctx, child)

    def keywords(self, messages: Messages, ws: Any) -> Callable[[], list[str]]:
        """What the session is about: its task and its latest ``cards.context_window_steps`` messages (never the system
        prompt; each text's head and tail only), worked out at most once, when first asked for."""
        found: list[list[str]] = []

        def words() -> list[str]:
            if not found:
                rest = [msg for msg in messages if msg.get("role") != "system"][-(ws.context_window_steps if ws is not None else 5) :]
                found.append(self.sources.keywords([_ends(first_user_text(messages) or ""), *(_ends(text_of(msg)) for msg in rest)]))
            return found[0]

        return words

    def build(
        self, messages: Messages, ctx: RequestContext, memory: Memory, ws: Any, archive: int, words: Callable[[], list[str]], compact: str = ""
    ) -> dict[str, Any]:
        """The stable part, as the session keeps it: its text, each section's text, and what memory held (for the delta)."""
        o = self.options
        chosen = relevant_anchors(memory.anchors, terms(words()) if memory.anchors else set(), o.anchors_max)
        rules = self.sources.rules(ws, ctx)
        sections = [
            Section("notebook", memory.notebook),
            Section("anchors", anchors_text(chosen, o.anchors_chars)),
            Section("rules", rules),
            Section("compact", compact),
        ]
        task = ""
        if o.mode == "full":
            task = ctx.task or first_user_text(messages) or ""
            # the core template goes around the client's system prompt each request (``_full``); for Anthropic, whose system
            # blocks stay as sent, this text follows them
            text = full_system(task, core(o.core_template, "").strip(), sections)
        else:
            text = block(sections)
        return {
            "archive": archive,
            "mode": o.mode,
            "text": text,
            "task": task,
            "sections": {s.name: s.text for s in sections if s.text.strip()},
            "notebook": memory.notebook_lines,
            "anchors": memory.active,
        }

    def trailing(self, ctx: RequestContext, record: Mapping[str, Any], memory: Memory, ws: Any, words: Callable[[], list[str]]) -> dict[str, str]:
        """This request's sections: metadata, retrieved cards, the memory delta (each empty when it has nothing)."""
        m = ctx.measurement
        assert m is not None
        o, out = self.options, {}
        if o.metadata or o.mode == "full":
            root = str(ws.workspace_root) if ws is not None and ws.workspace_root is not None else None
            agent = m.session.agent_id  # its parent: the session it named (X-Ruyi-Parent), else the agent of a sub-agent ``a/x``
            parent = ctx.parent_id or (agent.rsplit("/", 1)[0] if "/" in agent else None)
            out["metadata"] = Metadata(now_with_zone(), root, agent, parent, ctx.model, m.usage, m.window.tokens, m.tier.value).text()
        if ws is not None and (m.session.requests - 1) % max(1, ws.trigger_interval) == 0:  # the first request, then every n-th
            found = self.sources.cards(ws, words, ctx)
            out["cards"] = "\n\n".join(c.render(ws.max_card_chars) for c in found)
        if memory is not NO_MEMORY:  # new anchors as the stable part chooses them: constraints, and those the session is about
            known = set(record.get("anchors", ()))
            new = [a for a in memory.anchors if a.anchor_id not in known]
            shown = {a.anchor_id for a in relevant_anchors(new, terms(words()), o.anchors_max)} if new else set()
            anchors = [a for a in memory.anchors if a.anchor_id in known or a.anchor_id in shown]
            out["delta"] = delta(record.get("notebook", ()), memory.notebook_lines, record.get("anchors", ()), anchors, o.delta_chars)
        return out


CONTEXT_LINE = re.compile(r"^- context: .*$", re.MULTILINE)
"""The metadata's usage line, rewritten once pruning and the archive have said what is forwarded."""


class LayoutStep:
    """After the long-context steps: the stable part placed in the system part (rebuilt with the session's compact form
    and the yellow-light reminder when this request archived), the per-request block on the newest user or tool
    message; the stable part kept with the session's decisions when built; each section's tokens reported."""

    name = "layout"

    def __init__(self, plan: LayoutPlanStep) -> None:
        self.plan = plan
        self.options = plan.options

    def apply(
        self,
        messages: Messages,
        ctx: RequestContext,
        plan: LayoutState | None,
        positions: Positions | None,
        archived: int | None,
        outcome: T | None,
    ) -> tuple[Messages, Positions | None, T | None]:
        """The request with the planned sections placed, where each message came from when they were (None: nothing
        placed), and a copy of ``outcome`` with the sections' tokens and the stable part to keep; ``positions``: the
        messages' positions in the client's request so far; ``archived``: the number of the archive this request made."""
        m = ctx.measurement
        if plan is None or m is None or m.count_text is None:
            return messages, None, outcome
        state = copied(plan, trailing=dict(plan.trailing), tokens=dict(plan.tokens))  # the plan stays as planned
        if archived is not None:  # the prefix is lost anyway: rebuilt, with the compact form
            state.record, state.built = self._after_archive(messages, ctx, archived, outcome), True
            count = m.count_text
            state.tokens.update({name: count(text) + GAP_TOKENS for name, text in state.record["sections"].items()})
        out, added = messages, 0
        text = state.record.get("text") or ""
        count = m.count_text
        if text:
            replace = None
            if self.options.mode == "full" and ctx.wire != "anthropic":  # Anthropic's system blocks are never rewritten
                replace = self._full(messages, state.record)
            out, positions = with_system(out, positions, text, replace)
            added = (count(replace) - count(system_text(messages)) if replace is not None else count(text)) + GAP_TOKENS
        report = outcome.report if outcome is not None else {}
        if state.trailing.get("metadata") and isinstance(report.get("usage_after"), float):  # what is forwarded, not what was sent
            state.trailing["metadata"] = CONTEXT_LINE.sub(
                f"- context: {report['usage_after']:.0%} of {m.window.tokens:,} tokens used (tier {report.get('tier_after', m.tier.value)})",
                state.trailing["metadata"],
            )
        blk = trailing_block(state.trailing)
        at = newest_input(out)
        if blk and at is not None:
            out = with_block(out, at, blk)
            added += count(blk) + GAP_TOKENS
        outcome = self._account(ctx, state, added, outcome)
        if out is messages:
            return out, None, outcome
        placed = tuple(positions) if positions is not None else tuple(range(len(out)))  # for the dialects that rebuild native messages
        return out, placed, outcome

    def _after_archive(self, messages: Messages, ctx: RequestContext, number: int, outcome: Tally | None) -> dict[str, Any]:
        m, keeper = ctx.measurement, ctx.keeper
        assert m is not None
        if keeper is not None:  # what the session's earlier answers taught is remembered first (bounded): the same bytes
            if not keeper.pending.wait((m.session.agent_id, m.session.session_id), self.options.memory_wait_s):  # however fast the keeper went
                log.warning("archive_memory_unsettled", session=m.session.session_id, request_id=ctx.request_id)  # bytes may differ on a replay
        compact = ""
        room = m.budget.usable - (outcome.tokens_after if outcome is not None else m.tokens)
        if self.options.reminder and not (ctx.longctx is not None and ctx.longctx.overflow) and room > COMPACT_ROOM:
            form = ""
            if keeper is not None:
                try:
                    form = compact_form(keeper.state(m.session.agent_id, m.session.session_id))
                except Exception:  # noqa: BLE001 - fail open: the reminder alone
                    self.plan.sources._failed("compact_form", ctx)
            compact = "\n\n".join(p for p in (form.strip(), reminder(is_chinese(first_user_text(messages)), ctx.recall_tool)) if p)
        memory = self.plan._memory(ctx, messages)
        ws = self.plan.sources.workspace(m.session.agent_id, ctx)
        return self.plan.build(messages, ctx, memory, ws, number, self.plan.keywords(messages, ws), compact)

    def _full(self, messages: Messages, record: Mapping[str, Any]) -> str:
        """``full``: the system message rebuilt (task, core template around the client's system prompt, the rest)."""
        client = system_text(messages)
        sections = [Section(name, text) for name, text in record.get("sections", {}).items()]
        return full_system(record.get("task", ""), core(self.options.core_template, client), sections)

    def _account(self, ctx: RequestContext, state: LayoutState, added: int, given: T | None) -> T | None:
        """A copy of ``given`` with the sections' tokens: reported per section, and what was planned before pruning made good."""
        m = ctx.measurement
        assert m is not None
        if given is None:
            return None
        outcome = given.copy()
        record = state.record
        if state.built and ctx.mode == "on" and (record.get("text") or record.get("notebook") or record.get("anchors")):
            # kept when it holds something (or memory did): a session without one had an empty stable part and memory
            outcome.decisions[LAYOUT] = [{**record, "target": LAYOUT, "strategy": LAYOUT}]
        if added != state.planned:
            outcome.raw_tokens_after += added - state.planned
            outcome.tokens_after = m.calibrated(outcome.raw_tokens_after)
        if added:
            shown = {**state.record.get("sections", {}), **{k: v for k, v in state.trailing.items() if v}}
            outcome.report["layout"] = {
                "mode": self.options.mode,
                "built": state.built,
                "tokens": added,
                "sections": {name: n for name, n in state.tokens.items() if name in shown},
            }
        return outcome


KEYWORD_CHARS = 4000
"""Keywords come from the first and the last this many characters of each text (a tool output may be megabytes)."""


def _ends(text: str) -> str:
    return text if len(text) <= 2 * KEYWORD_CHARS else text[:KEYWORD_CHARS] + "\n" + text[-KEYWORD_CHARS:]


def kept(decisions: Mapping[str, Any]) -> dict[str, Any] | None:
    """The stable part a session keeps (as its other session-wide decisions: a list of one, on the target ``layout``)."""
    value = decisions.get(LAYOUT)
    if isinstance(value, list) and value and isinstance(value[-1], Mapping):
        return {k: v for k, v in value[-1].items() if k not in ("target", "strategy")}
    return None


def layout_steps(options: LayoutOptions, config: LayoutSettings | None) -> tuple[LayoutPlanStep, LayoutStep]:
    plan = LayoutPlanStep(options, config)
    return plan, LayoutStep(plan)


def snapshot_after_system(messages: Messages, snapshot: str, positions: Positions | None) -> tuple[Messages, Positions]:
    """A sub-agent's snapshot after the system prompt (Anthropic: the client's system blocks stay as sent; siblings
    share that prompt, so they still share a cached prefix), and where each message came from, for the dialect."""
    return with_system(messages, positions, snapshot)
