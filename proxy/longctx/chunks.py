"""S2 chunks: archived history cut at turn boundaries, each with its digest, summary, one line, tags and anchors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

from redaction.redact import redact
from summaries.extractive import Digest, Extractor, merge
from summaries.render import compact

LINE_CHARS = 160


@dataclass(frozen=True)
class Chunk:
    """One S2 chunk: messages first..last (positions in the conversation) of a session."""

    chunk_id: str
    first: int
    last: int
    end_link: str
    """The chain link of its last message: the chunk holds only while a request still carries that prefix."""
    digest: Digest
    summary: str
    line: str
    tags: tuple[str, ...]
    anchors: tuple[str, ...]
    source: str = "extractive"


def chunk_id(first: int, end_link: str) -> str:
    """A chunk's id: where it starts and the chain link where it ends (the whole conversation up to there)."""
    key = f"{first}\x00{end_link}".encode("utf-8", "surrogatepass")
    return "c" + blake2b(key, digest_size=5).hexdigest()


def spans(
    messages: Sequence[Mapping[str, Any]],
    tokens: Sequence[int],
    first: int,
    last: int,
    size: int,
    base: Sequence[Sequence[int]] = (),
    complete_only: bool = False,
) -> list[tuple[int, int]]:
    """first..last cut into spans: ``base`` (the spans of the archive in force, kept as they were), then spans of at
    least ``size`` tokens each ending just before an assistant message, then (unless ``complete_only``) the rest.

    The cuts depend only on the messages and ``base``, never on when chunks were prepared, so a restarted Ruyi
    makes the same chunks and the same summary."""
    out: list[tuple[int, int]] = []
    expected = first
    for a, b in base:
        if a != expected or b > last:
            break
        out.append((a, b))
        expected = b + 1
    start, total = expected, 0
    for i in range(expected, last + 1):
        total += tokens[i] if i < len(tokens) else 0
        at_turn_end = i + 1 >= len(messages) or messages[i + 1].get("role") == "assistant"
        if total >= size and at_turn_end:
            out.append((start, i))
            start, total = i + 1, 0
    if start <= last and not complete_only:
        out.append((start, last))
    return out


def tags_of(d: Digest) -> tuple[str, ...]:
    tags = []
    if d.files or d.commands or d.last_error:
        tags.append("facts")
    if d.notes:
        tags.append("preferences")
    if any(a.startswith(("[D", "[C", "[I")) for a, _ in d.anchors):
        tags.append("decisions")
    if d.plan:
        tags.append("todos")
    return tuple(tags)


def line_of(d: Digest) -> str:
    """A chunk in one line: what changed, what it ran last, whether it failed."""
    parts = []
    if d.edited:
        parts.append("changed " + ", ".join(p.rsplit("/", 1)[-1] for p in d.edited[:4]) + ("…" if len(d.edited) > 4 else ""))
    elif d.files:
        parts.append("looked at " + ", ".join(p.rsplit("/", 1)[-1] for p, _ in d.files[-3:]))
    if d.commands:
        c = d.commands[-1]
        parts.append(f"last `{c.label[:60]}`" + (f" → exit {c.exit}" if c.exit is not None else ""))
    if d.last_error:
        parts.append("error: " + d.last_error.strip().splitlines()[-1][:60])
    text = " · ".join(parts) or (d.last_words or "conversation")
    return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"


def make_chunk(
    extractor: Extractor,
    messages: Sequence[Mapping[str, Any]],
    links: Sequence[str],
    first: int,
    last: int,
    budget: int,
    count: Callable[[str], int] | None = None,
) -> Chunk:
    """The chunk of messages first..last (client positions), digested and summarised within ``budget`` tokens."""
    d = extractor.digest(messages[first : last + 1], first)  # its budget checked at about 4 characters a token: cheap
    return Chunk(
        chunk_id(first, links[last]),
        first,
        last,
        links[last],
        d,
        redact(compact(d, None, budget)),
        redact(line_of(d)),
        tags_of(d),
        tuple(anchor for anchor, _ in d.anchors),
    )


def digest_of(chunks: Sequence[Chunk]) -> Digest:
    d = Digest()
    for c in chunks:
        d = merge(d, c.digest)
    return d
