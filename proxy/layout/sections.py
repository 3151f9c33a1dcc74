"""The stable sections as text (seed 003's order): task, core template, notebook, anchors, rules, the compact form after an archive."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memory.anchors.anchor import Anchor
from memory.anchors.render import compact as anchor_compact

OPEN = "<ruyi-memory>"
CLOSE = "</ruyi-memory>"
CLIENT_SYSTEM = "{client_system}"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-/]{2,}|[\u4e00-\u9fff]{2,}")
STOP = frozenset(
    "the and for with that this from you your are was were have has not but all any can use into onto our out "
    "then than them they what when where which will would should could about after before each more most".split()
)
TITLES = {
    "task": "Task",
    "core": "Core template",
    "notebook": "Notebook (FastMemo: the agent's hot memory)",
    "anchors": "Anchors (decisions and constraints in force; cite them as [D001])",
    "rules": "Project rules",
    "snapshot": "From the parent agent",
    "compact": "After the archive",
}
MIN_SCORE = 2
"""An anchor goes in when it shares one word of its title, or two of its fields, with the session."""
REMINDER_EN = (
    "⚠️ Yellow light, not red: the older turns are archived and the context has room again. No need to rush or wrap up early: go on as planned."
)
REMINDER_ZH = "⚠️ 黄灯提醒：Ruyi 已存档较早的对话，上下文还有空间。不必仓促收尾，按计划继续完成任务。"


@dataclass(frozen=True)
class Section:
    """One section of the layout: its name (for the report) and its text (never empty)."""

    name: str
    text: str


def terms(texts: Iterable[str]) -> set[str]:
    """Lower-cased words worth matching on (identifiers, paths, CJK runs), common English words left out."""
    found: set[str] = set()
    for text in texts:
        for whole in _WORD.findall(text or ""):
            for w in {whole, *re.split(r"[./\-]", whole)}:  # a dotted name or path, and its parts
                w = w.lower().strip(".-/")
                if len(w) >= 3 and w not in STOP:
                    found.add(w)
    return found


def relevant_anchors(anchors: Sequence[Anchor], keywords: set[str], limit: int) -> list[Anchor]:
    """Active constraints always (oldest first); then the other active anchors that share words with the session (a
    word of the title counts 2, of its fields 1; at least ``MIN_SCORE``), most shared first (ties: the newest first); at most ``limit`` in all (constraints beyond it still go in)."""
    active = [a for a in anchors if a.status == "active"]
    constraints = [a for a in active if a.type == "C"]
    scored = []
    for a in active:
        if a.type == "C":
            continue
        title = terms([a.title])
        shared = 2 * len(title & keywords) + len((terms(a.fields.values()) - title) & keywords)  # the title weighs more
        if shared >= MIN_SCORE:
            scored.append((-shared, -(a.created_at or 0), a.anchor_id, a))
    scored.sort(key=lambda t: t[:3])
    others = [t[3] for t in scored][: max(0, limit - len(constraints))]
    return constraints + others


def anchors_text(anchors: Sequence[Anchor], limit: int) -> str:
    """The anchors in the seed's compact form, within ``limit`` characters (whole anchors only)."""
    out: list[str] = []
    used = 0
    for a in anchors:
        text = anchor_compact(a)
        if used + len(text) + 1 > limit:
            break
        out.append(text)
        used += len(text) + 1
    return "\n".join(out)


def cut(text: str, limit: int, note: str = "[…cut by Ruyi to the layout budget]") -> tuple[str, bool]:
    """``text`` within ``limit`` characters, cut at a line with a clear note; and whether it was cut."""
    if len(text) <= limit:
        return text, False
    head = text[: max(0, limit - len(note) - 1)].rsplit("\n", 1)[0]
    return f"{head}\n{note}", True


def reminder(chinese: bool, tool: str | None = None) -> str:
    """Seed 000's yellow light: the context still has room (the same words every time: it sits in the cached part);
    with Ruyi's recall tool offered, where the archived details are."""
    if tool is None:
        return REMINDER_ZH if chinese else REMINDER_EN
    if chinese:
        return f"{REMINDER_ZH}需要被存档的细节时，调用 {tool}。"
    return f"{REMINDER_EN} For a detail that was archived, call {tool}."


def core(template: str, client_system: str) -> str:
    """Section 2: the configured template with the client's system prompt verbatim where it says ``{client_system}``."""
    if not template:
        return client_system
    if CLIENT_SYSTEM in template:
        return template.replace(CLIENT_SYSTEM, client_system)
    return f"{template}\n\n{client_system}" if client_system else template


def block(sections: Sequence[Section]) -> str:
    """The stable part as one marked block (empty sections left out; nothing in it names the session)."""
    shown = [s for s in sections if s.text.strip()]
    if not shown:
        return ""
    parts = [OPEN]
    for s in shown:
        parts += [f"## {TITLES.get(s.name, s.name)}", s.text.strip(), ""]
    parts[-1] = CLOSE
    return "\n".join(parts)


def full_system(task: str, core_text: str, rest: Sequence[Section]) -> str:
    """``full``: the system part in the seed's order: 1 task, 2 core template, then the stable sections (3 notebook,
    anchors, 4 rules, the compact form after an archive)."""
    parts = []
    if task.strip():
        parts.append(f"## 1. {TITLES['task']}\n{task.strip()}")
    if core_text.strip():
        parts.append(f"## 2. {TITLES['core']}\n{core_text.strip()}")
    rendered = block(rest)
    if rendered:
        parts.append(rendered)
    return "\n\n".join(parts)
