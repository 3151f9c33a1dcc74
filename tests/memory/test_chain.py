"""Message digests ignore what does not change meaning; chain links name whole prefixes."""

from __future__ import annotations

import gc
import json
import tracemalloc
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from memory.chain import Fingerprinter, FingerprintOptions, chain_of, message_digest, message_key, message_keys

CALL = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls", "cwd": "/"}'}}


def test_cache_control_key_order_and_nulls_do_not_matter() -> None:
    plain = {"role": "user", "content": "hello"}
    marked = {"content": [{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}], "role": "user"}
    nulls = {"role": "user", "content": "hello", "name": None, "tool_calls": None, "tool_call_id": None}
    assert message_digest(plain) == message_digest(marked) == message_digest(nulls)


def test_argument_strings_and_objects_hash_alike() -> None:
    openai = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    ollama = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "bash", "arguments": {"cwd": "/", "command": "ls"}}}]}
    assert message_digest(openai) == message_digest(ollama)


def test_what_the_model_sees_does_matter() -> None:
    base = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    variants: list[dict[str, Any]] = [
        dict(base, content="ok!"),
        dict(base, tool_call_id="c2"),
        dict(base, role="user"),
        {"role": "assistant", "content": None, "tool_calls": [dict(CALL, function={"name": "sh", "arguments": "{}"})]},
        {"role": "assistant", "content": None, "tool_calls": [dict(CALL, function={"name": "bash", "arguments": "{}"})]},
    ]
    digests = {message_digest(m) for m in [base, *variants]}
    assert len(digests) == len(variants) + 1


def test_non_text_parts_hash_without_their_cache_marker() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    a = {"role": "user", "content": [{"type": "text", "text": "see"}, image]}
    b = {"role": "user", "content": [{"type": "text", "text": "see"}, dict(image, cache_control={"type": "ephemeral"})]}
    c = {"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:x"}}]}
    assert message_digest(a) == message_digest(b) != message_digest(c)


def test_a_change_moves_every_later_link() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    edited = [messages[0], {"role": "user", "content": "U"}, messages[2]]
    a, b = chain_of(messages), chain_of(edited)
    assert a.links[0] == b.links[0]
    assert a.links[1] != b.links[1] and a.links[2] != b.links[2]
    assert a.digests[2] == b.digests[2]  # the message itself is unchanged: its count stays cached
    assert a.first_non_system == 1
    assert chain_of([messages[0]]).first_non_system == 1
    assert a.shared_prefix(b.links) == 1


@given(st.lists(st.sampled_from("abc"), max_size=12), st.lists(st.sampled_from("abc"), max_size=12))
def test_shared_prefix_is_the_common_prefix(xs: list[str], ys: list[str]) -> None:
    a = chain_of([{"role": "user", "content": x} for x in xs])
    b = chain_of([{"role": "user", "content": y} for y in ys])
    common = next((i for i, (x, y) in enumerate(zip(xs, ys)) if x != y), min(len(xs), len(ys)))
    assert a.shared_prefix(b.links) == common == b.shared_prefix(a.links)


