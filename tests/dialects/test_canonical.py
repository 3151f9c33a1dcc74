"""The canonical form's contract (proxy/dialects/base.py): what strategies do not understand travels opaquely."""

from __future__ import annotations

import copy
import json
from typing import Any

from memory.chain import text_parts
from proxy.dialects.ollama import OLLAMA_CHAT
from proxy.dialects.openai_chat import OPENAI_CHAT
from strategies.base import CONTENT, Replacement
from strategies.pipeline import apply_replacements

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
THINKING = {"type": "thinking", "thinking": "Let me look at the file.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}
SERVER_TOOL = {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "ruyi"}}


def replace(messages: list[dict[str, Any]], index: int, text: str) -> list[dict[str, Any]]:
    old = "".join(text_parts(messages[index]["content"])[0])
    return apply_replacements(messages, [Replacement(index, CONTENT, text, old, 100, 10, "ref1", "test", "testing")])


def test_non_text_parts_stay_in_place_and_a_replaced_text_part_keeps_its_keys() -> None:
    output = [{"type": "text", "text": "x" * 5000, "cache_control": {"type": "ephemeral"}}, IMAGE, SERVER_TOOL]
    messages = [
        {
            "role": "assistant",
            "content": [THINKING],
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": output},
    ]
    before = copy.deepcopy(messages)
    after = replace(messages, 1, "[placeholder]")
    assert messages == before  # the input is never mutated
    assert after[0] is messages[0]  # untouched messages are the very same objects
    parts = after[1]["content"]
    assert parts[0] == {"type": "text", "text": "[placeholder]", "cache_control": {"type": "ephemeral"}}
    assert parts[1:] == [IMAGE, SERVER_TOOL]  # never pruned, byte for byte
    assert text_parts(after[0]["content"]) == ([], [THINKING])  # strategies read text only


def test_openai_bodies_change_only_their_messages() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True, "x_vendor": {"a": 1}}
    messages = OPENAI_CHAT.to_canonical(body)
    assert messages is body["messages"]
    assert OPENAI_CHAT.with_messages(body, messages, messages) is body
    new = OPENAI_CHAT.with_messages(body, messages, [{"role": "user", "content": "hello"}])
    assert list(new) == list(body) and new["x_vendor"] is body["x_vendor"]


def test_ollama_native_fields_go_back_untouched_on_the_clients_own_message() -> None:
    native = [
        {"role": "user", "content": "what is in this picture?", "images": ["iVBORw0KGgo="]},
        {
            "role": "assistant",
            "content": "",
            "thinking": "I should read it",
            "tool_calls": [{"function": {"name": "read", "arguments": {"path": "a.py"}}}],
        },
        {"role": "tool", "content": "y" * 3000, "tool_name": "read"},
        {"role": "user", "content": "thanks", "images": ["R0lGODlh"]},
    ]
    body = {"model": "llava", "messages": native, "options": {"temperature": 0}}
    original = json.dumps(body)
    canonical = OLLAMA_CHAT.to_canonical(body)
    assert canonical is not None and canonical[0]["images"] == ["iVBORw0KGgo="]  # counted and fingerprinted
    assert canonical[2]["tool_call_id"] == canonical[1]["tool_calls"][0]["id"]  # synthetic ids pair them
    rewritten = OLLAMA_CHAT.with_messages(body, canonical, replace(canonical, 2, "[placeholder]"))
    assert json.dumps(body) == original  # the client's body is not mutated
    out = rewritten["messages"]
    assert [m is n for m, n in zip(out, native)] == [True, True, False, True]
    assert out[2] == {"role": "tool", "content": "[placeholder]", "tool_name": "read"}
    assert "tool_call_id" not in out[1]["tool_calls"][0] and out[1]["thinking"] == "I should read it"


def test_a_system_message_added_after_the_task_rides_at_the_end_of_it_on_the_wire() -> None:
    from proxy.dialects.ollama import OLLAMA_CHAT
    from proxy.dialects.openai_chat import OPENAI_CHAT

    system = {"role": "system", "content": "Be brief."}
    parts = {"role": "user", "content": [{"type": "text", "text": "Fix it."}, {"type": "image_url", "image_url": {"url": "data:x"}}]}
    newest = [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "thanks"}]
    before = [system, parts, {"role": "assistant", "content": "Looking."}, {"role": "user", "content": "go on"}, *newest]
    block = {"role": "system", "content": "<ruyi-archive>B</ruyi-archive>"}
    after = [system, parts, block, *newest]
    out = OPENAI_CHAT.with_messages({"model": "m", "messages": before}, before, after, [0, 1, -1, 4, 5])["messages"]
    assert out[0] is system and out[2:] == newest  # no message added between the task and the newest turns
    assert out[1] == {"role": "user", "content": [*parts["content"], {"type": "text", "text": "<ruyi-archive>B</ruyi-archive>"}]}
    plain = [system, {"role": "user", "content": "Fix it.", "images": ["aGk="]}, *before[2:]]
    out = OLLAMA_CHAT.with_messages({"model": "m", "messages": plain}, plain, [system, plain[1], block, *newest], [0, 1, -1, 4, 5])["messages"]
    assert out[1] == {"role": "user", "content": "Fix it.\n\n<ruyi-archive>B</ruyi-archive>", "images": ["aGk="]} and out[2:] == newest
    first = [block, *before]  # a system message added first (a conversation without one) stays a message of its own
    assert OPENAI_CHAT.with_messages({"messages": before}, before, first, [-1, *range(len(before))])["messages"] == first
