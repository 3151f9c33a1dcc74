"""Next-step evidence: does the forwarded request still hold what the agent's next message refers to?

Usage: ``python bench/savings/evidence.py [--traces DIR] [--windows 8000,16000,32000,64000] [--only NAME,...] [--json]
[--summarizer-model M [--summarizer-api-base URL] [--summarizer-key-env NAME] | --fake-summarizer]``: the last add a
row of Ruyi with its LLM summarizer on beside Ruyi with it off (bench/savings/llm_summarizer.py says how it is modelled).

For every request of a recorded session (each prefix ending before an assistant message), the distinctive terms of
the agent's *actual next message* (its text and tool calls) are taken: identifiers with ``_``, paths, dotted names,
words with digits or inner capitals (``parse_args``, ``django/http/response.py``, ``HttpResponse``, ``PY39``). Of
those, the ones that appear earlier in the history but not in the system prompt or the task are the evidence the next
step used; the figure is the share of them still anywhere in the request the strategy forwards (message text, tool
calls, an archive block). Sending everything keeps 100 %. Beside it: saved %, cost with caching, cache hit, needles and
requests over the window, from the same replay (``bench/savings/savings.py``'s strategies and definitions).

A lost term is put down to the step that removed the last message holding it: ``archived`` (the message is gone from
a request that carries an archive or a compaction), ``pruned: <why>`` (a tool output replaced by a placeholder, its
reason), ``dropped`` (a baseline removed the message), ``cleared`` (a baseline replaced its text).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/savings/evidence.py`: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.savings.llm_summarizer import LLMRows, add_arguments, logs_to_stderr
from bench.savings.savings import STRATEGIES, TRACES, load_traces
from proxy.replay.metrics import archive_in, canonical
from proxy.replay.run import Cl100kCounter, Prices, ReplayResult, Rewrite, merge, replay

WINDOWS = (8_000, 16_000, 32_000, 64_000)
_CANDIDATE = re.compile(r"(?<![\\\w])[A-Za-z0-9_][A-Za-z0-9_./:-]*[A-Za-z0-9_]")
_INNER_CAPITAL = re.compile(r"[a-z][A-Z]")
_PLACEHOLDER_WHY = re.compile(r"^\[ruyi: .*? replaced: ([^;\]]+)")
MIN_CHARS = 4
Message = Mapping[str, Any]


def distinctive(text: str) -> set[str]:
    """The distinctive terms of a text: identifiers with ``_``, paths, dotted names, words with digits or inner capitals."""
    found: set[str] = set()
    for match in _CANDIDATE.finditer(text):
        term = match.group(0).rstrip(".:-/")
        if len(term) < MIN_CHARS or term.isdigit() or "://" in term:
            continue
        letters = any(c.isalpha() for c in term)
        if not letters:
            continue  # numbers, dates, versions alone
        if "_" in term or "/" in term or _INNER_CAPITAL.search(term) or any(c.isdigit() for c in term) or re.search(r"\w\.\w", term):
            found.add(term)
    return found


def message_body(message: Message) -> str:
    """Everything a message says: its text parts and its tool calls' names and arguments."""
    content = message.get("content")
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping):
                for key in ("text", "content", "input", "thinking"):
                    value = part.get(key)
                    if isinstance(value, str):
                        parts.append(value)
                    elif value is not None and key in ("input", "content"):
                        parts.append(json.dumps(value, ensure_ascii=False))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        parts.append(f"{function.get('name', '')}({_arguments(function.get('arguments'))})")
    return "\n".join(parts)


def _arguments(arguments: Any) -> str:
    """A call's arguments as the text they hold (JSON strings decoded: a ``\\n`` inside is a line break)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    if isinstance(arguments, Mapping):
        return "\n".join(str(v) for v in arguments.values())
    return str(arguments)


def task_end(messages: Sequence[Message]) -> int:
    """Position of the first assistant message: the system prompt and the task lie before it."""
    return next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages))


@dataclass
class Evidence:
    """Terms the next steps used and how many the forwarded requests kept; lost ones by term and by cause."""

    terms: int = 0
    kept: int = 0
    requests: int = 0
    lost_terms: Counter[str] = field(default_factory=Counter)
    causes: Counter[str] = field(default_factory=Counter)

    @property
    def share(self) -> float:
        return self.kept / self.terms if self.terms else 1.0

    def add(self, other: Evidence) -> None:
        self.terms += other.terms
        self.kept += other.kept
        self.requests += other.requests
        self.lost_terms.update(other.lost_terms)
        self.causes.update(other.causes)


def evidence_of(original: Sequence[Message], sent: Sequence[Message], next_message: Message, bodies: Sequence[str] | None = None) -> Evidence:
    """The next step's evidence in one request: the terms of ``next_message`` found earlier in ``original`` (not in
    its system prompt or task), and which of them ``sent`` still holds; ``bodies``: ``original``'s message bodies."""
    bodies = list(bodies) if bodies is not None else [message_body(m) for m in original]
    head = task_end(original)
    fixed = "\n".join(bodies[:head])
    wanted = [t for t in sorted(distinctive(message_body(next_message))) if t not in fixed and any(t in b for b in bodies[head:])]
    result = Evidence(requests=1)
    if not wanted:
        return result
    forwarded = "\n".join(message_body(m) for m in sent)
    sent_canon = {canonical(m) for m in sent}
    by_call = {m.get("tool_call_id"): m for m in sent if m.get("role") == "tool" and m.get("tool_call_id")}
    archived = archive_in(sent) > 0
    for term in wanted:
        result.terms += 1
        if term in forwarded:
            result.kept += 1
            continue
        result.lost_terms[term] += 1
        holder = max(i for i in range(head, len(original)) if term in bodies[i])
        result.causes[_cause(original[holder], sent_canon, by_call, archived)] += 1
    return result


