"""Recall as a function of the request and the archive in force only: the archived messages the client still sends.

They are searched for the newest input's terms, the agent's boilerplate not counting. The same request gets the same block after a restart and on another replica (nothing depends on what a background
writer had stored yet), and a block never repeats what the request already holds: the head (system prompt, the
agent's preambles, the task), the messages an archive keeps, the newest turns."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from conversation.task import stripped
from memory.chain import SYSTEM_ROLES
from memory.store.sqlite_recall import matched, terms
from proxy.longctx.options import RetrievalOptions
from proxy.longctx.retrieval import recall_block
from summaries.extractive import text_of

ROLES = ("user", "assistant", "tool")
BOILERPLATE_CHARS = 200_000
"""Of the system messages and the head, the characters read for the agent's boilerplate terms."""


def boilerplate(client: Sequence[Mapping[str, Any]], head: int) -> set[str]:
    """Terms the agent says on every request (its system prompt, tool descriptions it puts there, its preambles and the
    task, all in the head): they match everything, so they never count toward a recall."""
    texts = [text_of(m) for k, m in enumerate(client) if k < head or m.get("role") in SYSTEM_ROLES]
    return set(terms("\n".join(texts)[:BOILERPLATE_CHARS], limit=1 << 30))


def query_terms(text: str, common: set[str]) -> list[str]:
    """The query's own terms: without the agent's wrappers (``<system-reminder>`` …) and its boilerplate."""
    return [t for t in terms(stripped(text)) if t not in common]


def best_turn(
    client: Sequence[Mapping[str, Any]], archive: Mapping[str, Any], text: str, min_terms: int, extra_boilerplate: str = ""
) -> tuple[dict[str, Any], int] | None:
    """The archived message that matches the query best (at least ``min_terms``; ties: the newest), as a recall hit
    (``turn``, ``message``) and its score; None when none does."""
    head, end = int(archive["head"]), int(archive["end"])
    kept = {p for p in archive.get("keep", ()) if isinstance(p, int)}
    common = boilerplate(client, head)
    if extra_boilerplate:
        common |= set(terms(extra_boilerplate, limit=1 << 30))
    words = query_terms(text, common)
    if not words:
        return None
    best: tuple[int, int] | None = None
    for k in range(head, min(end + 1, len(client))):
        m = client[k]
        if k in kept or m.get("role") not in ROLES:
            continue
        score = matched(words, text_of(m))
        if score >= min_terms and (best is None or score >= best[0]):
            best = (score, k)
    if best is None:
        return None
    score, k = best
    return {"turn": k, "message": dict(client[k])}, score


def recall_from_request(
    client: Sequence[Mapping[str, Any]], archive: Mapping[str, Any], text: str, options: RetrievalOptions, count: Callable[[str], int]
) -> tuple[str | None, dict[str, Any]]:
    """The recall block for this request (None: nothing strong enough) and its audit facts, as ``retrieval.recall``."""
    found = best_turn(client, archive, text, options.min_terms)
    if found is None:
        return None, {"path": [], "chunks": [], "drop_reason": "below_threshold"}
    hit, score = found
    return recall_block(hit, "turn", score, options.max_tokens, count), {"path": ["s0"], "chunks": [f"turn:{hit['turn']}"], "drop_reason": None}
