"""The agent's memory as the app holds it: anchors and notebook on their connection, capture after each answer, idle compaction."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from memory.anchors.anchor import Anchor
from memory.anchors.capture import definitions
from memory.anchors.sqlite_anchors import AnchorBook
from memory.cards.options import AgentSettings, CardsOptions, WorkspaceOptions
from memory.cards.workspace import AgentWorkspace, Shelf, workspace_of
from memory.forms.children import importance
from memory.forms.facts import learn
from memory.forms.render import SessionState
from memory.forms.render import compact as compact_form
from memory.forms.sqlite_forms import SessionMemory
from memory.notebook import compaction
from memory.notebook.proposals import Proposals, propose
from memory.notebook.sqlite_notebook import Notebook, NotebookStore
from memory.store.sqlite_database import Database
from proxy.keep.activity import Activity
from proxy.keep.answer_tasks import AnswerTasks
from proxy.keep.held import Held, Watched
from proxy.keep.options import NotebookOptions
from proxy.keep.organizer import Organizer
from proxy.keep.pending import Pending
from proxy.keep.refiner import Refiner
from proxy.keep.subagents import SPAWN_TTL_S, SPAWNS_KEPT, Spawns, prompt_candidates, snapshot_text, task_prompts, with_snapshot
from redaction.redact import redact
from summaries.llm import LLMSummarizer

if TYPE_CHECKING:
    from memory.store.base import KeeperDatabase
    from proxy.context import RequestContext

log = structlog.get_logger(__name__)
T = TypeVar("T")
BATCHES = ("applied", "economic", "overflow")
ANSWER_TOKENS = 1200
"""The most a compaction's answer may take (five sections of one to three lines)."""
"""Batches that leave a dynamic-pool line (they changed what the model sees)."""


