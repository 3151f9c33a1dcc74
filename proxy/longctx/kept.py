"""What is written of a session's long-context memory off the path: a chunk's row, an archive's record and forms."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from conversation.task import task_text
from memory.store.base import ChunkRow
from proxy.longctx.archive import Archived
from proxy.longctx.chunks import Chunk, digest_of
from redaction.redact import redact
from summaries.extractive import Extractor
from summaries.render import compact, short

NORMAL_TOKENS = 2000
"""Budget of an archive's normal form (seed 000: 500–2,000 characters of structure; kept for people and recall)."""


def chunk_row(agent_id: str, session_id: str, c: Chunk) -> ChunkRow:
    return ChunkRow(agent_id, session_id, c.chunk_id, c.first, c.last, c.source, c.tags, c.anchors, c.line, c.summary)


def archive_body(done: Archived, client: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What is kept of an archive (the seed's archive protocol): its record without the block, S1 (the compact
    form) and the normal form; the expanded form is the raw turns it covers (S0)."""
    record = {k: v for k, v in done.record.items() if k not in ("block", "end_link")}
    head = done.record["head"]
    task = task_text(client, head) if head > 0 else None
    digest = digest_of(done.summary.chunks)
    evidence = Extractor().evidence(client[head : done.record["end"] + 1], head)
    normal = redact(compact(digest, task, NORMAL_TOKENS, None, evidence))
    return {**record, "s1": done.summary.text, "forms": {"compact": redact(short(digest, task, evidence)), "normal": normal}}
