"""The C heap's free pages go back to the system after a trim (issue 27: memory flat after warm-up)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memory import heap

ROOT = Path(__file__).resolve().parents[2]

# In a fresh interpreter (this one's heap is pytest's): 40 MB of 8 kB texts (malloc's heap, not CPython's arenas),
# one more kept after them so the heap's top stays in use, the 40 MB freed; resident memory before and after a trim.
PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
from memory import heap

def anon_mb():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024

texts = [bytes(8000) for _ in range(5000)]
kept = bytes(8000)
del texts
freed = anon_mb()
released = heap.trim()
print(freed, anon_mb(), released)
"""


@pytest.mark.skipif(not heap.can_trim(), reason="no malloc_trim in this C library (glibc only)")
def test_freed_heap_memory_stays_resident_until_a_trim_gives_it_back() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE, str(ROOT)], capture_output=True, text=True, timeout=60, check=True).stdout
    freed_mb, trimmed_mb, released = out.split()
    assert float(freed_mb) - float(trimmed_mb) >= 30, out  # freed, yet resident until the trim
    assert released == "True"
