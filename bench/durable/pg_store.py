"""What the durable store adds to a request on SQLite and on PostgreSQL, side by side in one run (bench/durable/store.py's method).

Every public trace is replayed as its agent's requests through three registries: in memory, over SQLite, over
PostgreSQL (a schema of its own, dropped after), the order rotating per request. Timed per request: the session-state
work done before forwarding (resolve, record, and with a store its one transaction), as in bench/durable/store.py; background
records are written off the clock. Halfway through each trace both stores are reopened (a restart): that request
reads its session back.

    .venv/bin/python bench/durable/pg_store.py [--window 16000] [--url postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.durable.store import MODEL, Side, quantile  # noqa: E402
from bench.traces import TRACES, load_traces, requests_of  # noqa: E402
from config.load import load_config  # noqa: E402
from memory.chain import Fingerprinter, chain_of  # noqa: E402
from memory.sessions import SessionRegistry  # noqa: E402
from memory.store.base import Background, Store  # noqa: E402
from memory.store.pg_store import PgStore  # noqa: E402
from memory.store.sqlite_store import SQLiteStore  # noqa: E402
from proxy.know.tokens import TokenCounter, warm_up  # noqa: E402
from proxy.replay.run import Trace  # noqa: E402
from tests import pg  # noqa: E402


def run(config: Any, stores: dict[str, Callable[[], Store]], window: int, traces: list[Trace]) -> dict[str, dict[str, list[float]]]:
    names = ["memory", *stores]
    timings: dict[str, dict[str, list[float]]] = {n: {"no batch": [], "batch": [], "restart": [], "background": []} for n in names}
    counter = TokenCounter(config.tokens)
    queues: dict[str, list[Background]] = {n: [] for n in stores}

    def side(name: str) -> Any:
        if name == "memory":
            return Side(config, SessionRegistry(config.sessions))
        return Side(config, SessionRegistry(config.sessions, store=stores[name](), queue=queues[name].append), queues[name])

    sides = {n: side(n) for n in names}
    for n, trace in enumerate(traces):
        fingerprinter, agent = Fingerprinter(), f"agent-{n}"
        requests = list(requests_of(trace))
        for i, messages in enumerate(requests):
            chain = fingerprinter.chain(messages)
            prompt = counter.count(MODEL, messages, None, chain)
            restart = i == len(requests) // 2
            if restart:
                for name in stores:
                    timings[name]["background"] += sides[name].background
                    sides[name].registry.store.close()
                    sides[name] = side(name)
                    sides[name].registry.resolve("warm-up", chain_of([{"role": "user", "content": "warm up"}]))
                    sides[name].registry.flush()
            order = names[i % len(names) :] + names[: i % len(names)]
            results = {name: sides[name].request(agent, messages, chain, prompt, counter, window) for name in order}
            reference = results["memory"][1].messages
            assert all(out.messages == reference for _, out in results.values()), f"{trace.name} request {i}: a store changed a rewrite"
            kind = "restart" if restart else ("batch" if results["memory"][1].decisions else "no batch")
            for name, (ms, _) in results.items():
                timings[name][kind].append(ms)
    for name in stores:
        timings[name]["background"] += sides[name].background
        sides[name].registry.store.close()
    return timings


def table(timings: dict[str, dict[str, list[float]]]) -> str:
    stores = [n for n in timings if n != "memory"]
    head = "| request | n | " + " | ".join(f"{n}: added, median ms (p90)" for n in stores) + " | PostgreSQL / SQLite |"
    rows = [head, "|" + "---|" * (3 + len(stores))]
    for kind, label in (
        ("no batch", "without a batch"),
        ("batch", "with a batch"),
        ("restart", "first after a restart (read back)"),
        ("background", "background records (off the request path)"),
    ):
        cells, medians = [], []
        for name in stores:
            values = timings[name][kind]
            if kind in ("no batch", "batch"):
                values = [d - m for m, d in zip(timings["memory"][kind], values, strict=True)]
            medians.append(statistics.median(values))
            cells.append(f"{medians[-1]:.3f} ({quantile(values, 0.9):.3f})")
        n = len(timings[stores[0]][kind])
        rows.append(f"| {label} | {n} | " + " | ".join(cells) + f" | **{medians[-1] / medians[0]:.1f}x** |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=TRACES)
    parser.add_argument("--window", type=int, default=16000)
    parser.add_argument("--url", default=None, help="the PostgreSQL server (a schema of its own is made and dropped)")
    args = parser.parse_args()
    server = args.url or pg.probe()[0]
    if server is None:
        print(f"no PostgreSQL: {pg.probe()[1]}")
        return 1
    warm_up()
    config = load_config(None, {})
    traces = load_traces(args.traces)
    schema, url = pg.create_schema(server, "ruyi_bench")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            stores: dict[str, Callable[[], Store]] = {"SQLite": lambda: SQLiteStore(Path(tmp) / "ruyi.db"), "PostgreSQL": lambda: PgStore(url)}
            timings = run(config, stores, args.window, traces)
    finally:
        pg.drop_schema(server, schema)
    print(f"{len(traces)} traces, window {args.window}; SQLite (WAL) in a temporary directory, PostgreSQL at {server} (psycopg 3)\n")
    print(table(timings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