class Keeper:
    """Everything per agent; each call names its agent. Sync methods run in worker threads (``run``)."""

    def __init__(
        self,
        path: Path | KeeperDatabase | None,
        options: NotebookOptions,
        summarizer: LLMSummarizer | None,
        busy_timeout_ms: int = 5000,
        run: Callable[..., Any] | None = None,
        clock: Callable[[], float] = time.time,
        workspaces: Callable[[str], AgentWorkspace] | None = None,
        shelf: Shelf | None = None,
    ) -> None:
        self.db = path if path is not None and not isinstance(path, Path) else Database(path, busy_timeout_ms)
        self.options = options
        self.summarizer = summarizer
        self.held = Held()
        """The layout's and snapshot step's reads, kept between this keeper's writes (``held.on`` False with replicas)."""
        self.anchors: AnchorBook = Watched(AnchorBook(self.db, clock, redact), self.held)  # type: ignore[assignment]
        self.notebook: NotebookStore = Watched(NotebookStore(self.db, clock, redact), self.held)  # type: ignore[assignment]
        self.sessions = SessionMemory(self.db, clock, redact)
        self.shelf = shelf or Shelf()
        """Card indexes and project rules, shared by every request (the layout step reads them through ``ctx.keeper``)."""
        self.organizer = Organizer(self.db, workspaces or _shared_workspace, self.shelf, clock, redact)
        self.spawns = Spawns(clock)
        self.spawns.restore(self.sessions.task_calls(clock() - SPAWN_TTL_S, SPAWNS_KEPT))  # calls made before a restart
        self.activity = Activity(forget_s=options.idle_seconds)  # ``compact_idle`` asks with nothing longer
        self.refiner = Refiner(summarizer, self.sessions, self.run, redact)
        self._run = run
        self._clock = clock
        self.tasks = AnswerTasks()
        self.compactions: dict[str, int] = {"llm": 0, "fallback": 0, "unusable": 0, "stale": 0}
        self.pending = Pending()  # answers of each session not remembered yet: an archive waits for them
        self.remember_failed = 0
        """Requests whose memory work failed after the answer (logged as ``remember_failed``; GET /ruyi/v1/stats)."""

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` off the event loop."""
        if self._run is not None:
            return await self._run(fn, *args)
        return await asyncio.to_thread(fn, *args)

    def close(self) -> None:
        self.db.close()

    # after each answer

    def after_answer(self, ctx: RequestContext, pending: Hashable | None = None) -> None:
        """Off the request path: what the request's new messages and its answer showed (anchors defined, facts for the
        forms, sub-agent calls waiting for their child, a child's result), the prune batch's pool line; then ``pending`` is done."""
        m = ctx.measurement
        if m is None or ctx.mode != "on":
            return self.pending.done(pending) if pending is not None else None
        try:
            answer = ctx.assembled.message() if ctx.assembled is not None else None
            rewritten = ctx.rewritten
            report = rewritten.pruning.report if rewritten is not None and rewritten.pruning is not None else None
            noted = rewritten.noted if rewritten is not None else None
            archive = _archive_of(ctx)
            whole = (list(noted.all), m.shared) if noted is not None and noted.all else None
            new = list(noted.new) if noted is not None else []
            self.remember_later(
                m.session.agent_id, m.session.session_id, new, answer, report if isinstance(report, dict) else None, archive, whole, pending
            )
        except Exception:  # the answer is gone already; memory misses one request, logged and counted
            self.remember_failed += 1
            log.warning("remember_failed", request_id=ctx.request_id, exc_info=True)
            return self.pending.done(pending) if pending is not None else None

    def remember_later(
        self,
        agent_id: str,
        session_id: str,
        messages: list[dict[str, Any]],
        answer: dict[str, Any] | None,
        report: dict[str, Any] | None,
        archive: dict[str, Any] | None = None,
        whole: tuple[list[dict[str, Any]], int] | None = None,
        pending: Hashable | None = None,
    ) -> asyncio.Task[None]:
        """What one answer taught, remembered in a task of its own after the session's earlier answers (``AnswerTasks``)."""

        async def remembered(after: asyncio.Task[None] | None) -> None:
            try:
                if after is not None:  # the session's answer before this one first (its failure is its own: logged there)
                    await asyncio.wait([after])
                await self.run(self.remember, agent_id, session_id, messages, answer, report, whole)
                plan = await self.run(self.archived, agent_id, session_id, archive) if archive is not None else None
                if plan is not None and archive is not None:  # the summarizer proposes in a task of its own: nothing waits on it
                    if not self.refiner.propose(agent_id, session_id, archive["messages"], plan[0], plan[1], self.apply):
                        await self.run(self.apply, agent_id, session_id, plan[1], "extractive")
            except Exception:  # the answer is gone already; memory misses one request, logged and counted
                self.remember_failed += 1
                log.warning("remember_failed", agent_id=agent_id, session_id=session_id, exc_info=True)
            finally:
                if pending is not None:
                    self.pending.done(pending)  # the session's next archive reads what this answer taught

        return self.tasks.start(agent_id, session_id, remembered)

    async def settle_agent(self, agent_id: str) -> None:
        """Wait for what this agent's earlier answers showed to be remembered (a sub-agent's first request may follow
        its parent's answer at once: the parent's pending task calls must be known first). Other agents never wait."""
        await self.tasks.settle_agent(agent_id)

    async def settle(self) -> None:
        """Wait for what answers already gave to be remembered (before reading anything back)."""
        await self.tasks.settle()

    # in a worker thread

    def remember(
        self,
        agent_id: str,
        session_id: str,
        messages: Sequence[dict[str, Any]],
        answer: dict[str, Any] | None,
        report: dict[str, Any] | None,
        whole: tuple[Sequence[dict[str, Any]], int] | None = None,
    ) -> list[str]:
        """Everything learned from one request and its answer; returns the ids of the anchors captured. ``whole``: the
        request's messages and where its new ones begin (the facts fold in what they have not yet, whatever process
        recorded the request)."""
        said = [m.get("content") for m in [*messages, *([answer] if answer else [])] if m.get("role") == "assistant"]
        texts = [t for t in said if isinstance(t, str) and t]
        answer_text = answer.get("content") if answer else None
        if whole is not None:
            self.sessions.learn(agent_id, session_id, whole[0], answer_text, whole[1])
        else:
            self.sessions.learn(agent_id, session_id, messages, answer_text)
        captured: list[str] = []
        if self.options.capture_anchors:
            found = [c for text in texts for c in definitions(text)]
            captured = [a.anchor_id for a in self.anchors.capture(agent_id, session_id, found)] if found else []  # none: held reads stay
            if captured:
                log.info("anchors_captured", agent_id=agent_id, session_id=session_id, anchors=captured)
        if answer is not None:
            hashes = self.spawns.add(agent_id, session_id, task_prompts(answer.get("tool_calls") or []))
            if hashes:  # kept in the store too: a restart before the child's first request still recognises it
                self.sessions.keep_task_calls(agent_id, session_id, hashes, SPAWNS_KEPT, SPAWN_TTL_S)
        child_of = self.sessions.snapshot(agent_id, session_id)
        if child_of is not None and answer_text and not answer.get("tool_calls"):  # type: ignore[union-attr]
            self.sessions.keep_result(agent_id, child_of[0], session_id, importance(answer_text), answer_text)
        if self.options.pool_lines and report is not None and report.get("batch") in BATCHES:
            saved = sum(row.get("tokens_saved", 0) for row in report.get("strategies", {}).values())
            items = sum(row.get("items", 0) for row in report.get("strategies", {}).values())
            self.pool_line(
                agent_id,
                f"{_stamp(self._clock())} session {session_id}: prune batch ({report['batch']}) cleared {items} "
                f"item(s), {saved} tokens; {report.get('tier_before')} → {report.get('tier_after')}",
                session_id if child_of is not None else None,
            )
        return captured

    def archived(self, agent_id: str, session_id: str, archive: dict[str, Any]) -> tuple[str, Proposals] | None:
        """An archive was made: a dynamic-pool line; returns its history line and what its turns established, found
        extractively, for the caller to propose (``apply``: now, or once the summarizer has answered). A sub-agent's
        archive leaves its line in the child's own notebook and proposes nothing (None: its memory is its own, and
        reaches its parent only through its result)."""
        child = session_id if self.sessions.snapshot(agent_id, session_id) is not None else None
        record = archive["record"]
        span = f"messages {record.get('head')}–{record.get('end')}"
        if self.options.pool_lines:
            self.pool_line(
                agent_id,
                f"{_stamp(self._clock())} session {session_id}: archive {record.get('number')} ({record.get('reason')}), "
                f"{span}, summary {archive.get('source')}",
                child,
            )
        if child is not None:
            return None
        facts = learn({}, archive["messages"], None)
        changed = [p for p, a in facts.get("files", []) if a == "changed"][-4:]
        history = (
            f"session {session_id} archived {span}"
            + (f": changed {', '.join(changed)}" if changed else "")
            + (f"; last error {facts['errors'][-1][:80]}" if facts.get("errors") else "")
        )
        found = propose(archive["messages"], history)
        return history, Proposals(found.entries, found.anchors, self.organizer.drafted(archive["messages"]))

    def apply(self, agent_id: str, session_id: str, found: Proposals, how: str) -> dict[str, Any]:
        """An archive's proposals written (notebook entries for the user, environment and history sections, pending
        anchors for the decisions and constraints stated): never over what a person wrote, never what a person rejected."""
        entries = self.notebook.propose(agent_id, found.entries)
        anchors = self.anchors.propose(agent_id, session_id, found.anchors)
        drafts = self.organizer.propose(agent_id, session_id, found.cards)  # draft cards: the Organizer's rules hold whoever drafted
        log.info(
            "archive_remembered",
            agent_id=agent_id,
            session_id=session_id,
            how=how,
            entries=len(found.entries) if entries is not None else 0,
            anchors=[a.anchor_id for a in anchors],
            card_drafts=[d.draft_id for d in drafts],
        )
        return {"entries": entries is not None, "anchors": [a.anchor_id for a in anchors], "cards": [d.draft_id for d in drafts]}

    def state(self, agent_id: str, session_id: str) -> SessionState:
        """What the agent's memory holds for a session's forms (the registry's view and reports are added by the API); a
        sub-agent's forms show its own notebook, not its agent's."""
        child = session_id if self.sessions.snapshot(agent_id, session_id) is not None else None
        return SessionState(
            session_id,
            self.sessions.facts(agent_id, session_id),
            self.anchors.list(agent_id),
            self.notebook.current(agent_id, child).body,
            children=self.sessions.results(agent_id, session_id),
        )

    def snapshot_for(self, agent_id: str, session_id: str, new: bool, messages: Sequence[dict[str, Any]], parent_hint: str | None) -> str | None:
        """A child's snapshot: the one it was given (every request of it carries the same bytes), or, on its first request,
        one made now when it names its parent (X-Ruyi-Parent) or its first message is a pending task call's prompt."""
        kept = self.held.get((agent_id, "snapshot", session_id), lambda: self.sessions.snapshot(agent_id, session_id))
        if kept is not None:
            return kept[1]
        if not new:
            return None
        if parent_hint is not None and not self.sessions.facts(agent_id, parent_hint):
            parent_hint = None  # not a session of this agent that Ruyi knows
        parent = parent_hint or self.spawns.parent_of(agent_id, prompt_candidates(messages))
        if parent is None or parent == session_id:
            return None
        state = self.state(agent_id, parent)
        text = snapshot_text(parent, compact_form(state), state.anchors)
        log.info("subagent_recognised", agent_id=agent_id, session_id=session_id, parent_id=parent, by="header" if parent_hint else "task call")
        kept_text = self.sessions.keep_snapshot(agent_id, session_id, parent, text)
        self.held.put((agent_id, "snapshot", session_id), (parent, kept_text))
        return kept_text

    def memory_held(self, agent_id: str, session_id: str, new: bool) -> bool:
        """Whether the layout and snapshot steps can run on memory alone for this request: the agent's notebook and
        anchors and the session's snapshot (or its absence) are held, and it is not a first request (which may
        recognise a sub-agent: its parent is read from the store)."""
        held = self.held
        return not new and all(held.has((agent_id, *what)) for what in (("notebook",), ("anchors",), ("snapshot", session_id)))

    def current_notebook(self, agent_id: str) -> Notebook:
        return self.held.get((agent_id, "notebook"), lambda: self.notebook.current(agent_id))

    def anchor_list(self, agent_id: str) -> list[Anchor]:
        return self.held.get((agent_id, "anchors"), lambda: self.anchors.list(agent_id))

    @staticmethod
    def inject(messages: list[dict[str, Any]], snapshot: str) -> list[dict[str, Any]]:
        return with_snapshot(messages, snapshot)

    def pool_line(self, agent_id: str, text: str, child: str | None = None) -> Notebook:
        """One line of Ruyi's own in the dynamic pool (its oldest goes when it is full): the agent's, or a sub-agent's own."""
        return self.notebook.add(agent_id, "dynamic", text, by="ruyi", child=child)[0]

    # compaction

    async def compact(self, agent_id: str, child: str | None = None) -> tuple[Notebook | None, str]:
        """Compact the agent's notebook (or a sub-agent's own) now: through the summarizer when a model is configured
        (``summarizer.model``; ``same`` has no session to follow here, so it falls back), where an unusable answer, a
        timeout or an open breaker changes nothing and schedules a retry; else the deterministic fallback. Returns the
        new version (None: unchanged) and how."""
        before = await self.run(self.notebook.current, agent_id, child)
        target = self.summarizer.target(None, None, None, None) if self.summarizer is not None else None
        if self.summarizer is not None and target is not None:
            key = (agent_id, "notebook" if child is None else f"notebook {child}")
            messages = [{"role": "system", "content": compaction.SYSTEM}, {"role": "user", "content": compaction.prompt(before.body)}]
            answer, why = await self.summarizer.ask(key, target, messages, ANSWER_TOKENS)
            body = compaction.parse(answer, before.body, self._clock())
            if body is None:
                if answer is not None:
                    self.summarizer.unusable(key)
                self.compactions["unusable"] += 1
                if child is not None:  # a child's notebook is never pending: nothing to retry
                    return None, "unusable"
                retry_at = await self.run(self.notebook.failed, agent_id, self._backoff)
                log.warning(
                    "notebook_compaction_unusable",
                    agent_id=agent_id,
                    version=before.version,
                    reason=why if answer is None else "answer",
                    retry_at=round(retry_at, 1),
                )
                return None, "unusable"
            self.summarizer.succeeded(key)
            how = "llm"
        else:
            body, how = compaction.fallback(before.body), "fallback"
        after = await self.run(self.notebook.compacted, agent_id, before.version, body, how, child)
        if after is None:
            self.compactions["stale"] += 1
            return None, "stale"
        self.compactions[how] += 1
        log.info("notebook_compacted", agent_id=agent_id, version=after.version, how=how)
        return after, how

    def _backoff(self, attempts: int) -> float:
        return min(self.options.retry_seconds * 2 ** (attempts - 1), self.options.retry_max_seconds)

    async def compact_idle(self) -> list[str]:
        """Compact every pending notebook whose agent is idle and whose retry time has come; returns those compacted."""
        done = []
        for agent_id in await self.run(self.notebook.pending, self._clock()):
            if self.activity.idle(agent_id, self.options.idle_seconds):
                after, _ = await self.compact(agent_id)
                if after is not None:
                    done.append(agent_id)
        return done

    async def compact_forever(self) -> None:
        while True:
            await asyncio.sleep(self.options.check_seconds)
            try:
                await self.compact_idle()
            except Exception:  # the next round tries again
                log.warning("notebook_compaction_failed", exc_info=True)


def _shared_workspace(agent_id: str) -> AgentWorkspace:
    """Without per-agent settings (a keeper made outside the app): the default folders."""
    return workspace_of(CardsOptions(), WorkspaceOptions(), dict[str, AgentSettings](), agent_id)


def _archive_of(ctx: RequestContext) -> dict[str, Any] | None:
    """The archive this request made, as plain data: its record, the client's messages it covered, its summary's source."""
    mem = ctx.longctx
    done = mem.archived if mem is not None else None
    if done is None:
        return None
    head, end = int(done.record.get("head", 0)), int(done.record.get("end", -1))
    return {"record": dict(done.record), "messages": list(mem.messages[head : end + 1]), "source": done.summary.source}  # type: ignore[union-attr]


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(at))
