"""Usage tiers: how full the context is, as one of six named bands of (window − reserve)."""

from __future__ import annotations

from enum import StrEnum

from proxy.know.options import TierOptions


class Tier(StrEnum):
    """The bands, from roomy to full; each names what Ruyi does there."""

    EXPANDED = "expanded"
    NORMAL = "normal"
    COMPACT = "compact"
    PREPARE_SUMMARY = "prepare_summary"
    PRUNE = "prune"
    ARCHIVE = "archive"
    """Archive + restart (``archive.enabled``); with archives off, usage past ``tiers.archive`` is ``prune``."""


def tier_for(usage: float, tiers: TierOptions, archives: bool = False) -> Tier:
    """The tier of a usage (prompt tokens / (window − reserve)); each threshold belongs to the tier it starts.
    Past ``tiers.archive`` it is ``archive`` when archives are on, else ``prune``: what Ruyi does there."""
    if usage < tiers.normal:
        return Tier.EXPANDED
    if usage < tiers.compact:
        return Tier.NORMAL
    if usage < tiers.prepare_summary:
        return Tier.COMPACT
    if usage < tiers.prune:
        return Tier.PREPARE_SUMMARY
    return Tier.ARCHIVE if archives and usage >= tiers.archive else Tier.PRUNE
