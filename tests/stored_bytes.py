"""What a data directory holds, for tests that grep it for a text: each file's bytes, and the text of every packed body
(memory/store/sqlite_schema.py, ``pack``: audit records, reports, raw turns, deflated) found anywhere in it, live rows, free pages and
the write-ahead log's frames alike, so a grep still sees what packing hides."""

from __future__ import annotations

import zlib
from pathlib import Path

from memory.store.sqlite_schema import DICTIONARIES

WINDOW = 1 << 20
"""The most packed bytes tried from one offset (a body that spills onto SQLite's overflow pages is read up to the break)."""


def unpacked(data: bytes) -> bytes:
    """The decompressed text of every offset where a packed body could start (its dictionary's byte, then deflate
    that decodes to something), joined; what is not a body fails to decode within a few bytes and adds nothing."""
    found = []
    for byte, dictionary in DICTIONARIES.items():
        at = data.find(bytes((byte,)))
        while at != -1:
            z = zlib.decompressobj(-15, dictionary)
            try:
                text = z.decompress(data[at + 1 : at + 1 + WINDOW])
            except zlib.error:
                text = b""
            if text:
                found.append(text)
            at = data.find(bytes((byte,)), at + 1)
    return b"\n".join(found)


def stored_bytes(data_dir: Path) -> dict[str, bytes]:
    """File name → its bytes and the text of the packed bodies in it."""
    out = {}
    for path in data_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            out[path.name] = data + b"\n" + unpacked(data)
    return out
