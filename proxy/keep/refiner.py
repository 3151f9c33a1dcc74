"""The summarizer's background work on what the agent keeps: forms refined, an archive's proposals; no request waits on it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

import structlog

from memory.forms import refine
from memory.forms.sqlite_forms import SessionMemory
from memory.lru import LRU
from memory.notebook import card_proposals as proposed_cards
from memory.notebook import proposals
from summaries.extractive import text_of
from summaries.llm import LLMSummarizer, Target
from summaries.organizer import key_of
from summaries.prompt import clipped, quoted

log = structlog.get_logger(__name__)
FORM_TOKENS = {"compact": 400, "normal": 1200}
"""The most a refined form's answer may take (expanded: in proportion to the deterministic one)."""
PROPOSAL_TOKENS = 800
MESSAGE_CHARS = 1500
"""An archived message longer than this is given to the summarizer by its head and tail."""
TRACE_CHARS = 24_000
"""The archived turns given at most: user messages first, then the assistant's, then tool output, in their order."""
ROLE_ORDER = ("user", "assistant")
FORMS_TRIED = 10_000


def proposal_messages(trace: Sequence[Mapping[str, Any]], redact: Callable[[str], str] = lambda s: s) -> list[dict[str, str]]:
    """The proposals request: our instructions, then the archived turns (secrets redacted) as quoted data within TRACE_CHARS."""
    texts = [clipped(redact(text_of(m)), MESSAGE_CHARS) for m in trace]
    rank = sorted(range(len(trace)), key=lambda i: (ROLE_ORDER.index(trace[i].get("role")) if trace[i].get("role") in ROLE_ORDER else 2, i))
    kept, used = set(), 0
    for i in rank:
        if used + len(texts[i]) > TRACE_CHARS:
            continue
        kept.add(i)
        used += len(texts[i])
    parts = ["<trace>"]
    for i in sorted(kept):
        parts += [f'<message n="{i}" role="{quoted(str(trace[i].get("role") or "unknown"))}">', quoted(texts[i]), "</message>"]
    if len(kept) < len(trace):
        parts.append(f"[… {len(trace) - len(kept)} message(s) left out …]")
    parts += ["</trace>", "", "Answer now: the JSON object, nothing else."]
    return [{"role": "system", "content": proposals.SYSTEM + proposed_cards.SYSTEM}, {"role": "user", "content": "\n".join(parts)}]


def _with_cards(answer: str | None, found: proposals.Proposals | None, fallback: proposals.Proposals) -> proposals.Proposals | None:
    """The answer's proposals with its draft cards (keyed as the Organizer keys them), or None when its cards may not be
    used (the whole answer is then refused); an answer without a "cards" key keeps the extractive drafts."""
    raw = proposals.loaded(answer)
    if found is None or raw is None:
        return None
    if "cards" not in raw:
        return proposals.Proposals(found.entries, found.anchors, fallback.cards)
    cards = proposed_cards.cards_of(raw)
    if cards is None:
        return None
    return proposals.Proposals(found.entries, found.anchors, [(key_of(title), title, tags, body) for title, tags, body in cards])


