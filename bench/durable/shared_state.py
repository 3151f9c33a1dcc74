"""What sharing a store between replicas adds to a request's session work: one process's registry beside two replicas'
registries taking turns on one store (every request finds the other's newer row and reads it back), in one run.

Every public trace is replayed as its agent's requests (bench/durable/store.py's method, whose ``Side`` this reuses): per
request, resolve the session, record the facts and the pruning outcome, write before forwarding; for the replicas
also locating the session, taking its lock (SQLite: a record lock beside the file; PostgreSQL: an advisory lock)
and checking its version. Pruning is the same for all and not timed; the rewrites must be identical.

    .venv/bin/python bench/durable/shared_state.py
    .venv/bin/python bench/durable/shared_state.py --pg postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.durable.store import MODEL, Side, quantile
from bench.traces import TRACES, load_traces, requests_of
from config.load import load_config
from memory.chain import Fingerprinter, MessageChain
from memory.sessions import SessionRegistry
from memory.shared import SharedRegistry
from memory.store.backend import open_store
from memory.store.options import StoreOptions
from proxy.http.log import configure_logging
from proxy.know.tokens import TokenCounter, warm_up


class Replica:
    """A replica's registry as the proxy drives it: locate, lock, resolve, …, write, unlock (memory/shared.py)."""

    def __init__(self, registry: SharedRegistry) -> None:
        self.inner, self.store = registry, registry.store
        self._held: Any = None

    def resolve(self, agent: str, chain: MessageChain) -> Any:
        assert self.store is not None
        candidate = self.inner.locate(agent, chain)
        self._held = self.store.session_lock(agent, candidate) if candidate else None
        if self._held is not None:
            self._held.acquire()
        return self.inner.resolve(agent, chain, locked=candidate)

    def record(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.record(*args, **kwargs)

    def flush(self) -> bool:
        try:
            return self.inner.flush()
        finally:
            if self._held is not None:
                self._held.release()
                self._held = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=Path, default=TRACES)
    parser.add_argument("--window", type=int, default=16000)
    parser.add_argument("--pg", metavar="URL", help="also replicas on PostgreSQL (schema ruyi_bench_shared, dropped after)")
    args = parser.parse_args(argv)
    configure_logging("error", "console", [])
    warm_up()
    config = load_config(None, {})
    traces = load_traces(args.traces)
    counter = TokenCounter(config.tokens)
    tmp = Path(tempfile.mkdtemp(prefix="ruyi-bench-shared-"))
    stores = {"sqlite": StoreOptions(data_dir=str(tmp / "one"))}
    shared = {"sqlite": StoreOptions(data_dir=str(tmp / "shared"), shared=True)}
    if args.pg:
        import psycopg

        with psycopg.connect(args.pg, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS ruyi_bench_shared CASCADE")
            conn.execute("CREATE SCHEMA ruyi_bench_shared")
        url = args.pg + ("&" if "?" in args.pg else "?") + "options=-csearch_path%3Druyi_bench_shared"
        shared["postgres"] = StoreOptions(backend="postgres", url=url, shared=True)
    one = Side(config, SessionRegistry(config.sessions, store=open_store(stores["sqlite"])))
    pairs = {
        name: [Side(config, Replica(SharedRegistry(config.sessions, store=open_store(o)))) for _ in range(2)]  # type: ignore[arg-type]
        for name, o in shared.items()
    }
    timings: dict[str, list[float]] = {"one process, SQLite": [], **{f"two replicas, {n}": [] for n in pairs}}
    try:
        for n, trace in enumerate(traces):
            fingerprinter, agent = Fingerprinter(), f"agent-{n}"
            for i, messages in enumerate(requests_of(trace)):
                chain = fingerprinter.chain(messages)
                prompt = counter.count(MODEL, messages, None, chain)
                ms, expected = one.request(agent, messages, chain, prompt, counter, args.window)
                timings["one process, SQLite"].append(ms)
                for name, pair in pairs.items():
                    ms, got = pair[i % 2].request(agent, messages, chain, prompt, counter, args.window)
                    assert got.messages == expected.messages, f"{trace.name} request {i}: replicas on {name} rewrote differently"
                    timings[f"two replicas, {name}"].append(ms)
    finally:
        if args.pg:
            import psycopg

            with psycopg.connect(args.pg, autocommit=True) as conn:
                conn.execute("DROP SCHEMA IF EXISTS ruyi_bench_shared CASCADE")
    print(f"{len(traces)} traces, {len(timings['one process, SQLite'])} requests, window {args.window}; identical rewrites\n")
    print("| session state per request | median ms | p90 ms | vs one process |\n|---|---|---|---|")
    base = statistics.median(timings["one process, SQLite"])
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.3f} | {quantile(values, 0.9):.3f} | {median / base:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
