"""A huge original (the tool output a truncation replaced) is written into its row a piece at a time: the same bytes
as a whole write, without a bytes copy of the whole beside the text (SQLite's own copy is not traced, but went too)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from memory.store.base import Changes
from memory.store.sqlite_store import REF_PIECE, SQLiteStore


def test_an_8_mib_original_is_written_piece_by_piece_and_read_back_whole(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "ruyi.db")
    try:
        big = ("2026-11-27 worker read the queue\n" * (8 * 2**20 // 33 + 1))[: 8 * 2**20]
        odd = "é" * (REF_PIECE - 1) + "\ud83d\ude00 lone \ud800 " + "ü" * (REF_PIECE + 7)  # non-ASCII across a piece's end
        store.write(Changes(refs=[("a", "s", "small", "short original")]))  # the connection warmed up
        tracemalloc.start()
        try:
            store.write(Changes(refs=[("a", "s", "big", big)]))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < len(big) // 3, f"peak {peak:,} bytes for an original of {len(big):,}"  # 8 MiB before
        store.write(Changes(refs=[("a", "s", "odd", odd), ("a", "s", "big", big[::-1])]))  # replaced in place
        assert store.find_ref("a", "big") == big[::-1]
        assert store.find_ref("a", "odd") == odd
        assert store.find_ref("a", "small") == "short original"
    finally:
        store.close()