def _cause(message: Message, sent_canon: set[str], by_call: Mapping[Any, Message], archived: bool) -> str:
    role = message.get("role") or "?"
    if canonical(message) in sent_canon:
        return f"kept elsewhere ({role})"
    replaced = by_call.get(message.get("tool_call_id")) if role == "tool" else None
    if replaced is not None:
        match = _PLACEHOLDER_WHY.match(message_body(replaced))
        return f"pruned: {match.group(1).strip()[:40]}" if match else "cleared (tool output)"
    return f"archived ({role})" if archived else f"dropped ({role})"


class Probe:
    """A rewrite that measures the next step's evidence in every request it forwards."""

    def __init__(self, inner: Rewrite, trace: Sequence[Message]) -> None:
        self.inner, self.trace = inner, trace
        self.evidence = Evidence()
        self.bodies = [message_body(m) for m in trace]

    def __call__(self, messages: list[dict[str, Any]], tools: Any) -> list[dict[str, Any]]:
        end = len(messages)
        sent = self.inner(messages, tools)
        if end < len(self.trace):
            self.evidence.add(evidence_of(messages, sent, self.trace[end], self.bodies[:end]))
        return sent

    def __getattr__(self, name: str) -> Any:  # side_requests, layout_sections: the inner rewrite's
        return getattr(self.inner, name)


def run(factory: Callable[[int], Rewrite], traces: Sequence[Any], window: int) -> tuple[ReplayResult, Evidence]:
    """Replay every trace through a fresh rewrite of ``factory``; the replay's totals and the evidence kept."""
    count, total, results = Cl100kCounter(), Evidence(), []
    for trace in traces:
        probe = Probe(factory(window), trace.messages)
        results.append(replay(trace.messages, trace.tools, probe, window, count, Prices(), trace=trace.name))
        total.add(probe.evidence)
    return merge(results), total


def table(window: int, rows: Mapping[str, tuple[ReplayResult, Evidence]]) -> str:
    lines = [
        f"| at {window // 1000}k | evidence | saved | cost with caching | cache hit | needles | over the window |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, (result, ev) in rows.items():
        t = result.totals
        lines.append(
            f"| {name} | {100 * ev.share:.1f} % ({ev.kept:,}/{ev.terms:,}) | {100 * t.saved:.1f} % "
            f"| {t.cost_ratio:.2f}× | {100 * t.cache_hit_rate:.1f} % | {100 * t.needles_kept:.1f} % "
            f"| {t.over_window} / {t.requests} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=TRACES, help="folder of trace files")
    parser.add_argument("--windows", default=",".join(map(str, WINDOWS)))
    parser.add_argument("--only", default="", help="comma-separated substrings of strategy names to run")
    parser.add_argument("--lost", type=int, default=10, help="lost terms and causes listed per window (Ruyi)")
    parser.add_argument("--json", action="store_true")
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.traces is None or not Path(args.traces).is_dir():
        print("no trace folder (set RUYI_TRACE_DIR or --traces)", file=sys.stderr)
        return 2
    traces = load_traces(args.traces)
    wanted = [s.strip().lower() for s in args.only.split(",") if s.strip()]
    chosen = {n: f for n, f in STRATEGIES.items() if not wanted or any(w in n.lower() for w in wanted)}
    llm = LLMRows.from_args(args)
    chosen = llm.rows(chosen)
    report: dict[str, Any] = {}
    for window in (int(w) for w in args.windows.split(",")):
        rows = {name: run(factory, traces, window) for name, factory in chosen.items()}
        summarizer = llm.take()
        report[str(window)] = {
            name: {
                "evidence": round(ev.share, 4),
                "terms": ev.terms,
                "kept": ev.kept,
                "saved": round(r.totals.saved, 4),
                "cost_ratio": round(r.totals.cost_ratio, 3),
                "cache_hit": round(r.totals.cache_hit_rate, 4),
                "needles": round(r.totals.needles_kept, 4),
                "over": r.totals.over_window,
                "requests": r.totals.requests,
                "lost": ev.lost_terms.most_common(args.lost),
                "causes": ev.causes.most_common(),
            }
            for name, (r, ev) in rows.items()
        }
        if llm.label is not None:
            report[str(window)][llm.label]["summarizer"] = summarizer.as_json(rows[llm.label][0].totals.summarizer_tokens)
        if not args.json:
            print(table(window, rows) + "\n")
            if llm.label is not None:
                print(summarizer.line(f"LLM summarizer at {window // 1000}k", rows[llm.label][0].totals.summarizer_tokens) + "\n")
            for name, (_, ev) in rows.items():
                if name.startswith("Ruyi") or len(rows) == 1:
                    print(
                        f"{name} at {window // 1000}k, lost most often: " + ", ".join(f"`{t}` ×{n}" for t, n in ev.lost_terms.most_common(args.lost))
                    )
                    print("  why: " + ", ".join(f"{c} {n}" for c, n in ev.causes.most_common()) + "\n")
            sys.stdout.flush()
    llm.close()
    if args.json:
        print(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    logs_to_stderr()
    sys.exit(main())
