"""The per-request block (metadata, retrieved cards, the memory delta): one marked block on the newest user or tool message."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory.anchors.anchor import Anchor
from proxy.layout.sections import cut

OPEN = "<ruyi-context>"
NOTE = "(added by the proxy for this request only)"
CLOSE = "</ruyi-context>"
TITLES = {"metadata": "Metadata", "cards": "Knowledge cards", "delta": "Memory changed since the memory section above was written"}
"""Short on purpose: the block is sent anew with every request, never cached, so each of its tokens is paid each time."""


@dataclass(frozen=True)
class Metadata:
    """Section 7: what the agent is running in, this request."""

    now: datetime.datetime
    workspace_root: str | None
    agent_id: str
    parent_id: str | None
    model: str | None
    usage: float
    window: int
    tier: str

    def text(self) -> str:
        lines = [f"- time: {self.now.isoformat(timespec='seconds')}"]
        if self.workspace_root:
            lines.append(f"- workspace root: {self.workspace_root}")
        lines.append(f"- agent: {self.agent_id}" + (f" (parent: {self.parent_id})" if self.parent_id else ""))
        if self.model:
            lines.append(f"- model: {self.model}")
        lines.append(f"- context: {self.usage:.0%} of {self.window:,} tokens used (tier {self.tier})")
        return "\n".join(lines)


def now_with_zone() -> datetime.datetime:
    """The local time with its zone (ISO 8601 with an offset when printed)."""
    return datetime.datetime.now(datetime.UTC).astimezone()


def delta(built_notebook: Sequence[str], notebook: Sequence[str], built_anchors: Sequence[str], anchors: Sequence[Anchor], limit: int) -> str:
    """What changed in memory since the stable part was built: notebook lines added and removed, anchors newly in
    force (their first line) and no longer in force; within ``limit`` characters."""
    before, now = set(built_notebook), set(notebook)
    lines = [f"+ notebook: {line.lstrip('- ')}" for line in notebook if line not in before and line.startswith("- ")]
    lines += [f"- notebook (removed): {line.lstrip('- ')}" for line in built_notebook if line not in now and line.startswith("- ")]
    active = {a.anchor_id: a for a in anchors if a.status == "active"}
    known = set(built_anchors)
    lines += [f"+ anchor [{a.anchor_id}] {a.title}" for i, a in active.items() if i not in known]
    lines += [f"- anchor [{i}] is no longer in force" for i in built_anchors if i not in active]
    if not lines:
        return ""
    return cut("\n".join(lines), limit, "[…more changes: GET /ruyi/v1/notebook and /ruyi/v1/anchors]")[0]


def trailing_block(sections: Mapping[str, str]) -> str:
    """The one marked block (empty sections left out; empty when all are)."""
    shown = [(name, text) for name, text in sections.items() if text and text.strip()]
    if not shown:
        return ""
    parts = [OPEN, NOTE]
    for name, text in shown:
        parts += [f"## {TITLES.get(name, name)}", text.strip()]
    parts.append(CLOSE)
    return "\n".join(parts)


def newest_input(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """The index of the message the block goes to: the newest, when it is a user or tool message (None otherwise:
    the block is then left out, never made a message of its own)."""
    if messages and messages[-1].get("role") in ("user", "tool"):
        return len(messages) - 1
    return None
