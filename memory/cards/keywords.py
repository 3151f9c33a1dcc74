"""Keywords from recent text for looking up cards: CamelCase and snake_case identifiers, code identifiers, acronyms, quoted strings."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

MAX_KEYWORDS = 40
MAX_TEXT_CHARS = 200_000
"""Of each text only the last this many characters are looked at (a huge tool output costs no more than this)."""
_BACKTICK = re.compile(r"`([^`\n]{2,60})`")
_QUOTED = re.compile(r"\"([^\"\n]{3,60})\"|“([^”\n]{2,60})”|「([^」\n]{2,60})」|'([^'\n]{3,60})'")
_CAMEL = re.compile(r"\b[A-Za-z][a-z0-9]*(?:[A-Z][a-z0-9]+)+[A-Za-z0-9]*\b|\b[A-Z]{2,}[a-z][a-z0-9]+(?:[A-Z][a-z0-9]*)*\b")
_SNAKE = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b")
_DOTTED = re.compile(r"\b[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+\b")
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,9}\b")
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]{2,})\(")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
STOP = frozenset({
    "ok", "id", "ids", "todo", "the", "and", "for", "not", "none", "null", "true", "false", "self", "this", "that", "with",
    "print", "return", "len", "str", "int", "dict", "list", "set", "tuple", "get", "put", "post", "http", "https", "www", "com",
    "txt", "md", "i", "a", "an", "it", "is", "to", "in", "of", "on", "at", "by", "or", "no", "yes", "you", "we",
})
"""Words too common to tell one card from another."""


def _keep(word: str) -> bool:
    w = word.strip(" .-_'\"")
    return len(w) >= 2 and w.lower() not in STOP and not w.isdigit()


def keywords_from(texts: Iterable[str], limit: int = MAX_KEYWORDS) -> list[str]:
    """The distinct keywords of ``texts``, most frequent first (ties: first seen first), at most ``limit``. Quoted strings
    and code spans are kept whole; identifiers as written (matching ignores case)."""
    counts: Counter[str] = Counter()
    first: dict[str, int] = {}
    spelled: dict[str, str] = {}

    def add(word: str, weight: int = 1) -> None:
        word = word.strip(" .,;:-'\"")
        if not _keep(word):
            return
        key = word.lower()
        counts[key] += weight
        first.setdefault(key, len(first))
        spelled.setdefault(key, word)

    for text in texts:
        if not text:
            continue
        text = text[-MAX_TEXT_CHARS:]
        for m in _BACKTICK.finditer(text):
            add(m.group(1), 2)
        for m in _QUOTED.finditer(text):
            add(next(g for g in m.groups() if g is not None), 2)
        for pattern in (_CAMEL, _SNAKE, _DOTTED):
            for m in pattern.finditer(text):
                add(m.group(0))
        for m in _CALL.finditer(text):
            add(m.group(1))
        for m in _ACRONYM.finditer(text):
            add(m.group(0))
    ranked = sorted(counts, key=lambda k: (-counts[k], first[k]))
    return [spelled[k] for k in ranked[:limit]]


def parts_of(keyword: str) -> list[str]:
    """The words inside a compound keyword (``CardIndex`` → card, index; ``max_inject`` → max, inject), lower case, three
    letters or more; empty for a single word."""
    pieces = [p.lower() for chunk in re.split(r"[\W_]+", keyword) for p in _PARTS.findall(chunk)]
    pieces = [p for p in pieces if len(p) >= 3 and p not in STOP]
    return pieces if len(pieces) > 1 else []
