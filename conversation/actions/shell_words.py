"""Shell words as shlex splits them (posix, punctuation characters, whitespace split, no comments), by regex."""

from __future__ import annotations

import re

_WORD = re.compile(r"""[ \t\r\n]*(?:([();<>|&]+)|((?:[^ \t\r\n();<>|&'"\\]+|'[^']*'|"(?:[^"\\]|\\[\s\S])*"|\\[\s\S])+))""")
_PIECE = re.compile(r"""[^'"\\]+|'([^']*)'|"((?:[^"\\]|\\[\s\S])*)"|\\([\s\S])""")
_QUOTED_ESCAPE = re.compile(r'\\(["\\])')
_BLANK = re.compile(r"[ \t\r\n]*")


def split_words(text: str) -> list[str]:
    """What ``list(shlex.shlex(text, posix=True, punctuation_chars=True))`` with ``whitespace_split = True``
    and no commenters gives (runs of operator characters are words of their own), without walking the
    text a character at a time. Raises ValueError where shlex does: an unclosed quote, a trailing backslash."""
    words: list[str] = []
    position = 0
    while True:
        match = _WORD.match(text, position)
        if match is None:
            if _BLANK.fullmatch(text, position):
                return words
            raise ValueError("No closing quotation or no escaped character")
        operators, word = match.groups()
        words.append(operators if operators else _unquote(word))
        position = match.end()


def _unquote(word: str) -> str:
    """A word with its quotes and escapes resolved as posix shlex does (in double quotes only \\" and \\\\)."""
    if not any(c in word for c in "'\"\\"):
        return word
    out: list[str] = []
    for piece in _PIECE.finditer(word):
        single, double, escaped = piece.groups()
        if single is not None:
            out.append(single)
        elif double is not None:
            out.append(_QUOTED_ESCAPE.sub(r"\1", double))
        elif escaped is not None:
            out.append(escaped)
        else:
            out.append(piece.group())
    return "".join(out)
