"""A session's three forms (seed 000), built deterministically from its state, in the conversation's language."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory.anchors.anchor import Anchor
from memory.anchors.render import compact as anchor_compact
from memory.anchors.render import full as anchor_full
from memory.forms.children import aggregate
from memory.forms.facts import is_chinese, one_line
from memory.notebook.render import injected

FORMS = ("compact", "normal", "expanded")
COMPACT_CHARS = 500
NORMAL_CHARS = 2000
EN = {
    "compact": "## 🔸 Compact context",
    "normal": "## 🔹 Normal context",
    "expanded": "## 🔶 Expanded context",
    "task": "Task",
    "decided": "Decided",
    "constraints": "Constraints",
    "progress": "Progress",
    "done": "done",
    "doing": "doing",
    "next": "next",
    "anchors": "Anchor references",
    "background": "Task background",
    "completed": "Completed work",
    "decisions": "Key decisions",
    "focus": "Current focus",
    "interfaces": "Interfaces",
    "caveats": "Caveats",
    "index": "Anchor index",
    "history": "Session history",
    "all_decisions": "All decisions",
    "changes": "Code changes",
    "problems": "Problems and solutions",
    "preferences": "User preferences",
    "all_anchors": "All anchors",
    "notebook": "Notebook",
    "children": "Sub-agents' results",
    "none": "—",
    "files_changed": "files changed",
    "requests": "requests",
    "errors": "last errors",
}
ZH = {
    "compact": "## 🔸 缩形态上下文",
    "normal": "## 🔹 常形态上下文",
    "expanded": "## 🔶 巨形态上下文",
    "task": "任务",
    "decided": "已决策",
    "constraints": "约束",
    "progress": "当前进度",
    "done": "已完成",
    "doing": "进行中",
    "next": "待处理",
    "anchors": "锚点引用",
    "background": "任务背景",
    "completed": "已完成工作",
    "decisions": "关键决策",
    "focus": "当前焦点",
    "interfaces": "接口约定",
    "caveats": "注意事项",
    "index": "锚点索引",
    "history": "完整会话历史",
    "all_decisions": "所有决策及讨论",
    "changes": "完整代码变更",
    "problems": "问题与解决",
    "preferences": "用户偏好记录",
    "all_anchors": "完整锚点列表",
    "notebook": "笔记本",
    "children": "分身结果",
    "none": "—",
    "files_changed": "已修改文件",
    "requests": "请求数",
    "errors": "最近错误",
}


@dataclass(frozen=True)
class SessionState:
    """Everything a form is built from (plain data, read from the store)."""

    session_id: str
    facts: Mapping[str, Any] = field(default_factory=dict)
    anchors: Sequence[Anchor] = ()
    notebook: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    session: Mapping[str, Any] = field(default_factory=dict)
    reports: Mapping[str, Any] = field(default_factory=dict)
    children: Sequence[Mapping[str, Any]] = ()
    summary: str | None = None
    """The active summary (S1) of an archived session, when there is one."""

    def words(self) -> dict[str, str]:
        return ZH if is_chinese(self.facts.get("task")) else EN

    def of(self, *kinds: str, status: str = "active") -> list[Anchor]:
        return [a for a in self.anchors if a.type in kinds and a.status == status]


def build(state: SessionState, form: str) -> str:
    return {"compact": compact, "normal": normal, "expanded": expanded}[form](state)


def compact(s: SessionState) -> str:
    """Under 500 characters: task, decisions, constraints, progress, anchor references (lists shortened to fit)."""
    w, facts = s.words(), s.facts
    changed = [p for p, a in facts.get("files", []) if a == "changed"]
    for keep, task_chars in ((4, 160), (3, 120), (2, 90), (1, 60), (0, 40)):
        lines = [w["compact"], "", f"【{w['task']}】{one_line(facts.get('task') or w['none'], task_chars)}", "", f"【{w['decided']}】"]
        lines += [f"- [{a.anchor_id}] {one_line(a.title, 60)}" for a in s.of("D")[:keep]] or [f"- {w['none']}"]
        lines += ["", f"【{w['constraints']}】"]
        lines += [f"- [{a.anchor_id}] {one_line(a.title, 60)}" for a in s.of("C")[:keep]] or [f"- {w['none']}"]
        lines += ["", f"【{w['progress']}】"]
        if changed and keep:
            lines.append(f"- {w['done']}: " + one_line(", ".join(changed[-keep:]), 80))
        if facts.get("last_words"):
            lines.append(f"- {w['doing']}: " + one_line(facts["last_words"], 40 + 20 * keep))
        elif facts.get("commands"):  # an agent that only calls tools, never says a word: its newest command
            lines.append(f"- {w['doing']}: `" + one_line(facts["commands"][-1], 30 + 20 * keep) + "`")
        ids = [a.anchor_id for a in s.anchors if a.status == "active"]
        lines += ["", f"【{w['anchors']}】", "- " + (", ".join(f"[{i}]" for i in ids[: 2 + 2 * keep]) or w["none"])]
        text = "\n".join(lines)
        if len(text) < COMPACT_CHARS:
            return text
    return text[: COMPACT_CHARS - 1] + "…"


def normal(s: SessionState) -> str:
    """500 to 2,000 characters: background, completed work, key decisions, current focus, interfaces, caveats, anchor index."""
    w, facts = s.words(), s.facts
    for keep in (8, 5, 3, 2, 1):
        lines = [w["normal"], "", f"### {w['background']}", one_line(facts.get("task") or w["none"], 400)]
        user = [e["text"] for e in s.notebook.get("user", [])][-keep:]
        lines += [f"- {t}" for t in user]
        lines += ["", f"### {w['completed']}", f"- {w['requests']}: {facts.get('requests', s.session.get('requests', 0))}"]
        changed = [p for p, a in facts.get("files", []) if a == "changed"]
        if changed:
            lines.append(f"- {w['files_changed']}: " + ", ".join(changed[-keep * 2 :]))
        lines += [f"- `{c}`" for c in facts.get("commands", [])[-keep:]]
        lines += ["", f"### {w['decisions']}", "| ID | Decision | Why |", "|----|----------|-----|"]
        lines += [f"| {a.anchor_id} | {one_line(a.title, 80)} | {one_line(a.fields.get('why', ''), 80)} |" for a in s.of("D")[-keep:]]
        lines += ["", f"### {w['focus']}", one_line(facts.get("last_words") or w["none"], 300)]
        if s.summary:
            lines.append(one_line(s.summary, 300))
        lines += ["", f"### {w['interfaces']}"] + ([f"- [{a.anchor_id}] {one_line(a.title, 120)}" for a in s.of("I")[-keep:]] or [f"- {w['none']}"])
        caveats = [f"- [{a.anchor_id}] {one_line(a.title, 120)}" for a in (*s.of("C"), *s.of("P"))][-keep:]
        caveats += [f"- {w['errors']}: {one_line(e, 160)}" for e in facts.get("errors", [])[-1:]]
        lines += ["", f"### {w['caveats']}"] + (caveats or [f"- {w['none']}"])
        lines += ["", f"### {w['index']}", ", ".join(f"[{a.anchor_id}]" for a in s.anchors if a.status != "obsolete") or w["none"]]
        text = "\n".join(lines)
        if len(text) <= NORMAL_CHARS:
            return text
    return text[: NORMAL_CHARS - 1] + "…"


def expanded(s: SessionState) -> str:
    """Everything: history, every decision in full, changes, problems, preferences, the notebook, children, every anchor."""
    w, facts = s.words(), s.facts
    lines = [
        w["expanded"],
        "",
        f"### {w['history']}",
        f"- {w['task']}: {facts.get('task') or w['none']}",
        f"- {w['requests']}: {facts.get('requests', s.session.get('requests', 0))}; tier {s.session.get('tier')}; "
        f"tokens {s.session.get('tokens')} / window {s.session.get('window')}",
    ]
    batches = s.reports.get("batches") or {}
    if batches:
        lines.append("- DCP: " + ", ".join(f"{k} {v}" for k, v in batches.items()) + f"; {s.reports.get('tokens_saved', 0)} tokens saved")
    if s.summary:
        lines += ["", s.summary]
    lines += [f"- `{c}`" for c in facts.get("commands", [])]
    if facts.get("last_words"):
        lines.append(f"- {w['doing']}: {facts['last_words']}")
    lines += ["", f"### {w['all_decisions']}"] + ([anchor_compact(a) for a in s.anchors if a.type == "D"] or [w["none"]])
    lines += ["", f"### {w['changes']}"] + ([f"- {p} ({a})" for p, a in facts.get("files", [])] or [f"- {w['none']}"])
    problems = [anchor_compact(a) for a in s.anchors if a.type == "P"] + [f"- {e}" for e in facts.get("errors", [])]
    lines += ["", f"### {w['problems']}"] + (problems or [f"- {w['none']}"])
    prefs = [anchor_compact(a) for a in s.anchors if a.type == "U"] + [f"- {e['text']}" for e in s.notebook.get("user", [])]
    lines += ["", f"### {w['preferences']}"] + (prefs or [f"- {w['none']}"])
    note = injected({k: list(v) for k, v in s.notebook.items()})
    lines += ["", f"### {w['notebook']}", note or w["none"]]
    if s.children:
        lines += ["", f"### {w['children']}", aggregate(s.children, "normal", 1 << 20)["text"]]
    lines += ["", f"### {w['all_anchors']}", ""] + ([anchor_full(a) for a in s.anchors] or [w["none"]])
    return "\n".join(lines).rstrip() + "\n"
