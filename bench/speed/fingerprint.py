"""What the fingerprinter costs and keeps: this checkout's beside another version's, side by side in one run.

``--before FILE`` names the ``memory/chain.py`` of another checkout (``git show REV:memory/chain.py > FILE``).
Every request of every public trace is parsed fresh, as the proxy sees it, and rewritten whole (fingerprint,
count, session, pruning) by two offline Ruyis that differ only in their fingerprinter, alternating which goes
first; then each fingerprinter alone is fed 128 whole traces as 128 agents would send them (each its own system
prompt) and what it still holds once the bodies are gone is measured with tracemalloc.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.traces import load_traces, requests_of
from config.load import load_config
from memory.chain import Fingerprinter
from proxy.know.tokens import TokenCounter, warm_up
from proxy.replay.offline import OfflineRuyi


def fingerprinter_from(path: Path) -> type[Any]:
    spec = importlib.util.spec_from_file_location("chain_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module.Fingerprinter  # type: ignore[no-any-return]


def retained(kind: type[Any], wires: list[str]) -> tuple[int, float]:
    """Bytes a fingerprinter still holds after the given bodies went through it and were dropped; ms spent."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    fingerprinter, spent = kind(), 0.0
    for wire in wires:
        messages = json.loads(wire)
        started = time.perf_counter()
        fingerprinter.chain(messages)
        spent += time.perf_counter() - started
        del messages
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return kept, spent * 1000


def agent_body(messages: list[dict[str, Any]], agent: int) -> str:
    """A whole trace as agent number ``agent`` would send it: its own system prompt, so its own session."""
    first = dict(messages[0], content=f"[agent {agent}] {messages[0].get('content') or ''}")
    return json.dumps([first, *messages[1:]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="memory/chain.py of the version to compare with")
    parser.add_argument("--window", type=int, default=32000)
    args = parser.parse_args()
    warm_up()
    config = load_config(None, {})
    old_kind = fingerprinter_from(args.before)
    traces = load_traces()
    rewrite: dict[str, list[float]] = {"this": [], "before": []}
    alone: dict[str, list[float]] = {"this": [], "before": []}
    wires: list[str] = []
    for trace in traces:
        ruyis = {
            "this": OfflineRuyi(config, "gpt-4", args.window, TokenCounter(config.tokens)),
            "before": OfflineRuyi(config, "gpt-4", args.window, TokenCounter(config.tokens)),
        }
        ruyis["before"].fingerprinter = old_kind()
        for n, request in enumerate(requests_of(trace)):
            wire = json.dumps(request)
            wires.append(wire)
            for name in ("this", "before") if n % 2 else ("before", "this"):
                body = json.loads(wire)
                started = time.perf_counter()
                ruyis[name](body, trace.tools)
                rewrite[name].append((time.perf_counter() - started) * 1000)
                body = json.loads(wire)
                fingerprinter = ruyis[name].fingerprinter
                started = time.perf_counter()
                fingerprinter.chain(body)  # the same request again: fingerprinting alone, warm
                alone[name].append((time.perf_counter() - started) * 1000)
    agents = [agent_body(traces[i % len(traces)].messages, i) for i in range(128)]
    memory = {"this": retained(Fingerprinter, agents), "before": retained(old_kind, agents)}
    size = sum(len(w) for w in agents)
    print(f"{len(wires)} requests of {len(traces)} traces, window {args.window}; 128 agents' bodies: {size / 2**20:.1f} MiB\n")
    print("| fingerprinter | rewrite, median ms | rewrite, p90 ms | fingerprint alone, median ms | held after 128 agents | ms for the 128 |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in ("before", "this"):
        values = sorted(rewrite[name])
        kept, spent = memory[name]
        print(
            f"| {name} | {statistics.median(values):.3f} | {values[int(0.9 * (len(values) - 1))]:.3f} "
            f"| {statistics.median(alone[name]):.3f} | {kept / 2**20:.2f} MiB | {spent:.0f} |"
        )
    ratio = statistics.median(rewrite["this"]) / statistics.median(rewrite["before"])
    print(f"\nrewrite median, this / before: {ratio:.2f}×; memory held, this / before: {memory['this'][0] / max(1, memory['before'][0]):.3f}×")


if __name__ == "__main__":
    main()
