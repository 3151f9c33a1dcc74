"""How well a card matches keywords: title and tags weigh more than the body; a compound keyword's words count for less."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory.cards.card import Card
from memory.cards.keywords import parts_of

TITLE = 4.0
TAG = 4.0
BODY = 1.0
BODY_HITS = 2
"""A keyword's occurrences in a body count up to this many times."""
PART = 0.5
"""A word taken from inside a compound keyword weighs this share of the keyword itself."""
_SQUASH = re.compile(r"[\W_]+", re.U)


def squash(text: str) -> str:
    """Lower case without separators: ``Card Index``, ``card_index`` and ``CardIndex`` all read ``cardindex``."""
    return _SQUASH.sub("", text.lower())


@dataclass(frozen=True)
class Indexed:
    """A card with what matching needs, computed once when its file is read."""

    card: Card
    title: str
    title_squashed: str
    tags: frozenset[str]
    tags_squashed: frozenset[str]
    body: str


def indexed(card: Card) -> Indexed:
    return Indexed(card, card.title.lower(), squash(card.title), frozenset(t.lower() for t in card.tags),
                   frozenset(squash(t) for t in card.tags), card.body.lower())


def terms(keywords: Sequence[str]) -> list[tuple[str, str, float]]:
    """(lower-case term, squashed term, weight): each keyword at 1, the words inside compound ones at ``PART``."""
    out: dict[str, tuple[str, str, float]] = {}
    for keyword in keywords:
        word = " ".join(keyword.split()).lower()
        if len(squash(word)) < 2:
            continue
        out[word] = (word, squash(word), 1.0)
        for part in parts_of(keyword):
            if part not in out:
                out[part] = (part, part, PART)
    return list(out.values())


def _hits(text: str, term: str) -> int:
    """Occurrences of a term, at most ``BODY_HITS``; a short one (an acronym such as ``api``) only as a whole word."""
    if len(term) < 4:
        return min(BODY_HITS, len(re.findall(rf"(?<!\w){re.escape(term)}(?!\w)", text)))
    return min(BODY_HITS, text.count(term))


def score(entry: Indexed, wanted: Sequence[tuple[str, str, float]]) -> float:
    """The card's score for these terms (0: it does not match), times its own ``relevance_score``."""
    total = 0.0
    for term, squashed, weight in wanted:
        hit = 0.0
        if _hits(entry.title, term) or (len(squashed) >= 4 and squashed in entry.title_squashed):
            hit += TITLE
        if term in entry.tags or squashed in entry.tags_squashed:
            hit += TAG
        hit += BODY * _hits(entry.body, term)
        total += weight * hit
    return total * entry.card.relevance_score
