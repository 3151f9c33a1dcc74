"""The three forms from plain state: sizes, sections, anchors."""

from __future__ import annotations

from memory.anchors.anchor import Anchor
from memory.forms.render import SessionState, build

ANCHORS = [Anchor("a", f"D{i:03d}", f"decision number {i} " + "w" * 40, "active", {"why": "because " + "y" * 60}) for i in range(1, 30)]


def test_compact_stays_under_500_however_much_there_is() -> None:
    facts = {"task": "t" * 2000, "files": [[f"/src/file_{i}.py", "changed"] for i in range(40)], "last_words": "z" * 1000}
    text = build(SessionState("s", facts, ANCHORS), "compact")
    assert len(text) < 500 and text.startswith("## 🔸 Compact context") and "[D001]" in text


def test_normal_stays_within_2000_and_expanded_keeps_everything() -> None:
    state = SessionState("s", {"task": "a task", "commands": [f"cmd {i}" for i in range(12)]}, ANCHORS)
    assert len(build(state, "normal")) <= 2000
    expanded = build(state, "expanded")
    assert all(f"## [D{i:03d}]" in expanded for i in range(1, 30)) and "cmd 0" in expanded


def test_compact_progress_names_the_newest_command_of_an_agent_that_never_speaks() -> None:
    """Seen in a real Claude Code run: only tool calls, no words, no file changed, and an empty 【Progress】."""
    facts = {"task": "Print the numbers", "commands": ["seq 1 900", "seq 901 1800"], "requests": 2}
    text = build(SessionState("s", facts, []), "compact")
    progress = text.split("【Progress】")[1].split("【")[0]
    assert "`seq 901 1800`" in progress and "seq 1 900" not in progress and len(text) < 500
    spoken = build(SessionState("s", {**facts, "last_words": "Printing the second range."}, []), "compact")
    assert "Printing the second range." in spoken and "seq 901 1800" not in spoken
