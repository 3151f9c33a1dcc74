"""Seed 002's health report, folded from the store's audit records: requests, overflows, tokens and cost saved, cache, archives, summarizer, latency, top sessions.

Cost is estimated with one prefix-cache model on both sides, so that the two compare: a request's prefix that its
session's previous request already sent is read from the cache at ``cache_read_ratio`` of the price, the rest at full
price; sending everything unchanged keeps the whole previous prompt as a prefix, and Ruyi's forwarded prompt keeps it
unless that request ran a batch or an archive (then it is counted as a full miss). What the upstream reported as
cached is shown beside it, over the requests that reported it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memory.store.base import AuditRecord

PERCENTILES = (0.5, 0.9, 0.99)


@dataclass
class _Session:
    agent_id: str
    session_id: str
    requests: int = 0
    before: int = 0
    after: int = 0
    archives: int = 0
    last: float = 0.0
    prev_before: int | None = None
    prev_after: int | None = None


def iso(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds") if ts is not None else None


def _pct(values: list[float]) -> dict[str, float | int | None]:
    ordered = sorted(values)
    out: dict[str, float | int | None] = {"n": len(ordered)}
    for q in PERCENTILES:
        out[f"p{round(q * 100)}"] = round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2) if ordered else None
    out["max"] = round(ordered[-1], 2) if ordered else None
    return out


def _share(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


def _cached(prev: int | None, now: int, prefix_kept: bool, miss: float) -> float:
    """The price of a prompt of ``now`` tokens whose first ``prev`` were sent just before (when the prefix is kept)."""
    hit = min(prev, now) if prev is not None and prefix_kept else 0
    return now - miss * hit


def build(
    records: Iterable[AuditRecord],
    cache_read_ratio: float,
    since: float | None = None,
    agent: str | None = None,
    top: int = 10,
    price_per_mtok: float | None = None,
) -> dict[str, Any]:
    """Fold the records (oldest first) into the report. ``agent`` keeps one agent and its sub-agents (``agent/…``)."""
    miss = 1 - cache_read_ratio
    sessions: dict[tuple[str, str], _Session] = {}
    modes, tiers, batches, reasons, sources, paths = Counter(), Counter(), Counter(), Counter(), Counter(), Counter()
    overflow = Counter({"client_over_window": 0, "prevented": 0, "not_prevented": 0, "upstream_refused": 0, "unknown": 0})
    lat: dict[str, list[float]] = {"upstream": [], "ruyi": [], "retrieval": []}
    n = errors = compactions = s2_written = rag_chunks = recalled = 0
    before_sum = after_sum = 0
    cost_without = cost_with = 0.0
    reported_prompt = reported_cached = reported_requests = 0
    first = last = None
    for record in records:
        if agent is not None and record.agent_id != agent and not record.agent_id.startswith(agent + "/"):
            continue
        b = record.body
        n += 1
        first = record.created_at if first is None else first
        last = record.created_at
        s = sessions.get((record.agent_id, record.session_id))
        if s is None:
            s = sessions[(record.agent_id, record.session_id)] = _Session(record.agent_id, record.session_id)
        before = int(b.get("est_before") or 0)
        after = int(b.get("est_after") if b.get("est_after") is not None else before)
        status, retried, archive = b.get("status"), bool(b.get("overflow_retry")), b.get("archive")
        modes[b.get("mode") or "on"] += 1
        tiers[b.get("tier") or "unknown"] += 1
        if b.get("batch") not in (None, "none", "waiting"):
            batches[b["batch"]] += 1
        compactions += bool(b.get("compaction"))
        errors += isinstance(status, int) and status >= 400
        # overflows: sent over the usable window (window - reserve), or refused by the upstream as too long after the retry
        usable = b.get("usable")
        refused = retried and isinstance(status, int) and status >= 400
        overflow["upstream_refused"] += retried
        if usable is None:
            overflow["unknown"] += 1  # a record written before the window was audited
        else:
            overflow["client_over_window"] += before > usable
            if refused or after > usable:
                overflow["not_prevented"] += 1
            elif before > usable or retried:
                overflow["prevented"] += 1
        # tokens and cost
        before_sum += before
        after_sum += after
        kept = not b.get("compaction") and not archive
        cost_without += _cached(s.prev_before, before, True, miss)
        cost_with += _cached(s.prev_after, after, kept, miss)
        if isinstance(b.get("cached_tokens"), int) and isinstance(b.get("upstream_prompt_tokens"), int):
            reported_requests += 1
            reported_prompt += b["upstream_prompt_tokens"]
            reported_cached += b["cached_tokens"]
        # archives, recall, summarizer
        if isinstance(archive, dict):
            reasons[archive.get("reason") or "unknown"] += 1
            sources[archive.get("summary_source") or "unknown"] += 1
            s.archives += 1
        s2_written += int(b.get("s2_written_count") or 0)
        chunks = int(b.get("rag_chunks") or 0)
        rag_chunks += chunks
        recalled += chunks > 0
        for path in b.get("retrieval_path") or ():
            paths[path] += 1
        for key, field in (("upstream", "latency_llm_ms"), ("ruyi", "latency_ruyi_ms"), ("retrieval", "latency_retrieval_ms")):
            if isinstance(b.get(field), (int, float)):
                lat[key].append(float(b[field]))
        s.requests += 1
        s.before += before
        s.after += after
        s.last = record.created_at
        s.prev_before, s.prev_after = before, after
    llm, fallback = sources["llm"], sources["extractive_fallback"]
    cost: dict[str, Any] = {
        "cache_read_ratio": cache_read_ratio,
        "without_ruyi": round(cost_without),
        "with_ruyi": round(cost_with),
        "saved": round(cost_without - cost_with),
        "saved_share": _share(cost_without - cost_with, cost_without),
        "ratio": _share(cost_with, cost_without),
    }
    if price_per_mtok is not None:
        cost["usd_saved"] = round((cost_without - cost_with) * price_per_mtok / 1e6, 4)
    ranked = sorted(sessions.values(), key=lambda x: (-x.before, x.agent_id, x.session_id))[:top]
    return {
        "generated_at": iso(time.time()),
        "since": iso(since),
        "first": iso(first),
        "last": iso(last),
        "agent": agent,
        "requests": {
            "total": n,
            "errors": errors,
            "agents": len({a for a, _ in sessions}),
            "sessions": len(sessions),
            "by_mode": dict(modes),
            "by_tier": dict(tiers),
        },
        "overflows": dict(overflow),
        "tokens": {
            "before": before_sum,
            "after": after_sum,
            "saved": before_sum - after_sum,
            "saved_share": _share(before_sum - after_sum, before_sum),
        },
        "cost": cost,
        "cache": {
            "reported_requests": reported_requests,
            "prompt_tokens": reported_prompt,
            "cached_tokens": reported_cached,
            "hit_rate": _share(reported_cached, reported_prompt),
            "estimated_hit_rate_with_ruyi": _share(after_sum - cost_with, miss * after_sum) if miss else None,
        },
        "batches": dict(batches),
        "compactions": compactions,
        "archives": {"total": sum(reasons.values()), "by_reason": dict(reasons), "s2_chunks_written": s2_written},
        "recall": {"requests": recalled, "chunks": rag_chunks, "paths": dict(paths)},
        "summarizer": {"by_source": dict(sources), "llm_summaries": llm, "fallbacks": fallback, "fallback_rate": _share(fallback, llm + fallback)},
        "latency_ms": {key: _pct(values) for key, values in lat.items()},
        "top_sessions": [
            {
                "agent_id": x.agent_id,
                "session_id": x.session_id,
                "requests": x.requests,
                "tokens_before": x.before,
                "tokens_after": x.after,
                "saved": x.before - x.after,
                "archives": x.archives,
                "last_seen": iso(x.last),
            }
            for x in ranked
        ],
    }


def _pc(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f} %"


def _ms(row: dict[str, Any]) -> str:
    if not row["n"]:
        return "| – | – | – | – | 0 |"
    return f"| {row['p50']:,} | {row['p90']:,} | {row['p99']:,} | {row['max']:,} | {row['n']:,} |"


def markdown(r: dict[str, Any]) -> str:
    """The report for people (seed 002's ``memory_system_health_YYYY-MM-DD.md``)."""
    req, ov, tok, cost, cache = r["requests"], r["overflows"], r["tokens"], r["cost"], r["cache"]
    arch, summ, recall = r["archives"], r["summarizer"], r["recall"]
    day = (r["generated_at"] or "")[:10]
    lines = [
        f"# Ruyi health report {day}",
        "",
        f"Records from {r['first'] or '–'} to {r['last'] or '–'}"
        + (f" (since {r['since']})" if r["since"] else "")
        + (f", agent {r['agent']}" if r["agent"] else "")
        + ".",
        "",
        "## Requests",
        "",
        f"- requests: {req['total']:,} ({req['errors']:,} answered with an error), {req['sessions']:,} sessions of {req['agents']:,} agents",
        "- by mode: " + (", ".join(f"{k} {v:,}" for k, v in sorted(req["by_mode"].items())) or "–"),
        "- by tier on arrival: " + (", ".join(f"{k} {v:,}" for k, v in sorted(req["by_tier"].items(), key=lambda kv: -kv[1])) or "–"),
        "",
        "## Overflows",
        "",
        f"- prevented: {ov['prevented']:,} (sent by the client over the usable window: {ov['client_over_window']:,})",
        f"- not prevented: {ov['not_prevented']:,} (forwarded over the usable window, or refused as too long after the one retry)",
        f"- upstream said too long (retried once): {ov['upstream_refused']:,}"
        + (f"; records without the window (older Ruyi): {ov['unknown']:,}" if ov["unknown"] else ""),
        "",
        "## Tokens and cost",
        "",
        f"- prompt tokens: {tok['before']:,} sent by clients, {tok['after']:,} forwarded: {tok['saved']:,} saved ({_pc(tok['saved_share'])})",
        f"- estimated cost with prompt caching (cached tokens at {cost['cache_read_ratio']:g} of the price): {cost['with_ruyi']:,} "
        f"vs {cost['without_ruyi']:,} token-prices sending everything: {cost['saved']:,} saved ({_pc(cost['saved_share'])}, "
        + (f"{cost['ratio']:.2f}×)" if cost["ratio"] is not None else "–)")
        + (f", ${cost['usd_saved']:,}" if "usd_saved" in cost else ""),
        f"- cache hits reported by the upstream: {_pc(cache['hit_rate'])} of {cache['prompt_tokens']:,} prompt tokens "
        f"({cache['reported_requests']:,} requests reported); estimated: {_pc(cache['estimated_hit_rate_with_ruyi'])}",
        "",
        "## Pruning and archives",
        "",
        "- batches: " + (", ".join(f"{k} {v:,}" for k, v in sorted(r["batches"].items())) or "none") + f"; compactions: {r['compactions']:,}",
        f"- archives: {arch['total']:,}"
        + (" (" + ", ".join(f"{k} {v:,}" for k, v in sorted(arch["by_reason"].items())) + ")" if arch["total"] else "")
        + f"; S2 chunks written: {arch['s2_chunks_written']:,}",
        f"- recall: {recall['requests']:,} requests, {recall['chunks']:,} chunks; paths: "
        + (", ".join(f"{k} {v:,}" for k, v in sorted(recall["paths"].items())) or "–"),
        "",
        "## Summarizer",
        "",
        "- archive summaries by source: " + (", ".join(f"{k} {v:,}" for k, v in sorted(summ["by_source"].items())) or "none"),
        f"- LLM summaries {summ['llm_summaries']:,}, fell back to extractive {summ['fallbacks']:,} ({_pc(summ['fallback_rate'])})",
        "",
        "## Latency (ms)",
        "",
        "| | p50 | p90 | p99 | max | requests |",
        "|---|---:|---:|---:|---:|---:|",
        f"| upstream (until its answer began) {_ms(r['latency_ms']['upstream'])}",
        f"| Ruyi's own (before the upstream's answer) {_ms(r['latency_ms']['ruyi'])}",
        f"| recall {_ms(r['latency_ms']['retrieval'])}",
        "",
        "## Top sessions by tokens",
        "",
        "| agent | session | requests | tokens sent | forwarded | saved | archives | last seen |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    lines += [
        f"| {s['agent_id']} | {s['session_id']} | {s['requests']:,} | {s['tokens_before']:,} | {s['tokens_after']:,} | {s['saved']:,} | "
        f"{s['archives']:,} | {s['last_seen']} |"
        for s in r["top_sessions"]
    ]
    return "\n".join(lines) + "\n"
