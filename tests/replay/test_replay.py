"""Tests for proxy/replay.py: request extraction, prefix cache, needles, orphans, arguments, totals."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.replay.metrics import cached_prefix, canonical, invalid_arguments, needle_indices, needles_kept, orphans
from proxy.replay.run import (
    Cl100kCounter,
    Message,
    ReplayResult,
    StderrProgress,
    Tools,
    format_table,
    load_trace,
    merge,
    replay,
    request_ends,
)
from tests.replay.conversations import TOOLS, call, conversation, result
from tests.traces import TRACES, needs_traces

COUNT = Cl100kCounter()


def identity(messages: list[Message], tools: Tools) -> list[Message]:
    return messages


def test_requests_end_before_each_assistant_message_then_whole_trace() -> None:
    messages = conversation(3)
    assert request_ends(messages) == [2, 4, 6, 8]
    assert request_ends(messages + [{"role": "assistant", "content": "done"}]) == [2, 4, 6, 8]


@needs_traces
def test_public_traces_give_538_requests() -> None:
    index = json.loads((TRACES / "INDEX.json").read_text())
    total = 0
    for entry in index:
        trace = load_trace(TRACES / entry["file"])
        assistants = sum(m["role"] == "assistant" for m in trace.messages)
        assert len(request_ends(trace.messages)) == assistants + 1, entry["file"]
        total += assistants + 1
    assert total == 538


def test_cached_prefix_counts_identical_leading_messages_and_tools_once() -> None:
    a, b, c = ({"role": "user", "content": x} for x in "abc")
    canon = [canonical(m) for m in (a, b, c)]
    assert cached_prefix(None, canon, [5, 6, 7], 10) == 0  # first request: nothing cached
    assert cached_prefix(canon[:2], canon, [5, 6, 7], 10) == 10 + 5 + 6
    assert cached_prefix(canon[:2], [canon[0], canon[2]], [5, 7], 10) == 10 + 5
    assert cached_prefix([canon[1]], canon, [5, 6, 7], 0) == 0


def test_canonical_ignores_key_order() -> None:
    assert canonical({"role": "user", "content": "x"}) == canonical({"content": "x", "role": "user"})


def test_rewriting_an_old_message_busts_the_cache_from_there() -> None:
    messages = conversation(6)

    def edit_first_result(ms: list[Message], tools: Tools) -> list[Message]:
        return [{**m, "content": f"edited {len(ms)}"} if m.get("tool_call_id") == "c0" else m for m in ms]

    rows = replay(messages, TOOLS, edit_first_result, 10_000, COUNT).rows
    per = COUNT(messages, TOOLS).messages
    assert rows[2].cached == COUNT(messages, TOOLS).tools + sum(per[:3])  # system, task, first call
    assert ReplayResult(10_000, rows).totals.cache_hit_rate < 1


def test_needles_are_system_user_and_the_last_four_turns() -> None:
    messages = conversation(6)  # turns start at 2, 4, …, 12
    assert needle_indices(messages) == [0, 1] + list(range(6, 14))
    assert needle_indices(messages[:2]) == [0, 1]


def test_a_cleared_result_in_the_last_four_turns_loses_a_needle() -> None:
    messages = conversation(6)
    rewritten = [{**m, "content": "[cleared]"} if m.get("tool_call_id") == "c2" else m for m in messages]
    canon = [canonical(m) for m in messages]
    assert needles_kept(messages, canon, rewritten, [canonical(m) for m in rewritten]) == (10, 9)
    older = [{**m, "content": "[cleared]"} if m.get("tool_call_id") == "c1" else m for m in messages]
    assert needles_kept(messages, canon, older, [canonical(m) for m in older]) == (10, 10)


def test_a_system_message_extended_by_a_layout_still_holds_its_needle() -> None:
    messages = conversation(1)
    rewritten = [{"role": "system", "content": "You are an agent.\n\n## Notebook\n- x"}] + messages[1:]
    canon = [canonical(m) for m in messages]
    assert needles_kept(messages, canon, rewritten, [canonical(m) for m in rewritten]) == (4, 4)


def test_a_valid_conversation_has_no_orphans() -> None:
    messages = conversation(4)
    assert orphans(messages) == 0
    parallel = [call("a", "ls") | {"tool_calls": call("a", "ls")["tool_calls"] + call("b", "pwd")["tool_calls"]},
                result("a", "x"), result("b", "y")]  # fmt: skip
    assert orphans(messages + parallel) == 0


def test_a_tool_result_without_its_call_is_an_orphan() -> None:
    messages = conversation(4)
    del messages[4]  # the assistant message that called c1
    assert orphans(messages) == 1  # c1's result now follows the call of c0


def test_a_call_without_its_result_is_an_orphan() -> None:
    messages = conversation(4)
    del messages[5]  # c1's result
    assert orphans(messages) == 1
    assert orphans(messages[:-1]) == 2  # and the last call's result too


def test_invalid_tool_arguments_are_counted() -> None:
    messages = conversation(2)
    assert invalid_arguments(messages) == 0
    broken = call("x", "ls")
    broken["tool_calls"][0]["function"]["arguments"] = '{"command": "ls'
    assert invalid_arguments(messages + [broken]) == 1


def test_identity_rewrite_costs_one_with_full_cache_and_needles() -> None:
    result = replay(conversation(12), TOOLS, identity, 1_000, COUNT)
    assert len(result.rows) == 13
    assert result.totals.cost_ratio == pytest.approx(1.0)
    assert result.totals.cache_hit_rate == pytest.approx(1.0)
    assert result.totals.needles_kept == 1.0
    assert result.totals.saved == 0.0
    assert (result.totals.orphans, result.totals.invalid_args) == (0, 0)
    assert result.totals.over_window == sum(r.tokens_sent > 1_000 for r in result.rows) > 0


@needs_traces
def test_identity_rewrite_on_a_public_trace() -> None:
    trace = load_trace(TRACES / "mini-swe-agent-pr816__deepseek_reasoner_dev__pvlib__pvlib-python-1707.json")
    result = replay(trace.messages, trace.tools, identity, 32_000, COUNT, trace=trace.name)
    assert len(result.rows) == 17
    assert (result.totals.cost_ratio, result.totals.cache_hit_rate, result.totals.needles_kept) == (pytest.approx(1.0), 1.0, 1.0)
    assert result.totals.orphans == 0


def test_rewrite_gets_a_copy_of_the_request_list() -> None:
    seen: list[int] = []

    def appending(ms: list[Message], tools: Tools) -> list[Message]:
        ms.append({"role": "user", "content": "extra"})
        seen.append(len(ms))
        return ms

    messages = conversation(2)
    replay(messages, TOOLS, appending, 1_000, COUNT)
    assert len(messages) == 6 and seen == [3, 5, 7]


def test_counter_adds_overhead_tool_calls_tools_and_priming() -> None:
    text = COUNT.text
    task = {"role": "user", "content": "hello world"}
    assert COUNT.message(task) == 3 + text("user") + text("hello world")
    assert COUNT.message(call("a", "ls")) == 3 + text("assistant") + text("bash") + text('{"command": "ls"}')
    count = COUNT([task], TOOLS)
    assert count.total == COUNT.message(task) + text(json.dumps(TOOLS)) + 3 and count.tools == text(json.dumps(TOOLS))


def test_merge_and_table_report_totals_over_all_requests() -> None:
    one = replay(conversation(3), TOOLS, identity, 1_000, COUNT, trace="a")
    two = replay(conversation(5), TOOLS, identity, 1_000, COUNT, trace="b")
    both = merge([one, two])
    assert len(both.rows) == 4 + 6
    assert both.totals.tokens_sent == one.totals.tokens_sent + two.totals.tokens_sent
    assert both.to_json()["totals"]["requests"] == 10
    table = format_table(both)
    assert "cost with caching   1.00x" in table and "needles kept        100.0 %" in table


def test_progress_bar_draws_on_a_terminal_for_long_runs(capsys: pytest.CaptureFixture[str]) -> None:
    bar = StderrProgress("32k x", min_total=10, width=10)
    bar.enabled = True  # as on a terminal
    bar(5, 10)
    bar(10, 10)
    bar(1, 2)  # too short a run: nothing
    assert capsys.readouterr().err == "\r32k x [#####.....] 5/10\r32k x [##########] 10/10\n"


def test_ruyi_replay_takes_an_anthropic_trace(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from proxy.cli import main
    from tests.rewrite.test_anthropic_session import conversation as claude_code

    body = claude_code(20)
    trace = tmp_path / "claude-code.json"
    trace.write_text(json.dumps({"system": body["system"], "messages": body["messages"], "tools": body["tools"]}))
    loaded = load_trace(trace)
    assert loaded.messages[0]["role"] == "system" and {m["role"] for m in loaded.messages} == {"system", "user", "assistant", "tool"}
    assert main(["replay", str(trace), "--window", "16000", "--json", "--model", "claude-opus-4-5"]) == 0
    totals = json.loads(capsys.readouterr().out)["totals"]
    assert totals["tokens_sent"] < totals["tokens_original"] and totals["orphans"] == 0


def test_a_message_whose_previous_copy_carried_a_block_of_ruyis_is_still_a_cached_prefix() -> None:
    system, user = {"role": "system", "content": "S"}, {"role": "user", "content": "run the tests"}
    blocked = {"role": "user", "content": "run the tests\n\n<ruyi-context>\n- time: now\n</ruyi-context>"}
    parts = {"role": "user", "content": [{"type": "text", "text": "run the tests"}]}
    parts_blocked = {
        "role": "user",
        "content": [{"type": "text", "text": "run the tests"}, {"type": "text", "text": "<ruyi-context>x</ruyi-context>"}],
    }
    reply = {"role": "assistant", "content": "ok"}
    assert cached_prefix([canonical(system), canonical(blocked)], [canonical(m) for m in (system, user, reply)], [5, 6, 7], 0) == 11
    assert cached_prefix([canonical(parts_blocked)], [canonical(parts), canonical(reply)], [6, 7], 0) == 6
    edited = {"role": "user", "content": "run the tests again\n\n<ruyi-context>x</ruyi-context>"}
    assert cached_prefix([canonical(system), canonical(edited)], [canonical(m) for m in (system, user, reply)], [5, 6, 7], 0) == 5
    other = {"role": "tool", "content": blocked["content"], "tool_call_id": "c1"}
    assert cached_prefix([canonical(other)], [canonical({**user, "role": "tool", "tool_call_id": "c2"})], [6], 0) == 0
