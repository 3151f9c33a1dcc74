"""Sub-agents (seed 004): the importance of a child's result and the aggregation of results within a budget, HIGH first."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

LEVELS = ("HIGH", "MEDIUM", "LOW")
BUDGETS = {"normal": 2000, "compact": 500}
MIN_LINE = 40
"""A result is cut to the room left when at least this much is left; else it is left out (and counted)."""
_MARKER = re.compile(r"(?im)(?:^|\[|\b(?:importance|priority|重要性)\s*[:：]\s*)\s*(HIGH|MEDIUM|LOW|高|中|低)\b\]?")
_ZH = {"高": "HIGH", "中": "MEDIUM", "低": "LOW"}
_HIGH = re.compile(
    r"(?i)\b(critical|security|vulnerab\w*|injection|data loss|must|blocker|fail(?:ed|s|ure)?|error|bug|broken)\b|严重|安全|漏洞|失败|错误"
)
_MEDIUM = re.compile(r"[\w./-]+\.\w{1,5}\b|\[(?:CK|DN|[DCIPMU])\d{3,4}\]|\b\d+\b")


def importance(text: str) -> str:
    """The child's own marker (``[HIGH]``, ``Importance: MEDIUM``, ``重要性: 高``), else a rule: problems and risks are
    HIGH, findings that name files, anchors or numbers MEDIUM, the rest LOW."""
    match = _MARKER.search(text[:400])
    if match:
        found = match.group(1)
        return _ZH.get(found, found.upper())
    if _HIGH.search(text):
        return "HIGH"
    return "MEDIUM" if _MEDIUM.search(text) else "LOW"


def aggregate(results: Sequence[Mapping[str, Any]], form: str, budget: int | None = None) -> dict[str, Any]:
    """The children's results as one text, HIGH first then MEDIUM then LOW (oldest first within a level), each cut to
    fit, greedily within the budget (the last one that fits only in part is cut) (``normal``: 2,000 characters, ``compact``: 500); what did not fit is counted."""
    limit = budget or BUDGETS[form]
    ordered = sorted(results, key=lambda r: LEVELS.index(r["importance"]))
    per_item = 400 if form == "normal" else 160
    lines: list[str] = []
    used, left_out = 0, 0
    for r in ordered:
        text = " ".join(str(r["text"]).split())
        text = text if len(text) <= per_item else text[: per_item - 1] + "…"
        line = f"- [{r['importance']}] {r['child_id']}: {text}" if form == "normal" else f"- [{r['importance'][0]}] {text}"
        room = limit - used - 1
        if len(line) > room:
            if room < MIN_LINE:
                left_out += 1
                continue
            line = line[: room - 1] + "…"  # cut to what is left rather than dropped: the first ones matter most
        lines.append(line)
        used += len(line) + 1
    counts = {level: sum(1 for r in results if r["importance"] == level) for level in LEVELS}
    return {"form": form, "budget": limit, "children": len(results), "counts": counts, "left_out": left_out, "text": "\n".join(lines)}
