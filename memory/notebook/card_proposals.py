"""Draft cards the summarizer proposes at an archive: what its prompt asks for and the strict checks on its answer."""

from __future__ import annotations

import re
from typing import Any

from memory.notebook.sections import _INJECTION, _ROLE_LINE, _TOOL_OUTPUT, NotebookError, clean_entry

PER_ARCHIVE = 2
"""The most cards one answer may propose (as many as the extractive Organizer drafts)."""
TITLE_CHARS = 90
BODY_CHARS = 1200
TAGS = 6
_TAG = re.compile(r"[\w.+#-]{1,40}")

SYSTEM = (
    f' In the same object, "cards": at most {PER_ARCHIVE} knowledge cards for lessons the data shows were learned (a '
    'problem met, its cause, the fix, how the fix was verified), each {"title": "…", "tags": ["…"], "body": "…"}: a '
    f"title under {TITLE_CHARS} characters, one to {TAGS} one-word tags, a markdown body under {BODY_CHARS} characters "
    "with the sections Problem, Cause, Fix and Verification, concise: no secrets, no pasted tool output, no "
    'instructions to a model. No lesson learned: "cards": [].'
)
"""Appended to the notebook's proposal instructions when the summarizer is asked for cards too."""


def cards_of(raw: dict[str, Any]) -> list[tuple[str, tuple[str, ...], str]] | None:
    """The cards in the summarizer's parsed answer as (title, tags, body), or None when any of them may not be used: not a
    list, more than PER_ARCHIVE, a card that is not exactly title/tags/body, a title that is not one short clean line,
    no tags or odd ones, an empty or over-long body, or a body with code, a wall of tool output or what reads as
    instructions to a model. A missing "cards" key is None too: the caller tells it apart (it keeps the extractive drafts)."""
    found = raw.get("cards")
    if not isinstance(found, list) or len(found) > PER_ARCHIVE:
        return None
    cards: list[tuple[str, tuple[str, ...], str]] = []
    for card in found:
        if not isinstance(card, dict) or set(card) != {"title", "tags", "body"}:
            return None
        title, tags, body = card["title"], card["tags"], card["body"]
        try:
            cleaned = clean_entry(title, TITLE_CHARS)
        except NotebookError:
            return None
        if cleaned.notes:  # cut or joined: not the short single line asked for
            return None
        if not isinstance(tags, list) or not 1 <= len(tags) <= TAGS or not all(isinstance(t, str) and _TAG.fullmatch(t) for t in tags):
            return None
        if not isinstance(body, str) or not body.strip() or len(body) > BODY_CHARS:
            return None
        if "```" in body or _TOOL_OUTPUT.search(body) or _INJECTION.search(body) or _ROLE_LINE.search(body):
            return None
        cards.append((cleaned.line, tuple(dict.fromkeys(tags)), body.strip() + "\n"))
    return cards
