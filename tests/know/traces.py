"""The public traces, and each replayed as the requests its agent made."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def _traces_dir() -> Path:
    """RUYI_TRACES, else the shared/traces beside the checkout, else this workplace's shared folder."""
    beside = Path(__file__).resolve().parents[3] / "shared" / "traces"
    return Path(os.environ.get("RUYI_TRACES") or (beside if beside.is_dir() else "/work/shared/traces"))


TRACES = _traces_dir()


def trace_files() -> list[Path]:
    return sorted(p for p in TRACES.glob("*.json") if p.name != "INDEX.json")


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def requests_of(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Every prefix ending just before an assistant message, then the whole trace."""
    cuts = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and i > 0]
    return [messages[:i] for i in cuts] + [messages]
