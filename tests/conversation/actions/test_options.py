"""Tests for conversation/actions/options.py: one error type for bad options, shared with the strategies."""

from __future__ import annotations

from conversation.actions.options import OptionError
from strategies.base import OptionError as ReExported


def test_the_strategies_raise_the_same_option_error() -> None:
    assert ReExported is OptionError and issubclass(OptionError, ValueError)
