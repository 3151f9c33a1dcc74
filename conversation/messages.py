"""What a conversation is: each message's role, text and key, a tool call and where its result is, an error output."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conversation.actions.classify import ToolAction

_RETURNCODE = re.compile(r"\s*<returncode>(-?\d+)</returncode>")
_EXIT = re.compile(r"\[Command finished with exit code (-?\d+)\]|\b[Ee]xit code:? (-?\d+)|\"exit_code\":\s*(-?\d+)")
_FIRST_LINE_ERROR = re.compile(r"^\s*(?:error\b|<tool_use_error>|<exception>|fatal:|Your proposed edit has introduced)", re.IGNORECASE)


@dataclass(frozen=True)
class Call:
    """A tool call and where its result is. call_id None: a command written in a fenced block."""

    position: int
    index: int
    call_id: str | None
    name: str
    arguments: str
    result: int | None
    turn: int
    action: ToolAction
    is_error: bool


def read(messages: list[dict[str, Any]]) -> tuple[tuple[str | None, ...], tuple[str | None, ...], tuple[object, ...]]:
    """Each message's role, text and key: what analysis reads of it, texts as text_key, so that equal keys
    mean an equal analysis (a fresh object, equal to nothing, for what is not a plain dict)."""
    roles: list[str | None] = []
    texts: list[str | None] = []
    keys: list[object] = []
    for message in messages:
        if type(message) is not dict:
            roles.append(role(message))
            texts.append(message_text(message))
            keys.append(object())
            continue
        get = message.get
        value, content, tool_calls = get("role"), get("content"), get("tool_calls")
        text = content if type(content) is str else message_text(message)
        roles.append(value if isinstance(value, str) else None)
        texts.append(text)
        calls = tuple([_call_key(c) for c in tool_calls]) if isinstance(tool_calls, list) else None
        keys.append((value, None if text is None else (hash(text), len(text)), get("tool_call_id"), get("is_error"), get("status"), calls))
    return tuple(roles), tuple(texts), tuple(keys)


def _call_key(tool_call: object) -> object:
    if not isinstance(tool_call, dict):
        return None
    function = tool_call.get("function") or {}
    if not isinstance(function, dict):
        return object()
    arguments = function.get("arguments")
    arguments_key = (hash(arguments), len(arguments)) if isinstance(arguments, str) else ("repr", text_key(repr(arguments)))
    return tool_call.get("id"), function.get("name"), arguments_key


def role(message: object) -> str | None:
    """A message's role; None for anything that is not a message (it is then left alone)."""
    value = message.get("role") if isinstance(message, Mapping) else None
    return value if isinstance(value, str) else None


def message_text(message: Mapping[str, Any]) -> str | None:
    """A message's text: its string content, or its text parts joined by newlines; None when it has none."""
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)]
        return "\n".join(parts) if parts else None
    return None


def is_error_output(message: Mapping[str, Any], text: str | None) -> bool:
    """An error result: is_error, a non-zero exit code, a traceback, or an error first line."""
    if message.get("is_error") is True or message.get("status") == "error":
        return True
    if not text:
        return False
    returncode = _RETURNCODE.match(text)
    if returncode is not None:
        if int(returncode.group(1)) != 0:
            return True
    else:
        edges = text[:300] + "\n" + text[-300:]
        if "xit code" in edges or "exit_code" in edges:
            for match in _EXIT.finditer(edges):
                if int(next(g for g in match.groups() if g is not None)) != 0:
                    return True
    return "Traceback (most recent call last)" in text or bool(_FIRST_LINE_ERROR.match(text))


def text_key(text: str) -> tuple[int, int]:
    """A text's stand-in in cache keys: its hash and length, so a cache never holds the text itself."""
    return hash(text), len(text)
