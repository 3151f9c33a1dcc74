"""What a session's messages showed, learned request by request: its task, files touched, commands, errors, last words."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from conversation.actions.classify import ClassifyState, classify
from conversation.messages import is_error_output, message_text
from conversation.task import request_text

FILES_KEPT = 40
COMMANDS_KEPT = 12
ERRORS_KEPT = 3
LINE_CHARS = 300
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
ACTIONS = {"write": "changed", "edit": "changed", "read": "read", "search": "searched", "list": "listed"}


def one_line(text: str, limit: int = LINE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_chinese(text: str | None) -> bool:
    """Whether a text is mostly Chinese (the forms follow the conversation's language)."""
    if not text or text.isascii():  # no CJK character in ASCII: the common case, answered without a scan
        return False
    letters = sum(map(str.isalpha, text))  # counted in C: a task can be tens of thousands of characters
    return bool(letters) and sum(map(str.isalpha, _CJK.findall(text))) * 3 >= letters


def learn(facts: Mapping[str, Any], messages: Sequence[Mapping[str, Any]], answer: str | None) -> dict[str, Any]:
    """The facts so far updated with a request's new messages and its answer (plain JSON, bounded)."""
    out: dict[str, Any] = {
        "task": facts.get("task"),
        "files": [list(f) for f in facts.get("files", [])],
        "commands": list(facts.get("commands", [])),
        "errors": list(facts.get("errors", [])),
        "last_words": facts.get("last_words"),
        "requests": int(facts.get("requests", 0)) + 1,
    }
    state = ClassifyState()
    calls: dict[str, str] = {}
    for msg in messages:
        role, text = msg.get("role"), message_text(msg)
        if role == "user" and text and not out["task"]:
            request = request_text(msg)  # the person's words, not the agent's wrappers or preambles around them
            if request:
                out["task"] = one_line(request, 500)
        elif role == "assistant":
            if text and text.strip() and out["task"]:  # before the person's request: an agent's "Got it." to its own preamble
                out["last_words"] = one_line(text)
            for call in msg.get("tool_calls") or ():
                action = classify(call, state)
                calls[str(call.get("id"))] = action.label or action.kind
                for path in action.writes if action.writes and action.writes != ("*",) else (action.path,) if action.path else ():
                    _touch(out["files"], path, ACTIONS.get(action.kind, action.kind) if not action.writes else "changed")
                if action.label:
                    out["commands"] = [*out["commands"], one_line(action.label, 160)][-COMMANDS_KEPT:]
        elif role == "tool" and is_error_output(msg, text):
            label = calls.get(str(msg.get("tool_call_id")), "a call")
            lines = [line for line in (text or "").splitlines() if line.strip()][-3:]
            out["errors"] = [*out["errors"], one_line(f"{label}: " + " / ".join(lines))][-ERRORS_KEPT:]
    if answer and answer.strip():
        out["last_words"] = one_line(answer)
    return out


def _touch(files: list[list[str]], path: str, action: str) -> None:
    """Most recent last; a file once changed stays ``changed``."""
    before = next((f for f in files if f[0] == path), None)
    if before is not None:
        files.remove(before)
        if before[1] == "changed":
            action = "changed"
    files.append([path, action])
    del files[:-FILES_KEPT]
