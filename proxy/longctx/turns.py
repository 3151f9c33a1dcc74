"""S0, the raw turns: each request's new messages and its answer, redacted, keyed by (agent, session, turn, content hash)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory.chain import message_digest
from memory.store.base import Turn
from redaction.redact import redact
from summaries.extractive import text_of

STORED_CHARS = 256 * 1024
"""The most characters of one string of a message the raw turns keep (its head and tail; what is between is named,
never silently dropped): one 32 MiB tool output must not become 64 MB of store (the raw turn and its search copy)."""
HEAD_SHARE = 0.75
MARGIN = 16 * 1024
"""Characters redacted past each cut of an over-long string (a secret that straddles the cut is still seen whole)."""


def capped(value: Any, limit: int = STORED_CHARS) -> Any:
    """A JSON-like value with each string over ``limit`` characters cut to its head and tail and a note of the rest."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        head, tail = int(limit * HEAD_SHARE), limit - int(limit * HEAD_SHARE)
        return f"{value[:head]}\n[… {len(value) - head - tail:,} characters not kept by Ruyi's store …]\n{value[-tail:]}"
    if isinstance(value, dict):
        return {k: capped(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [capped(v, limit) for v in value]
    return value


def kept(value: Any, limit: int = STORED_CHARS) -> Any:
    """``capped(redact_value(value))`` without redacting (or copying) what the cap cuts anyway: a string over the cap
    is cut first, each piece with ``MARGIN`` characters past its cut, redacted, then cut to size. A 32 MiB tool output
    costs its head and tail, not a lowered copy of the whole (RELIABILITY.md, row 5). Strings up to ``limit + 2 *
    MARGIN`` are redacted whole, exactly as before; past that the stored text differs only where a secret the cut
    removes anyway would have shifted it. Where redaction shrank a piece by more than half its margin (a long key
    block near the cut), a key cut in two at the piece's end could come within the kept part: redacted whole then."""
    if isinstance(value, str):
        if len(value) <= limit + 2 * MARGIN:
            return capped(redact(value), limit)
        head_n = int(limit * HEAD_SHARE)
        tail_n = limit - head_n
        head, tail = redact(value[: head_n + MARGIN]), redact(value[-(tail_n + MARGIN) :])
        if len(head) - head_n < MARGIN // 2 or len(tail) - tail_n < MARGIN // 2:
            return capped(redact(value), limit)
        return f"{head[:head_n]}\n[… {len(value) - head_n - tail_n:,} characters not kept by Ruyi's store …]\n{tail[-tail_n:]}"
    if isinstance(value, Mapping):
        return {k: kept(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [kept(v, limit) for v in value]
    return value


def turns_of(agent_id: str, session_id: str, messages: Sequence[Mapping[str, Any]], start: int, answer: Mapping[str, Any] | None) -> list[Turn]:
    """The turns to keep for a request: its messages from ``start`` on (those the session had not seen), then the
    answer at the position after them. The hash is the message's canonical digest, so a resent or replayed message
    is the same row, and the answer matches the message the client sends back for it."""
    out = []
    numbered = [(i, messages[i]) for i in range(max(0, start), len(messages))]
    if answer is not None:
        numbered.append((len(messages), answer))
    for position, message in numbered:
        if not isinstance(message, Mapping):
            continue
        clean = kept(message)  # redacted, each string capped: what is cut is never redacted or copied whole
        text = text_of(clean)
        out.append(
            Turn(
                agent_id,
                session_id,
                position,
                message_digest(message).hex(),
                str(message.get("role") or ""),
                clean,
                text if len(text) <= STORED_CHARS else str(capped(text)),
            )
        )
    return out
