"""One pass over a request's messages: texts, turns, tool calls paired with their results, errors, protection."""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from strategies.base import text_key
from strategies.classify import ClassifyState, ToolAction, classify, observe
from strategies.protection import cites_anchor, protected_indices

if TYPE_CHECKING:
    from strategies.base import StrategyContext

_RETURNCODE = re.compile(r"\s*<returncode>(-?\d+)</returncode>")
_EXIT = re.compile(r"\[Command finished with exit code (-?\d+)\]|\b[Ee]xit code:? (-?\d+)|\"exit_code\":\s*(-?\d+)")
_FIRST_LINE_ERROR = re.compile(r"^\s*(?:error\b|<tool_use_error>|<exception>|fatal:|Your proposed edit has introduced)",
                               re.IGNORECASE)
_FENCE = re.compile(r"```(?:bash|sh|shell|console|mswea_bash_command)?[ \t]*\n(.*?)```", re.DOTALL)
_OBSERVATION = re.compile(r"^\s*(?:<returncode>|<output>|<exception>|Observation:|OBSERVATION:)")


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


@dataclass(frozen=True)
class Conversation:
    """What every strategy needs to know about one list of messages, computed once."""

    messages: list[dict[str, Any]]
    roles: tuple[str | None, ...]
    texts: tuple[str | None, ...]
    turn_of: tuple[int, ...]
    turns: int
    calls: tuple[Call, ...]
    protected: frozenset[int] = field(default_factory=frozenset)
    anchored: frozenset[int] | None = None
    """Messages citing an anchor, found once per analysis (None: not looked for yet)."""

    def output(self, call: Call) -> str | None:
        return self.texts[call.result] if call.result is not None else None

    def turns_after(self, index: int) -> int:
        """How many assistant messages come after the one that opened index's turn."""
        return self.turns - 1 - self.turn_of[index] if self.turn_of[index] >= 0 else self.turns


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


def analyze(messages: list[dict[str, Any]], ctx: StrategyContext) -> Conversation:
    """The Conversation of these messages: ctx.conversation when the pipeline already made it."""
    if ctx.conversation is not None and ctx.conversation.messages is messages:
        return ctx.conversation
    roles = tuple(role(m) for m in messages)
    texts = tuple(message_text(m) for m in messages)
    turn_of: list[int] = []
    turn = -1
    for message_role in roles:
        turn += message_role == "assistant"
        turn_of.append(turn)
    observations = ctx.protection.observations_in_user_messages
    calls = _calls(messages, roles, texts, turn_of, ClassifyState(tools=ctx.tools), observations, ctx.memo)
    anchored = (frozenset(i for i, m in enumerate(messages) if isinstance(m, dict) and cites_anchor(texts[i], m, ctx.memo))
                if ctx.protection.anchor_protection else frozenset())
    conversation = Conversation(messages, roles, texts, tuple(turn_of), turn + 1, calls, anchored=anchored)
    return replace(conversation, protected=protected_indices(conversation, ctx.protected_turns, ctx.protection))


def _calls(messages: list[dict[str, Any]], roles: tuple[str | None, ...], texts: tuple[str | None, ...],
           turn_of: list[int], state: ClassifyState, observations: bool,
           memo: MutableMapping[Any, Any] | None = None) -> tuple[Call, ...]:
    results: dict[str, list[int]] = {}
    for index, message_role in enumerate(roles):
        if message_role == "tool" and isinstance(messages[index].get("tool_call_id"), str):
            results.setdefault(messages[index]["tool_call_id"], []).append(index)
    calls: list[Call] = []
    for index, message_role in enumerate(roles):
        if message_role != "assistant":
            continue
        message = messages[index]
        tool_calls = message.get("tool_calls")
        if isinstance(tool_calls, list) and tool_calls:
            for tool_call in tool_calls:
                if not isinstance(tool_call, dict) or not isinstance(tool_call.get("id"), str):
                    continue
                call_id = tool_call["id"]
                result = next((r for r in results.get(call_id, ()) if r > index), None)
                function = tool_call.get("function") or {}
                arguments = function.get("arguments")
                calls.append(_call(len(calls), index, call_id, str(function.get("name") or ""),
                                   arguments if isinstance(arguments, str) else "", result, tool_call, messages,
                                   texts, turn_of, state, memo))
        elif observations and index + 1 < len(messages) and roles[index + 1] == "user":
            fence = _FENCE.search(texts[index] or "")
            if fence and _OBSERVATION.match(texts[index + 1] or ""):
                tool_call = {"function": {"name": "bash", "arguments": {"command": fence.group(1).strip()}}}
                calls.append(_call(len(calls), index, None, "bash", "", index + 1, tool_call, messages, texts,
                                   turn_of, state))
    return tuple(calls)


def _call(position: int, index: int, call_id: str | None, name: str, arguments: str, result: int | None,
          tool_call: Mapping[str, Any], messages: list[dict[str, Any]], texts: tuple[str | None, ...],
          turn_of: list[int], state: ClassifyState, memo: MutableMapping[Any, Any] | None = None) -> Call:
    output = texts[result] if result is not None else None
    key = None
    if memo is not None and call_id is not None:
        key = (call_id, name, text_key(arguments), text_key(output) if output is not None else None,
               result is not None and messages[result].get("is_error"), state.cwd, state.open_file,
               tuple(state.script_writes.items()))
        known = memo.get(key)
        if known is not None:
            action, is_error, state.cwd, state.open_file, writes = known
            state.script_writes = dict(writes)
            return Call(position, index, call_id, name, arguments, result, turn_of[index], action, is_error)
    action = observe(classify(tool_call, state), output, state)
    is_error = result is not None and is_error_output(messages[result], output)
    if key is not None and memo is not None:
        memo[key] = (action, is_error, state.cwd, state.open_file, tuple(state.script_writes.items()))
    return Call(position, index, call_id, name, arguments, result, turn_of[index], action, is_error)
