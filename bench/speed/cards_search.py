"""What looking up knowledge cards costs: 1,000 cards indexed cold, searched warm (with and without the recheck interval), keywords, rules."""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from memory.cards.index import CardIndex
from memory.cards.keywords import keywords_from
from memory.cards.rules import ProjectRules

WORDS = (
    "sqlite wal checkpoint redis cache retry backoff pytest fixture asyncio event loop token window archive summary "
    "prompt cache anthropic openai ollama stream chunk parser config yaml docker compose deploy migration schema index "
    "query latency budget tier prune dedup supersede placeholder anchor notebook snapshot agent session"
).split()
IDENTIFIERS = (
    "CardIndex",
    "load_config",
    "SessionRegistry",
    "max_inject",
    "HTTP",
    "WAL",
    "JSONDecodeError",
    "ProxyError",
    "retry_after",
    "num_ctx",
    "ClientSession",
    "prefix_cache",
    "ArchiveStep",
    "S0Options",
    "TTL",
)


def vocabulary(rng: random.Random, size: int) -> list[str]:
    """Made-up words, as many distinct ones as a real set of cards might hold."""
    return ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 10))) for _ in range(size)]


def make_cards(folder: Path, n: int, rng: random.Random, words: list[str]) -> None:
    """``n`` cards of about 1.5 KB: titles and tags from WORDS and IDENTIFIERS, bodies from ``words`` and a few of them."""
    folder.mkdir(parents=True, exist_ok=True)
    pool = words + list(IDENTIFIERS) + WORDS
    for i in range(n):
        title = " ".join(rng.sample(WORDS, 3) + [rng.choice(IDENTIFIERS)])
        tags = rng.sample(WORDS, 3)
        body = "\n".join(" ".join(rng.choice(pool) for _ in range(14)) for _ in range(15))
        (folder / f"card-{i:04d}.md").write_text(f"---\ntitle: {title!r}\ntags: {tags}\nrelevance_score: {rng.random():.2f}\n---\n{body}\n")


def make_tree(root: Path, folders: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "AGENTS.md").write_text("Run make check before committing.\n" * 40)
    for i in range(folders):
        sub = root / f"pkg{i % 20}" / f"mod{i}"
        sub.mkdir(parents=True, exist_ok=True)
        if i % 25 == 0:
            (sub / "AGENTS.md").write_text(f"Rules of module {i}.\n")


def timed(fn: Callable[[], Any], runs: int) -> dict[str, float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {"median_ms": round(statistics.median(times), 3), "p95_ms": round(times[int(len(times) * 0.95) - 1], 3), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cards", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        folder, dense, root = Path(tmp) / "cards", Path(tmp) / "dense", Path(tmp) / "repo"
        make_cards(folder, args.cards, rng, vocabulary(rng, 5000))
        make_cards(dense, args.cards, rng, [])  # every card shares one small vocabulary: every keyword hits every card
        make_tree(root, 400)
        recent = ["\n".join(" ".join(rng.choice(WORDS + list(IDENTIFIERS)) for _ in range(20)) for _ in range(200))] * 5  # 5 steps, ~40 KB each
        keywords = keywords_from(recent)
        cold = CardIndex([folder])
        start = time.perf_counter()
        found = cold.search(keywords, 3)
        cold_ms = (time.perf_counter() - start) * 1000
        every_call = CardIndex([folder], recheck_seconds=0)
        every_call.search(keywords, 3)
        throttled = CardIndex([folder], recheck_seconds=2)
        throttled.search(keywords, 3)
        worst = CardIndex([dense], recheck_seconds=2)
        worst.search(keywords, 3)
        rules = ProjectRules()
        rules.read(root, ["AGENTS.md"], 8000)
        results = {
            "cards": args.cards,
            "keywords": len(keywords),
            "found": [c.title for c in found],
            "cold_index_and_search_ms": round(cold_ms, 1),
            "search_rescan_every_call": timed(lambda: every_call.search(keywords, 3), args.runs),
            "search_recheck_2s": timed(lambda: throttled.search(keywords, 3), args.runs),
            "search_dense_worst_case": timed(lambda: worst.search(keywords, 3), args.runs),
            "keywords_from_5_steps": timed(lambda: keywords_from(recent), max(20, args.runs // 10)),
            "rules_cached_400_folders": timed(lambda: rules.read(root, ["AGENTS.md"], 8000), args.runs),
            "files_read_again_warm": every_call.reads - args.cards,
        }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for key, value in results.items():
        print(f"{key:<28} {value}")


if __name__ == "__main__":
    main()
