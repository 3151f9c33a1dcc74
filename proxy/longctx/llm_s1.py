"""S1 written by an LLM ahead of need: everything the next archive would replace, the previous S1 folded in."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from conversation.task import task_text
from proxy.longctx.request import RequestMemory
from proxy.longctx.restart import head_size
from redaction.redact import redact
from summaries.extractive import Extractor, is_chinese
from summaries.llm import LLMSummarizer
from summaries.render import compact

if TYPE_CHECKING:
    from proxy.longctx.service import SessionMemory

TRACE_TOKENS = 12_000
"""The most of the conversation an LLM summarizer is sent as quoted data at once (older parts go as their digest)."""


async def prepare_llm_s1(
    summarizer: LLMSummarizer, extractor: Extractor, summary_tokens: int, state: SessionMemory, mem: RequestMemory, m: Any
) -> None:
    """S1 of everything the next archive would replace into ``state``, the previous S1 folded in (the messages since
    it as quoted data, at most TRACE_TOKENS of the newest; the rest as its extractive form)."""
    if mem.target is None or mem.prepare_until is None:
        return
    s, last, links, tokens = m.session, mem.prepare_until, m.links, m.message_tokens
    first = mem.restart.archive["head"] if mem.restart is not None else head_size(mem.messages)
    held = state.s1 if state.s1 is not None and state.s1[0] <= last and links[state.s1[0]] == state.s1[1] else None
    start = held[0] + 1 if held is not None else first
    if held is not None and sum(tokens[start : last + 1]) < summarizer.options.every_tokens:
        return  # too little new since the kept summary to pay for a call: an archive adds it in extractive form
    previous = held[2] if held is not None else None
    newest = last + 1
    while newest > start and sum(tokens[newest - 1 : last + 1]) < TRACE_TOKENS:
        newest -= 1
    task = task_text(mem.messages, first) if first > 0 else None
    older = await asyncio.to_thread(extractor.digest, mem.messages[start:newest], start) if newest > start else None
    if older is not None and not older.empty:
        previous = "\n\n".join(p for p in (previous, compact(older, task, summary_tokens, m.count_text)) if p)
    chinese = is_chinese(older or extractor.digest(mem.messages[newest : newest + 1]), task)
    text, why = await summarizer.summarize(
        (s.agent_id, s.session_id), mem.target, mem.messages[newest : last + 1], newest, previous, summary_tokens, chinese, m.count_text or _quarter
    )
    if text is not None:
        state.s1 = (last, links[last], redact(text))
    state.summarizer = why


def _quarter(text: str) -> int:
    return len(text) // 4
