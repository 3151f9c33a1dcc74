"""Text a database can store: JSON admits lone surrogates (``"\\ud800"``), UTF-8 and so SQLite and PostgreSQL do not."""

from __future__ import annotations

import dataclasses
from typing import Any


def without_lone_surrogates(value: Any) -> Any:
    """A JSON-like value or record (dataclasses, dicts, lists, strings) with every lone surrogate replaced by
    U+FFFD; surrogate pairs stay the character they make. Values holding none come back as they are."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(without_lone_surrogates(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: without_lone_surrogates(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **fields)
    return value
