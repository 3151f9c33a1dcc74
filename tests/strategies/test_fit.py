"""Fitting a request into its window: the biggest texts after the head are cut in the middle, tool outputs first."""

from __future__ import annotations

from typing import Any

from proxy.know.options import TokenOptions
from proxy.know.tokens import TokenCounter
from strategies.fit import MIN_CAP, cuttable_text, fit
from strategies.pipeline import apply_replacements

COUNT = TokenCounter(TokenOptions()).text_counter("gpt-4")


def lines(tag: str, n: int) -> str:
    return "\n".join(f"{tag} line {i}: value_{i} = compute({i}, {i * 7})" for i in range(n))


def conversation(output: str, words: str = "Let me look.") -> list[dict[str, Any]]:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "cat big.log"}'}}
    return [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix " + lines("task", 80)},
        {"role": "assistant", "content": words, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": output},
    ]


def test_the_newest_tool_output_is_cut_first_its_start_and_end_kept_the_head_never() -> None:
    messages = conversation(lines("out", 400), words="Let me look at " + lines("mine", 40))
    total = sum(COUNT(cuttable_text(m) or "") for m in messages)
    cuts = fit(messages, 2, 3000, 2000, COUNT, 4096)
    assert [r.index for r in cuts] == [3], "the output alone frees enough: the agent's words stay"
    out = apply_replacements(messages, cuts)
    text = out[3]["content"]
    assert text.startswith("[ruyi: cut from") and "4,096-token window" in text and cuts[0].ref_id in text
    assert "out line 0:" in text and "out line 399:" in text and "out line 200:" not in text
    assert COUNT(text) <= 0.3 * 2000 and out[:3] == messages[:3]
    assert sum(COUNT(cuttable_text(m) or "") for m in out) < total - 3000
    assert cuts[0].original == messages[3]["content"]
    assert fit(messages, 2, 3000, 2000, COUNT, 4096) == cuts, "a pure function: the same cut in every process"


def test_the_agents_own_words_go_next_then_a_second_tighter_pass() -> None:
    messages = conversation(lines("out", 400), words="Thinking: " + lines("mine", 300))
    cuts = fit(messages, 2, 11_000, 2000, COUNT, 4096)  # more than the first pass frees
    assert [r.index for r in cuts] == [2, 3]
    assert all(r.tokens_after <= max(MIN_CAP, 0.1 * 2000) for r in cuts), "both cut to the second pass's cap"
    assert apply_replacements(messages, cuts)[2]["tool_calls"] == messages[2]["tool_calls"], "the call itself is untouched"


def test_nothing_within_the_head_or_carrying_an_image_is_cut() -> None:
    messages = conversation(lines("out", 50))
    messages[3] = {
        "role": "user",
        "content": [{"type": "text", "text": lines("shot", 400)}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}],
    }
    assert fit(messages, 2, 5000, 2000, COUNT, 4096) == []
    assert fit(messages, 4, 5000, 2000, COUNT, 4096) == [], "everything is head"
    assert cuttable_text({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}) == "a\nb"


def test_the_tighter_passes_run_only_for_the_whole_window_never_for_the_answers_reserve_alone() -> None:
    messages = conversation(lines("out", 400), words="Thinking: " + lines("mine", 300))
    reserve_only = fit(messages, 2, 11_000, 2000, COUNT, 4096, over_window=0)  # over the usable part, not the window
    assert [r.tokens_after > 0.1 * 2000 for r in reserve_only] == [True, True], "truncation's own cap, no tighter"
    over = fit(messages, 2, 11_000, 2000, COUNT, 4096, over_window=10_900)
    assert all(r.tokens_after <= 0.1 * 2000 for r in over), "over the window itself: cut as far as it takes"
