"""The person's request told apart from the preambles of Claude Code, Qwen Code, Codex, Aider and text-mode agents."""

from __future__ import annotations

import pytest

from conversation.task import head_end, instructions, is_preamble, stripped, task_text
from tests.conversation.agent_bodies import REQUEST, aider, claude_code_blocks, claude_code_one_text, codex_chat, mini_swe_agent_text_mode, qwen_code
from tests.longctx.sessions import turn


@pytest.mark.parametrize(
    "opening",
    [claude_code_blocks, claude_code_one_text, qwen_code, codex_chat, aider],
    ids=["claude-blocks", "claude-text", "qwen", "codex", "aider"],
)
def test_the_task_is_the_request_and_the_head_keeps_every_preamble(opening) -> None:  # type: ignore[no-untyped-def]
    messages = opening() + turn(0) + turn(1)
    head = head_end(messages)
    assert head == len(opening())  # preambles, acknowledgements and the request: all verbatim in the head
    assert task_text(messages) == REQUEST
    assert "system-reminder" not in (task_text(messages) or "")


def test_a_message_of_reminders_only_is_a_preamble_and_one_with_words_is_not() -> None:
    assert is_preamble({"role": "user", "content": "<system-reminder>\nToday's date is 2026-11-27.\n</system-reminder>"})
    assert not is_preamble(claude_code_blocks()[1])
    assert stripped("<environment_context><cwd>/x</cwd></environment_context>\nfix it") == "fix it"


def test_a_demonstration_then_the_issue_is_all_task() -> None:
    messages = [
        {"role": "system", "content": "SWE-agent"},
        {"role": "user", "content": "Here is a demonstration: ..."},
        {"role": "user", "content": "<pr_description>the parser crashes</pr_description>"},
    ] + turn(0)
    assert head_end(messages) == 3


def test_a_history_of_user_messages_only_has_the_first_request_as_task() -> None:
    messages = mini_swe_agent_text_mode(30)
    assert head_end(messages) == 2
    assert task_text(messages) == "Please solve this issue: " + REQUEST
    assert instructions(messages, 2) == []  # observations in text form are not instructions


def test_a_later_instruction_is_told_apart_from_tool_results() -> None:
    messages = (
        qwen_code()
        + turn(0)
        + [{"role": "assistant", "content": "Done: three files."}, {"role": "user", "content": "Now also count the lines of each file."}]
        + turn(1)
    )
    assert instructions(messages, head_end(messages)) == [len(qwen_code()) + 3]
