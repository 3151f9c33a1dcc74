"""SWE-agent editor commands and the headers and footers of its output."""

from __future__ import annotations

from conversation.actions.swe_agent import command, footer, shown_file, window

OUTPUT = (
    "[File: /testbed/src/x.py (372 lines total)]\n(272 more lines above)\n273:    a = 1\n274:    b = 2\n"
    "372:    end\n(Open file: /testbed/src/x.py)\n(Current directory: /testbed)\nbash-$"
)


def test_commands() -> None:
    assert command("open src/x.py 293", "/t").path == "/t/src/x.py"
    assert command("scroll_down", None).on_open_file
    assert command("create new.py", None).kind == "write"
    assert command("insert 5\ntext\nend_of_insert", None).kind == "edit"
    assert command("find_file x.py src", None).path == "src"
    assert command("search_dir foo", "/t").path == "/t"
    assert command("search_file foo a.py", None).path == "a.py"
    assert command("submit", None).kind == "other"
    assert command("open 'unterminated", None).kind == "read"


def test_output_facts() -> None:
    assert shown_file(OUTPUT) == "/testbed/src/x.py"
    assert footer(OUTPUT) == ("/testbed/src/x.py", "/testbed")
    assert window(OUTPUT) == (273, 372)
    assert footer("ls output\n(Open file: n/a)\n(Current directory: /r)") == (None, "/r")
    assert footer("plain") == (None, None)
    assert shown_file("plain") is None
    assert window("no numbers") is None
