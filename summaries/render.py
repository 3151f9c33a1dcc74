"""A digest as the seed's compact form (task, decisions, constraints, progress, anchors), in the conversation's language, within a token budget."""

from __future__ import annotations

from collections.abc import Callable

from summaries.evidence import Change, Evidence
from summaries.extractive import Digest, is_chinese

TASK_CHARS = 160
SHORT_CHARS = 500
FILL = 0.9
"""Share of the budget the optional lines fill: a counted block stays within the size it had before them."""
"""The compact form of an archive is under this many characters (seed 000)."""
SECTIONS_EN = ("Task", "Decisions", "Constraints", "Progress", "Anchors")
SECTIONS_ZH = ("任务", "已决策", "约束", "当前进度", "锚点引用")


def headings(chinese: bool) -> tuple[str, ...]:
    """The five section titles, in English or Chinese."""
    return SECTIONS_ZH if chinese else SECTIONS_EN


def compact(digest: Digest, task: str | None, budget: int, count: Callable[[str], int] | None = None, evidence: Evidence | None = None) -> str:
    """The active summary of a digest, as much of it as the budget holds: always the task, decisions, constraints,
    every file changed, the last error and the last step; then, while they fit, in this order: what changed in
    each file and where (newest first), the output lines the agent named afterwards, the results it stated, the
    latest commands, files read and the plan. Without ``evidence``: the digest alone, as short as the budget needs."""
    count = count or (lambda text: len(text) // 4)
    chinese = is_chinese(digest, task)
    ev = evidence or Evidence()
    files = ev.by_file()
    optional: list[tuple[str, int]] = [("change", i) for i in reversed(range(len(files)))]
    optional += [("line", i) for i in reversed(range(len(ev.lines)))]
    optional += [("result", i) for i in reversed(range(len(ev.results)))]
    optional += [("command", i) for i in reversed(range(len(digest.commands)))][:8]
    read = [p for p, a in digest.files if p not in digest.edited]
    optional += [("read", i) for i in reversed(range(len(read)))][:10]
    optional += [("plan", i) for i in range(len(digest.plan))][:6]
    chosen: set[tuple[str, int]] = set()
    text = _render(digest, task, chinese, chosen, ev, files, read)
    if count(text) > budget:
        return text
    for item in optional:
        chosen.add(item)
        attempt = _render(digest, task, chinese, chosen, ev, files, read)
        if count(attempt) <= budget * FILL:
            text = attempt
        else:
            chosen.discard(item)
    return text


def short(digest: Digest, task: str | None, evidence: Evidence | None = None, limit: int = SHORT_CHARS) -> str:
    """The seed's compact form (缩形态): task, decisions, constraints, progress and anchors under ``limit`` characters."""
    zh = is_chinese(digest, task)
    ev = evidence or Evidence()
    t = headings(zh)
    decided = [line for anchor, line in digest.anchors if anchor.startswith("[D")] + list(ev.decisions)
    rules = [line for anchor, line in digest.anchors if anchor.startswith("[C")] + list(ev.constraints)
    changed = [p.rsplit("/", 1)[-1] for p in digest.edited]
    done = ("已修改: " if zh else "changed: ") + ", ".join(changed[-6:]) if changed else ""
    now = (("最后一步: " if zh else "last step: ") + digest.last_words) if digest.last_words else ""
    error = (("最后的错误: " if zh else "last error: ") + digest.last_error.splitlines()[-1]) if digest.last_error else ""
    anchors = " ".join(a for a, _ in digest.anchors) or "—"
    for width in (110, 80, 60, 40, 24):
        parts = [
            f"[{t[0]}] {_one_line(task or '—', width)}",
            f"[{t[1]}] " + ("; ".join(_one_line(d, width) for d in decided[-2:]) or "—"),
            f"[{t[2]}] " + ("; ".join(_one_line(r, width) for r in rules[-2:]) or "—"),
            f"[{t[3]}] " + " · ".join(_one_line(x, width) for x in (done, error, now) if x),
            f"[{t[4]}] {_one_line(anchors, width)}",
        ]
        text = "\n".join(parts)
        if len(text) < limit:
            return text
    return text[: limit - 2] + "…"


def _render(
    d: Digest, task: str | None, zh: bool, chosen: set[tuple[str, int]], ev: Evidence, files: dict[str, list[Change]], read: list[str]
) -> str:
    t = headings(zh)
    lines = [f"## {t[0]}", _one_line(task or ("（见上文）" if zh else "(see the first user message)"), TASK_CHARS), ""]
    decided = [f"- {line}" for anchor, line in d.anchors if anchor.startswith("[D")] + [f"- {x}" for x in ev.decisions]
    lines += [f"## {t[1]}", *(decided or ["- —"]), ""]
    constraints = [f"- {line}" for anchor, line in d.anchors if anchor.startswith("[C")] + [f"- {x}" for x in ev.constraints]
    lines += [f"## {t[2]}", *(constraints or ["- —"]), ""]
    lines.append(f"## {t[3]}")
    if not d.empty:
        span = f"{d.first}–{d.last}"
        lines.append(f"- 已归档消息 {span}（{d.turns} 轮）" if zh else f"- archived messages {span} ({d.turns} turns)")
    if d.edited:
        action = dict(d.files)
        lines.append(f"- {'已修改文件（最新在后）' if zh else 'files changed (newest last)'}:")
        detailed = list(files)
        for path in sorted(d.edited, key=lambda p: detailed.index(p) if p in detailed else -1):
            how = action.get(path)
            line = f"  - {path} ({how if how in ('created', 'edited') else 'edited'})"  # read since: still changed
            if path in files and ("change", detailed.index(path)) in chosen:
                line += "".join(_change_line(c) for c in files[path])
            lines.append(line)
    shown_read = [p for i, p in enumerate(read) if ("read", i) in chosen]
    if shown_read:
        lines.append(f"- {'已读文件（未修改）' if zh else 'files read (not changed)'}: {', '.join(shown_read)}")
    kept = [line for i, (_, line) in enumerate(ev.lines) if ("line", i) in chosen]
    if kept:
        lines.append(f"- {'输出中后来用到的行' if zh else 'output lines the agent used later'}:")
        lines += [f"  {line}" for line in kept]
    results = [r for i, r in enumerate(ev.results) if ("result", i) in chosen]
    if results:
        lines.append(f"- {'已得出' if zh else 'found'}: " + " / ".join(results))
    for i, c in enumerate(d.commands):
        if ("command", i) in chosen:
            status = f" → exit {c.exit}" if c.exit is not None else (" → error" if c.error else "")
            lines.append(f"- `{c.label}`{status}")
    if d.last_error:
        where = f" (`{d.last_error_call}`)" if d.last_error_call else ""
        lines += [f"- {'最后的错误' if zh else 'last error'}{where}:", "```", d.last_error, "```"]
    plan = [p for i, p in enumerate(d.plan) if ("plan", i) in chosen]
    if plan:
        lines.append(f"- {'最新计划' if zh else 'latest plan'}:")
        lines += [f"  {line}" for line in plan]
    if d.last_words:
        lines.append(f"- {'最后一步' if zh else 'last step'}: {d.last_words}")
    lines += ["", f"## {t[4]}", " ".join(a for a, _ in d.anchors) or "—"]
    return "\n".join(lines)


def _change_line(c: Change) -> str:
    where = f" at {c.where}" if c.where else ""
    return f"\n    - #{c.position}{where}: {c.what}"


def since(d: Digest, chinese: bool) -> str:
    """What happened after an LLM's summary was made (an extractive section appended to it)."""
    return "\n".join([f"## {'此后' if chinese else 'Since then'}", *progress(d, chinese, 5, 5, 4)])


def progress(d: Digest, zh: bool, reads: int, commands: int, plan: int) -> list[str]:
    """The progress lines: range, files changed (all), files read, commands, the last error, plan, last step."""
    lines: list[str] = []
    if not d.empty:
        span = f"{d.first}–{d.last}"
        lines.append(f"- 已归档消息 {span}（{d.turns} 轮）" if zh else f"- archived messages {span} ({d.turns} turns)")
    if d.edited:
        action = dict(d.files)
        shown = ", ".join(f"{p} ({action.get(p, 'edited')})" for p in d.edited)
        lines.append(f"- {'已修改文件' if zh else 'files changed'}: {shown}")
    read = [p for p, a in d.files if p not in d.edited][-reads:] if reads else []
    if read:
        lines.append(f"- {'已读文件' if zh else 'files read'}: {', '.join(read)}")
    for c in d.commands[-commands:] if commands else ():
        status = f" → exit {c.exit}" if c.exit is not None else (" → error" if c.error else "")
        lines.append(f"- `{c.label}`{status}")
    if d.last_error:
        where = f" (`{d.last_error_call}`)" if d.last_error_call else ""
        lines += [f"- {'最后的错误' if zh else 'last error'}{where}:", "```", d.last_error, "```"]
    if d.plan and plan:
        lines.append(f"- {'最新计划' if zh else 'latest plan'}:")
        lines += [f"  {line}" for line in d.plan[:plan]]
    if d.last_words:
        lines.append(f"- {'最后一步' if zh else 'last step'}: {d.last_words}")
    return lines


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
