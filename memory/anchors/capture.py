"""Anchors defined in an assistant's text: a line that opens with an id (``[D004] Use SQLite — why: …``) and the fields it states."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from memory.anchors.anchor import REQUIRED, TITLE_CHARS, missing_fields

DEFINITION = re.compile(r"^\s*(?:[-*+]\s+|#{1,6}\s+|>\s*)?(?:\*\*)?\[(CK|DN|[DCIPMU])(\d{3,4})\](?:\*\*)?\s*[:：.]?\s*(\S.*)$")
"""A line that defines an anchor: it opens with the id (after a bullet, heading or quote mark); a line that only
cites one (``as [D001] says``) does not."""
LABELS: dict[str, str] = {
    "decision": "decision",
    "alternatives": "alternatives",
    "alternative": "alternatives",
    "why": "why",
    "because": "why",
    "reason": "why",
    "impact": "impact",
    "verification": "verification",
    "verify": "verification",
    "rollback": "rollback",
    "决策": "decision",
    "备选方案": "alternatives",
    "备选": "alternatives",
    "理由": "why",
    "原因": "why",
    "影响": "impact",
    "验证": "verification",
    "回滚": "rollback",
}
_LABEL = re.compile(r"(?:^|(?<=[\s;|,，；—–(（-]))(" + "|".join(sorted(map(re.escape, LABELS), key=len, reverse=True)) + r")\s*[:：]", re.IGNORECASE)
_EDGES = " \t—–-;|,，；:：*"
LINE_CHARS = 2000
"""Longer lines are not read as definitions (a tool output pasted into an answer, not an anchor)."""


@dataclass(frozen=True)
class Captured:
    """An anchor a line defines: its stated id, title, the fields it states and those it lacks."""

    anchor_id: str
    title: str
    fields: dict[str, str]
    line_hash: str
    """What makes the same line seen again in a later request not captured twice."""

    @property
    def missing(self) -> tuple[str, ...]:
        return missing_fields(self.fields)


def line_hash(line: str) -> str:
    return hashlib.sha256(" ".join(line.split()).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def definitions(text: str) -> list[Captured]:
    """Every anchor a text defines, in order (a code block's lines are skipped: code, not statements)."""
    found: list[Captured] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or len(line) > LINE_CHARS:
            continue
        match = DEFINITION.match(line)
        if match is None:
            continue
        kind, number, rest = match.groups()
        title, fields = _fields(rest)
        if not title:
            continue
        fields.setdefault("decision", title)
        found.append(Captured(f"{kind}{int(number):03d}", title[:TITLE_CHARS], fields, line_hash(line)))
    return found


def _fields(rest: str) -> tuple[str, dict[str, str]]:
    """The title (before the first label) and each labelled field's text."""
    labels = list(_LABEL.finditer(rest))
    title = (rest[: labels[0].start()] if labels else rest).strip(_EDGES).replace("**", "")
    fields: dict[str, str] = {}
    for i, label in enumerate(labels):
        end = labels[i + 1].start() if i + 1 < len(labels) else len(rest)
        value = rest[label.end() : end].strip(_EDGES)
        name = LABELS[label.group(1).lower()]
        if value and name in REQUIRED:
            fields[name] = value
    return " ".join(title.split()), fields
