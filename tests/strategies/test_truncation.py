"""Truncation: head, tail, and within the budget the lines that matter."""

from __future__ import annotations

import pytest

from redaction.redact import redact
from strategies.base import OptionError, Replacement
from strategies.truncation import (
    HIGH,
    LOW,
    MEDIUM,
    Truncation,
    compile_pattern,
    importance,
)
from tests.strategies.factories import (
    bash,
    conversation,
    count_tokens,
    lines,
    make_ctx,
    step,
)


def small(**overrides: object) -> Truncation:
    values: dict[str, object] = {"max_tool_output_tokens": 400}
    values.update(overrides)
    return Truncation(Truncation.Options(**values))  # type: ignore[arg-type]


def test_long_output_keeps_head_tail_and_errors() -> None:
    body = lines("noise", 300, 1) + "\nERROR: the one line that matters\n" + lines("noise", 300, 301)
    messages = conversation(bash("python run.py", body))
    (replacement,) = small().propose(messages, make_ctx())
    text = replacement.new_text
    assert replacement.tokens_after <= 400 < replacement.tokens_before
    assert text.startswith("[ruyi: output of `python run.py` truncated from ")
    assert f"ref {replacement.ref_id}" in text
    assert "<returncode>0</returncode>" in text and "</output>" in text
    assert "ERROR: the one line that matters" in text
    assert "lines omitted …]" in text
    assert replacement.original == messages[3]["content"]


def test_search_matches_are_kept_and_the_search_budget_follows_the_window() -> None:
    hits = "\n".join(f"src/f{i}.py:{i}: needle {'x' * 60}" if i % 50 == 0 else f"src/f{i}.py-{i}- hay {'x' * 60}" for i in range(400))
    messages = conversation(bash("grep -rn -C3 needle src", hits))
    truncation = Truncation()
    assert truncation.budget("search", make_ctx(remaining_tokens=100_000)) == 4000
    assert truncation.budget("search", make_ctx(remaining_tokens=2_000)) == 1000
    assert truncation.budget("search", make_ctx(remaining_tokens=0)) == 256
    assert truncation.budget("read", make_ctx(remaining_tokens=0)) == 4000
    (replacement,) = truncation.propose(messages, make_ctx(remaining_tokens=2000))
    assert replacement.tokens_after <= 1000
    assert "src/f200.py:200: needle" in replacement.new_text


def test_file_lists_keep_at_most_glob_max_files() -> None:
    listing = "\n".join(f"./src/pkg/module_{i}.py" for i in range(500))
    messages = conversation(bash("find . -name '*.py'", listing))
    (replacement,) = Truncation(Truncation.Options(glob_max_files=50)).propose(messages, make_ctx())
    assert "./src/pkg/module_49.py" in replacement.new_text
    assert "./src/pkg/module_50.py\n" not in replacement.new_text
    assert "more paths omitted" in replacement.new_text


def test_short_outputs_and_protected_ones_stay() -> None:
    messages = conversation(bash("cat x", lines("x", 5)))
    assert small().propose(messages, make_ctx()) == []
    long = conversation(bash("cat x", lines("x", 500)))
    assert small().propose(long, make_ctx(protected_turns=1)) == []


def test_one_huge_line_is_clipped() -> None:
    messages = conversation(step("bash", "{" + '"k": 1, ' * 3000 + "}", command="curl api"))
    (replacement,) = small().propose(messages, make_ctx())
    assert replacement.tokens_after <= 400
    assert "characters…]" in replacement.new_text


def test_importance_levels() -> None:
    pattern = compile_pattern("needle")
    assert importance('  File "/r/x.py", line 3, in f', None) == HIGH
    assert importance("see [D001]", None) == HIGH
    assert importance("a needle here", pattern) == MEDIUM
    assert importance("DeprecationWarning: old", None) == MEDIUM
    assert importance("plain", pattern) == LOW
    assert compile_pattern("(?i)NEEDLE").search("needle")  # type: ignore[union-attr]
    assert compile_pattern("a\\|b").search("b")  # type: ignore[union-attr]
    assert compile_pattern("unbalanced(").search("x unbalanced( y")  # type: ignore[union-attr]
    assert compile_pattern(None) is None


def test_options_validate() -> None:
    with pytest.raises(OptionError, match="grep_headroom"):
        Truncation.Options(grep_headroom=1.5)
    with pytest.raises(OptionError, match="max_tool_output_tokens"):
        Truncation.Options(max_tool_output_tokens=0)
    assert count_tokens("abcd") == 2


