"""The pipeline's steps in order: the one place that says what rewrites a request, and in what order."""

from __future__ import annotations

from config.schema import Config
from proxy.pipeline import Step


def default_steps(config: Config) -> list[Step]:
    """Empty until the pruning issue fills it."""
    return []
