"""Analysis of a message list: texts, turns, call/result pairing, error detection, observations."""

from __future__ import annotations

from conversation.messages import is_error_output, message_text
from strategies.conversation import analyze
from strategies.protection import Protection
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
    messages = [*conversation(), assistant(a, b), result(b, "B"), result(a, "A"), user("go on"), *bash("cat x", "1"), assistant(text="done")]
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
    messages = [
        *conversation(),
        assistant(text="Let me look.\n```bash\ncat src/x.py\n```"),
        user("<returncode>0</returncode>\n<output>\nbody\n</output>"),
        assistant(text="ok"),
    ]
    assert analyze(messages, make_ctx()).calls == ()
    ctx = make_ctx(protection=Protection.Options(observations_in_user_messages=True))
    conv = analyze(messages, ctx)
    assert len(conv.calls) == 1
    call = conv.calls[0]
    assert (call.call_id, call.result, call.action.kind, call.action.path) == (None, 3, "read", "src/x.py")
    assert 3 not in conv.protected
    assert 1 in conv.protected
