"""Anchors rendered three ways: the seed's full ADR, its compact form (three or four lines), and the ``anchors.md`` export."""

from __future__ import annotations

import time
from collections.abc import Sequence

from memory.anchors.anchor import FIELD_TITLES, REQUIRED, TYPES, Anchor, split_id

STATUS = {"active": "✅ active", "pending": "⚠️ pending", "obsolete": "❌ obsolete"}
COMPACT_CHARS = 160


def full(anchor: Anchor) -> str:
    """The seed's full ADR: heading, id, date, status, then each field as a section (missing ones say so)."""
    date = time.strftime("%Y-%m-%d", time.gmtime(anchor.created_at or 0))
    lines = [
        f"## [{anchor.anchor_id}] {anchor.title}",
        "",
        f"**ID**: {anchor.anchor_id}",
        f"**Type**: {TYPES[anchor.type]}",
        f"**Date**: {date}",
        f"**Status**: {STATUS[anchor.status]}",
        "",
    ]
    for name in REQUIRED:
        lines += [f"### {FIELD_TITLES[name]}", anchor.fields.get(name) or "_(missing)_", ""]
    for name, value in anchor.fields.items():
        if name not in REQUIRED:
            lines += [f"### {name.title()}", value, ""]
    return "\n".join(lines).rstrip() + "\n"


def compact(anchor: Anchor) -> str:
    """The seed's compact form: the id and title, then Why, Impact and Rollback on a line each (those it has)."""
    lines = [f"[{anchor.anchor_id}] {anchor.title}" + ("" if anchor.status == "active" else f" ({anchor.status})")]
    for name in ("why", "impact", "rollback"):
        value = " ".join((anchor.fields.get(name) or "").split())
        if value:
            lines.append(f"- {FIELD_TITLES[name]}: {_cut(value, COMPACT_CHARS)}")
    return "\n".join(lines)


def export(anchors: Sequence[Anchor], agent_id: str) -> str:
    """``anchors.md``: an index line per anchor, then each in full; active first, then pending, then obsolete."""
    ordered = sorted(anchors, key=order)
    lines = [f"# Anchors of {agent_id}", ""]
    if not ordered:
        return "\n".join(lines + ["_(none yet)_", ""])
    lines += [f"- [{a.anchor_id}] {a.title} — {STATUS[a.status]}" for a in ordered]
    lines.append("")
    return "\n".join(lines) + "\n" + "\n".join(full(a) for a in ordered)


def order(anchor: Anchor) -> tuple[int, int, int]:
    kind, number = split_id(anchor.anchor_id)
    return (("active", "pending", "obsolete").index(anchor.status), list(TYPES).index(kind), number)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