def test_kept_head_tail_and_label_are_redacted() -> None:
    secret = "AKIAQ7XPZ4RBN2KDM5EW"
    long_line = "x" * 5000 + f" aws_secret_access_key={secret}q8Ff2kV7wXz0Rt4yUi9o " + "y" * 5000
    body = f"export AWS_ACCESS_KEY_ID={secret}\n{long_line}\n" + lines("noise", 300) + f"\nERROR: auth failed for {secret}"
    messages = conversation(bash(f"AWS_ACCESS_KEY_ID={secret} aws s3 ls", body))
    (replacement,) = small().propose(messages, make_ctx())
    assert secret not in replacement.new_text and "q8Ff2kV7" not in replacement.new_text
    assert "[REDACTED:" in replacement.new_text.split("\n")[0]  # the label in the header line
    assert replacement.original == messages[3]["content"]  # the original is the client's (refs redact it apart)


def test_ranks_of_a_long_output_scanned_block_by_block_equal_each_line_s_importance() -> None:
    from strategies.truncation import SCAN_BLOCK, Lines, compile_pattern, importance, ranks

    kinds = ["ok line {i}", "WARNING: disk {i}", "Traceback (most recent call last) {i}", "see [D{i:03d}]", "needle {i}", ""]
    lines = [kinds[(i * 7) % len(kinds)].format(i=i % 1000) + " x" * (i % 13) for i in range(4 * SCAN_BLOCK // 20)]
    pattern = compile_pattern("needle")
    assert len("\n".join(lines)) > 3 * SCAN_BLOCK
    assert list(ranks(Lines("\n".join(lines)), pattern)) == [importance(line, pattern) for line in lines]


def test_a_huge_output_is_cut_from_line_offsets_not_a_list_of_its_lines() -> None:
    """An 8 MiB log of 200,000 lines: truncating it costs the redaction's lowered copy and an array of line starts,
    not a string per line (about 1.6 times the text), the text joined again and a list of starts (3 times before)."""
    import tracemalloc

    body = "\n".join(f"2026-11-27T04:00:{i % 60:02d} worker {i} read the queue" for i in range(200_000))
    body = body[:-100] + "\nERROR: the one line that matters\n" + body[-100:]
    messages = conversation(bash("cat worker.log", body))
    small().propose(conversation(bash("cat a.log", lines("noise", 300))), make_ctx())  # the rules compiled
    tracemalloc.start()
    try:
        (replacement,) = small().propose(messages, make_ctx())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "ERROR: the one line that matters" in replacement.new_text
    assert peak < 1.6 * len(body), f"peak {peak:,} bytes for a {len(body):,}-character output"


def test_the_memo_keeps_a_truncation_without_its_original_and_a_hit_gives_the_same_replacement() -> None:
    """Issue 27 (memory after a large body): the memo outlives the request, so it must not hold the output itself
    (a 32 MiB log stayed resident for as long as its entry did); a hit puts the request's own text back."""
    body = lines("noise", 300, 1) + "\nERROR: the one line that matters\n" + lines("noise", 300, 301)
    messages = conversation(bash("python run.py", body))
    memo: dict[object, object] = {}
    (first,) = small().propose(messages, make_ctx(memo=memo))
    assert body in first.original
    held = [value for value in memo.values() if isinstance(value, Replacement)]
    assert held and all(value.original == "" for value in held)
    assert not any(isinstance(value, str) and len(value) >= len(first.original) for value in memo.values())
    (again,) = small().propose(messages, make_ctx(memo=memo))
    assert again == first


def test_a_truncated_output_is_redacted_once_and_its_ref_keeps_that_text() -> None:
    """Issue 27 (large bodies): truncation redacts the whole output before clipping it, and the ref kept the original
    redacted again (about 2 s each for a 30 MiB log). The replacement carries what it redacted; the memo never does."""
    secret = "password = 'correct horse battery staple'"
    body = lines("noise", 300, 1) + f"\n{secret}\nERROR: the one line that matters\n" + lines("noise", 300, 301)
    messages = conversation(bash("python run.py", body))
    memo: dict[object, object] = {}
    (first,) = small().propose(messages, make_ctx(memo=memo))
    assert first.kept is not None and first.kept == redact(first.original) and "correct horse" not in first.kept
    assert first.kept_original is first.kept  # what the ref keeps, without a second redaction
    assert all(value.kept is None for value in memo.values() if isinstance(value, Replacement))
    (again,) = small().propose(messages, make_ctx(memo=memo))
    assert again == first and again.kept is None and again.kept_original == first.kept  # a hit redacts when the ref needs it
