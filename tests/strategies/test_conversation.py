"""Analysis of a message list: texts, turns, call/result pairing, error detection, observations."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from strategies.base import StrategyContext
from strategies.conversation import (
    Conversation,
    Prefix,
    analyze,
    is_error_output,
    message_text,
    read,
)
from strategies.protection import Protection
from tests.know.traces import load, requests_of, trace_files
from tests.strategies.factories import (
    assistant,
    bash,
    conversation,
    make_ctx,
    result,
    step,
    tool_call,
    user,
)


def test_message_text() -> None:
    assert message_text({"content": "x"}) == "x"
    assert message_text({"content": None}) is None
    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "u"}}, {"type": "text", "text": "b"}]
    assert message_text({"content": parts}) == "a\nb"
    assert message_text({"content": [{"type": "image_url"}]}) is None


def test_error_detection() -> None:
    assert is_error_output({}, "<returncode>1</returncode>\n<output>\nboom\n</output>")
    assert not is_error_output({}, "<returncode>0</returncode>\n<output>\nfine\n</output>")
    assert is_error_output({}, "<returncode>0</returncode>\nTraceback (most recent call last):\n  File x")
    assert is_error_output({"is_error": True}, "whatever")
    assert is_error_output({}, "Error: file not found")
    assert is_error_output({}, "<exception>An error occurred</exception>")
    assert is_error_output({}, "<tool_use_error>nope</tool_use_error>")
    assert is_error_output({}, "Your proposed edit has introduced new syntax error(s).")
    assert is_error_output({}, "output\n[Command finished with exit code 2]")
    assert is_error_output({}, '{"output": "x", "metadata": {"exit_code": 1}}')
    assert not is_error_output({}, '{"output": "x", "metadata": {"exit_code": 0}}')
    assert not is_error_output({}, "all good, no errors here")
    assert not is_error_output({}, None)


def test_calls_pair_with_their_results_and_turns() -> None:
    a, b = tool_call("bash", command="ls"), tool_call("bash", command="pwd")
    messages = [*conversation(), assistant(a, b), result(b, "B"), result(a, "A"), user("go on"),
                *bash("cat x", "1"), assistant(text="done")]
    conv = analyze(messages, make_ctx())
    assert [(c.call_id, c.result) for c in conv.calls] == [(a["id"], 4), (b["id"], 3), (conv.calls[2].call_id, 7)]
    assert conv.turns == 3
    assert conv.turn_of[:3] == (-1, -1, 0)
    assert conv.turns_after(2) == 2
    assert conv.turns_after(8) == 0
    assert conv.output(conv.calls[0]) == "A"


def test_missing_results_and_unknown_ids() -> None:
    pending = tool_call("bash", command="ls")
    messages = [*conversation(), {"role": "tool", "tool_call_id": "nobody", "content": "orphan"}, assistant(pending)]
    conv = analyze(messages, make_ctx())
    assert conv.calls[0].result is None


def test_conversation_is_reused_when_the_pipeline_made_it() -> None:
    messages = conversation(step("bash", "x", command="ls"))
    ctx = make_ctx()
    conv = analyze(messages, ctx)
    from dataclasses import replace

    assert analyze(messages, replace(ctx, conversation=conv)) is conv
    assert analyze(list(messages), replace(ctx, conversation=conv)) is not conv


def test_observations_in_user_messages_only_when_asked() -> None:
    messages = [*conversation(), assistant(text="Let me look.\n```bash\ncat src/x.py\n```"),
                user("<returncode>0</returncode>\n<output>\nbody\n</output>"), assistant(text="ok")]
    assert analyze(messages, make_ctx()).calls == ()
    ctx = make_ctx(protection=Protection.Options(observations_in_user_messages=True))
    conv = analyze(messages, ctx)
    assert len(conv.calls) == 1
    call = conv.calls[0]
    assert (call.call_id, call.result, call.action.kind, call.action.path) == (None, 3, "read", "src/x.py")
    assert 3 not in conv.protected
    assert 1 in conv.protected


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
        middle = [i for i, m in enumerate(last) if m.get("role") in {"tool", "assistant"}][len(last) // 4:][:3]
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
