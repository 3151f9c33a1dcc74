"""The DCP report of a session: per strategy items and tokens saved, totals, protection, usage before → after, archives."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

STRATEGY_TITLES = {
    "dedup": "Deduplication",
    "supersede": "Supersede",
    "purge_errors": "Purge Errors",
    "truncation": "Truncation",
    "discard": "Discard",
}


def summarize(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Totals over a session's reports: what each strategy replaced, batches, latest usage. Only reports whose
    decisions went out and were kept count (not dry-run ones, nor a rewrite sent as the client's own bytes, nor
    a refused overflow retry): so the items counted are the items in force."""
    per: dict[str, dict[str, int]] = {}
    batches = {"applied": 0, "economic": 0, "too_small": 0, "overflow": 0, "requested": 0}
    archives = [r["archive"] for r in reports if isinstance(r.get("archive"), dict)]
    not_applied = 0
    layout: dict[str, int] = {}
    for report in reports:
        for name, n in (report.get("layout") or {}).get("sections", {}).items():  # what the layout added, applied or not
            layout[name] = layout.get(name, 0) + n
        if not report.get("applied", report.get("mode", "on") == "on"):
            not_applied += 1
            continue
        for name, row in report.get("strategies", {}).items():
            total = per.setdefault(name, {"items": 0, "tokens_saved": 0})
            total["items"] += row["items"]
            total["tokens_saved"] += row["tokens_saved"]
        if report.get("batch") in batches:
            batches[report["batch"]] += 1
    latest = reports[-1] if reports else {}
    return {
        "strategies": per,
        "items": sum(r["items"] for r in per.values()),
        "tokens_saved": sum(r["tokens_saved"] for r in per.values()),
        "batches": batches,
        "requests": len(reports),
        "archives": archives,
        "not_applied": not_applied,
        "layout": layout,
        "latest": latest,
    }


def markdown(session_id: str, reports: Sequence[dict[str, Any]]) -> str:
    """The seed's report layout, for people: a table per strategy, what was protected, usage."""
    s = summarize(reports)
    latest = s["latest"]
    lines = [f"## DCP report — session {session_id}", ""]
    if latest:
        lines += [
            f"**Latest request**: {latest.get('request')} · batch: {latest.get('batch')} · tier {latest.get('tier_before')} → {latest.get('tier_after')}",
            "",
        ]
    lines += ["### Pruned", "| strategy | items | tokens saved |", "|---|---|---|"]
    for name, row in s["strategies"].items():
        lines.append(f"| {STRATEGY_TITLES.get(name, name)} | {row['items']} | ~{row['tokens_saved']:,} |")
    lines.append(f"| **total** | **{s['items']}** | **~{s['tokens_saved']:,}** |")
    lines += [
        "",
        "### Protected",
        f"- the newest {latest.get('protected_turns', 4)} turns, system and user messages",
        "- messages citing anchors ([D001], [C002], …), reads of protected paths (*.md), protected tools",
        "",
    ]
    if latest:
        lines += [
            "### After pruning",
            f"- context usage: {latest['usage_before']:.0%} → {latest['usage_after']:.0%}"
            f" ({latest['tokens_before']:,} → {latest['tokens_after']:,} tokens)",
            f"- batches at the prune tier: {s['batches']['applied']}, paying for themselves below it:"
            f" {s['batches']['economic']}, too small to apply: {s['batches']['too_small']},"
            f" overflow retries: {s['batches']['overflow']}",
        ]
    if latest.get("layout"):
        added = latest["layout"]
        lines += [
            "",
            f"### Added by the layout ({added['mode']}; stable part {'built' if added['built'] else 'kept'})",
            "| section | tokens |",
            "|---|---|",
        ]
        lines += [f"| {name} | ~{n:,} |" for name, n in added["sections"].items()]
        lines.append(f"| **total** | **~{added['tokens']:,}** |")
    if s["archives"]:
        lines += [
            "",
            "### Archived (archive + restart)",
            "| # | messages | turns | why | tokens before → after | summary |",
            "|---|---|---|---|---|---|",
        ]
        for a in s["archives"]:
            first, last = a["messages"]
            lines.append(
                f"| {a['number']} | {first}–{last} | {a['turns']} | {a['reason']} | {a['tokens_before']:,} → {a['tokens_after']:,} "
                f"| {a['summary_source']}, {a['chunks']} chunks |"
            )
    return "\n".join(lines) + "\n"
