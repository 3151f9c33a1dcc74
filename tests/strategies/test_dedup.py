"""Dedup: repeated reads, searches and lists; other calls only when byte-identical."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from strategies.base import Replacement
from strategies.conversation import analyze
from strategies.dedup import Dedup, overlaps
from tests.strategies.factories import (
    bash,
    conversation,
    indices,
    lines,
    make_ctx,
    step,
)
from tests.traces import load, requests_of, trace_files

BODY = lines("code", 40)


def propose(messages: list[dict[str, Any]], options: Dedup.Options | None = None) -> list[Replacement]:
    return Dedup(options).propose(messages, make_ctx())


def test_same_read_twice_replaces_the_older_output() -> None:
    messages = conversation(bash("cat /r/a.py", BODY), bash("echo hi", "hi"), bash("cd /r && cat a.py", BODY))
    proposals = propose(messages)
    assert indices(proposals) == [3]
    (replacement,) = proposals
    assert replacement.strategy == "dedup" and replacement.target == "content"
    assert "older output of `cat /r/a.py`" in replacement.new_text
    assert "the same lines were read again later" in replacement.new_text
    assert replacement.original == messages[3]["content"]


def test_a_range_inside_a_later_read_of_the_unchanged_file() -> None:
    messages = conversation(bash("sed -n '10,20p' /r/a.py", BODY), bash("cat /r/a.py | head -100", BODY))
    assert indices(propose(messages)) == [3]
    narrower_later = conversation(bash("cat /r/a.py", BODY), bash("sed -n '10,20p' /r/a.py", BODY))
    assert propose(narrower_later) == []
    whole_later = conversation(bash("tail -n 20 /r/a.py", BODY), bash("cat /r/a.py", BODY))
    assert indices(propose(whole_later)) == [3]


def test_a_write_or_edit_in_between_keeps_the_older_read() -> None:
    for change in ("sed -i 's/a/b/' /r/a.py", "cd /r && git checkout -- a.py", "echo x > /r/a.py", "git stash", "cd /r && patch -p1 < unknown.patch"):
        messages = conversation(bash("cat /r/a.py", BODY), bash(change, ""), bash("cat /r/a.py", BODY + "changed"))
        assert propose(messages) == [], change
    elsewhere = conversation(bash("cat /r/a.py", BODY), bash("echo x > /r/b.py", ""), bash("cat /r/a.py", BODY + "!"))
    assert indices(propose(elsewhere)) == [3]
    unchanged = conversation(bash("cat /r/a.py", BODY), bash("sed -i 's/q/q/' /r/a.py", ""), bash("cat /r/a.py", BODY))
    assert indices(propose(unchanged)) == [3]  # byte-identical: the later output shows all the older one did


def test_a_failed_later_read_covers_nothing() -> None:
    messages = conversation(bash("cat /r/a.py", BODY), bash("cat /r/a.py", "cat: /r/a.py: Permission denied", 1))
    assert propose(messages) == []


def test_searches_and_lists() -> None:
    search = "grep -rn 'def main' /r/src"
    hits = lines("/r/src/x.py:1: def main", 20)
    messages = conversation(bash(search, hits), bash(search, hits + "\nmore"))
    assert indices(propose(messages)) == [3]
    changed = conversation(bash(search, hits), bash("sed -i 's/x/y/' /r/src/x.py", ""), bash(search, hits + "\nmore"))
    assert propose(changed) == []
    listing = conversation(bash("ls -la /r", lines("file", 30)), bash("ls -la /r", lines("file", 31)))
    assert indices(propose(listing)) == [3]


def test_other_calls_only_when_byte_identical() -> None:
    failing = "Traceback (most recent call last):\n" + lines("frame", 20)
    run_twice = conversation(bash("python reproduce.py", failing, 1), bash("python reproduce.py", "OK " * 40))
    assert propose(run_twice) == []
    same = conversation(bash("python reproduce.py", failing, 1), bash("python reproduce.py", failing, 1))
    proposals = propose(same)
    assert indices(proposals) == [3]
    assert "a later identical call returned the same output" in proposals[0].new_text


def test_structured_tools_and_cross_tool_reads() -> None:
    messages = conversation(step("Read", BODY, file_path="/r/a.py"), step("Read", BODY, file_path="/r/a.py"))
    assert indices(propose(messages)) == [3]
    partial = conversation(step("Read", BODY, file_path="/r/a.py", offset=5, limit=10), bash("cat /r/a.py", BODY))
    assert indices(propose(partial)) == [3]


def test_protected_older_messages_are_kept_and_protected_later_ones_still_count() -> None:
    messages = conversation(bash("cat /r/a.py", BODY), bash("cat /r/a.py", BODY))
    assert Dedup().propose(messages, make_ctx(protected_turns=1)) != []
    assert Dedup().propose(messages, make_ctx(protected_turns=2)) == []


def test_the_earliest_later_call_decides_so_the_text_never_changes() -> None:
    base = [bash("sed -n '1,5p' /r/a.py", BODY), bash("cat /r/a.py", BODY)]
    first = propose(conversation(*base))
    grown = propose(conversation(*base, bash("sed -n '1,5p' /r/a.py", BODY)))
    assert first[0].new_text == next(r for r in grown if r.index == 3).new_text


def test_options_and_input_untouched() -> None:
    messages = conversation(bash("cat /r/a.py", BODY), bash("cat /r/a.py", BODY + "!"))
    before = copy.deepcopy(messages)
    assert indices(propose(messages)) == [3]
    assert propose(messages, Dedup.Options(by_key=())) == []
    assert messages == before


def test_overlaps() -> None:
    assert overlaps("/r/a.py", "/r/a.py") and overlaps("/r", "/r/a.py") and overlaps("/r/a.py", "/r")
    assert not overlaps("/r/a.py", "/r/b.py")
    assert overlaps("*", "/x") and overlaps(None, "/x") and overlaps(".", "/x")
    assert overlaps("src/a.py", "/t/src/a.py") and not overlaps("lib/a.py", "/t/src/a.py")
    assert overlaps("/t/ops/f.py", "/t/ops/*.py") and not overlaps("/t/x/f.py", "/t/ops/*.py")


@pytest.mark.skipif(not trace_files(), reason="no traces on this machine")
@pytest.mark.parametrize("options", [Dedup.Options(), Dedup.Options(by_key=("search",))])
def test_what_the_previous_request_found_gives_the_same_proposals(options: Dedup.Options) -> None:
    ctx = make_ctx(protected_turns=4, min_saving_tokens=20)
    for path in trace_files():
        known = None
        for messages in requests_of(load(path)["messages"]):
            resumed = analyze(messages, ctx, known)
            proposals = Dedup(options).propose(messages, replace(ctx, conversation=resumed))
            assert proposals == Dedup(options).propose(messages, ctx)
            known = resumed.prefix
        edited = copy.deepcopy(messages)
        for i in [i for i, m in enumerate(edited) if m.get("role") == "tool"][len(edited) // 8 :: 7]:
            edited[i]["content"] = "changed"  # an older output rewritten: what was found after it no longer holds
        resumed = analyze(edited, ctx, known)
        assert Dedup(options).propose(edited, replace(ctx, conversation=resumed)) == Dedup(options).propose(edited, ctx)
