"""The long-context memory of live sessions: S2 chunks prepared ahead of need, S1 summaries, what is written off the path."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from conversation.actions.classify import DEFAULT_TOOLS, ToolSpec
from conversation.task import task_text
from memory.lru import LRU
from memory.store.base import ArchiveRow, Item
from memory.store.writer import Writer
from proxy.longctx.archive import Archived, Summary, block_of, sized_for
from proxy.longctx.chunks import Chunk, chunk_id, digest_of, make_chunk, spans
from proxy.longctx.kept import archive_body, chunk_row
from proxy.longctx.llm_s1 import prepare_llm_s1
from proxy.longctx.options import ArchiveOptions, S0Options
from proxy.longctx.request import RequestMemory
from proxy.longctx.restart import BLOCK_SEPARATOR, head_size
from proxy.longctx.turns import turns_of
from redaction.redact import redact
from summaries.extractive import Extractor, is_chinese
from summaries.llm import LLMSummarizer
from summaries.render import compact, since

log = structlog.get_logger(__name__)

CHUNKS_MAX = 512
"""Chunks kept in memory per session (the oldest dropped; the next archive makes them again)."""
SESSIONS_MAX = 2000
"""Sessions whose prepared chunks are kept in memory (least recently used dropped; an archive then digests afresh)."""
SUMMARIES_MAX = 4
"""Summaries (S1 and its chunks) kept per session for the ends planned last."""


@dataclass
class SessionMemory:
    """What is prepared for one session: S2 chunks from its head on, in order, and an LLM's S1 when one was made."""

    chunks: dict[str, Chunk] = field(default_factory=dict)
    """Chunks made for the session, by id (an id names a span and the whole conversation up to its end)."""
    s1: tuple[int, str, str] | None = None
    """(last position covered, chain link there, text) of an LLM-made active summary."""
    preparing: bool = False
    summarizer: str | None = None
    """How the last LLM summary went (ok, timeout, error, unusable, breaker_open)."""
    summaries: LRU[tuple[Any, ...], Summary] = field(default_factory=lambda: LRU(SUMMARIES_MAX))
    """Summaries made for planned ends (ahead of need or on the path), by what they cover."""
    unwritten: set[str] = field(default_factory=set)
    """Chunks made for a summary (the last, partial one) and not yet written: an archive that uses them writes them."""


