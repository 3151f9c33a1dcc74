"""Discard: every long output outside the protected turns is a candidate; the pruner picks how many."""

from __future__ import annotations

import pytest

from strategies.base import OptionError
from strategies.discard import Discard
from tests.strategies.factories import bash, conversation, indices, lines, make_ctx


def test_every_long_unprotected_output_is_a_candidate_with_a_placeholder() -> None:
    messages = conversation(bash("cat /r/a.py", lines("a", 40)), bash("echo hi", "hi"), bash("cat /r/b.py", lines("b", 40)))
    proposals = Discard().propose(messages, make_ctx())
    assert indices(proposals) == [3, 7]  # "hi" is too short to be worth a placeholder
    first = proposals[0]
    assert first.new_text.startswith("[ruyi: older output of `cat /r/a.py`")
    assert "the context was nearly full" in first.new_text and "run it again if you need it" in first.new_text
    assert first.original == messages[3]["content"] and first.tokens_saved > 0


def test_protected_turns_and_anchors_are_never_candidates() -> None:
    messages = conversation(
        bash("cat /r/a.py", lines("a", 40)),
        bash("cat /r/d.py", "[D001] " + lines("d", 40)),
        bash("cat /r/b.py", lines("b", 40)),
        bash("cat /r/c.py", lines("c", 40)),
    )
    assert indices(Discard().propose(messages, make_ctx(protected_turns=2))) == [3]


def test_min_tokens() -> None:
    messages = conversation(bash("cat /r/a.py", lines("a", 40)))
    assert Discard(Discard.Options(min_tokens=10_000)).propose(messages, make_ctx()) == []
    with pytest.raises(OptionError, match="min_tokens"):
        Discard.Options(min_tokens=-1)


def test_the_placeholder_never_invites_repeating_a_change() -> None:
    messages = conversation(
        bash("cat /r/a.py", lines("a", 40)), bash("sed -i 's/a/b/' /r/a.py && cat /r/a.py", lines("b", 40)), bash("pip install thing", lines("c", 40))
    )
    hows = [r.new_text for r in Discard().propose(messages, make_ctx())]
    assert "run it again if you need it" in hows[0]
    assert "its changes stand; read the files if you need them" in hows[1]
    assert "its effects stand; run it again only if that is safe" in hows[2]
