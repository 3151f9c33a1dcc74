"""Tests for bench/savings/baselines.py: the observation rule and each competitor strategy."""

from __future__ import annotations

from bench.savings.savings import baselines
from proxy.replay.metrics import orphans
from proxy.replay.run import Cl100kCounter, Message, replay
from tests.replay.conversations import TOOLS, conversation

COUNT = Cl100kCounter()


def text_mode(steps: int) -> list[Message]:
    """A mini-swe-agent text-mode trace: bash blocks in assistant text, outputs in user messages."""
    messages: list[Message] = [{"role": "system", "content": "Reply with one bash block."},
                               {"role": "user", "content": "<pr_description>Fix it</pr_description>"}]  # fmt: skip
    for i in range(steps):
        messages += [{"role": "assistant", "content": f"```bash\ncat f{i}.py\n```"},
                     {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{i} {'x ' * 200}</output>"}]  # fmt: skip
    return messages


def test_observations_are_tool_messages_and_tool_output_user_messages() -> None:
    tools = conversation(2)
    assert [baselines.is_observation(tools, i) for i in range(len(tools))] == [False, False, False, True, False, True]
    text = text_mode(2)
    assert [baselines.is_observation(text, i) for i in range(len(text))] == [False, False, False, True, False, True]
    swe = [{"role": "assistant", "content": "open x.py"},
           {"role": "user", "content": "[File: x.py]\n(Open file: x.py)\n(Current directory: /repo)\nbash-$"}]  # fmt: skip
    assert baselines.is_observation(swe, 1)
    chat = [{"role": "assistant", "content": "Done?"}, {"role": "user", "content": "<returncode> is my tag"}]
    assert baselines.is_observation(chat, 1)  # looks like tool output: the rule is about shape only
    assert not baselines.is_observation([{"role": "user", "content": "<returncode>0</returncode>"}], 0)


def test_masking_keeps_the_last_ten_observations() -> None:
    messages = conversation(14)
    masked = baselines.make_masking(32_000)(messages, TOOLS)
    changed = [m.get("tool_call_id") for m, o in zip(masked, messages) if m is not o]
    assert changed == ["c0", "c1", "c2", "c3"]
    assert all(m["content"] == "[old observation omitted]" for m in masked if m.get("tool_call_id") in changed)
    assert messages == conversation(14) and orphans(masked) == 0


def test_masking_text_mode_observations_costs_needles() -> None:
    result = replay(text_mode(14), None, baselines.make_masking(32_000), 32_000, COUNT)
    assert result.totals.needles_kept < 1 and result.totals.cache_hit_rate < 1


def test_clearing_waits_for_the_trigger_then_keeps_the_last_three() -> None:
    messages = conversation(8)
    total = COUNT(messages, TOOLS).total
    assert baselines.make_clearing(32_000, trigger=total)(messages, TOOLS) is messages
    cleared = baselines.make_clearing(32_000, trigger=total - 1)(messages, TOOLS)
    kept = [m["tool_call_id"] for m in cleared if m.get("role") == "tool" and m["content"] != baselines.CLEARED]
    assert kept == ["c5", "c6", "c7"] and orphans(cleared) == 0


def test_trigger_and_budget_scale_with_the_window() -> None:
    assert baselines.budget(32_000) == 27_200
    assert baselines.budget(10_000) == 8_000
    assert baselines.reserve(64_000) == 9_600


def test_langchain_trim_keeps_system_starts_on_human_and_fits() -> None:
    small = conversation(2)
    trim = baselines.make_langchain_trim(16_000)
    assert trim(small, TOOLS) == small
    big = conversation(60, output="word " * 400)
    assert trim(big, TOOLS) == [big[0]]  # the only human message is the task, too old to fit: all goes


def test_litellm_trim_fits_the_budget_and_orphans_the_oldest_result() -> None:
    big = conversation(60, output="word " * 400)
    trimmed = baselines.make_litellm_trim(16_000)(big, TOOLS)
    assert trimmed[0] == big[0] and [m["role"] for m in trimmed[1:3]] == ["tool", "assistant"]
    assert trimmed[-1] == big[-1] and orphans(trimmed) == 1
    assert COUNT(trimmed[:-1], None).total <= baselines.budget(16_000)
