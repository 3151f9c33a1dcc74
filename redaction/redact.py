"""The one redaction function: every text Ruyi writes (stores, logs, puts into a request) goes through it."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import Any

from redaction.rules import Rule, load_rules

MARK = "[REDACTED:{}]"
MIN_CHARS = 8
"""No rule matches a text shorter than this (the shortest, a password in a URL, needs `a://b:c@`)."""
MEMO_CHARS = 256
"""Texts up to this long are remembered with their redacted form: the same short values (a path, a model, a
tier, a session id) come back on every request's log line, audit record and report."""
MEMO_SIZE = 4096
"""Short texts remembered, least recently used dropped first."""
MAX_PASSES = 4
"""Each rule runs until the text stops changing, at most this often."""
_FOLDS = str.maketrans({"ı": "i", "ſ": "s"})
"""The two letters that case-insensitive regexes match to an ASCII letter and str.lower() leaves alone
(Kelvin sign and dotted I lower to k and i already), so the keyword filter never skips a rule that matches."""


class Ruleset:
    """Rules indexed by keyword, so a text runs only the regexes whose keywords it holds."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        self.keywords = tuple(dict.fromkeys(k for r in self.rules for k in r.keywords))
        self.by_keyword = {k: frozenset(i for i, r in enumerate(self.rules) if k in r.keywords) for k in self.keywords}
        self.always = frozenset(i for i, r in enumerate(self.rules) if not r.keywords)

    def redact(self, text: str) -> str:
        if len(text) < MIN_CHARS:
            return text
        lowered, aligned = _lowered(text)
        chosen = set(self.always)
        for keyword in self.keywords:
            if keyword in lowered:
                chosen |= self.by_keyword[keyword]
        for i in sorted(chosen):
            rule = self.rules[i]
            for _ in range(MAX_PASSES):  # a greedy rule that matched one secret may have stepped over another
                if rule.lowered is not None and aligned:
                    found = _replace(text, rule, rule.lowered.finditer(lowered))
                else:
                    found = rule.pattern.sub(functools.partial(_mask, rule), text)
                if found == text:
                    break
                text = found
                lowered, aligned = _lowered(text)
        return text


def _lowered(text: str) -> tuple[str, bool]:
    """text lower-cased, the letters case folding matches to an ASCII letter folded; and whether the copy has text's
    positions (each character lowered to one: a few, such as İ, lower to two). On such a copy a ``lowered`` rule's
    regex (ASCII, written for lower-cased text) finds what the same regex with IGNORECASE finds in text, about ten
    times faster, in any script (tests/redaction/test_redact.py checks every code point)."""
    lowered = text.lower()
    if not lowered.isascii():
        lowered = lowered.translate(_FOLDS)
    return lowered, len(lowered) == len(text)


@functools.cache
def ruleset() -> Ruleset:
    """The rules, read and compiled on first use (once per process)."""
    return Ruleset(load_rules())


def redact(text: str) -> str:
    """text with every secret the rules find replaced by ``[REDACTED:<rule id>]``.

    Only the secret is replaced (the rule's secret group), so `api_key = [REDACTED:assigned-secret]`
    still says what was there. Idempotent: redact(redact(t)) == redact(t)."""
    if len(text) <= MEMO_CHARS:
        return _redact_short(text)
    return ruleset().redact(text)


@functools.lru_cache(maxsize=MEMO_SIZE)
def _redact_short(text: str) -> str:
    return ruleset().redact(text)


def redact_value(value: Any) -> Any:
    """A JSON-like value with every string in it redacted (dict keys kept); other values as they are."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


def _replace(text: str, rule: Rule, matches: Iterable[re.Match[str]]) -> str:
    """text with the secret of each match (found in a copy of text with the same positions) masked."""
    out, at = [], 0
    for match in matches:
        start, end = match.span(_secret_group(rule, match))
        out += [text[at:start], MARK.format(rule.id)]
        at = end
    return "".join(out) + text[at:] if out else text


def _secret_group(rule: Rule, match: re.Match[str]) -> int:
    if rule.group is not None:
        return rule.group
    return next((i for i in range(1, rule.pattern.groups + 1) if match.group(i) is not None and match.group(i)), 0)


def _mask(rule: Rule, match: re.Match[str]) -> str:
    start, end = match.span(_secret_group(rule, match))
    offset, whole = match.start(), match.group(0)
    return whole[: start - offset] + MARK.format(rule.id) + whole[end - offset :]
