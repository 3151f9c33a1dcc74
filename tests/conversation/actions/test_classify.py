"""The tool table: every default agent's tools, shell commands inside them, and state carried across calls."""

from __future__ import annotations

from typing import Any

import pytest

from conversation.actions.classify import (
    ClassifyState,
    ToolSpec,
    classify,
    observe,
    parse_arguments,
    tools_from_mapping,
)
from conversation.actions.effect import END
from strategies.base import OptionError
from tests.strategies.factories import tool_call


def kind_path_range(call: dict[str, Any], state: ClassifyState | None = None) -> tuple[Any, ...]:
    action = classify(call, state or ClassifyState())
    return action.kind, action.path, action.range


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        # Claude Code
        (tool_call("Read", file_path="/r/a.py"), ("read", "/r/a.py", None)),
        (tool_call("Read", file_path="/r/a.py", offset=10, limit=5), ("read", "/r/a.py", (10, 14))),
        (tool_call("Write", file_path="/r/a.py", content="x"), ("write", "/r/a.py", None)),
        (tool_call("Edit", file_path="/r/a.py", old_string="a", new_string="b"), ("edit", "/r/a.py", None)),
        (tool_call("MultiEdit", file_path="/r/a.py", edits=[]), ("edit", "/r/a.py", None)),
        (tool_call("Grep", pattern="foo", path="/r"), ("search", "/r", None)),
        (tool_call("Glob", pattern="**/*.py"), ("list", None, None)),
        (tool_call("Bash", command="sed -n '1,80p' /r/x.py"), ("read", "/r/x.py", (1, 80))),
        # opencode
        (tool_call("read", filePath="/r/a.py", offset=0, limit=10), ("read", "/r/a.py", (1, 10))),
        (tool_call("write", filePath="/r/a.py", content="x"), ("write", "/r/a.py", None)),
        (tool_call("edit", filePath="/r/a.py", oldString="a", newString="b"), ("edit", "/r/a.py", None)),
        (tool_call("patch", patchText="--- a/x.py\n+++ b/x.py\n"), ("edit", "x.py", None)),
        (tool_call("grep", pattern="foo", path="/r"), ("search", "/r", None)),
        (tool_call("glob", pattern="*.py", path="/r"), ("list", "/r", None)),
        (tool_call("bash", command="cat /r/a.py | head -5"), ("read", "/r/a.py", (1, 5))),
        # OpenHands
        (tool_call("str_replace_editor", command="view", path="/r/a.py"), ("read", "/r/a.py", None)),
        (tool_call("str_replace_editor", command="view", path="/r/a.py", view_range=[5, -1]), ("read", "/r/a.py", (5, END))),
        (tool_call("str_replace_editor", command="create", path="/r/b.py", file_text="x"), ("write", "/r/b.py", None)),
        (tool_call("str_replace_editor", command="str_replace", path="/r/a.py", old_str="a", new_str="b"), ("edit", "/r/a.py", None)),
        (tool_call("str_replace_editor", command="insert", path="/r/a.py", insert_line=3, new_str="b"), ("edit", "/r/a.py", None)),
        (tool_call("execute_bash", command="cd /r && grep -n x a.py"), ("search", "/r/a.py", None)),
        # Codex
        (tool_call("shell", command=["bash", "-lc", "cat a.py"], workdir="/r"), ("read", "/r/a.py", None)),
        (tool_call("shell", command=["sed", "-n", "1,9p", "a.py"], workdir="/r"), ("read", "/r/a.py", (1, 9))),
        (tool_call("apply_patch", input="*** Begin Patch\n*** Update File: src/a.py\n@@\n*** End Patch"), ("edit", "src/a.py", None)),
        # unknown tools and broken arguments
        (tool_call("mystery", path="/r/a.py"), ("other", None, None)),
        ({"id": "c", "function": {"name": "Read", "arguments": "{not json"}}, ("other", None, None)),
    ],
)
def test_default_tools(call: dict[str, Any], expected: tuple[Any, ...]) -> None:
    assert kind_path_range(call) == expected


def test_writes_and_keys() -> None:
    state = ClassifyState()
    write = classify(tool_call("Write", file_path="/r/a.py", content="x"), state)
    assert write.writes == ("/r/a.py",)
    first = classify(tool_call("Grep", pattern="x", path="/r", glob=None), state)
    second = classify(tool_call("Grep", path="/r", pattern="x"), state)
    assert first.key == second.key
    assert classify(tool_call("Read", file_path="/r/a.py"), state).key == classify(tool_call("bash", command="cat /r/a.py"), state).key


