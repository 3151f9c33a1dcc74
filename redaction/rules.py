"""Secret rules in gitleaks' TOML format: read, translated from Go's regex dialect to Python's, compiled once."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
RULE_FILES = (HERE / "gitleaks.toml", HERE / "ruyi.toml")
"""gitleaks' vendored rules first, then Ruyi's own (run in this order)."""
_INLINE_FLAGS = re.compile(r"\(\?([imsU-]+)\)")


class RuleError(ValueError):
    """A rule file Ruyi cannot use (a regex that does not compile, a rule without one)."""


@dataclass(frozen=True)
class Rule:
    """One pattern rule: where a secret is, found by a regex once one of its keywords is in the text."""

    id: str
    pattern: re.Pattern[str]
    keywords: tuple[str, ...]
    """Lower-case strings one of which any match contains (gitleaks' pre-filter); empty: always run."""
    group: int | None
    """The capture group holding the secret (gitleaks' secretGroup); None: the first group that matched,
    else the whole match."""
    lowered: re.Pattern[str] | None = None
    """For a rule marked ``lowercase = true`` (Ruyi's own key; its regex written for lower-cased text):
    the regex without case folding, to run on a text's lower-cased copy when it has the same positions (any text
    but a few, such as one with İ), ten times faster than case folding; ``pattern`` is then the same regex with
    IGNORECASE, for the others."""


def go_to_python(regex: str) -> str:
    """A Go (RE2) regex as Python's ``re`` reads it the same way.

    Go lets flags such as ``(?i)`` appear mid-pattern, applying to the rest of the enclosing group;
    Python only allows global flags at the start. Each mid-pattern ``(?flags)`` becomes a scoped
    ``(?flags:…)`` closed where the enclosing group (or alternative) ends and reopened after each ``|``.
    Go's ``\\z`` (end of text) is Python's ``\\Z``.
    """
    out: list[str] = []
    scopes: list[list[str]] = [[]]
    """Per open group, the flag sets opened inside it (each to be closed where the group or alternative ends)."""
    i, n, in_class = 0, len(regex), False
    while i < n:
        ch = regex[i]
        if ch == "\\" and i + 1 < n:
            out.append(r"\Z" if regex[i + 1] == "z" and not in_class else regex[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
            out.append(ch)
            i += 1
            continue
        if ch == "[":
            in_class = True
            out.append(ch)
            if regex.startswith("^]", i + 1) or regex.startswith("]", i + 1):  # a leading ] is literal
                skip = 2 if regex[i + 1] == "^" else 1
                out.append(regex[i + 1 : i + 1 + skip])
                i += skip
            i += 1
            continue
        flags = _INLINE_FLAGS.match(regex, i)
        if flags is not None and i > 0:
            scopes[-1].append(flags.group(1))
            out.append(f"(?{flags.group(1)}:")
            i = flags.end()
            continue
        if ch == "(":
            scopes.append([])
        elif ch == ")" and len(scopes) > 1:
            out.append(")" * len(scopes.pop()))
        elif ch == "|" and scopes[-1]:
            out.append(")" * len(scopes[-1]) + "|" + "".join(f"(?{f}:" for f in scopes[-1]))
            i += 1
            continue
        out.append(ch)
        i += 1
    out.append(")" * len(scopes[0]))
    return "".join(out)


def load_rules(paths: Iterable[Path] = RULE_FILES) -> tuple[Rule, ...]:
    """Every rule with a regex in these files, in order. Raises RuleError naming the file and rule."""
    rules: list[Rule] = []
    for path in paths:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        for entry in data.get("rules", ()):
            rule_id = entry.get("id", "?")
            if "regex" not in entry:
                continue  # a path-only rule (file names): nothing to find in text
            try:
                source, lowercase = go_to_python(entry["regex"]), bool(entry.get("lowercase"))
                pattern = re.compile(source, re.IGNORECASE if lowercase else 0)
                lowered = re.compile(source) if lowercase else None
            except re.error as exc:
                raise RuleError(f"{path.name}: rule {rule_id}: the regex does not compile in Python ({exc})") from None
            keywords = tuple(k.lower() for k in entry.get("keywords", ()))
            group = entry.get("secretGroup")
            if group is not None and not 0 <= group <= pattern.groups:
                raise RuleError(f"{path.name}: rule {rule_id}: secretGroup {group} but the regex has {pattern.groups} groups")
            rules.append(Rule(rule_id, pattern, keywords, group, lowered))
    return tuple(rules)
