"""What the durable store adds to a request: session state in memory vs in the SQLite store, side by side in one run.

Every public trace is replayed as its agent's requests; each request goes through two registries, one in
memory and one writing through to SQLite, alternating which goes first. Timed per request: what the proxy
does with session state before forwarding (resolve the session, record the facts and the pruning outcome,
and, with the store, the one transaction). Fingerprints, token counts and pruning are the same for both and
not timed. Background records (reports, usage) are written after each request, off the clock, as the
writer does off the request path. A request "with a batch" is one whose pruning made new decisions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.traces import TRACES, load_traces, requests_of
from config.load import load_config
from config.schema import Config
from memory.chain import Fingerprinter, MessageChain, chain_of
from memory.sessions import SessionRegistry
from memory.store.base import Background
from memory.store.sqlite_store import SQLiteStore
from proxy.know.tokens import PromptTokens, TokenCounter, warm_up
from proxy.know.window import budget_for
from proxy.replay.run import Trace
from proxy.rewrite.pruning import Outcome, Pruner

MODEL = "gpt-4o"
Timings = dict[str, list[float]]
Messages = list[dict[str, Any]]


class Side:
    """One way of keeping session state, with the pruning that reads it."""

    def __init__(self, config: Config, registry: SessionRegistry, queued: list[Background] | None = None) -> None:
        self.config, self.registry, self.queued = config, registry, queued
        self.background: list[float] = []
        """Milliseconds the background writer spends per request (off the request path)."""
        self.pruner = Pruner(config.pruning, config.tiers)

    def request(
        self, agent: str, messages: Messages, chain: MessageChain, prompt: PromptTokens, counter: TokenCounter, window: int
    ) -> tuple[float, Outcome]:
        """One request: milliseconds spent on session state, and the pruning outcome."""
        config, registry = self.config, self.registry
        started = time.perf_counter()
        resolution = registry.resolve(agent, chain)
        resolved = time.perf_counter()
        session = resolution.session
        budget = budget_for(window, None, config.window)
        outcome = self.pruner.rewrite(
            messages,
            chain.links,
            resolution.shared,
            session.decisions,
            session.batch_retry_at,
            prompt.total,
            budget,
            counter.text_counter(MODEL),
            prompt.messages,
            session.requests,
        )
        pruned = time.perf_counter()
        registry.record(agent, session.session_id, prompt_tokens=outcome.tokens_after, tier="normal", window=window, calibration=1.0)
        registry.record(
            agent,
            session.session_id,
            decisions=outcome.decisions,
            refs=outcome.refs,
            batch_retry_at=outcome.batch_retry_at,
            clear_batch_retry=outcome.clear_batch_retry,
            report=outcome.report,
            reports_max=config.pruning.reports_kept,
        )
        registry.flush()
        done = time.perf_counter()
        if self.queued and registry.store is not None:  # the background writer's work, off the request's clock
            written = time.perf_counter()
            registry.store.write_background(self.queued)
            self.background.append((time.perf_counter() - written) * 1000)
            self.queued.clear()
            registry.store.checkpoint()  # as the writer does, in a worker thread (a no-op until the log is 4 MiB)
        return ((resolved - started) + (done - pruned)) * 1000, outcome


def run(config: Config, data_dir: Path, window: int, traces: list[Trace]) -> tuple[Timings, Timings, list[float], list[float]]:
    memory: Timings = {"no batch": [], "batch": []}
    stored: Timings = {"no batch": [], "batch": []}
    restarts: list[float] = []
    background: list[float] = []
    counter = TokenCounter(config.tokens)
    queued: list[Background] = []
    mem = Side(config, SessionRegistry(config.sessions))
    disk = Side(config, SessionRegistry(config.sessions, store=SQLiteStore(data_dir / "ruyi.db"), queue=queued.append), queued)
    for n, trace in enumerate(traces):
        fingerprinter, agent = Fingerprinter(), f"agent-{n}"
        requests = list(requests_of(trace))
        for i, messages in enumerate(requests):
            chain = fingerprinter.chain(messages)
            prompt = counter.count(MODEL, messages, None, chain)
            restart = i == len(requests) // 2
            if restart:  # a new process on the same file: this request reads its session back
                assert disk.registry.store is not None
                disk.registry.store.close()
                background += disk.background
                disk = Side(config, SessionRegistry(config.sessions, store=SQLiteStore(data_dir / "ruyi.db"), queue=queued.append), queued)
                disk.registry.resolve("warm-up", chain_of([{"role": "user", "content": "warm up"}]))
                disk.registry.flush()  # the new process has served someone else first: its connection is warm
            results: dict[int, tuple[float, Outcome]] = {}
            for side in (mem, disk) if i % 2 else (disk, mem):
                results[id(side)] = side.request(agent, messages, chain, prompt, counter, window)
            (m_ms, m_out), (d_ms, d_out) = results[id(mem)], results[id(disk)]
            assert m_out.messages == d_out.messages, f"{trace.name} request {i}: the store changed a rewrite"
            if restart:
                restarts.append(d_ms)
                continue
            kind = "batch" if m_out.decisions else "no batch"
            memory[kind].append(m_ms)
            stored[kind].append(d_ms)
    return memory, stored, restarts, background + disk.background


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def table(memory: Timings, stored: Timings, restarts: list[float], background: list[float]) -> str:
    def fmt(ms: float) -> str:
        return f"{ms:.3f}"

    rows = [
        "| request | n | in memory, median ms | with the store, median ms | added, median ms | added, p90 ms | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, target in (("no batch", "< 1 ms"), ("batch", "< 5 ms")):
        added = [d - m for m, d in zip(memory[kind], stored[kind])]
        rows.append(
            f"| {'without' if kind == 'no batch' else 'with'} a batch | {len(added)} | {fmt(statistics.median(memory[kind]))} | "
            f"{fmt(statistics.median(stored[kind]))} | **{fmt(statistics.median(added))}** | {fmt(quantile(added, 0.9))} | {target} |"
        )
    rows.append(
        f"| first after a restart (session read back) | {len(restarts)} | – | {fmt(statistics.median(restarts))} | "
        f"{fmt(statistics.median(restarts))} | {fmt(quantile(restarts, 0.9))} | – |"
    )
    rows.append(
        f"| background records of a request (report, usage), off the request path | {len(background)} | – | "
        f"{fmt(statistics.median(background))} | – | {fmt(quantile(background, 0.9))} | – |"
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=Path, default=TRACES)
    parser.add_argument("--window", type=int, default=16000, help="context window in tokens (smaller: more batches)")
    parser.add_argument("--data-dir", type=Path, help="where the database goes (default: a temporary directory)")
    args = parser.parse_args(argv)
    warm_up()
    config = load_config(None, {})
    traces = load_traces(args.traces)
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data_dir or Path(tmp)
        memory, stored, restarts, background = run(config, data_dir, args.window, traces)
    print(
        f"{len(traces)} traces, window {args.window}, SQLite (WAL, synchronous=NORMAL) under {'a temporary directory' if not args.data_dir else data_dir}\n"
    )
    print(table(memory, stored, restarts, background))
    return 0


if __name__ == "__main__":
    sys.exit(main())
