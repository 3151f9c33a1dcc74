"""Placeholders, ref ids, the replacement builders, and the redaction of what they write."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from strategies.conversation import analyze
from strategies.pipeline import PipelineOptions, propose_all
from strategies.placeholder import (
    first_line,
    placeholder,
    ref_id,
    replace_arguments,
    replace_output,
)
from tests.strategies.factories import bash, conversation, lines, make_ctx, step
from tests.traces import load, trace_files


def test_placeholder_text() -> None:
    text = placeholder(
        "older output", "sed -n '1,80p' src/x.py", 1240, "the file was read again later", "run the command again if you need it", "r0123456789ab"
    )
    assert text == (
        "[ruyi: older output of `sed -n '1,80p' src/x.py` (1,240 tokens) replaced: the file was read "
        "again later; run the command again if you need it; original kept for a person or tool as ref r0123456789ab]"
    )


def every_kind_of_placeholder() -> list[tuple[str, str, str]]:
    """(strategy, placeholder, ref id) of one conversation that every strategy finds something in."""
    messages = conversation(
        bash("cat src/a.py", lines("a", 80)),
        step("Write", "File created", file_path="src/b.py", content=lines("b", 80)),
        bash("cat src/b.py", lines("b", 80)),
        step("Read", lines("c", 80), file_path="src/c.py"),
        step("Edit", "File edited", file_path="src/c.py", old_string="c line 1 with", new_string="c line 1 without"),
        step("Write", "Error: permission denied", file_path="/etc/x.conf", content=lines("x", 80)),
        bash("python run.py", "Traceback (most recent call last):\n" + lines("log", 200) + "\nValueError: boom", returncode=1),
        bash("cat src/a.py", lines("a", 80)),
        bash("find / -name x", lines("/path/x", 3000)),
        bash("git log", lines("commit", 120)),
        bash("ls", "a"),
        bash("ls", "b"),
        bash("ls", "c"),
        bash("ls", "d"),
        bash("ls", "e"),
    )
    found = []
    for r in propose_all(messages, make_ctx(protected_turns=4, window_tokens=8000, remaining_tokens=4000), PipelineOptions(), Counter()):
        texts = [v for v in json.loads(r.new_text).values() if "[ruyi:" in str(v)] if r.call_id else [r.new_text.split("\n", 1)[0]]
        found += [(r.strategy, text, r.ref_id) for text in texts]
    return found


def test_every_placeholder_says_how_to_get_the_content_back() -> None:
    """In words a model can act on (run it again, read the file, see the later output), and the ref id for a
    person or tool (the model cannot fetch it itself)."""
    found = every_kind_of_placeholder()
    assert {strategy for strategy, _, _ in found} == {"dedup", "supersede", "purge_errors", "truncation", "discard"}
    for strategy, text, ref in found:
        assert text.endswith(f"; original kept for a person or tool as ref {ref}]"), (strategy, text)
        how = text.rsplit("; ", 2)[-2]
        assert how.split()[0] in {"run", "read", "see", "write", "its"}, (strategy, text)


def test_ref_id_is_stable_and_depends_on_position_and_content() -> None:
    assert ref_id("call_1", "content", "x") == ref_id("call_1", "content", "x")
    assert ref_id("call_1", "content", "x") != ref_id("call_2", "content", "x")
    assert ref_id("call_1", "content", "x") != ref_id("call_1", "content", "y")
    assert len(ref_id("a", "b", "c")) == 13


def test_first_line() -> None:
    assert first_line("\n\n  hello `x`  \nmore", "label") == "hello 'x'"
    assert first_line("label\nmore", "label") is None
    assert (first_line("y" * 100, "l") or "").endswith("…")
    assert first_line("<returncode>0</returncode>\n<output>\nfound it\n</output>", "l") == "found it"


SECRET = "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3s12"
"""A GitHub token (made up), planted where a placeholder would quote it."""


def test_label_and_first_line_are_redacted_before_they_are_clipped() -> None:
    label = f"curl -H 'Authorization: token {SECRET}' https://api.github.com/user/repos"
    text = placeholder("older output", label, 10, "why", "how", "r0123456789ab", first_line(f"token={SECRET}\nmore", "l"))
    assert SECRET not in text and SECRET[:12] not in text
    assert "[REDACTED:" in text


def test_kept_argument_values_are_redacted_and_a_secret_alone_replaces_nothing() -> None:
    messages = conversation(step("Write", "ok", file_path="/r/.env", mode=f"key={SECRET}", content=lines("w", 30)))
    ctx = make_ctx()
    conv = analyze(messages, ctx)
    args = replace_arguments(conv, conv.calls[0], ctx, "test", "why", "how")
    assert args is not None and SECRET not in args.new_text and args.original == conv.calls[0].arguments
    assert json.loads(args.new_text)["file_path"] == "/r/.env"
    short = conversation(step("bash", "x", command=f"echo {SECRET}"))
    conv = analyze(short, ctx)
    assert replace_arguments(conv, conv.calls[0], ctx, "t", "w", "h") is None  # the client's own bytes stay


def test_replace_output_and_arguments() -> None:
    messages = conversation(
        bash("cat > f.py << 'EOF'\n" + lines("code", 30) + "\nEOF", "", 1), step("Write", "ok", file_path="/r/f.py", content=lines("w", 30))
    )
    ctx = make_ctx()
    conv = analyze(messages, ctx)
    out = replace_output(conv, conv.calls[0], ctx, "test", "why", "how")
    assert out is None  # the output is short: nothing to save
    args = replace_arguments(conv, conv.calls[1], ctx, "test", "why", "how")
    assert args is not None and args.target == f"args:{conv.calls[1].call_id}"
    new = json.loads(args.new_text)
    assert new["file_path"] == "/r/f.py"
    assert new["content"].startswith("[ruyi: `content` argument of `Write /r/f.py` (")
    assert args.original == conv.calls[1].arguments
    assert args.tokens_saved > 0


def test_replace_arguments_needs_json_and_long_values() -> None:
    messages = conversation(step("bash", "x", command="ls"))
    messages[2]["tool_calls"][0]["function"]["arguments"] = "{not json " + "x" * 400
    ctx = make_ctx()
    conv = analyze(messages, ctx)
    assert replace_arguments(conv, conv.calls[0], ctx, "t", "w", "h") is None
    short = conversation(step("bash", "x", command="ls -la /a/very/long/path/that/is/still/short"))
    conv = analyze(short, ctx)
    assert replace_arguments(conv, conv.calls[0], ctx, "t", "w", "h") is None


@pytest.mark.skipif(not trace_files(), reason="no traces on this machine")
def test_remembered_replacements_equal_fresh_ones_on_every_trace() -> None:
    memo: dict[Any, Any] = {}  # one memo for every trace and both passes, as a Pruner keeps it
    for path in trace_files():
        messages = load(path)["messages"]
        plain = make_ctx(min_saving_tokens=20)
        remembering = make_ctx(min_saving_tokens=20, memo=memo)
        conv = analyze(messages, plain)
        for _ in range(2):
            for call in conv.calls:
                for why in ("a", "b"):
                    assert replace_output(conv, call, remembering, "s", why, "how") == replace_output(conv, call, plain, "s", why, "how")
                    assert replace_arguments(conv, call, remembering, "s", why, "how") == replace_arguments(conv, call, plain, "s", why, "how")


def test_a_huge_original_hashes_in_pieces_to_the_id_of_the_whole() -> None:
    """Issue 27: a huge original is hashed a piece at a time (no second copy of it); its id is unchanged."""
    import hashlib

    from strategies.placeholder import HASH_PIECE_CHARS, ref_id

    for original in ("y" * (2 * HASH_PIECE_CHARS + 3), "é\ud800" * HASH_PIECE_CHARS):
        whole = hashlib.sha256(f"call_1\x00content\x00{original}".encode("utf-8", "surrogatepass")).hexdigest()[:12]
        assert ref_id("call_1", "content", original) == "r" + whole