def test_swe_agent_function_calls_follow_the_open_file() -> None:
    state = ClassifyState(cwd="/testbed")
    opened = classify(tool_call("open", path="src/f.py", line_number=10), state)
    assert (opened.kind, opened.path, opened.selector) == ("read", "/testbed/src/f.py", "window")
    output = "[File: /testbed/src/f.py (99 lines total)]\n1:a\n2:b\n(Open file: /testbed/src/f.py)\n(Current directory: /testbed)"
    opened = observe(opened, output, state)
    assert (opened.range, opened.selector) == ((1, 2), None)
    assert state.open_file == "/testbed/src/f.py"
    edit = classify(tool_call("edit", search="a", replace="b"), state)
    assert (edit.kind, edit.path, edit.writes) == ("edit", "/testbed/src/f.py", ("/testbed/src/f.py",))
    goto = classify(tool_call("goto", line_number=50), state)
    assert (goto.kind, goto.path) == ("read", "/testbed/src/f.py")


def test_swe_agent_text_commands_in_bash() -> None:
    state = ClassifyState()
    created = observe(
        classify(tool_call("bash", command="create r.py"), state),
        "[File: /repo/r.py (1 lines total)]\n1:\n(Open file: /repo/r.py)\n(Current directory: /repo)",
        state,
    )
    assert created.path == "/repo/r.py"
    assert (state.cwd, state.open_file) == ("/repo", "/repo/r.py")
    edit = classify(tool_call("bash", command="edit 1:1\nx = 1\nend_of_edit"), state)
    assert (edit.kind, edit.path, edit.writes) == ("edit", "/repo/r.py", ("/repo/r.py",))
    unknown = classify(tool_call("bash", command="edit 1:1\nx\nend_of_edit"), ClassifyState())
    assert unknown.writes == ("*",)


def test_pwd_output_sets_the_working_directory() -> None:
    state = ClassifyState()
    observe(classify(tool_call("bash", command="pwd && ls -la"), state), "<returncode>0</returncode>\n<output>\n/testbed\ntotal 1", state)
    assert state.cwd == "/testbed"
    assert classify(tool_call("bash", command="cat src/x.py"), state).path == "/testbed/src/x.py"


def test_scripts_and_patches_written_earlier_are_known_when_run() -> None:
    state = ClassifyState(cwd="/t")
    classify(tool_call("bash", command="cat > fix.py << 'EOF'\nopen('src/a.py', 'w').write('x')\nEOF"), state)
    run = classify(tool_call("bash", command="python fix.py"), state)
    assert (run.kind, run.path, run.writes) == ("edit", "/t/src/a.py", ("/t/src/a.py",))
    classify(tool_call("bash", command="cat > p.patch << 'EOF'\n--- a/b.py\n+++ b/b.py\nEOF"), state)
    applied = classify(tool_call("bash", command="patch -p1 < p.patch"), state)
    assert applied.writes == ("/t/b.py",)
    unknown = classify(tool_call("bash", command="git apply other.patch"), state)
    assert unknown.writes == ("*",)
    classify(tool_call("bash", command="echo 'print(1)' > fix.py"), state)
    assert classify(tool_call("bash", command="python fix.py"), state).writes == ()


def test_labels_are_short_single_lines() -> None:
    action = classify(tool_call("bash", command="cat > f << 'EOF'\n" + "x\n" * 100 + "EOF"), ClassifyState())
    assert action.label == "cat > f << 'EOF'"
    long_action = classify(tool_call("bash", command="echo " + "y" * 300), ClassifyState())
    assert len(long_action.label) == 100 and "`" not in long_action.label


def test_parse_arguments() -> None:
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments({"a": 1}) == {"a": 1}
    assert parse_arguments("[1]") is None
    assert parse_arguments(None) is None


def test_table_from_config() -> None:
    table = tools_from_mapping({"view_file": {"kind": "read", "path": ["filename"]}, "runner": {"kind": "shell", "command": "cmd"}})
    assert kind_path_range(tool_call("view_file", filename="a"), ClassifyState(tools=table)) == ("read", "a", None)
    assert kind_path_range(tool_call("runner", cmd="cat b"), ClassifyState(tools=table))[:2] == ("read", "b")
    assert "Read" in table
    with pytest.raises(OptionError, match="tools.bad: kind"):
        tools_from_mapping({"bad": {"kind": "nonsense"}})
    with pytest.raises(OptionError, match="tools.bad2"):
        tools_from_mapping({"bad2": {"kind": "read", "unknown_field": 1}})
    with pytest.raises(OptionError):
        ToolSpec("reading")


def test_a_sub_agent_call_is_labelled_by_its_description() -> None:
    """Claude Code's ``Agent``, Qwen Code's ``agent`` and opencode's ``task`` (seen in their real requests) all send a
    ``description``: the label (a summary's progress line, a placeholder) says what the sub-agent was asked."""
    for name in ("Agent", "agent", "task"):
        call = tool_call(name, description="Count lines", prompt="count the lines of notes.txt", subagent_type="general")
        action = classify(call, ClassifyState())
        assert action.kind == "other" and action.label == f"{name}: Count lines"
    assert classify(tool_call("todo_write", todos=[]), ClassifyState()).label == "todo_write"
    assert classify(tool_call("Agent", description="   "), ClassifyState()).label == "Agent"
