"""The archive in force: a request as its session restarted it (head verbatim, the archive block, the newest turns)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conversation.task import head_end

Messages = list[dict[str, Any]]
ARCHIVES = "archives"
"""The key of a session's archives among its decisions (chain links are hex, so it never names a message); a child
session inherits it whole (memory.sessions.INHERITED_WHOLE)."""
REQUESTED = "requested"
"""The key of what a person asked for the session's next request: one decision whose ``action`` is ``archive``,
``prune``, ``pass``, or None once done."""
INSERTED = -1
"""The position of a message an archive adds: its block as a message of its own (after the head, or first when the
conversation has no system message and the block goes in the system part)."""
AFTER_HEAD = -2
"""An archive record's ``system`` when its block is a system message of its own right after the head (``archive.block``
``after_task``): the system text and the task stay byte for byte as sent, so the provider's cache keeps them."""
BLOCK_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Restart:
    """A request with the archive in force applied: what the later steps see instead of the client's list."""

    archive: Mapping[str, Any]
    messages: Messages
    links: tuple[str, ...]
    """Each message's chain link in the client's request (the added system message gets the archive's id)."""
    positions: tuple[int, ...]
    """Each message's position in the client's request (INSERTED for an added system message)."""
    shared: int
    message_tokens: tuple[int, ...]
    raw_tokens: int
    tokens: int
    """The calibrated estimate of the restarted request."""


def head_size(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many leading messages an archive keeps verbatim: the system messages, the agent's preambles (Qwen Code's
    environment and its acknowledgement, Codex's instructions…) and the task, the user messages before the first
    answer (an agent may send a demonstration first and the issue to solve after it): conversation.task."""
    return head_end(messages)


def archives_of(decisions: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A session's archives, oldest first (each a decision on the target ``archive``: a new list replaces them all)."""
    records = decisions.get(ARCHIVES)
    return [a for a in records if isinstance(a, Mapping) and "end" in a] if isinstance(records, list) else []


def requested(action: str | None) -> list[dict[str, Any]]:
    """What a person asks of a session's next request, as the decision kept for it (None: nothing, or done)."""
    return [{"target": REQUESTED, "strategy": REQUESTED, "action": action}]


def in_force(decisions: Mapping[str, Any], links: Sequence[str]) -> Mapping[str, Any] | None:
    """The newest archive whose archived messages this request still carries, unchanged (None if none does)."""
    best = None
    for archive in archives_of(decisions):
        end = archive.get("end")
        if isinstance(end, int) and 0 <= end < len(links) and links[end] == archive.get("end_link"):
            if best is None or end > best["end"]:
                best = archive
    return best


def with_block(message: Mapping[str, Any], block: str) -> dict[str, Any]:
    """A copy of a system message with the archive block after its text (its own text stays, verbatim, first)."""
    out = dict(message)
    content = message.get("content")
    if isinstance(content, list):
        out["content"] = [*copy.deepcopy(content), {"type": "text", "text": block}]
    elif isinstance(content, str) and content:
        out["content"] = content + BLOCK_SEPARATOR + block
    else:
        out["content"] = block
    return out


def restarted_head(messages: Sequence[Mapping[str, Any]], archive: Mapping[str, Any]) -> tuple[Messages, list[int]]:
    """The head of a restarted request (the system messages, the task, and the block: a message of its own after them,
    or after the text of the last system message for a record made so) and each one's position; the system messages
    found among the archived ones (``keep``) follow it, then the newest turns."""
    head = int(archive["head"])
    out: Messages = [m if isinstance(m, dict) else dict(m) for m in messages[:head]]
    positions = list(range(head))
    carrier = int(archive["system"])
    if carrier == AFTER_HEAD:
        out.append({"role": "system", "content": archive["block"]})
        positions.append(INSERTED)
    elif carrier == INSERTED:
        out.insert(0, {"role": "system", "content": archive["block"]})
        positions.insert(0, INSERTED)
    else:
        out[carrier] = with_block(messages[carrier], archive["block"])
    return out, positions


def restart(
    messages: Sequence[Mapping[str, Any]],
    links: Sequence[str],
    shared: int,
    message_tokens: Sequence[int],
    raw_tokens: int,
    tokens: int,
    archive: Mapping[str, Any],
) -> Restart:
    """The request with ``archive`` applied: its head, then what follows the archived messages, untouched."""
    end = int(archive["end"])
    out, positions = restarted_head(messages, archive)
    kept = [p for p in archive.get("keep", ()) if isinstance(p, int) and p < len(messages)]
    out += [m if isinstance(m, dict) else dict(m) for m in (messages[p] for p in kept)]
    out += [m if isinstance(m, dict) else dict(m) for m in messages[end + 1 :]]
    positions += [*kept, *range(end + 1, len(messages))]
    view_links = tuple(str(archive["id"]) if p == INSERTED else links[p] for p in positions)
    added = int(archive["block_tokens"])
    per = tuple(added if p == INSERTED else message_tokens[p] + (added if p == archive["system"] else 0) for p in positions)
    new_raw = max(0, raw_tokens - sum(message_tokens) + sum(per))
    ratio = tokens / raw_tokens if raw_tokens else 1.0
    view_shared = sum(1 for p in positions if p < shared) if shared else 0
    return Restart(archive, out, view_links, tuple(positions), view_shared, per, new_raw, round(new_raw * ratio))
