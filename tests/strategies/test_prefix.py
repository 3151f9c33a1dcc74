"""Analyses resumed from an earlier request's prefix equal full ones; where they must not resume, they do not."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from conversation.messages import read
from strategies.base import StrategyContext
from strategies.conversation import Conversation, analyze
from strategies.prefix import Prefix
from strategies.protection import Protection
from tests.strategies.factories import (
    assistant,
    conversation,
    make_ctx,
    result,
    step,
    tool_call,
)
from tests.traces import load, requests_of, trace_files


def _resumed_equals_full(messages: list[dict[str, Any]], ctx: StrategyContext, known: Prefix | None) -> Conversation:
    resumed, full = analyze(messages, ctx, known), analyze(messages, ctx)
    assert resumed == full
    return resumed


@pytest.mark.skipif(not trace_files(), reason="no traces on this machine")
@pytest.mark.parametrize("observations", [False, True])
def test_an_analysis_resumed_from_any_earlier_request_equals_a_full_one(observations: bool) -> None:
    ctx = make_ctx(protected_turns=4, protection=Protection.Options(observations_in_user_messages=observations))
    for path in trace_files():
        known: Prefix | None = None
        for messages in requests_of(load(path)["messages"]):
            assert known is None or known.resume_point(read(messages)[2], ctx) is not None  # it does resume
            known = _resumed_equals_full(messages, ctx, known).prefix
        last = messages
        middle = [i for i, m in enumerate(last) if m.get("role") in {"tool", "assistant"}][len(last) // 4 :][:3]
        for i in middle:  # an older message rewritten (a decision, an edited history): resumed before it
            edited = copy.deepcopy(last)
            edited[i]["content"] = f"[ruyi: replaced {i}]"
            _resumed_equals_full(edited, ctx, known)
        _resumed_equals_full(last[: len(last) // 2], ctx, known)  # a shorter request


def test_a_prefix_is_not_resumed_where_a_result_is_still_missing_or_ids_differ() -> None:
    pending = tool_call("bash", command="cat a.py")
    ctx = make_ctx(protected_turns=2)
    start = [*conversation(), assistant(pending)]
    known = analyze(start, ctx).prefix
    _resumed_equals_full([*start, result(pending, "one\ntwo"), *step("bash", "x", command="ls")], ctx, known)
    same_text_other_id = [*conversation(), assistant(dict(pending, id="other")), result(pending, "one")]
    _resumed_equals_full(same_text_other_id, ctx, analyze([*start, result(pending, "one")], ctx).prefix)
    flagged = [*start, dict(result(pending, "one"), is_error=True)]
    _resumed_equals_full(flagged, ctx, analyze([*start, result(pending, "one")], ctx).prefix)


def test_a_prefix_made_under_other_options_is_not_used() -> None:
    messages = conversation(step("bash", "x", command="ls"), step("Read", "body", file_path="/r/notes.md"))
    known = analyze(messages, make_ctx()).prefix
    other = make_ctx(protection=Protection.Options(protected_patterns=()))
    assert known is not None and known.resume_point(read(messages)[2], other) is None
    _resumed_equals_full(messages, other, known)
