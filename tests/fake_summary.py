"""The fake upstream's answer to Ruyi's archivist built from the prompt it received (``FakeUpstream.summary_from_prompt``).

Deterministic and model-free: the five sections, with under Progress the first line of each quoted message, newest
first, then the previous summary's lines, cut at about the budget the prompt states. It shows that an LLM's S1 travels
from the summarizer to later archives; it is not a summary anyone should judge quality by."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

MARK = "(fake summarizer: the first line of each quoted message, newest first — not a model's summary)"
"""The line every such summary starts its Progress with (a test finds the LLM's S1 in a forwarded request by it)."""
_BUDGET = re.compile(r"At most (\d+) tokens")
_MESSAGE = re.compile(r'<message n="(\d+)" role="([^"]*)">\n(.*?)\n</message>', re.S)
_PREVIOUS = re.compile(r"<previous-summary>\n(.*?)\n</previous-summary>", re.S)
_SECTION = re.compile(r"^## (\w+)\n(.*?)(?=^## |\Z)", re.S | re.M)
CHARS_PER_TOKEN = 3
"""How many characters the summary may hold per token of its budget (the summarizer refuses one over 1.5× it)."""
LINE_CHARS = 160


def summary_from_prompt(messages: Sequence[Mapping[str, Any]]) -> str:
    """The summary of the quoted trace in a summarizer request's ``messages`` (system prompt, then the data)."""
    system = str(messages[0].get("content") or "") if messages else ""
    data = str(messages[-1].get("content") or "") if len(messages) > 1 else ""
    found = _BUDGET.search(system)
    limit = (int(found.group(1)) if found else 300) * CHARS_PER_TOKEN
    previous = _PREVIOUS.search(data)
    older = dict((m.group(1), m.group(2).strip()) for m in _SECTION.finditer(previous.group(1))) if previous else {}
    task = older.get("Task") or "—"
    lines = []
    for n, role, body in reversed(_MESSAGE.findall(data.split("</previous-summary>")[-1])):
        first = next((line.strip() for line in body.splitlines() if line.strip()), "")
        if first:
            lines.append(f"- [{n}] {role}: {first[:LINE_CHARS]}")
    lines += [line for line in older.get("Progress", "").splitlines() if line.startswith("- [")]
    progress, size = [MARK], len(task) + len(MARK) + 80
    for line in lines:
        if size + len(line) + 1 > limit:
            break
        progress.append(line)
        size += len(line) + 1
    return "\n".join(["## Task", task, "## Decisions", "—", "## Constraints", "—", "## Progress", *progress, "## Anchors", "—"])
