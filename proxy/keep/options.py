"""The notebook keeper's options (config ``notebook``): a leaf the config composes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NotebookOptions:
    """The FastMemo notebook: when a full one is compacted."""

    idle_seconds: float = 30.0
    """Compaction waits until the agent has had no request in flight for this long."""
    check_seconds: float = 10.0
    """How often Ruyi looks for notebooks waiting for compaction."""
    retry_seconds: float = 60.0
    """After a compaction whose answer was unusable, the first retry waits this long; each next one twice as long."""
    retry_max_seconds: float = 3600.0
    """The longest wait between retries."""
    capture_anchors: bool = True
    """Capture anchors defined in assistant messages (``[D004] … — why: …``) as pending."""
    pool_lines: bool = True
    """Each prune batch and each archive leaves a line in the dynamic pool."""

    def check(self) -> None:
        if self.idle_seconds < 0 or self.check_seconds <= 0 or self.retry_seconds <= 0 or self.retry_max_seconds < self.retry_seconds:
            raise ValueError("idle_seconds must be >= 0, check_seconds and retry_seconds positive, retry_max_seconds >= retry_seconds")
