"""The notebook's five sections, their aliases in Chinese and English, and what makes a text a valid entry."""

from __future__ import annotations

import re
from dataclasses import dataclass

SECTIONS: dict[str, str] = {
    "self": "自我感知",
    "user": "用户感知",
    "environment": "环境感知",
    "history": "历史感知",
    "dynamic": "动态context池",
}
"""The five fixed sections (seed 001), in their order: key → the seed's name."""
ENGLISH = {"self": "self", "user": "user", "environment": "environment", "history": "history", "dynamic": "dynamic pool"}
ALIASES: dict[str, str] = {
    **{v: k for k, v in SECTIONS.items()},
    **{k: k for k in SECTIONS},
    "自我": "self",
    "我": "self",
    "人格": "self",
    "me": "self",
    "persona": "self",
    "self-perception": "self",
    "用户": "user",
    "user-perception": "user",
    "环境": "environment",
    "env": "environment",
    "environment-perception": "environment",
    "历史": "history",
    "history-perception": "history",
    "动态池": "dynamic",
    "ctx_pool": "dynamic",
    "ctx-pool": "dynamic",
    "动态context池": "dynamic",
    "dynamic-pool": "dynamic",
    "dynamic-context-pool": "dynamic",
    "pool": "dynamic",
    "context-pool": "dynamic",
}
"""Every accepted name (case, spaces, underscores and brackets do not matter)."""
MAX_ENTRIES = 10
"""Entries a section holds at most; one that reaches it is compacted (when the agent is idle)."""
ENTRY_CHARS = 300
"""A longer entry is cut, and the reply says so."""
INJECTED_CHARS = 1800
"""The notebook's text as injected anywhere (snapshots, forms) is at most this long."""
WALL_LINES = 8
WALL_CHARS = 2000
_INJECTION = re.compile(
    r"(?im)(^\s*#+\s*(system|assistant|developer)\b|system\s+prompt\s*:|<\|im_start\|>|<\|im_end\|>|<\|(system|user|assistant)\|>|\[/?INST\]|<</?SYS>>|"
    r"ignore\s+(all\s+)?(the\s+)?(previous|prior|above|earlier)\s+(instructions|prompts|messages)|disregard\s+(all\s+)?(the\s+)?(previous|prior|above)|"
    r"forget\s+(all\s+)?(your|the)\s+(previous\s+)?instructions|you\s+are\s+now\s+(a|an|in)\b|new\s+system\s+prompt|"
    r"忽略(之前|以上|上面|前面)(的)?(所有)?(指令|指示|提示|要求)|无视(之前|以上|上面)(的)?(指令|提示))"
)
_ROLE_LINE = re.compile(r"(?im)^\s*(system|assistant|user|tool|developer|human)\s*:")
_TOOL_OUTPUT = re.compile(r"Traceback \(most recent call last\)|<returncode>|</?output>|\x1b\[|^\s*\$ \S", re.MULTILINE)
_CITES_ANCHOR = re.compile(r"\[(CK|DN|[DCIPMU])\d{3,4}\]")


class NotebookError(ValueError):
    """Input the notebook refuses: the message says what was wrong and what is accepted."""

    def __init__(self, message: str, code: str = "invalid_entry", status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


def section_of(name: str) -> str:
    """The section a name (or alias) means; NotebookError listing the five otherwise."""
    key = re.sub(r"[\s_]+", "-", (name or "").strip().strip("[]【】").strip().lower())
    found = ALIASES.get(key) or ALIASES.get(key.replace("-", "_")) or ALIASES.get((name or "").strip().strip("[]【】").strip())
    if found is None:
        listed = ", ".join(f"{k} ({v})" for k, v in SECTIONS.items())
        raise NotebookError(f"unknown notebook section {name!r}: the five sections are {listed}", "unknown_section", 404)
    return found


@dataclass(frozen=True)
class Cleaned:
    line: str
    notes: tuple[str, ...] = ()
    """What was done to the text (joined, cut), for the reply."""


def clean_entry(text: object, limit: int = ENTRY_CHARS) -> Cleaned:
    """One entry as a single line: multi-line text joined, over-long text cut; tool-output walls, code blocks and
    text that reads as prompt injection refused (the notebook keeps conclusions and pointers, never raw text)."""
    if not isinstance(text, str) or not text.strip():
        raise NotebookError('an entry is a non-empty string: {"text": "…"}', "invalid_entry")
    if "```" in text or len(re.findall(r"(?m)^(?: {4}|\t)\S", text)) >= 3:
        raise NotebookError("a code block is not a notebook entry: write the conclusion and a pointer (a path, a ref id)", "entry_is_code")
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) > WALL_LINES or len(text) > WALL_CHARS or _TOOL_OUTPUT.search(text):
        raise NotebookError(
            "a wall of tool output is not a notebook entry: write what it showed in one line and a pointer (a path, a ref id)", "entry_is_tool_output"
        )
    if _INJECTION.search(text) or len(_ROLE_LINE.findall(text)) >= 2:
        raise NotebookError(
            "the text reads as instructions to a model (a role marker, 'ignore previous instructions'): the notebook "
            "keeps facts and conclusions only",
            "entry_is_injection",
        )
    notes: list[str] = []
    line = " ".join(re.sub(r"^[-*+]\s+", "", piece) for piece in lines)
    line = " ".join(line.split())
    if len(lines) > 1:
        notes.append(f"{len(lines)} lines joined into one")
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
        notes.append(f"cut to {limit} characters")
    return Cleaned(line, tuple(notes))


def cites_anchor(line: str) -> bool:
    return _CITES_ANCHOR.search(line) is not None
