"""split_words gives exactly what shlex gives, errors included."""

from __future__ import annotations

import json
import random
import shlex

import pytest

from conversation.actions.shell_words import split_words
from tests.traces import load, trace_files

PIECES = [*" \t\r\n();<>|&'\"\\abc$~-./*?=#{}\x0b\xe9", "&&", "||", ">>", "'x y'", '"a\\"b"', "\\\n", "RUYIQ1"]


def shlex_words(text: str) -> list[str] | str:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return "error"


def words(text: str) -> list[str] | str:
    try:
        return split_words(text)
    except ValueError:
        return "error"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "ls -la",
        "a&&b||c;d",
        "echo 'a b' \"c d\" e\\ f",
        "x=''  ''",
        "cat <<< x >> y 2>&1 |& tee z",
        'echo "a\\\\b\\$c\\""',
        "echo 'unclosed",
        'echo "unclosed',
        "trailing \\",
        "a\\\nb",
        "(cd x; ls)&",
    ],
)
def test_examples(text: str) -> None:
    assert words(text) == shlex_words(text)


def test_random_lines() -> None:
    rng = random.Random(7)
    for _ in range(20_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 24)))
        assert words(text) == shlex_words(text), text


@pytest.mark.skipif(not trace_files(), reason="no traces on this machine")
def test_every_command_of_the_traces() -> None:
    for path in trace_files():
        for message in load(path)["messages"]:
            for call in message.get("tool_calls") or ():
                command = json.loads(call["function"]["arguments"]).get("command")
                if isinstance(command, str):
                    assert words(command) == shlex_words(command)
