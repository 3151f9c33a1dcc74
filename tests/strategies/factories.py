"""Message factories for the strategy tests: OpenAI chat messages, tool calls, and a cheap token counter."""

from __future__ import annotations

import itertools
import json
from typing import Any

from strategies.base import StrategyContext

_ids = itertools.count(1)


def count_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: about four characters a token."""
    return len(text) // 4 + 1


def make_ctx(**overrides: Any) -> StrategyContext:
    values: dict[str, Any] = {
        "count_tokens": count_tokens,
        "window_tokens": 32000,
        "remaining_tokens": 16000,
        "protected_turns": 0,
        "min_saving_tokens": 5,
    }
    values.update(overrides)
    return StrategyContext(**values)


def system(text: str = "You are a coding agent.") -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str = "Fix the bug in src/app.py.") -> dict[str, Any]:
    return {"role": "user", "content": text}


def tool_call(name: str, call_id: str | None = None, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id or f"call_{next(_ids)}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def assistant(*calls: dict[str, Any], text: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def result(call: dict[str, Any], content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call["id"], "content": content}


def step(name: str, output: Any, text: str | None = None, **arguments: Any) -> list[dict[str, Any]]:
    """One turn: an assistant message with one call, and its result."""
    call = tool_call(name, **arguments)
    return [assistant(call, text=text), result(call, output)]


def bash(command: str, output: str, returncode: int = 0) -> list[dict[str, Any]]:
    """A mini-swe-agent style bash turn."""
    return step("bash", f"<returncode>{returncode}</returncode>\n<output>\n{output}\n</output>", command=command)


def lines(prefix: str, count: int, start: int = 1) -> str:
    return "\n".join(f"{prefix} line {i} with some words in it" for i in range(start, start + count))


def conversation(*turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages = [system(), user()]
    for turn in turns:
        messages.extend(turn)
    return messages


def indices(replacements: list[Any]) -> list[int]:
    return sorted(r.index for r in replacements)
