"""Keywords from recent text for looking up cards: CamelCase and snake_case identifiers, code identifiers, acronyms, quoted strings."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

MAX_KEYWORDS = 40
MAX_TEXT_CHARS = 20_000
"""Of each text only the last this many characters are looked at (a huge tool output costs no more than this)."""
_BACKTICK = re.compile(r"`([^`\n]{2,60})`")
_QUOTED = re.compile(r"\"([^\"\n]{3,60})\"|“([^”\n]{2,60})”|「([^」\n]{2,60})」|(?<![A-Za-z])'([^'\n]{3,60})'(?![A-Za-z])")
"""Double, curly and corner quotes; single quotes only where no letter touches them (not the apostrophes of don't, it's)."""
_TOKEN = re.compile(r"(?<![0-9A-Za-z_])[A-Za-z_][A-Za-z0-9_]*(?:[.\-][A-Za-z_][A-Za-z0-9_]*)*(\()?")
"""A word, identifier, or dotted or dashed name, and whether a call's parenthesis follows: one pass over the text, each
token then sorted out in Python (CamelCase, snake_case, dotted, acronym, called)."""
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
STOP = frozenset(
    {
        "ok",
        "id",
        "ids",
        "todo",
        "the",
        "and",
        "for",
        "not",
        "none",
        "null",
        "true",
        "false",
        "self",
        "this",
        "that",
        "with",
        "print",
        "return",
        "len",
        "str",
        "int",
        "dict",
        "list",
        "set",
        "tuple",
        "get",
        "put",
        "post",
        "http",
        "https",
        "www",
        "com",
        "txt",
        "md",
        "i",
        "a",
        "an",
        "it",
        "is",
        "to",
        "in",
        "of",
        "on",
        "at",
        "by",
        "or",
        "no",
        "yes",
        "you",
        "we",
        "e.g",
        "i.e",
        "etc",
        "vs",
    }
)
"""Words too common to tell one card from another."""


def _keep(word: str) -> bool:
    w = word.strip(" .-_'\"")
    return len(w) >= 2 and w.lower() not in STOP and not w.isdigit()


def _is_identifier(token: str) -> bool:
    """CamelCase (``CardIndex``, ``httpClient``, ``SQLite``), snake_case (``max_inject``, ``MAX_INJECT``), dotted
    (``config.schema``), or an upper-case acronym of two to ten letters (``WAL``, ``HTTP2``)."""
    core = token.strip("_")
    if "." in core or "_" in core:
        return True
    if core.isupper():
        return 2 <= len(core) <= 10 and core[0].isalpha()
    return any(c.isupper() for c in core[1:]) and any(c.islower() for c in core)


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
        for m in _TOKEN.finditer(text):
            token = m.group(0).rstrip("(")
            if token.islower() and "_" not in token and "." not in token:
                if m.group(1) and len(token) >= 3:
                    add(token)  # a called name: parse_config(
                continue
            if _is_identifier(token) or m.group(1):
                add(token)
    ranked = sorted(counts, key=lambda k: (-counts[k], first[k]))
    return [spelled[k] for k in ranked[:limit]]


def parts_of(keyword: str) -> list[str]:
    """The words inside a compound keyword (``CardIndex`` → card, index; ``max_inject`` → max, inject), lower case, three
    letters or more; empty for a single word."""
    pieces = [p.lower() for chunk in re.split(r"[\W_]+", keyword) for p in _PARTS.findall(chunk)]
    pieces = [p for p in pieces if len(p) >= 3 and p not in STOP]
    return pieces if len(pieces) > 1 else []
