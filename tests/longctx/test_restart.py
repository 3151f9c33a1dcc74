"""The archive in force: found by its end link, applied byte for byte, its system message added or extended."""

from __future__ import annotations

from memory.chain import chain_of
from proxy.longctx.chunks import spans
from proxy.longctx.restart import AFTER_HEAD, ARCHIVES, INSERTED, head_size, in_force, restart, with_block
from tests.longctx.sessions import session


def record(messages: list[dict], end: int, system: int = 0, number: int = 1, keep: tuple[int, ...] = ()) -> dict:
    return {
        "id": f"a{number}",
        "number": number,
        "head": head_size(messages),
        "end": end,
        "end_link": chain_of(messages).links[end],
        "system": system,
        "keep": list(keep),
        "block": '<ruyi-archive n="1">summary</ruyi-archive>',
        "block_tokens": 12,
    }


def test_the_newest_archive_whose_messages_the_request_still_carries_is_in_force() -> None:
    messages = session(10)
    links = chain_of(messages).links
    first, second = record(messages, 7), record(messages, 15, number=2)
    assert in_force({ARCHIVES: [first, second]}, links) == second
    assert in_force({ARCHIVES: [first, second]}, links[:12]) == first  # a rewound client: the older archive
    edited = messages[:5] + [{"role": "user", "content": "changed"}] + messages[6:]
    assert in_force({ARCHIVES: [first, second]}, chain_of(edited).links) is None


def test_restart_keeps_the_head_adds_the_block_to_the_system_message_and_the_rest_follows() -> None:
    messages = session(10)
    chain = chain_of(messages)
    tokens = [10] * len(messages)
    view = restart(messages, chain.links, len(messages) - 2, tokens, sum(tokens) + 3, 2 * (sum(tokens) + 3), record(messages, 13))
    assert view.messages[0]["content"] == messages[0]["content"] + "\n\n" + '<ruyi-archive n="1">summary</ruyi-archive>'
    assert view.messages[1] is messages[1] and view.messages[2:] == messages[14:]
    assert view.positions == (0, 1, *range(14, len(messages))) and view.links[2:] == chain.links[14:]
    assert view.message_tokens[0] == 22 and view.raw_tokens == sum(tokens) + 3 - 12 * 10 + 12
    assert view.tokens == 2 * view.raw_tokens and view.shared == len(view.messages) - 2


def test_a_block_after_the_task_is_a_message_of_its_own_and_the_head_stays_the_very_objects_sent() -> None:
    messages = session(10)
    chain = chain_of(messages)
    tokens = [10] * len(messages)
    view = restart(messages, chain.links, len(messages) - 2, tokens, sum(tokens) + 3, sum(tokens) + 3, record(messages, 13, system=AFTER_HEAD))
    assert view.messages[0] is messages[0] and view.messages[1] is messages[1]  # the system text and the task: as sent
    assert view.messages[2] == {"role": "system", "content": '<ruyi-archive n="1">summary</ruyi-archive>'}
    assert view.messages[3:] == messages[14:]
    assert view.positions == (0, 1, INSERTED, *range(14, len(messages))) and view.links[2] == "a1" and view.links[3:] == chain.links[14:]
    assert view.message_tokens[:3] == (10, 10, 12) and view.raw_tokens == sum(tokens) + 3 - 12 * 10 + 12


def test_without_a_system_message_the_archive_adds_one_and_content_parts_get_a_part() -> None:
    messages = session(6)[1:]
    view = restart(messages, chain_of(messages).links, 0, [5] * len(messages), 100, 100, record(messages, 5, system=INSERTED))
    assert view.messages[0] == {"role": "system", "content": '<ruyi-archive n="1">summary</ruyi-archive>'}
    assert view.positions[:2] == (INSERTED, 0) and view.links[0] == "a1"
    parts = with_block({"role": "system", "content": [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}]}, "B")
    assert parts["content"] == [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "B"}]


def test_chunks_are_cut_where_the_content_says_whenever_they_are_made() -> None:
    messages = session(30)
    tokens = [200] * len(messages)
    whole = spans(messages, tokens, 2, 61, 1000)
    prepared = spans(messages, tokens, 2, 40, 1000, complete_only=True)
    assert whole[: len(prepared)] == prepared and all(messages[b + 1]["role"] == "assistant" for _, b in whole[:-1])
    assert spans(messages, tokens, 2, 61, 1000, base=[(2, 9), (10, 13)])[:2] == [(2, 9), (10, 13)]


def test_the_task_an_archive_keeps_is_every_user_message_before_the_first_answer() -> None:
    demonstration = {"role": "user", "content": "Here is a demonstration of how to solve a task like this one."}
    issue = {"role": "user", "content": "We're currently solving the following issue: the parser crashes on empty input."}
    messages = session(3)[:1] + [demonstration, issue] + session(3)[2:]
    assert head_size(messages) == 3 and head_size(session(3)) == 2
    assert head_size([{"role": "user", "content": "hi"}]) == 1 and head_size([]) == 0
    view = restart(messages, chain_of(messages).links, 0, [10] * len(messages), 10 * len(messages) + 3, 10 * len(messages) + 3, record(messages, 6))
    assert view.messages[1:3] == [demonstration, issue]  # the issue stays verbatim, not only the demonstration before it
