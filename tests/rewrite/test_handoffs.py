"""The pipeline's steps come after the steps whose values they read (``proxy/rewrite/steps.py: HANDOFFS``)."""

from __future__ import annotations

import pytest

from config.schema import Config
from proxy.rewrite.steps import HANDOFFS, check_handoffs, default_steps


def test_the_default_order_keeps_every_handoff_and_names_every_step() -> None:
    steps = default_steps(Config())
    check_handoffs(steps)
    assert [s.name for s in steps] == list(HANDOFFS)


@pytest.mark.parametrize(("moved", "before"), [("prune", "restart"), ("snapshot", "layout_plan"), ("archive", "prune")])
def test_a_step_moved_before_what_it_reads_is_refused(moved: str, before: str) -> None:
    steps = default_steps(Config())
    names = [s.name for s in steps]
    step = steps.pop(names.index(moved))
    steps.insert([s.name for s in steps].index(before), step)
    with pytest.raises(ValueError, match=moved):
        check_handoffs(steps)
