"""Single commands: line transforms, their composition in pipelines, searches, find, filters."""

from __future__ import annotations

from conversation.actions.effect import END, Effect
from conversation.actions.shell_commands import (
    command,
    compose,
    filtered,
    line_transform,
    search,
    strip_prefixes,
)


def test_line_transform() -> None:
    assert line_transform("head", ["-n", "5", "f"]) == (["f"], ("range", 1, 5))
    assert line_transform("head", ["-20"]) == ([], ("range", 1, 20))
    assert line_transform("tail", ["-n", "+3", "f"]) == (["f"], ("from", 3, 0))
    assert line_transform("tail", ["-f", "log"]) == (["log"], "tail follow")
    assert line_transform("head", ["-c", "100", "f"]) == (["f"], "head bytes")
    assert line_transform("sed", ["-n", "2,4p", "f"]) == (["f"], ("range", 2, 4))
    assert line_transform("sed", ["s/a/b/", "f"]) is None
    assert line_transform("sed", ["-i", "s/a/b/", "f"]) is None
    assert line_transform("nl", ["-b", "a", "f"]) == (["f"], None)
    assert line_transform("wc", ["-l", "f"]) is None


def test_compose_ranges() -> None:
    read = Effect("read", path="f")
    assert compose(read, ("range", 1, 50)).range == (1, 50)
    assert compose(compose(read, ("range", 1, 500)), ("tail", 100, 0)).range == (401, 500)
    assert compose(compose(read, ("range", 100, 200)), ("range", 11, 20)).range == (110, 119)
    assert compose(read, ("tail", 10, 0)).selector == "tail 10"
    assert compose(compose(read, ("from", 5, 0)), ("range", 1, 3)).range == (5, 7)
    assert compose(read, "grep x").selector == "grep x"
    assert compose(compose(read, "grep x"), ("range", 1, 3)).selector == "grep x | range 1 3"
    assert compose(read, None) is read
    assert compose(Effect("read", path="f", range=(1, END)), ("range", 1, 10)).range == (1, 10)


def test_search_options() -> None:
    found = search("grep", ["-rn", "-e", "foo", "--include", "*.py", "src"], "/t")
    assert (found.kind, found.path, found.pattern) == ("search", "/t/src", "foo")
    assert search("grep", ["-i", "Foo", "a.py"], None).pattern == "(?i)Foo"
    assert search("grep", ["foo"], None).kind == "filter"
    assert search("grep", ["foo", "a", "b"], None).path is None
    assert search("rg", ["foo"], "/t").path == "/t"


def test_find_variants() -> None:
    assert command(["find", "src", "-name", "*.py"], [], None).pattern == "*.py"
    assert command(["find", ".", "-name", "*.pyc", "-delete"], [], None).writes == ["."]
    assert command(["find", ".", "-exec", "rm", "{}", ";"], [], None).kind == "edit"
    assert command(["find", ".", "-exec", "wc", "-l", "{}", ";"], [], None).kind == "other"


def test_prefixes_are_stripped() -> None:
    assert strip_prefixes(["sudo", "env", "A=1", "timeout", "10", "cat", "f"]) == ["cat", "f"]
    assert strip_prefixes(["LANG=C", "grep", "x"]) == ["grep", "x"]
    assert command(["timeout", "5", "cat", "f"], [], None).kind == "read"


def test_redirects() -> None:
    assert command(["grep", "x", "f"], [(">", "out")], None).kind == "write"
    assert command(["cat", "f"], [("2>", "/dev/null")], None).kind == "read"
    assert command(["cat", "f"], [(">", "/dev/null")], None).kind == "read"
    assert command(["cat", "f"], [(">&", "1")], None).kind == "read"


def test_filters() -> None:
    read = Effect("read", path="f")
    assert filtered(read, ["wc", "-l"], [], None).selector == "wc -l"
    assert filtered(read, ["python", "x.py"], [], None).kind == "other"
    assert filtered(Effect("list", path="."), ["xargs", "grep", "-l", "foo"], [], None).kind == "search"
    assert filtered(Effect("list", path="src"), ["xargs", "rm"], [], None).writes == ["src"]
    assert filtered(Effect("benign"), ["tee", "log"], [], None).writes == ["log"]
    assert filtered(read, ["head", "-3"], [(">", "out")], None).kind == "write"
