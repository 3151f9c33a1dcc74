"""An anchor (an ADR record): its id, type, status and fields, and the seed's write rule."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TYPES: dict[str, str] = {
    "D": "decision",
    "C": "constraint",
    "I": "interface",
    "P": "problem",
    "M": "pattern",
    "U": "user preference",
    "CK": "checklist",
    "DN": "domain note",
}
"""Anchor types by prefix (seed 000)."""
STATUSES = ("active", "pending", "obsolete")
REQUIRED = ("decision", "alternatives", "why", "impact", "verification", "rollback")
"""The seed's required fields of an ADR: an active anchor holds every one."""
FIELD_TITLES = {
    "decision": "Decision",
    "alternatives": "Alternatives",
    "why": "Why",
    "impact": "Impact",
    "verification": "Verification",
    "rollback": "Rollback",
}
ID = re.compile(r"^(CK|DN|[DCIPMU])(\d{3,4})$")
"""An anchor id: its type's prefix and a number of at least three digits (``D001``, ``CK012``)."""
TITLE_CHARS = 200
FIELD_CHARS = 4000


class AnchorError(ValueError):
    """Input that does not make an anchor: the message says what was wrong and what is accepted."""

    def __init__(self, message: str, code: str = "invalid_anchor", missing: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.missing = missing


@dataclass
class Anchor:
    """One anchor of one agent."""

    agent_id: str
    anchor_id: str
    title: str
    """The one line that names it (``Use SQLite for the default store``)."""
    status: str = "active"
    fields: dict[str, str] = field(default_factory=dict)
    """The ADR's fields by name (``REQUIRED`` and any other a person adds), as markdown text."""
    source: str = "person"
    """Who wrote it: ``person`` (API, CLI), ``captured`` (a line of an assistant message), ``proposed`` (an archive's summary)."""
    session_id: str | None = None
    """The session it was captured in, if captured."""
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def type(self) -> str:
        return split_id(self.anchor_id)[0]

    @property
    def missing(self) -> tuple[str, ...]:
        """Required fields it lacks (empty: it may be active)."""
        return missing_fields(self.fields)

    def view(self) -> dict[str, Any]:
        return {
            "id": self.anchor_id,
            "type": self.type,
            "kind": TYPES[self.type],
            "title": self.title,
            "status": self.status,
            "fields": dict(self.fields),
            "missing": list(self.missing),
            "source": self.source,
            "session_id": self.session_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


def split_id(anchor_id: str) -> tuple[str, int]:
    """``D004`` → (``D``, 4); AnchorError for anything else."""
    match = ID.match(anchor_id or "")
    if match is None:
        raise AnchorError(
            f"{anchor_id!r} is not an anchor id: a type ({', '.join(TYPES)}) and a number of at least three digits, as in D001 or CK012",
            "invalid_anchor_id",
        )
    return match.group(1), int(match.group(2))


def format_id(kind: str, number: int) -> str:
    return f"{kind}{number:03d}"


def check_type(kind: Any) -> str:
    if not isinstance(kind, str) or kind.upper() not in TYPES:
        raise AnchorError(
            f"type must be one of {', '.join(TYPES)} ({', '.join(f'{k} {v}' for k, v in TYPES.items())}); got {kind!r}", "invalid_anchor_type"
        )
    return kind.upper()


def check_status(status: Any) -> str:
    if status not in STATUSES:
        raise AnchorError(f"status must be one of {', '.join(STATUSES)}; got {status!r}", "invalid_anchor_status")
    return str(status)


def missing_fields(fields: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(name for name in REQUIRED if not (fields.get(name) or "").strip())


def check_fields(raw: Any) -> dict[str, str]:
    """Fields as given (an object of strings; names lower-cased); AnchorError otherwise."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise AnchorError(f"fields must be an object of strings, with the required {', '.join(REQUIRED)}", "invalid_anchor_fields")
    out = {k.strip().lower(): v.strip() for k, v in raw.items() if k.strip()}
    long = [k for k, v in out.items() if len(v) > FIELD_CHARS]
    if long:
        raise AnchorError(f"fields over {FIELD_CHARS} characters: {', '.join(long)} (keep a pointer, not the whole text)", "invalid_anchor_fields")
    return out


def check_title(title: Any) -> str:
    if not isinstance(title, str) or not title.strip():
        raise AnchorError("title is required: one line naming the anchor, as in 'Use SQLite for the default store'", "invalid_anchor_title")
    title = " ".join(title.split())
    if len(title) > TITLE_CHARS:
        raise AnchorError(f"title is over {TITLE_CHARS} characters: name the anchor in one short line", "invalid_anchor_title")
    return title


def write_rule(anchor: Anchor) -> None:
    """Only what can affect future decisions becomes active: an active anchor holds every required field."""
    if anchor.status == "active" and anchor.missing:
        raise AnchorError(
            f"an active anchor needs {', '.join(REQUIRED)}; {anchor.anchor_id} lacks {', '.join(anchor.missing)} "
            '(add them, or create it with "status": "pending")',
            "anchor_fields_missing",
            anchor.missing,
        )