def test_unparseable_arguments_are_kept_raw() -> None:
    a = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{not json"}}]}
    b = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": json.dumps("{not json")}}]}
    assert message_digest(a) != message_digest(b)


# --- the fingerprinter: same chains as chain_of, computed from what differs -------------------


def _fresh(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    parsed: list[dict[str, Any]] = json.loads(json.dumps(messages))  # a new body, as the proxy sees it
    return parsed


def test_fingerprinter_matches_chain_of_over_every_trace() -> None:
    from tests.traces import load, requests_of, trace_files

    fingerprinter = Fingerprinter()
    for path in trace_files():
        for request in requests_of(load(path)["messages"]):
            assert fingerprinter.chain(_fresh(request)) == chain_of(request), path.name


def test_message_keys_are_message_key_of_each_message_over_every_trace() -> None:
    """The inline path for plain messages (a string role and a string content, nothing else) gives exactly
    ``message_key``: keys of both paths are compared with each other in the fingerprinter's memory."""
    from tests.traces import load, trace_files

    for path in trace_files():
        messages = _fresh(load(path)["messages"])
        assert message_keys(messages) == [message_key(m) for m in messages], path.name


def test_message_keys_tell_apart_what_the_digest_tells_apart() -> None:
    plain = {"role": "user", "content": "fix the test"}
    shapes: list[Any] = [
        plain,
        {"role": "user", "content": "fix the tesT"},  # an edit of the same length
        {"role": "assistant", "content": "fix the test"},
        {"role": "user", "content": "fix the test", "name": "a"},  # a third key: message_key's own path
        {"role": "user", "content": [{"type": "text", "text": "fix the test"}]},
        {"role": "user", "content": None},
        {"role": "x" * 300, "content": "fix the test"},  # a long role: keyed by its digest
        {"content": "fix the test", "images": ["aGk="]},
        {"role": "tool", "content": "fix the test", "tool_call_id": "c1"},
        {"role": "tool", "content": "fix the test", "tool_call_id": "c2"},
        {"role": "tool", "content": "fix the test", "tool_call_id": None},  # a null id: as if it were not there
        {"role": "tool", "content": "fix the test", "tool_call_id": 7},  # not a string: message_key's own path
    ]
    keys = message_keys(shapes)
    assert keys == [message_key(m) for m in shapes]
    assert keys[0] == message_keys([dict(plain)])[0]
    digests = [message_digest(m) for m in shapes]
    for i in range(len(shapes)):  # equal keys mean equal digests (the other way need not hold: the list of parts)
        for j in range(len(shapes)):
            assert keys[i] != keys[j] or digests[i] == digests[j], (shapes[i], shapes[j])
    assert len(set(keys)) == len(shapes)
    assert keys[-2] == message_keys([{"role": "tool", "content": "fix the test"}])[0]  # a null field is no field


def test_an_earlier_message_edited_in_a_growing_conversation_gets_new_links() -> None:
    fingerprinter = Fingerprinter()
    history = [{"role": "system", "content": "rules"}, {"role": "user", "content": "task"}]
    for i in range(6):
        history += [{"role": "assistant", "content": f"step {i}"}, {"role": "user", "content": f"result {i}"}]
        assert fingerprinter.chain(_fresh(history)) == chain_of(history)
    edited = _fresh(history)
    edited[3]["content"] = "result 9"  # the same length, an earlier message
    chain = fingerprinter.chain(edited)
    assert chain == chain_of(edited)
    before = chain_of(history)
    assert chain.links[:3] == before.links[:3] and all(a != b for a, b in zip(chain.links[3:], before.links[3:]))


def test_fingerprinter_handles_moved_markers_rewinds_and_parallel_runs() -> None:
    from tests.traces import load, requests_of, trace_files

    messages = load(trace_files()[0])["messages"][:60]
    other = [dict(m, content="other " + (m.get("content") or "")) if m["role"] == "assistant" else m for m in messages]
    fingerprinter = Fingerprinter(FingerprintOptions(recent_max=3, per_start=2))
    sequence: list[list[dict[str, Any]]] = []
    for a, b in zip(requests_of(messages), requests_of(other)):
        marked = _fresh(a)
        marked[-1]["content"] = [{"type": "text", "text": marked[-1]["content"], "cache_control": {"type": "ephemeral"}}]
        sequence += [marked, _fresh(b)]
    sequence += [_fresh(messages[:20]), _fresh(messages[:10] + messages[30:40]), [{"role": "user", "content": "solo"}]]
    for request in sequence:
        assert fingerprinter.chain(request) == chain_of(request)
    assert len(fingerprinter) <= 3


def test_fingerprinter_without_a_task_message() -> None:
    fingerprinter = Fingerprinter()
    only_system = [{"role": "system", "content": "s"}]
    image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
    for request in (only_system, image, image, []):
        assert fingerprinter.chain(request) == chain_of(request)


def test_fingerprinter_remembers_starts_with_part_lists() -> None:
    system = {"role": "system", "content": [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}]}
    task = {"role": "user", "content": [{"type": "text", "text": "task"}, {"type": "image_url", "image_url": {"url": "x"}}]}
    fingerprinter = Fingerprinter()
    history: list[dict[str, Any]] = [system, task]
    for i in range(4):
        request = _fresh(history)
        if isinstance(request[-1]["content"], str):  # Claude Code marks the newest message
            request[-1]["content"] = [{"type": "text", "text": request[-1]["content"], "cache_control": {"type": "ephemeral"}}]
        assert fingerprinter.chain(request) == chain_of(request)
        history += [{"role": "assistant", "content": f"step {i}"}, {"role": "user", "content": f"result {i}"}]
    assert len(fingerprinter) == 1  # one start, its latest request kept


def test_fingerprinter_keeps_hashes_not_the_messages() -> None:
    """Requests of up to 32 MiB each, 128 of them remembered: what is kept of them is a key per message."""
    fingerprinter = Fingerprinter()
    system = {"role": "system", "content": "rules"}
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(8):  # eight tasks, each a 1 MiB task and a 1 MiB tool output
            request = [
                system,
                {"role": "user", "content": f"task {i} " + "t" * 2**20},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}],
                },
                {"role": "tool", "tool_call_id": f"c{i}", "content": [{"type": "text", "text": f"out {i} " + "o" * 2**20}]},
            ]
            assert fingerprinter.chain(request) == chain_of(request)
            del request
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(fingerprinter) == 8
    assert kept < 256 * 1024, f"the fingerprinter holds {kept} bytes of 16 MiB of requests"


