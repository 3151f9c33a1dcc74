"""What waiting for a worker thread costs the event loop: ``Offload.run`` bounded (the stuck-store watchdog) and
unbounded, of this tree and of another checkout, interleaved, on a trivial function (so only the wait is measured).

    .venv/bin/python bench/serve/offload_wait.py --before /tmp/before     # "before" and "after", side by side
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def nothing() -> int:
    return 1


async def measure(trees: dict[str, Path], calls: int, rounds: int) -> dict[tuple[str, str], tuple[float, float]]:
    pools = {}
    for name, root in trees.items():
        module = load(root / "proxy" / "offload.py", f"offload_{name}")
        pools[(name, "unbounded")] = module.Offload(4, None)
        pools[(name, "bounded")] = module.Offload(4, 6.0)
    for pool in pools.values():  # warm-up: threads started
        for _ in range(500):
            await pool.run(nothing)
    seen: dict[tuple[str, str], list[tuple[float, float]]] = {key: [] for key in pools}
    for _ in range(rounds):
        for key, pool in pools.items():
            cpu, wall = time.thread_time(), time.perf_counter()
            for _ in range(calls):
                await pool.run(nothing)
            seen[key].append(((time.thread_time() - cpu) / calls * 1e6, (time.perf_counter() - wall) / calls * 1e6))
    for pool in pools.values():
        pool.close()
    return {key: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for key, v in seen.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, help="another checkout, measured as 'before'")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    trees = {"after": ROOT} if args.before is None else {"before": args.before, "after": ROOT}
    import uvloop

    results = uvloop.run(measure(trees, args.calls, args.rounds))
    print("| tree | wait | loop CPU µs per call | wall µs per call |\n|---|---|---:|---:|")
    for (tree, kind), (cpu, wall) in results.items():
        print(f"| {tree} | {kind} | {cpu:.1f} | {wall:.1f} |")


if __name__ == "__main__":
    main()
