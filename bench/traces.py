"""The public traces for the benches: where they are, each one loaded, and each replayed as the requests its agent made.

Every bench that replays traces goes through here, so all of them see the same files in the same order and the same
requests: a trace's request ``i`` is its messages up to the end of its ``i``-th request (``request_ends``), as the
agent sent it. The traces live in ``shared/traces`` beside the checkout, or where ``RUYI_TRACE_DIR`` says.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from proxy.replay.metrics import request_ends
from proxy.replay.run import Message, Trace, load_trace, public_traces

TRACES: Path | None = public_traces()
"""The folder of public traces (None when absent): a bench's ``--traces`` default."""
MISSING = "the public traces are not here: shared/traces beside the checkout, or set RUYI_TRACE_DIR"


def trace_paths(folder: Path | None = None) -> list[Path]:
    """The trace files of ``folder`` (else of TRACES), in name order, INDEX.json left out; exits saying why when absent."""
    where = folder if folder is not None else TRACES
    if where is None or not where.is_dir():
        raise SystemExit(MISSING if folder is None else f"no folder of traces at {folder}")
    return sorted(p for p in where.glob("*.json") if p.name != "INDEX.json")


def load_traces(folder: Path | None = None) -> list[Trace]:
    """Every trace of ``folder`` (else of TRACES), loaded, in name order."""
    return [load_trace(p) for p in trace_paths(folder)]


def requests_of(trace: Trace) -> Iterator[list[Message]]:
    """Each request the trace's agent made, in order: its messages up to that request's end (a new list each time)."""
    for end in request_ends(trace.messages):
        yield trace.messages[:end]
