"""S0, the raw turns: each request's new messages and its answer, redacted, keyed by (agent, session, turn, content hash)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory.chain import message_digest
from memory.store.base import Turn
from redaction.redact import redact_value
from summaries.extractive import text_of

STORED_CHARS = 256 * 1024
"""The most characters of one string of a message the raw turns keep (its head and tail; what is between is named,
never silently dropped): one 32 MiB tool output must not become 64 MB of store (the raw turn and its search copy)."""
HEAD_SHARE = 0.75


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


def redacted(message: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a message with every secret in its strings (text, tool-call arguments) redacted: the one
    redaction function Ruyi uses for everything it writes."""
    return redact_value(dict(message))  # type: ignore[no-any-return]


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
        clean = capped(redacted(message))
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
