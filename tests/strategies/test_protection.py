"""Protection: last turns, roles, anchors, protected paths and tools."""

from __future__ import annotations

import pytest

from strategies.base import OptionError
from strategies.conversation import analyze
from strategies.protection import ANCHOR, Protection
from tests.strategies.factories import assistant, bash, conversation, make_ctx, step


def test_last_turns_are_protected() -> None:
    messages = conversation(*(bash(f"cat f{i}", "x") for i in range(6)))
    conv = analyze(messages, make_ctx(protected_turns=4))
    assert conv.protected == frozenset({0, 1} | set(range(6, 14)))
    assert analyze(messages, make_ctx(protected_turns=0)).protected == frozenset({0, 1})
    assert analyze(messages, make_ctx(protected_turns=10)).protected == frozenset(range(14))


def test_roles_other_than_assistant_and_tool_are_protected() -> None:
    messages = [*conversation(), {"role": "developer", "content": "d"}, assistant(text="a")]
    assert analyze(messages, make_ctx()).protected == frozenset({0, 1, 2})


@pytest.mark.parametrize("anchor", ["[D001]", "[C002]", "[I003]", "[P001]", "[M001]", "[U001]", "[CK001]", "[DN001]"])
def test_anchor_citations_protect_a_message(anchor: str) -> None:
    assert ANCHOR.search(f"as decided in {anchor}, we")
    messages = conversation(bash("cat x", f"see {anchor}"), bash(f"echo {anchor}", "ok"), bash("cat y", "plain"))
    conv = analyze(messages, make_ctx())
    assert {3, 4} <= conv.protected
    assert 6 not in conv.protected
    off = analyze(messages, make_ctx(protection=Protection.Options(anchor_protection=False)))
    assert 3 not in off.protected


def test_anchor_pattern_is_strict() -> None:
    assert not ANCHOR.search("array[I]") and not ANCHOR.search("[D01]") and not ANCHOR.search("[X001]")


def test_protected_paths_and_tools() -> None:
    messages = conversation(
        bash("cat README.md", "readme"),
        bash("cat docs/Design.md | head -5", "d"),
        *[step("TodoWrite", "ok", todos=[])],
        bash("cat src/a.py", "code"),
        step("Write", "ok", file_path="/r/anchors.md", content="x"),
    )
    conv = analyze(messages, make_ctx())
    assert {2, 3, 4, 5, 6, 7, 10, 11} <= conv.protected
    assert not {8, 9} & conv.protected


def test_options_validate() -> None:
    with pytest.raises(OptionError, match="protected_patterns"):
        Protection.Options(protected_patterns=["*.md"])  # type: ignore[arg-type]


def test_protected_messages_for_callers_holding_only_messages() -> None:
    messages = conversation(bash("cat a", "x"), bash("cat b", "y"))
    assert analyze(messages, make_ctx(protected_turns=1)).protected == frozenset({0, 1, 4, 5})
