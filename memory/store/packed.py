"""Stored JSON bodies (audit records, reports, raw turns) as deflate against a preset dictionary: the keys and usual
values every record repeats are written once, in the dictionary, not per row (RELIABILITY.md, "Disk per request").

A packed body is a BLOB: its first byte names the dictionary, the rest is raw deflate of the body's compact JSON
(UTF-8, lone surrogates kept by ``surrogatepass``). A row written before packing (TEXT, plain JSON) reads back as it
was: ``unpack`` takes both, so a store written by an older Ruyi needs no rewrite. **A released dictionary never
changes** (rows written with it must stay readable): a better one is added under the next byte."""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

_AUDIT = (
    '{"request_id":"","model":"gpt-4o","mode":"on","session_how":"continued","est_before":1218,"est_after":1218,'
    '"tier":"expanded","batch":"none","window":128000,"usable":108800,"status":200,"compaction":false,'
    '"overflow_retry":false,"upstream_prompt_tokens":1215,"cached_tokens":0,"latency_llm_ms":1.57,"latency_ruyi_ms":5.03,'
    '"s2_written_count":0,"rag_chunks":0,"retrieval_path":[],"latency_retrieval_ms":null,"drop_reason":null,'
    '"archive":null,"prepare_until":null}'
)
_REPORT = (
    '{"request":16,"request_id":"","mode":"on","applied":true,"overflow_retry":false,"tokens_before":1218,'
    '"tokens_after":1218,"usage_before":0.0112,"usage_after":0.0112,"tier_before":"expanded","tier_after":"expanded",'
    '"batch":"none","strategies":{},"in_force":{"items":0,"tokens_saved":0},"protected_turns":4,"failed_strategies":{}}'
)
_TURN = (
    '{"role":"tool","tool_call_id":"call_","content":[{"type":"tool_result","tool_use_id":"toolu_","text":""}]}'
    '{"role":"assistant","content":null,"tool_calls":[{"id":"call_","type":"function","function":{"name":"","arguments":"{\\"'
    '"}}]}{"role":"user","content":"'
)
DICTIONARIES: dict[int, bytes] = {1: (_TURN + _REPORT + _AUDIT).encode()}
"""Byte → preset dictionary (the most repeated text last: deflate finds it nearest). Never edit a released one."""
CURRENT = 1
_MEM_LEVEL = 5
"""zlib's default (8) makes a compressor of about 256 KiB, and priming it with the dictionary then costs more than the
record: at 5, about 10 µs a record, no larger."""


def pack(value: Any) -> bytes:
    """A JSON-like value as a packed body (``CURRENT``'s dictionary)."""
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    z = zlib.compressobj(6, zlib.DEFLATED, -15, _MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, DICTIONARIES[CURRENT])
    return bytes((CURRENT,)) + z.compress(raw) + z.flush()


def unpack(stored: str | bytes) -> Any:
    """A body as stored: packed (BLOB), or plain JSON (TEXT, written before packing)."""
    if isinstance(stored, str):
        return json.loads(stored)
    data = bytes(stored)
    dictionary = DICTIONARIES.get(data[0]) if data else None
    if dictionary is None:  # not a packed body: plain JSON stored as bytes
        return json.loads(data.decode("utf-8", "surrogatepass"))
    z = zlib.decompressobj(-15, dictionary)
    return json.loads((z.decompress(data[1:]) + z.flush()).decode("utf-8", "surrogatepass"))


_HEX_DIGEST = re.compile(r"[0-9a-f]{32}")


def link_key(digest: str) -> str | bytes:
    """A digest as the store keeps it (a chain's links, a raw turn's hash): its 32 lower-case hex characters as its 16
    bytes; any other string (none that Ruyi makes) as it is."""
    return bytes.fromhex(digest) if len(digest) == 32 and _HEX_DIGEST.fullmatch(digest) else digest


def link_of(stored: str | bytes) -> str:
    """A digest as kept (``link_key``), as the string it was."""
    return stored if isinstance(stored, str) else bytes(stored).hex()
