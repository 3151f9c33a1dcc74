"""One request's long-context state (the archive in force, a new archive, recall) and the audit fields it reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from proxy.longctx.archive import Archived
    from proxy.longctx.restart import Restart
    from proxy.longctx.service import LongCtx


@dataclass
class RequestMemory:
    """One request for the long-context service (made per request, never shared): what it is (its messages, where its
    summaries go, what recall covers, whether it is an overflow retry), then what the rewrite came to for the service
    after it (``restart`` on: written by ``proxy.rewrite.steps.Rewrite`` once its steps ran, never read by a step)."""

    service: LongCtx
    messages: list[dict[str, Any]]
    """The request's canonical messages as the client sent them."""
    target: Any = None
    """Where an LLM summarizer sends this session's summaries (in memory only: it may hold the client's key)."""
    scope: str | None = None
    """What the request asked recall to cover (``X-Ruyi-Recall``: ``all-agents``)."""
    overflow: bool = False
    """The upstream refused the request as too long: this is the one retry, and it archives if an archive helps."""
    restart: Restart | None = None
    archived: Archived | None = None
    prepare_until: int | None = None
    """The last position the next archive would replace, when summaries should be prepared up to it."""
    prepare_number: int | None = None
    """The number the next archive would have (its block is counted ahead too)."""
    prepared: bool | None = None
    """Whether the archive made for this request found its summary made ahead of need (None: no archive)."""
    recall: dict[str, Any] = field(default_factory=dict)


def audit_fields(mem: RequestMemory | None, pruned: bool) -> dict[str, Any]:
    """The seed's audit fields for one request (compaction, s2_written_count, rag_chunks, retrieval_path, latency,
    drop_reason) and what an archive and its summarizer did."""
    if mem is None:
        return {"compaction": pruned}
    done, recall = mem.archived, mem.recall
    path = (["s1"] if done is not None or mem.restart is not None else []) + list(recall.get("path", ()))
    return {
        "compaction": pruned or done is not None,
        "s2_written_count": len(done.summary.new) if done is not None else 0,
        "rag_chunks": len(recall.get("chunks", ())),
        "retrieval_path": path,
        "latency_retrieval_ms": recall.get("latency_ms"),
        "drop_reason": recall.get("drop_reason"),
        "archive": {
            "number": done.record["number"],
            "reason": done.record["reason"],
            "messages": [done.record["head"], done.record["end"]],
            "summary_source": done.summary.source,
            "prepared": mem.prepared,
        }
        if done is not None
        else None,
        "prepare_until": mem.prepare_until,
    }