def test_a_huge_message_hashes_in_pieces_to_the_digest_of_the_whole() -> None:
    """Issue 27: a huge tool output is hashed a piece at a time (no second copy of it); the digest is unchanged."""
    from hashlib import blake2b

    from memory.chain import DIGEST_SIZE, HASH_PIECE_CHARS, message_digest

    for content in ("x" * (3 * HASH_PIECE_CHARS + 7), "é\ud800" * HASH_PIECE_CHARS):
        whole = blake2b(digest_size=DIGEST_SIZE)
        for tag, text in ((b"r", "tool"), (b"t", content), (b"i", "call_1")):
            data = text.encode("utf-8", "surrogatepass")
            whole.update(tag + len(data).to_bytes(8, "little") + data)
        assert message_digest({"role": "tool", "content": content, "tool_call_id": "call_1"}) == whole.digest()


def test_fingerprinter_keeps_a_bounded_number_of_messages() -> None:
    """Finished tasks' latest requests are kept until newer ones push them out: bounded by messages too, not only by
    requests (128 requests of 400 messages would keep 51,000 messages; issue 27's soak: ~190 bytes each)."""
    options = FingerprintOptions(messages_max=10_000)
    fingerprinter = Fingerprinter(options)
    system = {"role": "system", "content": "rules"}
    for task in range(60):  # 60 tasks of 400 messages each, one request each (the last of a finished task)
        request = [system] + [{"role": "user" if i % 2 == 0 else "assistant", "content": f"task {task} step {i}"} for i in range(400)]
        assert fingerprinter.chain(request) == chain_of(request)
        assert fingerprinter.messages <= options.messages_max
    assert len(fingerprinter) == 10_000 // 401  # the newest whole requests that fit
    big = [system] + [{"role": "user", "content": f"long {i}"} for i in range(12_000)]  # one request past the bound stays, alone
    assert fingerprinter.chain(big) == chain_of(big)
    assert len(fingerprinter) == 1 and fingerprinter.messages == len(big)
    grown = [*big, {"role": "assistant", "content": "more"}]
    assert fingerprinter.chain(grown) == chain_of(grown)  # extended from what was kept
    assert len(fingerprinter) == 1 and fingerprinter.messages == len(grown)
