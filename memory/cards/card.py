"""A knowledge card: a Markdown file with YAML front matter (title, tags, dates, source agent, relevance), read and written."""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MAX_FILE_BYTES = 256 * 1024
"""A bigger file is not a card (skipped with a warning)."""
RENDER_CHARS = 2000
"""What one card's injected text holds at most by default."""
_FENCE = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
_SLUG = re.compile(r"[^\w\-]+", re.U)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class CardError(ValueError):
    """Why a file is not a card (named in the warning that skips it)."""


@dataclass(frozen=True)
class Card:
    """One card as read from its file; ``score`` is set on the copies a search returns."""

    title: str
    tags: tuple[str, ...]
    body: str
    path: Path
    created_at: str | None = None
    updated_at: str | None = None
    source_agent: str | None = None
    relevance_score: float = 1.0
    """The front matter's own weight (0 to 1; 1 when unset): a search multiplies its score by it."""
    scope: str = "project"
    """``project`` or ``global``: the folder it came from."""
    score: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """Front-matter keys Ruyi does not use, kept as read."""

    def render(self, max_chars: int = RENDER_CHARS) -> str:
        """The text injected for this card: a title line, its tags and file, the body (cut to ``max_chars`` with a note)."""
        head = f"### {self.title}\n" + (f"tags: {', '.join(self.tags)} · " if self.tags else "") + f"{self.path.name}\n"
        body = self.body.strip()
        room = max(0, max_chars - len(head))
        if len(body) > room:
            note = f"\n[… cut: the whole card is {self.path}]"
            body = body[: max(0, room - len(note))].rstrip() + note
        return head + body + "\n"

    def view(self, with_body: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "title": self.title,
            "tags": list(self.tags),
            "path": str(self.path),
            "scope": self.scope,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "source_agent": self.source_agent,
            "relevance_score": self.relevance_score,
            "score": round(self.score, 3),
        }
        if with_body:
            out["body"] = self.body
        return out


def _when(value: Any, key: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, str):
        return value
    raise CardError(f"{key} must be a date or a string, got {type(value).__name__}")


def parse_card(text: str, path: Path, scope: str = "project") -> Card:
    """The card a file's text holds; ``CardError`` saying what is wrong otherwise."""
    match = _FENCE.match(text.lstrip("\ufeff"))
    if match is None:
        raise CardError("no YAML front matter (a card starts with a line '---', its fields, and a line '---')")
    try:
        meta = yaml.load(match.group(1), Loader=_LOADER)  # a safe loader, libyaml's when there is one
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise CardError(
            f"front matter is not valid YAML ({getattr(exc, 'problem', None) or exc}" + (f", line {mark.line + 2}" if mark is not None else "") + ")"
        ) from None
    except (ValueError, TypeError, RecursionError) as exc:  # a value YAML's constructors refuse, such as a 13th month
        raise CardError(f"front matter has a value that cannot be read ({exc})") from None
    if not isinstance(meta, dict):
        raise CardError("front matter must be a mapping of fields (title: …, tags: […])")
    title = meta.get("title")
    if not isinstance(title, str) or not title.strip():
        raise CardError("front matter needs a title (a non-empty string)")
    tags = meta.get("tags") or []
    if isinstance(tags, str):
        tags = [t for t in re.split(r"[,\s]+", tags) if t]
    if not isinstance(tags, list) or not all(isinstance(t, (str, int, float)) and not isinstance(t, bool) for t in tags):
        raise CardError("tags must be a list of words")
    relevance = meta.get("relevance_score", 1.0)
    if relevance is None:
        relevance = 1.0
    if isinstance(relevance, bool) or not isinstance(relevance, (int, float)) or not 0 <= relevance <= 1:
        raise CardError(f"relevance_score must be a number from 0 to 1, got {relevance!r}")
    source = meta.get("source_agent")
    known = {"title", "tags", "created_at", "updated_at", "source_agent", "relevance_score"}
    return Card(
        " ".join(title.split()),
        tuple(str(t).strip() for t in tags if str(t).strip()),
        text[match.end() :].lstrip("\n"),
        path,
        _when(meta.get("created_at"), "created_at"),
        _when(meta.get("updated_at"), "updated_at"),
        None if source is None else str(source),
        float(relevance),
        scope,
        extra={k: v for k, v in meta.items() if k not in known},
    )


def read_card(path: Path, scope: str = "project") -> Card:
    """Read and parse one file; ``CardError`` when it is too big, not UTF-8, unreadable or malformed."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise CardError(f"cannot read it ({exc.strerror or exc})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise CardError(f"over {MAX_FILE_BYTES} bytes: not a card")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CardError("not UTF-8 text") from None
    return parse_card(text, path, scope)


def card_text(
    title: str, tags: Sequence[str], body: str, source_agent: str | None, when: dt.datetime | None = None, relevance_score: float | None = None
) -> str:
    """A card file's text: front matter then body."""
    stamp = (when or dt.datetime.now(dt.UTC)).date().isoformat()
    meta: dict[str, Any] = {"title": title, "tags": list(tags), "created_at": stamp, "updated_at": stamp}
    if source_agent:
        meta["source_agent"] = source_agent
    if relevance_score is not None:
        meta["relevance_score"] = relevance_score
    front = yaml.safe_dump(meta, allow_unicode=True, sort_keys=False, default_flow_style=None, width=1000)
    return f"---\n{front}---\n\n{body.strip()}\n"


def slug(title: str, limit: int = 60) -> str:
    """A file name for a title: words joined by dashes (any script), never empty."""
    words = _SLUG.sub("-", title.lower()).strip("-_")
    return re.sub(r"-{2,}", "-", words)[:limit].strip("-") or "card"


def write_card(folder: Path, title: str, text: str) -> Path:
    """Write a new card file in ``folder`` (made if missing), never over an existing file: ``name-2.md`` and so on."""
    folder.mkdir(parents=True, exist_ok=True)
    base = slug(title)
    for n in range(1, 1000):
        path = folder / (f"{base}.md" if n == 1 else f"{base}-{n}.md")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return path
    raise CardError(f"{folder}: too many cards named {base}")
