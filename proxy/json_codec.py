"""JSON of request bodies: orjson where it can (several times faster), the standard library where orjson refuses."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from memory.safe_text import without_lone_surrogates

OFF_LOOP_BYTES = 256 * 1024
"""Bodies larger than this are parsed in a worker thread (parsing holds the interpreter: keep it short on the loop)."""


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def loads(raw: bytes | bytearray) -> Any:
    """Parse; raises ValueError (or UnicodeDecodeError) like ``json.loads`` for what is not JSON. orjson refuses some
    valid input (lone surrogate escapes, integers past 64 bits, nesting past 1024): the standard library takes it."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = json.loads(raw)
    # What Ruyi keeps of a body with lone surrogate escapes holds U+FFFD in their place: stored text must be UTF-8
    # (one client's "\ud800" must not fail the store's writes); an unrewritten body is still forwarded as it came.
    return without_lone_surrogates(value) if _SURROGATE_ESCAPE.search(raw) else value


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON; the standard library for what orjson refuses (lone surrogates, integers past 64 bits)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
