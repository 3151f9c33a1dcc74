"""What a session's messages showed: task, files, commands, errors, last words; the conversation's language."""

from __future__ import annotations

from memory.forms.facts import is_chinese, learn
from tests.api.test_forms_api import work


def test_facts_accumulate_request_by_request() -> None:
    first = learn({}, work("Fix the tests")[:4], None)
    assert first["task"] == "Fix the tests" and first["commands"] == ["python -m pytest tests"] and "ZeroDivisionError" in first["errors"][0]
    second = learn(first, work("ignored")[4:], "All fixed.")
    assert second["task"] == "Fix the tests" and ["/repo/app.py", "changed"] in second["files"]
    assert second["last_words"] == "All fixed." and second["requests"] == 2


def test_the_task_is_the_persons_words_not_the_agents_wrappers() -> None:
    """Claude Code sends ``<system-reminder>`` blocks before the request in its first user message; Qwen Code sends
    its environment as a first user message of its own (seen in the compact form of a real Claude Code run)."""
    reminder = {"type": "text", "text": "<system-reminder>\n# Environment\nPrimary working directory: /tmp/w\n</system-reminder>"}
    claude = {"role": "user", "content": [reminder, {"type": "text", "text": "Count the lines of notes.txt."}]}
    assert learn({}, [claude], None)["task"] == "Count the lines of notes.txt."
    qwen = [
        {"role": "user", "content": "This is the Qwen Code. We are setting up the context for our chat.\nToday's date is Friday."},
        {"role": "assistant", "content": "Got it. Thanks for the context!"},
        {"role": "user", "content": "Fix the parser."},
    ]
    assert learn({}, qwen, None)["task"] == "Fix the parser."
    assert learn({}, qwen, None)["last_words"] is None  # "Got it." answered the preamble, not the task
    assert learn({}, [{"role": "user", "content": [reminder]}], None)["task"] is None  # only wrappers: none yet


def test_language_follows_the_text() -> None:
    assert is_chinese("修复 app.py 中失败的测试") and not is_chinese("Fix app.py") and not is_chinese(None)


def test_language_counts_letters_only() -> None:
    """A third of the letters CJK or more; symbols in the CJK blocks (the Yijing hexagrams, ䷀) and digits are no letters."""
    assert is_chinese("修复 abcd") and not is_chinese("修复 abcde")  # 2 of 6 letters, 2 of 7
    assert not is_chinese("䷀䷁䷂ abc") and not is_chinese("䷀䷁ 123") and not is_chinese("")
    assert is_chinese("修" + "1" * 50) and not is_chinese("x" * 40_000 + "修复")
