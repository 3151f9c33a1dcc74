"""Reading a configured secret: a literal value, or ``env:NAME`` read from the environment.

In redaction/ (the room for secrets, below every other) and standard library only, so that every part that holds a
secret — the config schema, the summarizer — resolves it the same way; ``config.schema`` re-exports it."""

from __future__ import annotations

import os


def resolve_secret(value: str | None) -> str | None:
    """A literal secret, or ``env:NAME`` read from the environment (``None`` when unset)."""
    if value is None or not value.startswith("env:"):
        return value
    return os.environ.get(value[4:]) or None
