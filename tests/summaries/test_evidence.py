"""Archives that keep the evidence (issue 23): what changed and where, output lines the agent named later within the
archived stretch (never after it), stated results; constraints and decisions only from what states one; files read
apart from files changed; the archive's compact form under 500 characters and its normal form a longer text of its own."""

from __future__ import annotations

import json
from typing import Any

from summaries.evidence import terms
from summaries.extractive import Extractor
from summaries.render import compact, short
from tests.longctx.sessions import bash
from tests.traces import load, needs_traces, trace_files

Message = dict[str, Any]
TASK = "Fix the crash in parse_config when the file is empty."


def editor(call_id: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "str_replace_editor", "arguments": json.dumps(arguments)}}


def worked() -> list[Message]:
    """A stretch: a read whose output defines load_rows, a failing test, an edit, a later call naming load_rows."""
    return [
        {"role": "assistant", "content": "Let me look at the loader.", "tool_calls": [bash("c1", "cat -n /repo/app/loader.py")]},
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "     1\timport csv\n    12\tdef load_rows(path, strict=False):\n"
            "    13\t    return list(csv.reader(open(path)))\n    14\t# a comment line",
        },
        {"role": "user", "content": "ok go on"},
        {"role": "user", "content": "You must never edit the tests under tests/legacy."},
        {"role": "assistant", "content": "Running the tests.", "tool_calls": [bash("c2", "pytest -x tests/test_loader.py")]},
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": "FAILED tests/test_loader.py::test_empty_file - IndexError: list index out of range\n1 failed in 0.2s",
        },
        {
            "role": "assistant",
            "content": "The cause is that load_rows assumes a header row.",
            "tool_calls": [
                editor(
                    "c3",
                    command="str_replace",
                    path="/repo/app/loader.py",
                    old_str="return list(",
                    new_str="def load_rows(path, strict=False):\n    rows = list(csv.reader(open(path)))\n    return rows or []",
                )
            ],
        },
        {"role": "tool", "tool_call_id": "c3", "content": "The file /repo/app/loader.py has been edited."},
        {"role": "assistant", "content": "Check test_empty_file again.", "tool_calls": [bash("c4", "cat /repo/app/loader.py")]},
        {"role": "tool", "tool_call_id": "c4", "content": "import csv"},
    ]


def test_each_file_changed_says_what_changed_and_where() -> None:
    ev = Extractor().evidence(worked(), 2)
    [change] = ev.changes
    assert change.path == "/repo/app/loader.py" and change.position == 8
    assert "`load_rows`" in change.where and "rows or []" in change.what


def test_output_lines_kept_are_those_the_agent_named_later_within_the_stretch() -> None:
    ev = Extractor().evidence(worked(), 2)
    lines = [line for _, line in ev.lines]
    assert any("def load_rows(path, strict=False)" in line for line in lines)  # named in the later edit and words
    assert any("test_empty_file" in line for line in lines)  # the failing test, named in the last call's words
    assert not any("a comment line" in line for line in lines)
    # cut before the agent named them: nothing after the archived stretch decides what it keeps
    early = Extractor().evidence(worked()[:2], 2)
    assert early.lines == ()


def test_results_the_agent_stated_are_kept() -> None:
    assert "The cause is that load_rows assumes a header row." in Extractor().evidence(worked(), 2).results


def test_constraints_come_only_from_a_stated_rule_never_from_ok_go_on() -> None:
    messages = worked()
    text = compact(Extractor().digest(messages, 2), TASK, 600, None, Extractor().evidence(messages, 2))
    constraints = text.split("## Constraints", 1)[1].split("## Progress", 1)[0]
    assert "You must never edit the tests under tests/legacy." in constraints
    assert "ok go on" not in text
    decisions = text.split("## Decisions", 1)[1].split("## Constraints", 1)[0]
    assert decisions.strip() == "- —"


def test_files_read_and_files_changed_are_apart() -> None:
    messages = worked()  # loader.py is edited and read again after; nothing else is changed
    messages += [
        {"role": "assistant", "content": "Read the docs.", "tool_calls": [bash("c5", "cat /repo/docs/usage.txt")]},
        {"role": "tool", "tool_call_id": "c5", "content": "usage"},
    ]
    text = compact(Extractor().digest(messages, 2), TASK, 600, None, Extractor().evidence(messages, 2))
    changed = text.split("files changed", 1)[1].split("\n- ", 1)[0]
    assert "/repo/app/loader.py (edited)" in changed and "(read)" not in changed and "usage.txt" not in changed
    read = next(line for line in text.splitlines() if line.startswith("- files read"))
    assert "/repo/docs/usage.txt" in read and "loader.py" not in read


def test_the_summary_stays_within_its_budget() -> None:
    messages = worked() * 1
    for budget in (120, 300, 600):
        text = compact(Extractor().digest(messages, 2), TASK, budget, lambda t: len(t) // 4, Extractor().evidence(messages, 2))
        core = compact(Extractor().digest(messages, 2), TASK, 0, lambda t: len(t) // 4)
        assert len(text) // 4 <= budget or text == core


def test_terms_are_identifiers_paths_dotted_names_digits_and_inner_capitals() -> None:
    found = terms("see django/http/response.py, HttpResponse, parse_args, os.path.join and PY39 but not the plain words")
    assert found == {"django/http/response.py", "HttpResponse", "parse_args", "os.path.join", "PY39"}


@needs_traces
def test_on_real_traces_the_compact_form_is_under_500_characters_and_the_normal_form_its_own_longer_text() -> None:
    extractor = Extractor()
    for path in trace_files():
        messages = load(path)["messages"]
        first = next(i for i, m in enumerate(messages) if m.get("role") == "assistant")
        last = min(len(messages) - 1, first + 60)
        task = next((m["content"] for m in messages[:first] if m.get("role") == "user" and isinstance(m.get("content"), str)), None)
        digest, ev = extractor.digest(messages[first : last + 1], first), extractor.evidence(messages[first : last + 1], first)
        small, normal = short(digest, task, ev), compact(digest, task, 2000, None, ev)
        assert len(small) < 500, (path.name, len(small))
        assert small != normal and len(normal) > len(small), path.name
        assert "user: " not in normal.split("## Progress", 1)[0], path.name  # no "user: ok go on" constraint


@needs_traces
def test_on_real_traces_every_changed_file_has_its_change_and_no_line_comes_from_after_the_stretch() -> None:
    extractor, seen = Extractor(), 0
    for path in trace_files():
        messages = load(path)["messages"]
        first = next(i for i, m in enumerate(messages) if m.get("role") == "assistant")
        last = min(len(messages) - 1, first + 40)
        ev = extractor.evidence(messages[first : last + 1], first)
        digest = extractor.digest(messages[first : last + 1], first)
        assert set(ev.by_file()) == set(digest.edited), path.name
        assert all(first <= position <= last for position, _ in ev.lines)
        assert all(c.what for c in ev.changes)
        seen += len(ev.changes)
    assert seen > 0