class LongCtx:
    """Chunks and summaries per session, made on demand (an archive) or ahead of need (``prepare``).

    ``summarize`` runs on the request path only for what was not prepared; ``prepare`` is meant to run in a
    worker thread (the proxy) or between two requests (a replay). One lock guards the per-session state."""

    def __init__(
        self,
        options: ArchiveOptions,
        tools: Mapping[str, ToolSpec] = DEFAULT_TOOLS,
        s0: S0Options | None = None,
        recall: Any = None,
        summarizer: LLMSummarizer | None = None,
    ) -> None:
        self.options = options
        self.summarizer = summarizer
        """An LLM writing S1 ahead of need (None: extractive only)."""
        self.s0 = s0 or S0Options()
        self.recall = recall
        """Where turns, chunks and archives are kept and searched (None: nowhere, as in a replay)."""
        self.writer: Writer | None = None
        self.extractor = Extractor(tools)
        self._sessions: LRU[tuple[str, str], SessionMemory] = LRU(SESSIONS_MAX)
        self._lock = threading.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def start(self, queue_max: int = 10_000, retention_days: float = 14.0, sweep_hours: float = 24.0) -> None:
        """Start writing turns, chunks and archives in the background, and removing raw turns older than
        ``retention_days`` every ``sweep_hours`` (in the running event loop)."""
        if self.recall is not None:
            self.writer = Writer(self.recall, queue_max)  # it writes Recall's items
            self.writer.start()
            task = asyncio.get_running_loop().create_task(self._expire_forever(retention_days * 86400, sweep_hours * 3600))
            self._sweeper = task

    async def _expire_forever(self, retention_s: float, interval_s: float) -> None:
        while True:
            try:
                removed = await asyncio.to_thread(self.recall.expire_turns, time.time() - retention_s)
                if removed:
                    log.info("raw_turns_expired", removed=removed)
            except Exception:  # retried at the next interval
                log.warning("raw_turns_expire_failed", exc_info=True)
            await asyncio.sleep(interval_s)

    def _put(self, items: Sequence[Item]) -> None:
        if self.writer is not None:
            for item in items:
                self.writer.put(item)  # type: ignore[arg-type]

    def forget_idle(self, now: float, idle_s: float, limit: int) -> int:
        """Forget up to ``limit`` sessions' prepared chunks and summaries not used for ``idle_s`` (as past
        ``SESSIONS_MAX``: an archive then digests afresh); returns how many went."""
        with self._lock:
            return self._sessions.forget_idle(now, idle_s, limit)

    def memory(self, agent_id: str, session_id: str) -> SessionMemory:
        key = (agent_id, session_id)
        with self._lock:
            found: SessionMemory | None = self._sessions.get(key)
            if found is None:
                found = self._sessions[key] = SessionMemory()
            return found

    def chunks_for(
        self,
        agent_id: str,
        session_id: str,
        client: Sequence[Mapping[str, Any]],
        links: Sequence[str],
        tokens: Sequence[int],
        first: int,
        last: int,
        count: Callable[[str], int] | None,
        base: Sequence[Sequence[int]] = (),
        complete_only: bool = False,
    ) -> tuple[list[Chunk], list[Chunk]]:
        """The chunks covering first..last (all, and those made now), reusing what was prepared."""
        return self._chunks(self.memory(agent_id, session_id), client, links, tokens, first, last, count, base, complete_only)

    def _chunks(
        self,
        mem: SessionMemory,
        client: Sequence[Mapping[str, Any]],
        links: Sequence[str],
        tokens: Sequence[int],
        first: int,
        last: int,
        count: Callable[[str], int] | None,
        base: Sequence[Sequence[int]] = (),
        complete_only: bool = False,
    ) -> tuple[list[Chunk], list[Chunk]]:
        out, new = [], []
        for a, b in spans(client, tokens, first, last, self.options.chunk_source_tokens, base, complete_only):
            with self._lock:
                found = mem.chunks.get(chunk_id(a, links[b]))
            if found is None:
                found = make_chunk(self.extractor, client, links, a, b, self.options.chunk_tokens, count)
                new.append(found)
                with self._lock:
                    mem.chunks[found.chunk_id] = found
                    while len(mem.chunks) > CHUNKS_MAX:
                        mem.unwritten.discard(mem.chunks.pop(next(iter(mem.chunks))).chunk_id)
            out.append(found)
        return out, new

    def summarize(
        self,
        agent_id: str,
        session_id: str,
        client: Sequence[Mapping[str, Any]],
        links: Sequence[str],
        tokens: Sequence[int],
        first: int,
        last: int,
        count: Callable[[str], int] | None,
        base: Sequence[Sequence[int]] = (),
        summary_tokens: int | None = None,
    ) -> Summary:
        """S1 for the messages first..last and their chunks: an LLM's when one is ready for exactly them, else
        extractive; made once per end (ahead of need, or here), the same bytes either way. ``new``: the chunks
        among them not written yet."""
        mem = self.memory(agent_id, session_id)
        s1 = mem.s1
        held = s1 is not None and s1[0] <= last and links[s1[0]] == s1[1]
        size = summary_tokens or self.options.summary_tokens
        key = (first, last, links[last], tuple(tuple(b) for b in base), (s1[0], s1[1], hash(s1[2])) if held and s1 else None, size)
        with self._lock:
            found = mem.summaries.peek(key)
        if found is None:
            found = self._summarize(mem, client, links, tokens, first, last, count, base, s1 if held else None, size)
            with self._lock:
                mem.unwritten.update(c.chunk_id for c in found.new)
                mem.summaries[key] = found
        with self._lock:
            return replace(found, new=tuple(c for c in found.chunks if c.chunk_id in mem.unwritten))

    def _summarize(
        self,
        mem: SessionMemory,
        client: Sequence[Mapping[str, Any]],
        links: Sequence[str],
        tokens: Sequence[int],
        first: int,
        last: int,
        count: Callable[[str], int] | None,
        base: Sequence[Sequence[int]],
        s1: tuple[int, str, str] | None,
        size: int,
    ) -> Summary:
        chunks, new = self._chunks(mem, client, links, tokens, first, last, count, base)
        digest = digest_of(chunks)
        task = task_text(client, first) if first > 0 else None
        chinese = is_chinese(digest, task)
        if s1 is not None:  # an LLM's S1, and what happened since, extractive
            later = self.extractor.digest(client[s1[0] + 1 : last + 1], s1[0] + 1)
            return Summary(s1[2] + ("" if later.empty else "\n\n" + redact(since(later, chinese))), tuple(chunks), tuple(new), chinese, "llm")
        evidence = self.extractor.evidence(client[first : last + 1], first)  # what the agent worked with, up to last
        text = redact(compact(digest, task, size, None, evidence))  # about 4 characters a token: the same on any replica
        return Summary(text, tuple(chunks), tuple(new), chinese, "extractive" if self.summarizer is None else "extractive_fallback")

    def is_prepared(self, agent_id: str, session_id: str, links: Sequence[str], first: int, last: int, base: Sequence[Sequence[int]] = ()) -> bool:
        """Whether the summary of first..last is made (its S1, chunks and block counted)."""
        mem = self.memory(agent_id, session_id)
        prefix = (first, last, links[last], tuple(tuple(b) for b in base))
        with self._lock:
            return any(k[:4] == prefix for k in mem.summaries)

    def prepare(
        self,
        agent_id: str,
        session_id: str,
        client: Sequence[Mapping[str, Any]],
        links: Sequence[str],
        tokens: Sequence[int],
        first: int,
        last: int,
        count: Callable[[str], int] | None,
        base: Sequence[Sequence[int]] = (),
        number: int | None = None,
        usable: float | None = None,
    ) -> list[Chunk]:
        """Make ahead of need what an archive of first..last uses: the complete chunks up to ``last`` (returned when
        made now, to be written), the last partial one, S1, and (for archive ``number``) the block's token count."""
        made = self.chunks_for(agent_id, session_id, client, links, tokens, first, last, count, base, complete_only=True)[1]
        options = sized_for(self.options, usable) if usable is not None else self.options
        summary = self.summarize(agent_id, session_id, client, links, tokens, first, last, count, base, options.summary_tokens)
        self.extractor.digest(client[last + 1 :], last + 1)  # the calls after it classified: a later end finds them known
        if count is not None and number is not None:  # the counter remembers it: the archiving request finds it counted
            count(block_of(options, client, number, first, last, summary, usable=usable))
            count(BLOCK_SEPARATOR)
        return made

    def after_rewrite(self, mem: RequestMemory, m: Any, sent: bool = True) -> None:
        """After a request is rewritten (on the event loop): keep what an archive made (if it went out), start
        what it left to do."""
        if m is None:
            return
        s = m.session
        if mem.archived is not None and sent:
            done = mem.archived
            self._put([chunk_row(s.agent_id, s.session_id, c) for c in done.summary.new])
            state = self.memory(s.agent_id, s.session_id)
            with self._lock:
                state.unwritten.difference_update(c.chunk_id for c in done.summary.new)
            task = asyncio.get_running_loop().create_task(self._keep_archive(s.agent_id, s.session_id, done, mem.messages))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if mem.prepare_until is None:
            return
        state = self.memory(s.agent_id, s.session_id)
        if state.preparing:
            return
        state.preparing = True
        task = asyncio.get_running_loop().create_task(self._prepare(state, mem, m))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _keep_archive(self, agent_id: str, session_id: str, done: Archived, client: Sequence[Mapping[str, Any]]) -> None:
        """Write an archive with its forms, made in a worker thread (its normal form is a summary of its own)."""
        try:
            body = await asyncio.to_thread(archive_body, done, client)
            self._put([ArchiveRow(agent_id, session_id, done.record["id"], done.record["number"], body)])
        except Exception:  # a failed preparation is made at the archive instead
            log.warning("archive_keep_failed", exc_info=True)

    async def _prepare(self, state: SessionMemory, mem: RequestMemory, m: Any) -> None:
        try:
            made = await asyncio.to_thread(self.prepare_for, mem, m)
            self._put([chunk_row(m.session.agent_id, m.session.session_id, c) for c in made])
            if self.summarizer is not None:
                await self.prepare_s1(state, mem, m)
                await asyncio.to_thread(self.prepare_for, mem, m)  # the summary with the LLM's S1, its block counted
        except Exception:  # a failed preparation is made at the archive instead
            log.warning("summary_prepare_failed", exc_info=True)
        finally:
            state.preparing = False

    async def prepare_s1(self, state: SessionMemory, mem: RequestMemory, m: Any) -> None:
        """With an LLM summarizer: S1 of everything the next archive would replace (longctx/llm_s1.py)."""
        if self.summarizer is not None:
            await prepare_llm_s1(self.summarizer, self.extractor, self.options.summary_tokens, state, mem, m)

    def after_answer(self, mem: RequestMemory, m: Any, answer: Mapping[str, Any] | None) -> None:
        """After the answer (on the event loop): queue the raw turns (S0) this request added."""
        if not self.s0.enabled or self.writer is None or m is None:
            return
        self._put(turns_of(m.session.agent_id, m.session.session_id, mem.messages, m.shared, answer))

    def prepare_for(self, mem: RequestMemory, m: Any, first: int | None = None) -> list[Chunk]:
        """Prepare what ``mem`` planned: the chunks of the messages the next archive would replace."""
        if mem.prepare_until is None:
            return []
        s = m.session
        first = first if first is not None else mem.restart.archive["head"] if mem.restart is not None else head_size(mem.messages)
        base = mem.restart.archive.get("spans", ()) if mem.restart is not None else ()
        return self.prepare(
            s.agent_id,
            s.session_id,
            mem.messages,
            m.links,
            m.message_tokens,
            first,
            mem.prepare_until,
            m.count_text,
            base,
            mem.prepare_number,
            m.budget.usable,
        )

    async def drain(self) -> None:
        """Wait for the background work started so far."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def drain_writes(self) -> None:
        """Wait until the turns, chunks and archives queued so far are written (before reading them back)."""
        await self.drain()
        if self.writer is not None:
            await self.writer.drain()

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        await self.drain()
        if self.writer is not None:
            await self.writer.close()
        if self.recall is not None:
            self.recall.close()

    def forget(self, agent_id: str, session_id: str | None) -> None:
        """Drop what is prepared for a session (every session of the agent when None)."""
        with self._lock:
            for key in [k for k in self._sessions if k[0] == agent_id and session_id in (None, k[1])]:
                del self._sessions[key]
