"""The Anthropic dialect: Messages blocks ⇄ canonical messages, written back block by block; its SSE assembler and error shape."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from proxy.dialects.anthropic import ANTHROPIC_MESSAGES, AnthropicAssembler, convert, error_body, system_without_billing
from strategies.base import CONTENT, Replacement
from strategies.pipeline import apply_replacements
from tests.anthropic_shape import breakpoints, problems

BILLING = "x-anthropic-billing-header: cc_version=2.1.37.0d9; cc_entrypoint=cli; cch=fa690;"
THINKING = {"type": "thinking", "thinking": "I should read the file.", "signature": "EqQBCkYIARgCIkDsig"}
SEARCH = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "aiohttp"}}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [{"type": "web_search_result", "url": "https://docs.aiohttp.org", "title": "aiohttp", "encrypted_content": "Eu8B"}],
}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}


def body() -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": BILLING}, {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Read main.py"}, IMAGE]},
            {
                "role": "assistant",
                "content": [
                    THINKING,
                    {"type": "text", "text": "Reading it."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/w/main.py"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print('hi')\n" * 50, "cache_control": {"type": "ephemeral"}},
                    {"type": "text", "text": "<system-reminder>keep going</system-reminder>"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    SEARCH,
                    SEARCH_RESULT,
                    {"type": "text", "text": "Found the docs."},
                    {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "pytest"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "is_error": True,
                        "content": [{"type": "text", "text": "FAILED"}, {"type": "text", "text": "1 failed", "cache_control": {"type": "ephemeral"}}],
                    }
                ],
            },
            {"role": "assistant", "content": "All done."},
            {"role": "user", "content": "thanks", "future_field": {"x": 1}},
        ],
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 100000}}]},
        "a_field_of_a_newer_client": [1, 2],
    }


def test_the_canonical_form_carries_every_block() -> None:
    messages = ANTHROPIC_MESSAGES.to_canonical(body())
    assert messages is not None
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user", "assistant", "tool", "assistant", "user"]
    assert messages[0]["content"] == [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]  # no billing line
    assert messages[1]["content"] == [{"type": "text", "text": "Read main.py"}, IMAGE]
    assert messages[2]["content"] == [THINKING, {"type": "text", "text": "Reading it."}]
    assert messages[2]["tool_calls"] == [
        {"id": "toolu_1", "type": "function", "function": {"name": "Read", "arguments": '{"file_path": "/w/main.py"}'}}
    ]
    assert messages[3]["tool_call_id"] == "toolu_1" and messages[3]["content"].startswith("print")
    assert messages[5]["content"][:2] == [SEARCH, SEARCH_RESULT]  # the server tool and its result, together, in order
    assert messages[6]["is_error"] is True


def test_a_body_no_step_changes_is_the_same_object() -> None:
    original = body()
    messages = ANTHROPIC_MESSAGES.to_canonical(original)
    assert ANTHROPIC_MESSAGES.with_messages(original, messages, messages) is original


def rewritten(replacements: list[Replacement]) -> tuple[dict[str, Any], dict[str, Any]]:
    original = body()
    kept = copy.deepcopy(original)
    before = ANTHROPIC_MESSAGES.to_canonical(original)
    assert before is not None
    after = apply_replacements(before, replacements)
    return ANTHROPIC_MESSAGES.with_messages(original, before, after), kept


def replacement(index: int, text: str, target: str = CONTENT) -> Replacement:
    return Replacement(
        index=index, target=target, new_text=text, original="", tokens_before=10, tokens_after=1, ref_id="r", strategy="test", reason="test"
    )


def test_a_replaced_tool_result_keeps_its_block_keys_and_everything_else_is_untouched() -> None:
    out, original = rewritten([replacement(3, "[ruyi: removed]")])
    result = out["messages"][2]["content"][0]
    assert result == {**original["messages"][2]["content"][0], "content": "[ruyi: removed]"}  # cache_control stays on its block
    assert out["messages"][2]["content"][1] == original["messages"][2]["content"][1]
    for i in (0, 1, 3, 4, 5, 6):
        assert out["messages"][i] == original["messages"][i]
    assert {k: v for k, v in out.items() if k != "messages"} == {k: v for k, v in original.items() if k != "messages"}
    assert breakpoints(out) == breakpoints(original)
    assert not problems(out)


def test_a_marker_on_a_dropped_text_part_moves_to_the_text_that_replaced_it() -> None:
    out, original = rewritten([replacement(6, "[ruyi: FAILED]")])
    block = out["messages"][4]["content"][0]
    assert block["is_error"] is True and block["tool_use_id"] == "toolu_2"
    assert block["content"] == [{"type": "text", "text": "[ruyi: FAILED]", "cache_control": {"type": "ephemeral"}}]
    assert len(breakpoints(out)) == len(breakpoints(original))
    assert not problems(out)


def test_assistant_text_and_arguments_change_while_thinking_and_server_blocks_stay_whole() -> None:
    out, original = rewritten([replacement(5, "[ruyi: shortened]"), replacement(2, '{"file_path": "[ruyi]"}', "args:toolu_1")])
    first, second = out["messages"][1]["content"], out["messages"][3]["content"]
    assert first[0] == THINKING and first[1] == {"type": "text", "text": "Reading it."}
    assert first[2] == {**original["messages"][1]["content"][2], "input": {"file_path": "[ruyi]"}}
    assert second[:2] == [SEARCH, SEARCH_RESULT]
    assert second[2] == {"type": "text", "text": "[ruyi: shortened]"}
    assert second[3] == original["messages"][3]["content"][3]
    assert not problems(out)


def test_string_contents_are_replaced_whole() -> None:
    out, _ = rewritten([replacement(7, "[ruyi: done]")])
    assert out["messages"][5] == {"role": "assistant", "content": "[ruyi: done]"}


def test_a_changed_number_of_messages_is_refused() -> None:
    original = body()
    before = ANTHROPIC_MESSAGES.to_canonical(original)
    assert before is not None
    with pytest.raises(ValueError):
        ANTHROPIC_MESSAGES.with_messages(original, before, before[:-1])


@pytest.mark.parametrize(
    "system", [BILLING + "\nYou are Claude Code.", [{"type": "text", "text": BILLING}, {"type": "text", "text": "You are Claude Code."}]]
)
def test_the_billing_line_is_not_part_of_the_canonical_form(system: Any) -> None:
    one = {"model": "claude-x", "system": system, "messages": [{"role": "user", "content": "hi"}]}
    other = json.loads(json.dumps(one).replace("cch=fa690", "cch=0aaa9").replace("0d9", "76b"))
    assert ANTHROPIC_MESSAGES.to_canonical(one) == ANTHROPIC_MESSAGES.to_canonical(other)
    assert "billing" not in json.dumps(system_without_billing(system))
    assert "You are Claude Code." in json.dumps(system_without_billing(system))


def test_the_origins_name_each_native_block() -> None:
    found = convert(body())
    assert found is not None
    assert found[1][:4] == [("system", -1, ()), ("user", 0, (0, 1)), ("assistant", 1, (0, 1)), ("tool", 2, (0,))]


def sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def test_the_assembler_reads_the_event_sequence() -> None:
    events = [
        {
            "type": "message_start",
            "message": {"usage": {"input_tokens": 10, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 1}},
        },
        {"type": "ping"},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Let me look."}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_9", "name": "Read", "input": {}}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"file_'}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": 'path": "a.py"}'}},
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 30},
            "context_management": {"applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 3, "cleared_input_tokens": 4000}]},
        },
        {"type": "message_stop"},
    ]
    asm = AnthropicAssembler()
    data = sse(events)
    cut = data.index(b"\n", 300) + 1  # the relay feeds whole lines, in any number of pieces
    asm.feed_lines(data[:cut])
    asm.feed_lines(data[cut:])
    result = asm.result
    assert result.done and result.finish_reason == "tool_use" and result.content == "Let me look."
    assert result.tool_calls == [{"id": "toolu_9", "type": "function", "function": {"name": "Read", "arguments": '{"file_path": "a.py"}'}}]
    assert result.usage == {"input_tokens": 10, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 30}
    assert result.applied_edits[0]["cleared_input_tokens"] == 4000


def test_the_assembler_reads_an_error_event_and_a_whole_message() -> None:
    asm = AnthropicAssembler()
    asm.feed_lines(sse([{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]))
    assert asm.result.error == {"type": "overloaded_error", "message": "Overloaded"}
    whole = AnthropicAssembler()
    whole.feed_object(
        {"type": "message", "content": [THINKING, {"type": "text", "text": "Hi"}], "stop_reason": "end_turn", "usage": {"input_tokens": 3}}
    )
    assert whole.result.content == "Hi" and whole.result.usage == {"input_tokens": 3}


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),
        (503, "overloaded_error"),
        (529, "overloaded_error"),
        (431, "invalid_request_error"),
    ],
)
def test_errors_have_anthropics_shape(status: int, kind: str) -> None:
    assert error_body(status, "x", "what happened") == {"type": "error", "error": {"type": kind, "message": "what happened"}}


def test_an_archive_drops_whole_block_groups_and_appends_its_block_after_the_last_system_breakpoint() -> None:
    from proxy.longctx.restart import with_block
    from proxy.longctx.retrieval import with_recall

    original = body()
    sent = copy.deepcopy(original)
    before = ANTHROPIC_MESSAGES.to_canonical(sent)
    assert before is not None
    positions = [0, 1, 5, 6, 7, 8]  # the first tool turn (thinking, tool_use, its result, the reminder) archived
    after = [
        with_block(before[0], '<ruyi-archive n="1">summary</ruyi-archive>'),
        *(before[p] for p in positions[1:-1]),
        with_recall(before[8], "<ruyi-recall>chunk</ruyi-recall>"),
    ]
    out = ANTHROPIC_MESSAGES.with_messages(sent, before, after, positions)
    assert sent == original and not problems(out), problems(out)
    assert out["system"][:2] == original["system"] and out["system"][2] == {"type": "text", "text": '<ruyi-archive n="1">summary</ruyi-archive>'}
    assert breakpoints(out) == ["system[1]", "messages[2].content[0].content[1]"]  # none added; the removed one went with its block
    assert out["messages"][:4] == [original["messages"][0], *original["messages"][3:6]]  # kept messages byte-identical
    assert out["messages"][4] == {**original["messages"][6], "content": "thanks\n\n<ruyi-recall>chunk</ruyi-recall>"}
    assert {k: v for k, v in out.items() if k not in ("system", "messages")} == {k: v for k, v in original.items() if k not in ("system", "messages")}


def test_an_archive_block_after_the_task_goes_after_the_tasks_last_block_and_the_system_stays_as_sent() -> None:
    original = body()
    sent = copy.deepcopy(original)
    before = ANTHROPIC_MESSAGES.to_canonical(sent)
    assert before is not None
    block = {"role": "system", "content": '<ruyi-archive n="1">summary</ruyi-archive>'}
    positions = [0, 1, -1, 5, 6, 7, 8]  # the block after the task (archive.block: after_task), the first tool turn archived
    after = [before[0], before[1], block, *(before[p] for p in positions[3:])]
    out = ANTHROPIC_MESSAGES.with_messages(sent, before, after, positions)
    assert sent == original and not problems(out), problems(out)
    assert out["system"] == original["system"]  # byte for byte: the provider's cached prefix holds
    task = original["messages"][0]["content"]
    assert out["messages"][0]["content"] == [*task, {"type": "text", "text": '<ruyi-archive n="1">summary</ruyi-archive>'}]
    assert breakpoints(out) == breakpoints({**original, "messages": [original["messages"][0], *original["messages"][3:]]})  # none added
    assert out["messages"][1:5] == original["messages"][3:7]  # kept messages byte-identical, roles alternating


def test_an_archive_block_after_a_plain_string_task_stays_a_string() -> None:
    sent: dict[str, Any] = {
        "model": "claude-x",
        "max_tokens": 1000,
        "system": "You are Claude Code.",
        "messages": [
            {"role": "user", "content": "Fix the bug."},
            {"role": "assistant", "content": "Looking."},
            {"role": "user", "content": "go on"},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "thanks"},
        ],
    }
    before = ANTHROPIC_MESSAGES.to_canonical(sent)
    assert before is not None
    after = [before[0], before[1], {"role": "system", "content": "ARCHIVE"}, *before[4:]]
    out = ANTHROPIC_MESSAGES.with_messages(sent, before, after, [0, 1, -1, 4, 5])
    assert not problems(out), problems(out)
    assert out["system"] == "You are Claude Code." and out["messages"][0] == {"role": "user", "content": "Fix the bug.\n\nARCHIVE"}
    assert out["messages"][1:] == sent["messages"][3:]


def test_removed_calls_take_their_results_along_and_roles_still_alternate() -> None:
    sent = body()
    sent["system"] = "You are Claude Code."
    before = ANTHROPIC_MESSAGES.to_canonical(sent)
    assert before is not None
    positions = [0, 1, 3, 4, 8]  # the call of a kept result removed, and the assistant answers after it
    after = [with_block_text(before[0]), *(before[p] for p in positions[1:])]
    out = ANTHROPIC_MESSAGES.with_messages(sent, before, after, positions)
    assert not problems(out), problems(out)
    assert out["system"] == "You are Claude Code.\n\nARCHIVE"  # a string system stays a string
    assert "toolu_1" not in json.dumps(out["messages"])  # the orphaned result went; the user inputs left merge into one
    assert out["messages"] == [{"role": "user", "content": [*original_user(sent), {"type": "text", "text": "thanks"}]}]


def original_user(sent: dict[str, Any]) -> list[Any]:
    return [*sent["messages"][0]["content"], sent["messages"][2]["content"][1]]


def with_block_text(message: dict[str, Any]) -> dict[str, Any]:
    from proxy.longctx.restart import with_block

    return with_block(message, "ARCHIVE")
