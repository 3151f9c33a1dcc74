"""Ruyi's rewrite without HTTP: the same fingerprints, counts, sessions and pipeline steps, for replay and benches."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from config.schema import Config
from memory.chain import Fingerprinter
from memory.sessions import SessionRegistry
from proxy.context import RequestContext
from proxy.know.measurement import Measurement
from proxy.know.tiers import tier_for
from proxy.know.tokens import TokenCounter
from proxy.know.window import Window, budget_for, window_for
from proxy.longctx.request import RequestMemory
from proxy.longctx.service import LongCtx
from proxy.rewrite.pipeline import Pipeline
from proxy.rewrite.pruning import Outcome
from proxy.rewrite.steps import default_steps
from summaries.llm import LLMSummarizer

Messages = list[dict[str, Any]]


class OfflineRuyi:
    """One agent's requests rewritten as the proxy would (sessions resolved by message chain).

    Background work (summaries prepared ahead of need) that a real session would have finished between two
    requests is finished before the next one."""

    def __init__(
        self,
        config: Config,
        model: str,
        window: int | None = None,
        counter: TokenCounter | None = None,
        keeper: Any = None,
        agent_id: str = "offline",
    ) -> None:
        self.config = config
        self.keeper = keeper
        """The agent's memory (proxy.keep.keeper.Keeper) the layout reads; None: no notebook or anchors."""
        self.agent_id = agent_id
        """Whose memory, workspace and cards the layout uses (its sessions here are the replay's own)."""
        self.model = model
        self.window = window or window_for(model, config.window).tokens
        self.counter = counter or TokenCounter(config.tokens)
        self.fingerprinter = Fingerprinter()
        self.sessions = SessionRegistry(config.sessions)
        self.pipeline = Pipeline(default_steps(config))
        summarizer = LLMSummarizer(config.summarizer) if config.summarizer.model else None
        self.longctx = LongCtx(config.archive, config.pruning.tool_table(), summarizer=summarizer)
        self.outcomes: list[Outcome] = []
        self.unfit = 0
        """Requests ``ruyi serve`` would refuse: still over the whole window once cut to fit (``proxy.rewrite.fit``)."""
        self.contexts: list[RequestContext] = []
        """The last request's context (what each step learnt), for tests and benches."""

    def side_requests(self) -> list[tuple[int, int]]:
        """The LLM summarizer's calls since the last request (prompt tokens, none cached): priced like requests."""
        summarizer = self.longctx.summarizer
        if summarizer is None:
            return []
        calls, summarizer.calls = summarizer.calls, []
        return [(n, 0) for n in calls]

    def layout_sections(self) -> dict[str, int]:
        """The tokens each layout section added to the last request (empty: none)."""
        rewritten = self.contexts[0].rewritten if self.contexts else None
        outcome = rewritten.pruning if rewritten is not None else None
        layout = outcome.report.get("layout") if outcome is not None else None
        return dict(layout["sections"]) if isinstance(layout, dict) else {}

    @property
    def pruner(self) -> Any:
        return next(step.pruner for step in self.pipeline.each_step() if hasattr(step, "pruner"))

    def __call__(self, messages: Messages, tools: Sequence[Any] | None = None) -> Messages:
        chain = self.fingerprinter.chain(messages)
        prompt = self.counter.count(self.model, messages, list(tools) if tools else None, chain)
        resolution = self.sessions.resolve(self.agent_id, chain)
        session = resolution.session
        budget = budget_for(self.window, None, self.config.window)
        m = Measurement(
            session,
            resolution.how,
            resolution.new_messages,
            chain.links,
            resolution.shared,
            prompt.total,
            prompt.total,
            Window(self.window, "config"),
            budget,
            tier_for(budget.usage(prompt.total), self.config.tiers, self.config.archive.enabled),
            None,
            self.counter.text_counter(self.model),
            prompt.messages,
        )
        ctx = RequestContext("offline", "openai", model=self.model, agent_id=self.agent_id, keeper=self.keeper)
        target = summarizer.target(self.model, None, None, None) if (summarizer := self.longctx.summarizer) is not None else None
        ctx.measurement, ctx.longctx = m, RequestMemory(self.longctx, messages, target=target)
        rewritten = self.pipeline.run(messages, ctx)
        ctx.rewritten, outcome = rewritten, rewritten.pruning
        if outcome is not None:
            self.sessions.decide(
                self.agent_id, session.session_id, outcome.decisions, outcome.refs, outcome.batch_retry_at, outcome.clear_batch_retry
            )
            self.sessions.record(
                self.agent_id,
                session.session_id,
                prompt_tokens=outcome.tokens_after,
                report=outcome.report,
                reports_max=self.config.pruning.reports_kept,
            )
            self.outcomes.append(outcome)
        mem = ctx.longctx
        if mem.prepare_until is not None:  # a real session's background preparation ends before its next request
            first = mem.restart.archive["head"] if mem.restart is not None else None
            self.longctx.prepare_for(mem, m, first)
            if target is not None:
                state = self.longctx.memory(self.agent_id, session.session_id)
                asyncio.run(self.longctx.prepare_s1(state, mem, m))
                self.longctx.prepare_for(mem, m, first)
        self.contexts[:] = [ctx]
        self.unfit += rewritten.unfit is not None
        return rewritten.messages
