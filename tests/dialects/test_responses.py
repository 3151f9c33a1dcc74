"""The Responses API as a dialect: items ⇄ canonical messages (calls paired by call_id, reasoning opaque), changes written
back onto copies of the items, removed messages taking their items along, a chained body left alone."""

from __future__ import annotations

import copy
import json
from typing import Any

from proxy.dialects.responses import RESPONSES, ResponsesAssembler, convert

BODY: dict[str, Any] = {
    "model": "gpt-5-codex",
    "instructions": "You are Codex.",
    "stream": True,
    "prompt_cache_key": "sess-1",
    "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
    "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>sandboxed</permissions>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>cwd=/repo</environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-opaque"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell", "arguments": '{"command": ["pytest"]}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "FAILED test_x\n" + "log line\n" * 50},
        {"type": "message", "role": "assistant", "id": "msg_1", "content": [{"type": "output_text", "text": "Looking at it."}]},
        {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_2", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done!"},
        {"type": "mystery_item", "payload": {"x": 1}},
    ],
}


def test_items_become_canonical_messages() -> None:
    messages, origins = convert(BODY)  # type: ignore[misc]
    roles = [m["role"] for m in messages]
    assert roles == ["system", "system", "user", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assistant = messages[4]
    assert assistant["content"] == [BODY["input"][3]]  # reasoning rides along, opaque
    assert assistant["tool_calls"][0]["id"] == "call_1" and messages[5]["tool_call_id"] == "call_1"
    assert messages[6]["tool_calls"][0]["function"] == {"name": "apply_patch", "arguments": "*** Begin Patch"}
    assert messages[8]["content"] == [BODY["input"][9]]  # an unknown item is carried untouched
    assert origins[4] == ("assistant", (3, 4))


def test_unchanged_messages_give_the_very_items_back() -> None:
    messages = RESPONSES.to_canonical(BODY)
    assert RESPONSES.with_messages(BODY, messages, messages) is BODY  # type: ignore[arg-type]
    copied = copy.deepcopy(messages)
    out = RESPONSES.with_messages(BODY, messages, copied)  # type: ignore[arg-type]
    assert json.dumps(out) == json.dumps(BODY)


def test_a_change_is_written_onto_a_copy_of_its_item() -> None:
    before = RESPONSES.to_canonical(BODY)
    assert before is not None
    after = list(before)
    after[5] = {**before[5], "content": "[ruyi: older output replaced]"}
    calls = [{**before[4]["tool_calls"][0], "function": {"name": "shell", "arguments": '{"command": "[ruyi: …]"}'}}]
    after[4] = {**before[4], "tool_calls": calls}
    out = RESPONSES.with_messages(BODY, before, after)
    assert out["input"][5] == {"type": "function_call_output", "call_id": "call_1", "output": "[ruyi: older output replaced]"}
    assert out["input"][4]["arguments"] == '{"command": "[ruyi: …]"}' and out["input"][4]["id"] == "fc_1"
    assert out["input"][3] is BODY["input"][3] and out["input"][0] is BODY["input"][0]
    assert BODY["input"][5]["output"].startswith("FAILED")  # the client's body untouched


def test_removed_messages_take_their_items_and_a_summary_goes_in_their_place() -> None:
    before = RESPONSES.to_canonical(BODY)
    assert before is not None
    keep = [0, 1, 2, 3]  # instructions, developer, environment, the task; then the newest turn
    summary = {"role": "system", "content": "Archive 1: ran pytest, test_x failed."}
    after = [before[p] for p in keep] + [summary, before[6], before[7], before[8]]
    positions = [*keep, -1, 6, 7, 8]
    out = RESPONSES.with_messages(BODY, before, after, positions)
    types = [i.get("type") for i in out["input"]]
    assert types == ["message", "message", "message", "message", "custom_tool_call", "custom_tool_call_output", "mystery_item"]
    task = BODY["input"][2]  # the summary after the task's own text, an input_text part of its own: no item added
    assert out["input"][2] == {**task, "content": [*task["content"], {"type": "input_text", "text": "Archive 1: ran pytest, test_x failed."}]}
    assert out["input"][:2] == BODY["input"][:2]
    assert out["instructions"] == "You are Codex." and out["tools"] is BODY["tools"]
    assert not any(i.get("call_id") == "call_1" for i in out["input"])  # the call and its output went together


def test_a_chained_body_is_left_alone() -> None:
    assert RESPONSES.to_canonical({**BODY, "previous_response_id": "resp_9", "input": BODY["input"][-2:]}) is None


def test_the_assembler_reads_events_and_whole_objects() -> None:
    asm = ResponsesAssembler()
    events = [
        {"type": "response.output_text.delta", "delta": "Hel"},
        {"type": "response.output_text.delta", "delta": "lo"},
        {"type": "response.output_item.done", "item": {"type": "function_call", "call_id": "c9", "name": "shell", "arguments": "{}"}},
        {
            "type": "response.completed",
            "response": {"status": "completed", "usage": {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 100}}},
        },
    ]
    asm.feed_lines(b"".join(b"event: x\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events))
    assert asm.result.content == "Hello" and asm.result.tool_calls[0]["id"] == "c9" and asm.result.done
    assert asm.result.usage["input_tokens_details"]["cached_tokens"] == 100
