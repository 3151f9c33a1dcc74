"""What archives do on the public traces: how often, why, what the summary keeps, what they cost in rewrite time.

Usage: ``python bench/savings/archives.py [--traces DIR] [--windows 8000,16000,32000] [--json]``.

Every trace is replayed as its requests through Ruyi (default config) at each window. For each archive:
- kept: the summary carried in the request names every file the archived messages changed (as Ruyi's classifier
  sees them: writes, edits, shell redirections and sed -i), the last error they saw (its last error line) and the
  task (its first 60 characters);
- regrowth: how far the session grew between an archive and the next one made at the archive tier, as a share of
  the window (an archive made because the request would not fit at all is counted apart);
- time: each request's rewrite time, as CPU time of the thread that rewrites it (the machine's load moves wall
  time far more), without the background preparation a replay runs before the next request, measured in the
  same run; an archiving request's extra time is compared with
  the median of the ordinary requests of the same window, and with the median of the 5 requests of its session
  just before it (as long, give or take a turn) (the target: at most 2× an ordinary request's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.savings.savings import RUYI_CONFIG, RUYI_COUNTER
from bench.traces import TRACES, load_traces, requests_of
from conversation.messages import is_error_output, message_text
from proxy.replay.offline import OfflineRuyi
from proxy.replay.run import Trace
from strategies.purge_errors import error_lines
from summaries.extractive import Extractor

WINDOWS = (8_000, 16_000, 32_000)


def last_error_line(messages: list[dict[str, Any]], first: int, last: int) -> str | None:
    for m in reversed(messages[first : last + 1]):
        text = message_text(m)
        if m.get("role") == "tool" and text and is_error_output(m, text):
            lines = error_lines(text, 5)
            return lines[-1].strip() if lines else None
    return None


def in_background(ruyi: OfflineRuyi) -> list[float]:
    """A one-item list the replay adds the CPU time of its background preparation of chunks and summaries to (a
    real session does it between two requests, off the request path; an LLM summarizer's S1 is not counted
    out: the default config has none)."""
    spent, method = [0.0], ruyi.longctx.prepare_for

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return method(*args, **kwargs)
        finally:
            spent[0] += time.thread_time() - started

    ruyi.longctx.prepare_for = timed  # type: ignore[method-assign]
    return spent


def run(window: int, traces: list[Trace]) -> dict[str, Any]:
    extractor = Extractor()
    archives: list[str] = []
    checks = {"files": 0, "error": 0, "task": 0, "of": 0}
    regrowth: list[float] = []
    over = 0
    ordinary: list[float] = []
    archiving: list[float] = []
    near: list[float] = []
    for trace in traces:
        ruyi = OfflineRuyi(RUYI_CONFIG, "gpt-4", window, RUYI_COUNTER)
        background = in_background(ruyi)
        previous_after: int | None = None
        recent: list[float] = []
        for messages in requests_of(trace):
            background[0], started = 0.0, time.thread_time()
            ruyi(messages, trace.tools)
            took = (time.thread_time() - started - background[0]) * 1000  # the request's own CPU time
            mem = ruyi.contexts[0].longctx
            if mem is None or mem.archived is None:
                ordinary.append(took)
                recent = (recent + [took])[-5:]
                continue
            archiving.append(took)
            if recent:
                near.append((took - statistics.median(recent)) / statistics.median(recent))
            record = mem.archived.record
            archives.append(record["reason"])
            if record["reason"] == "over_window":
                over += 1
            elif previous_after is not None:
                regrowth.append((record["tokens_before"] - previous_after) / window)
            previous_after = record["tokens_after"]
            block, first, last = record["block"], record["head"], record["end"]
            edited = extractor.digest(messages[first : last + 1], first).edited
            error = last_error_line(messages, first, last)
            task = message_text(messages[first - 1]) if first else None
            checks["of"] += 1
            checks["files"] += all(path in block for path in edited)
            checks["error"] += error is None or error[:60] in block
            checks["task"] += task is None or " ".join(task.split())[:60] in " ".join(block.split())
    base = statistics.median(ordinary) if ordinary else 0.0
    extra = [t - base for t in archiving]
    return {
        "archives": len(archives),
        "reasons": {r: archives.count(r) for r in sorted(set(archives))},
        "summary_names_edited_files": f"{checks['files']}/{checks['of']}",
        "summary_has_last_error": f"{checks['error']}/{checks['of']}",
        "summary_has_task": f"{checks['task']}/{checks['of']}",
        "regrowth_min": round(min(regrowth), 3) if regrowth else None,
        "regrowth_median": round(statistics.median(regrowth), 3) if regrowth else None,
        "ordinary_ms_median": round(base, 3),
        "archiving_ms_median": round(statistics.median(archiving), 3) if archiving else None,
        "archiving_extra_over_ordinary_median": round(statistics.median(extra) / base, 2) if extra and base else None,
        "archiving_extra_over_ordinary_p90": round(sorted(extra)[int(0.9 * (len(extra) - 1))] / base, 2) if extra and base else None,
        "archiving_extra_over_the_5_requests_before_median": round(statistics.median(near), 2) if near else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=TRACES, help="folder of trace files")
    parser.add_argument("--windows", default=",".join(map(str, WINDOWS)))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    traces = load_traces(args.traces)
    report = {w: run(w, traces) for w in (int(x) for x in args.windows.split(","))}
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    keys = list(next(iter(report.values())))
    print("| measure | " + " | ".join(f"{w // 1000}k" for w in report) + " |")
    print("|---|" + "---:|" * len(report))
    for key in keys:
        print(f"| {key.replace('_', ' ')} | " + " | ".join(str(report[w][key]) for w in report) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
