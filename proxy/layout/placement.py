"""Where the sections go: the stable part at the end of the system part (or, ``full``, the system part rebuilt); the per-request block on the newest input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.longctx.block import OPEN
from proxy.longctx.retrieval import with_recall

Messages = list[dict[str, Any]]


def with_system(messages: Messages, positions: Sequence[int] | None, text: str, replace: str | None = None) -> tuple[Messages, tuple[int, ...]]:
    """The messages with ``text`` after the leading system message's content (a text part of its own when the content
    is a list of parts, so a breakpoint stays where the client put it), or a system message of its own at the head when
    there is none; ``replace``: that message's content instead (``full`` with a plain string system prompt). Returns the
    messages and where each came from (-1: added).

    When an archive's block is a message of its own after the task (``archive.block``: ``after_task``), ``text`` goes
    after the block instead: the stable part is rebuilt at each archive, and the system text and the task before it
    stay byte for byte what the provider cached."""
    where = tuple(positions) if positions is not None else tuple(range(len(messages)))
    at = archive_message(messages, where)
    if replace is None and at is not None:
        out = list(messages)
        out[at] = with_recall(messages[at], text)
        return out, where
    head = messages[0] if messages else None
    if head is not None and head.get("role") == "system":
        if replace is not None and isinstance(head.get("content"), str):
            return [{**head, "content": replace}, *messages[1:]], where
        return [with_recall(head, text), *messages[1:]], where
    return [{"role": "system", "content": replace if replace is not None else text}, *messages], (-1, *where)


def archive_message(messages: Messages, positions: Sequence[int]) -> int | None:
    """The index of the archive block's own message (added after the head: a system message Ruyi made, its text the
    block), None when the request carries none."""
    for k, (message, p) in enumerate(zip(messages, positions, strict=False)):
        content = message.get("content")
        if k > 0 and p < 0 and message.get("role") == "system" and isinstance(content, str) and content.startswith(OPEN):
            return k
    return None


def with_block(messages: Messages, index: int, block: str) -> Messages:
    """The messages with the per-request block after the content of message ``index`` (never a message of its own);
    the same append as a recall block's, so the two travel together."""
    out = list(messages)
    out[index] = with_recall(messages[index], block)
    return out


def system_text(messages: Messages) -> str:
    """The client's system prompt as text (the leading system message; text parts joined)."""
    head = messages[0] if messages else None
    if head is None or head.get("role") != "system":
        return ""
    content = head.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""
