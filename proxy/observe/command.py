"""``ruyi report``: the health report (seed 002) from the store under store.data_dir, as markdown or JSON."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DURATION = re.compile(r"^(\d+(?:\.\d+)?)([mhdw])$")
SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def add_parser(sub: Any) -> None:
    report = sub.add_parser(
        "report",
        help="the health report: requests, overflows, tokens and cost saved, cache, archives, summarizer, latency",
        description="Seed 002's health report from the store's audit records (every agent's, or --agent's): requests, "
        "overflows prevented and not, tokens and estimated cost saved with prompt caching, the cache-hit rate, batches and "
        "archives, the summarizer's health, latency percentiles (the upstream's and Ruyi's own), the top sessions by tokens. "
        "Reads the store under store.data_dir; safe while Ruyi runs (its newest records may still be queued).",
    )
    report.add_argument(
        "--since",
        metavar="DATE",
        help="only records from then on: 2026-11-24, 2026-11-24T09:00 (UTC unless an offset is given), or a duration back from now: 90m, 24h, 7d, 2w",
    )
    report.add_argument("--format", choices=("markdown", "json"), default="markdown", help="markdown (default) or JSON")
    report.add_argument("--agent", metavar="A", help="one agent and its sub-agents only")
    report.add_argument("--top", metavar="N", type=int, default=10, help="sessions listed by tokens (default 10)")
    report.add_argument("--price", metavar="USD", type=float, help="price of a million uncached prompt tokens: the cost saved in dollars too")
    report.add_argument("--data-dir", metavar="DIR", help="the store's directory (default: store.data_dir, RUYI_DATA_DIR)")
    report.add_argument("--config", metavar="FILE", help="YAML config file (also RUYI_CONFIG)")


def parse_since(text: str, now: float | None = None) -> float:
    """A date, a date and time (UTC unless it says otherwise), or a duration back from ``now``. ValueError otherwise."""
    now = time.time() if now is None else now
    match = DURATION.match(text.strip())
    if match:
        return now - float(match.group(1)) * SECONDS[match.group(2)]
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--since: {text!r} is not a date (2026-11-24), a date and time (2026-11-24T09:00) or a duration (24h, 7d)") from None
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()


def run(args: argparse.Namespace) -> int:
    from config.load import load_config
    from memory.store.backend import open_store
    from proxy.observe.report import build, markdown

    try:
        since = parse_since(args.since) if args.since else None
    except ValueError as exc:
        print(f"ruyi: {exc}", file=sys.stderr)
        return 2
    config = load_config(args.config, os.environ, {"store.data_dir": args.data_dir})
    if config.store.backend == "memory":
        print("ruyi: store.backend is memory: nothing is kept, nothing to report", file=sys.stderr)
        return 1
    if config.store.backend == "sqlite" and not (Path(config.store.data_dir) / "ruyi.db").exists():
        print(f"ruyi: no store under {config.store.data_dir} (store.data_dir, RUYI_DATA_DIR, --data-dir): nothing to report", file=sys.stderr)
        return 1
    store = open_store(config.store)
    assert store is not None
    try:
        report = build(store.audit_records(since), config.pruning.cache_read_ratio, since, args.agent, max(0, args.top), args.price)
    finally:
        store.close()
    print(json.dumps(report, indent=1, ensure_ascii=False) if args.format == "json" else markdown(report), end="" if args.format != "json" else "\n")
    return 0
