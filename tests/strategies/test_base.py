"""Replacement, StrategyContext and option parsing."""

from __future__ import annotations

import pytest

from strategies.base import OptionError, Replacement
from tests.strategies.factories import make_ctx


def test_replacement() -> None:
    r = Replacement(3, "args:call_9", "{}", "{...}", 100, 10, "rabc", "dedup", "why")
    assert r.tokens_saved == 90 and r.call_id == "call_9"
    assert Replacement(3, "content", "", "", 5, 10, "r", "s", "w").tokens_saved == 0
    assert Replacement(3, "content", "", "", 5, 1, "r", "s", "w").call_id is None


def test_context_validates() -> None:
    with pytest.raises(OptionError, match="protected_turns"):
        make_ctx(protected_turns=-1)
    with pytest.raises(OptionError, match="min_saving_tokens"):
        make_ctx(min_saving_tokens=True)
