"""Raw turns keep at most STORED_CHARS of any one string of a message (head and tail, the rest named), so one huge
tool output never becomes its size twice over in the store."""

from __future__ import annotations

import tracemalloc

from proxy.longctx.turns import HEAD_SHARE, MARGIN, STORED_CHARS, capped, kept, turns_of
from redaction.redact import redact, redact_value


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


def test_a_huge_output_is_capped_before_it_is_redacted() -> None:
    """Keeping an 8 MiB tool output costs its kept head and tail, not a lowered and a redacted copy of the whole
    (8 MiB each before: redaction ran on the whole string, then the cap cut it)."""
    big = ("2026-11-27 worker read line of the log\n" * (8 * 2**20 // 39 + 1))[: 8 * 2**20]
    message = {"role": "tool", "tool_call_id": "c1", "content": big}
    turns_of("a", "s", [{"role": "user", "content": "warm up: the rules compiled " * 20}], 0, None)
    tracemalloc.start()
    try:
        turn = turns_of("a", "s", [message], 0, None)[0]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(big) // 2, f"peak {peak:,} bytes for a {len(big):,}-byte string"
    assert turn.body["content"] == capped(big)  # no secret in it: the same stored text as redacting it whole


def test_a_key_cut_in_two_by_a_piece_never_reaches_the_stored_text() -> None:
    """A long key block before the cut shrinks the redacted head by more than its margin: a key straddling the
    piece's end, cut in two there (its first half too short for the rule), would slide into the kept head. The
    string is then redacted whole: the key is masked, no half of it is kept."""
    head_n = int(STORED_CHARS * HEAD_SHARE)
    block = "-----BEGIN RSA PRIVATE KEY-----\n" + "MIIEowIBAAKCAQEA7x9" * 1200 + "\n-----END RSA PRIVATE KEY-----\n"
    key = "sk-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2
    before_key = head_n + MARGIN - 10  # the piece ends 10 characters into the key
    filler = "ok, go on. " * (4 * STORED_CHARS // 11)  # not key material: the key rules scan it fast
    text = filler[: head_n - len(block) - 100] + "\n" + block
    text += filler[: before_key - len(text) - 1] + " " + key + "\n" + filler[: 3 * STORED_CHARS]
    assert text.index(key) == before_key
    body = turns_of("a", "s", [{"role": "tool", "tool_call_id": "c1", "content": text}], 0, None)[0].body["content"]
    assert key[:12] not in body and "[REDACTED:sk-key]" in body and "[REDACTED:private-key]" in body
    assert kept(text) == capped(redact(text))


def test_strings_near_the_cap_are_stored_as_before() -> None:
    """Up to the cap and its margins a string is redacted whole and then cut, exactly as before this change."""
    secret = "api_key = 'sk-" + "Q" * 30 + "'"
    for size in (STORED_CHARS - 10, STORED_CHARS + 10, STORED_CHARS + 2 * MARGIN):
        text = (secret + " " + "w" * 97 + "\n") * (size // 145 + 1)
        text = text[:size]
        assert kept({"content": text}) == capped(redact_value({"content": text}))
