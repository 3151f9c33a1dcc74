"""Replacement, StrategyContext and option parsing."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from strategies.base import OptionError, Replacement, check_int, options_from_mapping
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


@dataclass(frozen=True)
class _Options:
    size: int = 1
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_int("size", self.size, minimum=1)


def test_options_from_mapping() -> None:
    assert options_from_mapping(_Options, {"size": 3, "names": ["a"]}, "x") == _Options(3, ("a",))
    assert options_from_mapping(_Options, None, "x") == _Options()
    with pytest.raises(OptionError, match=r"x\.colour: unknown option"):
        options_from_mapping(_Options, {"colour": 1}, "x")
    with pytest.raises(OptionError, match=r"x\.size: expected an integer >= 1"):
        options_from_mapping(_Options, {"size": 0}, "x")
