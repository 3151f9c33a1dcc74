"""Raw turns keep at most STORED_CHARS of any one string of a message (head and tail, the rest named), so one huge
tool output never becomes its size twice over in the store."""

from __future__ import annotations

from proxy.longctx.turns import STORED_CHARS, capped, turns_of


def test_a_huge_output_is_kept_as_head_and_tail_with_the_rest_named() -> None:
    big = "A" * 1000 + "x" * (3 * STORED_CHARS) + "Z" * 1000
    turn = turns_of("a", "s", [{"role": "tool", "tool_call_id": "c1", "content": big}], 0, None)[0]
    kept = turn.body["content"]
    assert len(kept) < STORED_CHARS + 200 and kept.startswith("A" * 1000) and kept.endswith("Z" * 1000)
    assert f"{len(big) - STORED_CHARS:,} characters not kept" in kept
    assert len(turn.text) < STORED_CHARS + 200


def test_ordinary_messages_are_kept_whole() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
    }
    assert capped(message) == message
    assert turns_of("a", "s", [message], 0, None)[0].body == message
