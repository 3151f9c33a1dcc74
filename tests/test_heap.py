"""The C heap's free pages go back to the system after a trim (issue 27: memory flat after warm-up)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from proxy import heap

ROOT = Path(__file__).resolve().parents[1]
START = """
import sys, threading
sys.path.insert(0, sys.argv[1])
from proxy import heap

def anon_mb():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
"""
"""Each probe runs in a fresh interpreter (this one's heap is pytest's): the tree's ``heap`` and resident memory."""

# 40 MB of 8 kB texts (malloc's heap, not CPython's arenas), one more kept after them so the heap's top stays in use,
# the 40 MB freed; resident memory before and after a trim.
PROBE = (
    START
    + """
texts = [bytes(8000) for _ in range(5000)]
kept = bytes(8000)
del texts
freed = anon_mb()
released = heap.trim()
print(freed, anon_mb(), released)
"""
)


@pytest.mark.skipif(not heap.can_trim(), reason="no malloc_trim in this C library (glibc only)")
def test_freed_heap_memory_stays_resident_until_a_trim_gives_it_back() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE, str(ROOT)], capture_output=True, text=True, timeout=60, check=True).stdout
    freed_mb, trimmed_mb, released = out.split()
    assert float(freed_mb) - float(trimmed_mb) >= 30, out  # freed, yet resident until the trim
    assert released == "True"


# Worker threads each take and free a large text after a larger block was freed (which, by default, raises glibc's
# thresholds: those texts then come from the threads' heaps and stay there, free yet resident, trim or not).
THREADS_PROBE = (
    START
    + """
if sys.argv[2] == "fixed":
    assert heap.fixed_thresholds()
start = anon_mb()
big = "x" * (30 << 20)
del big

def work(i):
    text = ("line %d " % i) * (4 << 20)
    lowered = text.lower()
    del text, lowered

threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
heap.trim()
print(anon_mb() - start)
"""
)


@pytest.mark.skipif(not heap.can_trim(), reason="no malloc_trim in this C library (glibc only)")
def test_with_fixed_thresholds_large_blocks_freed_in_worker_threads_leave_memory() -> None:
    def kept_mb(mode: str) -> float:
        run = subprocess.run([sys.executable, "-c", THREADS_PROBE, str(ROOT), mode], capture_output=True, text=True, timeout=60, check=True)
        return float(run.stdout)

    assert kept_mb("fixed") < 20
    assert kept_mb("default") > 60  # what start-up's fixed thresholds are for: glibc's own keep it
