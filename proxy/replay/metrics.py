"""What a replay measures per request: request boundaries, prefix-cache hits, needles, orphans, bad arguments, archives."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from proxy.longctx.block import archive_number

Message = dict[str, Any]
LAST_TURNS = 4
COMPACTED = re.compile(r'<compacted-history n="(\d+)">')


def request_ends(messages: Sequence[Message]) -> list[int]:
    """End index of each request: before every assistant message, then the whole trace."""
    ends = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and i > 0]
    if messages and messages[-1].get("role") != "assistant":
        ends.append(len(messages))
    return ends


def canonical(message: Message) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def cached_prefix(previous: Sequence[str] | None, current: Sequence[str], counts: Sequence[int], tools: int) -> int:
    """Tokens of ``current`` identical to the start of ``previous`` (canonical strings), tools included. A prompt
    cache matches a prefix, not whole messages: where the previous request's copy of a message is this one with a
    block of Ruyi's appended (recall, the layout's per-request block), the message's own tokens are still cached."""
    if previous is None:
        return 0
    n = tools
    for before, now, tokens in zip(previous, current, counts):
        if before != now:
            n += tokens if appended_to(before, now) else 0
            break
        n += tokens
    return n


def appended_to(before: str, now: str) -> bool:
    """Whether ``before`` (canonical) is ``now`` with a block of Ruyi's after its content, and nothing else changed."""
    if APPENDED.strip() not in before:
        return False
    old, new = json.loads(before), json.loads(now)
    was, content = old.pop("content", None), new.pop("content", None)
    if old != new:
        return False
    if isinstance(was, str) and isinstance(content, str):
        return was.startswith(content + APPENDED) if content else was.startswith(APPENDED.strip())
    if isinstance(was, list) and isinstance(content, list) and len(was) > len(content) and was[: len(content)] == content:
        return all(isinstance(p, dict) and str(p.get("text", "")).startswith(APPENDED.strip()) for p in was[len(content) :])
    return False


APPENDED = "\n\n<ruyi-"
"""What follows a message's own text when Ruyi appended a block to it."""


def needle_indices(messages: Sequence[Message], archived: bool = False) -> list[int]:
    """System and user messages, and everything from the start of the last 4 turns; once a session is archived,
    of the user messages only the task (those before the first answer: a demonstration, then the issue)."""
    starts = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    first = starts[-LAST_TURNS] if len(starts) >= LAST_TURNS else (starts[0] if starts else len(messages))
    answered = starts[0] if starts else len(messages)
    return [
        i for i, m in enumerate(messages) if i >= first or m.get("role") == "system" or (m.get("role") == "user" and (not archived or i < answered))
    ]


def _text(message: Message) -> str | None:
    content = message.get("content")
    return content if isinstance(content, str) and content else None


def needles_kept(
    original: Sequence[Message], canon: Sequence[str], rewritten: Sequence[Message], rewritten_canon: Sequence[str], archived: bool = False
) -> tuple[int, int]:
    """(needles, needles kept verbatim) of ``original`` in ``rewritten``; canon = their canonical JSON."""
    available = Counter(rewritten_canon)
    indices = needle_indices(original, archived)
    kept = 0
    for i in indices:
        if available[canon[i]] > 0:
            available[canon[i]] -= 1
            kept += 1
            continue
        text, role = _text(original[i]), original[i].get("role")
        if role == "system" and text:
            kept += any(m.get("role") == "system" and text in (_text(m) or "") for m in rewritten)
        elif text:  # verbatim, with a block of Ruyi's appended for this request (recall, the layout's)
            kept += any(m.get("role") == role and (_text(m) or "").startswith(text + APPENDED) for m in rewritten)
    return len(indices), kept


def orphans(messages: Sequence[Message]) -> int:
    """Tool results without their call in the nearest preceding assistant message, plus calls without a result."""
    found, calls, pending = 0, set[str](), set[str]()
    for m in messages:
        if m.get("role") == "assistant":
            found += len(pending)
            calls = {str(c.get("id")) for c in m.get("tool_calls") or ()}
            pending = set(calls)
        elif m.get("role") == "tool":
            found += str(m.get("tool_call_id")) not in calls
            pending.discard(str(m.get("tool_call_id")))
    return found + len(pending)


def invalid_arguments(messages: Sequence[Message]) -> int:
    """Tool calls whose arguments are not a valid JSON string."""
    bad = 0
    for m in messages:
        for call in m.get("tool_calls") or ():
            args = (call.get("function") or {}).get("arguments")
            try:
                json.loads(args)
            except (TypeError, ValueError):
                bad += 1
    return bad


def archive_in(messages: Sequence[Message]) -> int:
    """The number of the archive a rewritten request carries in its system messages (0: none), or of the
    compaction a baseline marked with ``<compacted-history n="N">``."""
    for m in messages:
        content = m.get("content")
        texts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or () if isinstance(p, dict)]
        for text in texts:
            if not isinstance(text, str):
                continue
            found = archive_number(text) if m.get("role") in ("system", "developer") else 0
            compacted = COMPACTED.match(text)
            if found or compacted:
                return found or int(compacted.group(1))  # type: ignore[union-attr]
    return 0
