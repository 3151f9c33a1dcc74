"""Tier boundaries as DESIGN.md states them, and validation of the tiers block."""

from __future__ import annotations

import pytest

from proxy.know.options import TierOptions
from proxy.know.tiers import Tier, tier_for


@pytest.mark.parametrize(
    ("usage", "tier"),
    [
        (0.0, Tier.EXPANDED),
        (0.4999, Tier.EXPANDED),
        (0.50, Tier.NORMAL),
        (0.6999, Tier.NORMAL),
        (0.70, Tier.COMPACT),
        (0.80, Tier.PREPARE_SUMMARY),
        (0.85, Tier.PRUNE),
        (0.9499, Tier.PRUNE),
        (0.95, Tier.PRUNE),  # with archives off Ruyi prunes there, and says so
        (3.0, Tier.PRUNE),
        (float("inf"), Tier.PRUNE),
    ],
)
def test_each_threshold_starts_its_tier(usage: float, tier: Tier) -> None:
    assert tier_for(usage, TierOptions()) == tier


def test_past_the_red_line_the_tier_is_archive_when_archives_are_on() -> None:
    assert [tier_for(u, TierOptions(), archives=True) for u in (0.9499, 0.95, 3.0)] == [Tier.PRUNE, Tier.ARCHIVE, Tier.ARCHIVE]


def test_tiers_are_strings() -> None:
    assert tier_for(0.9, TierOptions()) == "prune"


def test_custom_thresholds() -> None:
    tiers = TierOptions(normal=0.3, compact=0.4, prepare_summary=0.5, prune=0.6, archive=0.7)
    assert tier_for(0.45, tiers) == Tier.COMPACT


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prune": 0.75}, "tiers.prune (0.75) must be above tiers.prepare_summary (0.8)"),
        ({"archive": 1.5}, "tiers.archive must be a fraction in (0, 1]"),
        ({"normal": 0}, "tiers.normal must be a fraction in (0, 1]"),
    ],
)
def test_bad_thresholds_name_the_option(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        TierOptions(**kwargs)
