"""Supersede: a write's input once the file is read again; a read's output once the file is edited."""

from __future__ import annotations

import json
from typing import Any

from strategies.base import Replacement
from strategies.supersede import Supersede
from tests.strategies.factories import (
    bash,
    conversation,
    indices,
    lines,
    make_ctx,
    step,
)

BODY = lines("code", 40)
HEREDOC = "cat > /r/t.py << 'EOF'\n" + BODY + "\nEOF"


def propose(messages: list[dict[str, Any]], options: Supersede.Options | None = None) -> list[Replacement]:
    return Supersede(options).propose(messages, make_ctx())


def test_a_write_read_later_loses_its_input() -> None:
    messages = conversation(bash(HEREDOC, ""), bash("cat /r/t.py", BODY))
    (replacement,) = propose(messages)
    assert replacement.index == 2 and replacement.target.startswith("args:")
    args = json.loads(replacement.new_text)
    assert list(args) == ["command"]
    assert args["command"].startswith("[ruyi: `command` argument of `cat > /r/t.py << 'EOF'`")
    assert "the file was read again later" in args["command"]


def test_structured_writes_and_edits() -> None:
    messages = conversation(
        step("Write", "ok", file_path="/r/a.py", content=BODY),
        step("Edit", "ok", file_path="/r/a.py", old_string=BODY[:200], new_string=BODY[:190]),
        step("Read", BODY, file_path="/r/a.py"),
    )
    assert indices(propose(messages)) == [2, 4]


def test_a_read_followed_by_a_successful_edit_is_stale() -> None:
    messages = conversation(bash("sed -n '1,40p' /r/a.py", BODY), bash("sed -i 's/a/b/' /r/a.py", ""))
    (replacement,) = propose(messages)
    assert replacement.index == 3
    assert "older view of `sed -n '1,40p' /r/a.py`" in replacement.new_text
    assert "the file was changed later, so this view is stale" in replacement.new_text


def test_a_failed_edit_keeps_the_read() -> None:
    messages = conversation(bash("cat /r/a.py", BODY), bash("sed -i 's/a/b/' /r/a.py", "sed: no such file", 4))
    assert propose(messages) == []


def test_an_error_output_is_no_view() -> None:
    messages = conversation(bash("cat /r/a.py", "Error: " + BODY, 1), bash("echo x > /r/a.py", ""))
    assert propose(messages) == []


def test_scripts_that_edit_files_count_as_edits() -> None:
    script = "cat > /r/fix.py << 'EOF'\nwith open('/r/a.py', 'w') as f:\n    f.write('x')\nEOF"
    messages = conversation(bash("cat /r/a.py", BODY), bash(script, ""), bash("python /r/fix.py", ""))
    assert indices(propose(messages)) == [3]


def test_editor_views_are_stale_after_a_later_edit() -> None:
    window = "[File: /r/a.py (99 lines total)]\n" + "\n".join(f"{i}:x = {i}" for i in range(1, 60))
    footer = "\n(Open file: /r/a.py)\n(Current directory: /r)\nbash-$"
    messages = conversation(
        step("bash", window + footer, command="open a.py"),
        step("bash", window + footer, command="edit 3:3\ny = 1\nend_of_edit"),
        step("bash", window + footer, command="edit 4:4\nz = 1\nend_of_edit"),
    )
    assert indices(propose(messages)) == [3, 5]


def test_options_and_protection() -> None:
    messages = conversation(bash(HEREDOC, ""), bash("cat /r/t.py", BODY), bash("sed -i 's/a/b/' /r/t.py", ""))
    assert indices(propose(messages)) == [2, 5]
    assert indices(propose(messages, Supersede.Options(writes=False))) == [5]
    assert indices(propose(messages, Supersede.Options(stale_reads=False))) == [2]
    assert Supersede().propose(messages, make_ctx(protected_turns=3)) == []
