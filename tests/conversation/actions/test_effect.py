"""Path helpers shared by the shell parser."""

from __future__ import annotations

from conversation.actions.effect import command_name, positional, resolve


def test_resolve() -> None:
    assert resolve("a/../b", "/t") == "/t/b"
    assert resolve("/abs/./x", "/t") == "/abs/x"
    assert resolve("./x", None) == "x"
    assert resolve("~/x", "/t") == "~/x"
    assert resolve("$HOME/x", "/t") == "$HOME/x"
    assert resolve("", "/t") == ""


def test_positional() -> None:
    assert positional(["-n", "5", "a", "--", "-b"], frozenset({"-n"})) == ["a", "-b"]
    assert positional(["-", "x"]) == ["-", "x"]


def test_command_name() -> None:
    assert command_name(["/usr/bin/python3.11", "x"]) == "python"
    assert command_name(["./run.sh"]) == "run.sh"
    assert command_name([]) == ""
