"""Draft cards from archived turns: a command that failed, the files changed, the same command then passing; nothing else."""

from __future__ import annotations

import json
from typing import Any

from summaries.organizer import PER_ARCHIVE, draft_cards, key_of


def call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def assistant(text: str | None, *calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **({"tool_calls": list(calls)} if calls else {})}


def tool(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


TRACEBACK = (
    '============ FAILURES ============\nTraceback (most recent call last):\n  File "tests/test_app.py", line 3, in <module>\n'
    "    from app import parse_config\nImportError: cannot import name 'parse_config' from 'app' (app.py)\nExit code: 1"
)


def fixed_run(cmd: str = "pytest -q tests/test_app.py", error: str = TRACEBACK, n: int = 0) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "make the tests pass"},
        assistant(None, call(f"a{n}", "bash", command=cmd)),
        tool(f"a{n}", error),
        assistant(
            "The test imports parse_config, which app.py never defined. I will add it.",
            call(f"b{n}", "str_replace_editor", command="str_replace", path="/repo/app.py", old_str="x", new_str="y"),
        ),
        tool(f"b{n}", "The file /repo/app.py has been edited."),
        assistant(None, call(f"c{n}", "bash", command=cmd)),
        tool(f"c{n}", "3 passed in 0.1s\nExit code: 0"),
    ]


def test_a_failure_fixed_by_a_change_becomes_a_draft_card() -> None:
    [card] = draft_cards(fixed_run())
    assert card.title == "ImportError: cannot import name 'parse_config' from 'ap… (pytest): fixed in app.py"
    assert card.tags == ("pytest", "ImportError", "app")
    assert "`pytest -q tests/test_app.py` failed:" in card.body and "    ImportError: cannot import name" in card.body
    assert "Changed /repo/app.py." in card.body and "The test imports parse_config, which app.py never defined." in card.body
    assert card.body.rstrip().endswith("`pytest -q tests/test_app.py` then succeeded.")
    assert card.key == key_of(card.title)


def test_no_fix_no_change_or_no_failure_drafts_nothing() -> None:
    turns = fixed_run()
    assert draft_cards(turns[:5]) == []  # never seen passing
    assert draft_cards(turns[:3] + turns[5:]) == []  # passed again with nothing changed (a flaky run)
    assert draft_cards([turns[0], turns[5], turns[6]]) == []  # never failed
    read_failure = [assistant(None, call("r", "bash", command="cat missing.txt")), tool("r", "cat: missing.txt: No such file or directory")]
    assert draft_cards(read_failure) == []


def test_the_same_lesson_twice_is_one_draft_and_at_most_a_few_are_kept() -> None:
    twice = fixed_run(n=0) + fixed_run(error=TRACEBACK.replace("line 3", "line 9"), n=1)
    assert len(draft_cards(twice)) == 1
    many = [m for i in range(4) for m in fixed_run(cmd=f"make test{i}", error=TRACEBACK.replace("parse_config", f"name{'abcd'[i]}"), n=i)]
    drafts = draft_cards(many)
    assert len(drafts) == PER_ARCHIVE and all("(make): fixed in app.py" in d.title for d in drafts)
    assert "`make test3`" in drafts[-1].body and "named" in drafts[-1].title


def test_a_draft_is_titled_by_what_it_teaches_never_by_a_count_line() -> None:
    from summaries.organizer import lesson_title

    title = lesson_title("pytest -x", ["FAILED tests/test_a.py::test_parse - assert 1 == 2", "1 failed in 0.2s"], ["/src/a.py"])
    assert title == "test_parse failing (pytest): fixed in a.py"
    assert lesson_title("make", ["1 failed in 0.2s"], ["/src/a.py"]) == "make failing (make): fixed in a.py"
    [card] = draft_cards(fixed_run(error=TRACEBACK + "\n=== 1 failed in 0.2s ==="))
    assert "failed in" not in card.title and card.title.startswith("ImportError")


def test_key_ignores_numbers() -> None:
    assert key_of("pytest: error at line 3") == key_of("pytest:  Error at line 12")


def test_the_program_of_a_command_line() -> None:
    from summaries.organizer import program_of

    assert program_of("cd /repo && python -m pytest tests/test_case_1.py -x") == "pytest"
    assert program_of("FOO=1 sudo npm test") == "npm"
    assert program_of("make check; ./scripts/lint.sh") == "lint.sh"
    assert program_of("$(weird)") == "command"
    [card] = draft_cards(fixed_run(cmd="cd /repo && python -m pytest -q"))
    assert card.title.startswith("ImportError") and "(pytest)" in card.title and card.tags[0] == "pytest"