class Refiner:
    """LLM work in background tasks, only when a model is configured: a form's refinement (kept once it passes its
    checks; until then the deterministic form is the answer) and an archive's proposals (the extractive ones when the
    answer is unusable, late or missing). Each call under the summarizer's slots, timeout and breaker."""

    def __init__(
        self, summarizer: LLMSummarizer | None, sessions: SessionMemory, run: Callable[..., Any], redact: Callable[[str], str] = lambda s: s
    ) -> None:
        self.summarizer = summarizer
        self._sessions = sessions
        self._run = run
        self._redact = redact
        self._tasks: set[asyncio.Task[Any]] = set()
        self._forms_tried: LRU[tuple[str, str, str, str], None] = LRU(FORMS_TRIED)
        """Forms whose refinement was started (bounded): one state is asked about once, whatever came of it."""
        self.counts = {"forms_refined": 0, "forms_kept": 0, "proposals_llm": 0, "proposals_extractive": 0, "failed": 0}

    def target(self) -> Target | None:
        """Where the summarizer's requests go (None: no model configured, or ``same``, which has no session route here)."""
        return self.summarizer.target(None, None, None, None) if self.summarizer is not None else None

    # forms

    async def form(self, agent_id: str, session_id: str, form: str, deterministic: str, state: str) -> tuple[str, str]:
        """The form to answer with and where it came from: the refined one made from this very state (``summarizer``),
        else the deterministic one (``deterministic``), its refinement started in the background when a model is set."""
        found = await self._run(self._sessions.refined, agent_id, session_id, form, refine.basis(deterministic))
        if found is not None:
            return found, "summarizer"
        self.refine(agent_id, session_id, form, deterministic, state)
        return deterministic, "deterministic"

    def refine(self, agent_id: str, session_id: str, form: str, deterministic: str, state: str) -> bool:
        """Start a form's refinement unless no model is configured or this form of this state was asked about already
        (under way, kept, or refused: a state is asked about once); returns whether started."""
        target = self.target()
        key = (agent_id, session_id, form, refine.basis(deterministic))
        if target is None or key in self._forms_tried:
            return False
        self._forms_tried[key] = None
        self._spawn(self._refine(key, target, deterministic, state))
        return True

    async def _refine(self, key: tuple[str, str, str, str], target: Target, deterministic: str, state: str) -> None:
        assert self.summarizer is not None
        agent_id, session_id, form, made_from = key
        breaker = (agent_id, f"forms {session_id}")
        tokens = FORM_TOKENS.get(form) or min(8000, max(self.summarizer.options.max_tokens, len(deterministic) // 3 + 200))
        asked = await self._run(refine.messages, form, deterministic, state)  # the state as stored: redacted already
        answer, why = await self.summarizer.ask(breaker, target, asked, tokens)
        text = refine.check(answer, form, deterministic, state)
        if text is None:
            if answer is not None:
                self.summarizer.unusable(breaker)
            self.counts["forms_kept"] += 1
            log.info("form_refinement_unusable", agent_id=agent_id, session_id=session_id, form=form, reason=why if answer is None else "answer")
            return
        self.summarizer.succeeded(breaker)
        await self._run(self._sessions.keep_refined, agent_id, session_id, form, made_from, text)
        self.counts["forms_refined"] += 1
        log.info("form_refined", agent_id=agent_id, session_id=session_id, form=form, chars=len(text))

    # an archive's proposals

    def propose(
        self,
        agent_id: str,
        session_id: str,
        trace: Sequence[Mapping[str, Any]],
        history_line: str,
        fallback: proposals.Proposals,
        apply: Callable[[str, str, proposals.Proposals, str], Any],
    ) -> bool:
        """Ask the summarizer what the archived turns established, then ``apply`` its proposals, or ``fallback`` (the
        extractive ones) when its answer is unusable, late or missing. False (nothing started) without a model."""
        target = self.target()
        if target is None:
            return False
        self._spawn(self._propose(agent_id, session_id, target, list(trace), history_line, fallback, apply))
        return True

    async def _propose(
        self,
        agent_id: str,
        session_id: str,
        target: Target,
        trace: list[Mapping[str, Any]],
        history_line: str,
        fallback: proposals.Proposals,
        apply: Callable[[str, str, proposals.Proposals, str], Any],
    ) -> None:
        assert self.summarizer is not None
        breaker = (agent_id, "proposals")
        asked = await self._run(proposal_messages, trace, self._redact)  # a worker thread: the turns may be large
        answer, why = await self.summarizer.ask(breaker, target, asked, PROPOSAL_TOKENS)
        found = _with_cards(answer, proposals.parse(answer, history_line), fallback)
        if found is None:
            if answer is not None:
                self.summarizer.unusable(breaker)
            log.info("proposals_fell_back", agent_id=agent_id, session_id=session_id, reason=why if answer is None else "answer")
            found, how = fallback, "extractive"
        else:
            self.summarizer.succeeded(breaker)
            how = "llm"
        await self._run(apply, agent_id, session_id, found, how)
        self.counts[f"proposals_{how}"] += 1

    # tasks

    def _spawn(self, work: Coroutine[Any, Any, None], done: Callable[[], None] | None = None) -> None:
        task = asyncio.create_task(self._guarded(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if done is not None:
            task.add_done_callback(lambda _: done())

    async def _guarded(self, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except Exception:  # background work: the deterministic answers stay, logged and counted
            self.counts["failed"] += 1
            log.warning("refiner_failed", exc_info=True)

    async def settle(self) -> None:
        """Wait for the work under way (each call bounded by the summarizer's timeout)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def cancel(self) -> None:
        """At shutdown: what is under way is given up (a form stays deterministic; proposals under way are lost)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)
