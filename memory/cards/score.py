"""How well a card matches keywords: title and tags weigh more than the body; a compound keyword's words count for less."""

from __future__ import annotations

import re
from collections import Counter
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
_WORD = re.compile(r"[a-z0-9_]+")
"""An ASCII word: matched against a card's words (whole words); any other term (CJK, dotted, several words) as text."""


def squash(text: str) -> str:
    """Lower case without separators: ``Card Index``, ``card_index`` and ``CardIndex`` all read ``cardindex``."""
    return _SQUASH.sub("", text.lower())


@dataclass(frozen=True)
class Term:
    text: str
    """Lower case, spaces collapsed."""
    squashed: str
    weight: float
    word: bool
    """An ASCII word (looked up among a card's words); else looked for as text."""


@dataclass(frozen=True)
class Indexed:
    """A card with what matching needs, computed once when its file is read."""

    card: Card
    title: str
    title_words: frozenset[str]
    title_squashed: str
    tags: frozenset[str]
    tags_squashed: frozenset[str]
    body: str
    body_words: Counter[str]


def indexed(card: Card) -> Indexed:
    title, body = card.title.lower(), card.body.lower()
    return Indexed(
        card,
        title,
        frozenset(_WORD.findall(title)),
        squash(card.title),
        frozenset(t.lower() for t in card.tags),
        frozenset(squash(t) for t in card.tags),
        body,
        Counter(_WORD.findall(body)),
    )


def terms(keywords: Sequence[str]) -> list[Term]:
    """Each keyword at weight 1, the words inside compound ones at ``PART``."""
    out: dict[str, Term] = {}
    for keyword in keywords:
        word = " ".join(keyword.split()).lower()
        if len(squash(word)) < 2:
            continue
        out[word] = Term(word, squash(word), 1.0, _WORD.fullmatch(word) is not None)
        for part in parts_of(keyword):
            if part not in out:
                out[part] = Term(part, part, PART, True)
    return list(out.values())


def _count(text: str, term: str) -> int:
    return min(BODY_HITS, text.count(term))


def score(entry: Indexed, wanted: Sequence[Term]) -> float:
    """The card's score for these terms (0: it does not match), times its own ``relevance_score``. The definition; the
    index computes the same through its postings."""
    total = 0.0
    for t in wanted:
        hit = 0.0
        whole = t.weight == 1.0 and len(t.squashed) >= 4  # a whole keyword run together: "cardindex" in "Card index"
        if (t.text in entry.title_words if t.word else t.text in entry.title) or (whole and t.squashed in entry.title_squashed):
            hit += TITLE
        if t.text in entry.tags or t.squashed in entry.tags_squashed:
            hit += TAG
        hit += BODY * (min(BODY_HITS, entry.body_words[t.text]) if t.word else _count(entry.body, t.text))
        total += t.weight * hit
    return total * entry.card.relevance_score
