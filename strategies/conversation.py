"""One pass over a request's messages: texts, turns, tool calls paired with their results, errors, protection."""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from strategies.base import text_key
from strategies.classify import ClassifyState, ToolAction, classify, observe
from strategies.protection import always_protected, cites_anchor, protected_indices

if TYPE_CHECKING:
    from strategies.base import StrategyContext
    from strategies.classify import ToolSpec
    from strategies.protection import Protection

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
    always: tuple[Protection.Options, frozenset[int]] | None = None
    """Messages protected under these options whatever the protected turns, found once per analysis."""
    prefix: Prefix | None = None
    """What a longer request starting with these messages can reuse of this analysis."""

    def output(self, call: Call) -> str | None:
        return self.texts[call.result] if call.result is not None else None

    def turns_after(self, index: int) -> int:
        """How many assistant messages come after the one that opened index's turn."""
        return self.turns - 1 - self.turn_of[index] if self.turn_of[index] >= 0 else self.turns


Frontier = tuple[int, int, str | None, str | None, tuple[tuple[str, tuple[str, ...]], ...]]
"""(index, calls, cwd, open file, script writes): every call before index has its result before index;
the calls made before it and the classification state there."""


@dataclass(frozen=True)
class Prefix:
    """What an analysis learned that later messages cannot change: where a longer request may resume.

    keys: message_key of each message (texts as text_key, never the texts); calls: without arguments.
    """

    keys: tuple[object, ...]
    turn_of: tuple[int, ...]
    calls: tuple[Call, ...]
    frontiers: tuple[Frontier, ...]
    always: frozenset[int]
    anchored: frozenset[int]
    tools: Mapping[str, ToolSpec]
    protection: Protection.Options
    notes: dict[Any, Any] = field(default_factory=dict, compare=False)
    """What strategies derived from the final calls (those before the last frontier), each under its own key,
    for the next request; written while this request is rewritten, read-only after."""
    inherited: tuple[dict[Any, Any], int] | None = field(default=None, compare=False)
    """The notes of the prefix this analysis resumed from, and how many of its calls it reused."""

    @property
    def final(self) -> int:
        """How many calls come before the last frontier: they and their results no longer change."""
        return self.frontiers[-1][1] if self.frontiers else 0

    def resume_point(self, keys: Sequence[object], ctx: StrategyContext) -> Frontier | None:
        """The last frontier before any message that differs from these keys (None: nothing to reuse)."""
        if self.tools is not ctx.tools or self.protection != ctx.protection:
            return None
        same = len(self.keys)
        if tuple(keys[:same]) != self.keys:
            same = next((i for i, (a, b) in enumerate(zip(keys, self.keys)) if a != b), min(same, len(keys)))
        return next((f for f in reversed(self.frontiers) if 0 < f[0] <= same), None)


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
        keys.append((value, None if text is None else (hash(text), len(text)), get("tool_call_id"), get("is_error"),
                     get("status"), calls))
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


def analyze(messages: list[dict[str, Any]], ctx: StrategyContext, known: Prefix | None = None) -> Conversation:
    """The Conversation of these messages: ctx.conversation when the pipeline already made it.
    ``known``: an earlier analysis's prefix; the messages this request still shares with it are not analysed again."""
    if ctx.conversation is not None and ctx.conversation.messages is messages:
        return ctx.conversation
    roles, texts, keys = read(messages)
    state = ClassifyState(tools=ctx.tools)
    start, count, calls, frontiers, turn_of, always, anchored = 0, 0, [], [], [], set(), set()
    resume = known.resume_point(keys, ctx) if known is not None else None
    if known is not None and resume is not None:
        start, count, state.cwd, state.open_file, writes = resume
        state.script_writes = dict(writes)
        calls = _rearm(known.calls[:count], messages)
        frontiers = [f for f in known.frontiers if f[0] <= start]
        turn_of = list(known.turn_of[:start])
        always = {i for i in known.always if i < start}
        anchored = {i for i in known.anchored if i < start}
    turn = turn_of[-1] if turn_of else -1
    for message_role in roles[start:]:
        turn += message_role == "assistant"
        turn_of.append(turn)
    observations = ctx.protection.observations_in_user_messages
    found = _calls(messages, roles, texts, turn_of, state, observations, ctx.memo, start, calls, frontiers)
    if ctx.protection.anchor_protection:
        anchored.update(i for i in range(start, len(messages))
                        if isinstance(messages[i], dict) and cites_anchor(texts[i], messages[i], ctx.memo))
    conversation = Conversation(messages, roles, texts, tuple(turn_of), turn + 1, found, anchored=frozenset(anchored))
    always.update(always_protected(conversation, ctx.protection, start))
    kept = (known.calls[:count] if known is not None else ()) + tuple(_with_arguments(c, "") for c in found[count:])
    prefix = Prefix(keys, conversation.turn_of, kept, tuple(frontiers), frozenset(always),
                    conversation.anchored or frozenset(), ctx.tools, ctx.protection,
                    inherited=(known.notes, count) if known is not None and start else None)
    conversation = replace(conversation, always=(ctx.protection, prefix.always), prefix=prefix)
    return replace(conversation, protected=protected_indices(conversation, ctx.protected_turns, ctx.protection))


def _calls(messages: list[dict[str, Any]], roles: tuple[str | None, ...], texts: tuple[str | None, ...],
           turn_of: list[int], state: ClassifyState, observations: bool, memo: MutableMapping[Any, Any] | None,
           start: int, calls: list[Call], frontiers: list[Frontier]) -> tuple[Call, ...]:
    """The calls of messages[start:] added to calls (those before start); each frontier found added to frontiers."""
    results: dict[str, list[int]] = {}
    for index in range(start, len(roles)):
        if roles[index] == "tool" and isinstance(messages[index].get("tool_call_id"), str):
            results.setdefault(messages[index]["tool_call_id"], []).append(index)
    never = len(messages)
    reach = start - 1  # the last message a call so far depends on (never: a call still waits for its result)
    for index, message_role in enumerate(roles[start:], start):
        if message_role != "assistant":
            continue
        if reach < index and (not frontiers or frontiers[-1][0] < index):
            frontiers.append((index, len(calls), state.cwd, state.open_file, tuple(state.script_writes.items())))
        message = messages[index]
        tool_calls = message.get("tool_calls")
        if isinstance(tool_calls, list) and tool_calls:
            for tool_call in tool_calls:
                if not isinstance(tool_call, dict) or not isinstance(tool_call.get("id"), str):
                    continue
                call_id = tool_call["id"]
                result = next((r for r in results.get(call_id, ()) if r > index), None)
                reach = max(reach, never if result is None else result)
                function = tool_call.get("function") or {}
                arguments = function.get("arguments")
                calls.append(_call(len(calls), index, call_id, str(function.get("name") or ""),
                                   arguments if isinstance(arguments, str) else "", result, tool_call, messages,
                                   texts, turn_of, state, memo))
        elif observations:
            reach = max(reach, index + 1)
            if index + 1 < len(messages) and roles[index + 1] == "user":
                fence = _FENCE.search(texts[index] or "")
                if fence and _OBSERVATION.match(texts[index + 1] or ""):
                    tool_call = {"function": {"name": "bash", "arguments": {"command": fence.group(1).strip()}}}
                    calls.append(_call(len(calls), index, None, "bash", "", index + 1, tool_call, messages, texts,
                                       turn_of, state))
    if reach < len(messages) and (not frontiers or frontiers[-1][0] < len(messages)):
        frontiers.append((len(messages), len(calls), state.cwd, state.open_file, tuple(state.script_writes.items())))
    return tuple(calls)


def _rearm(calls: Sequence[Call], messages: list[dict[str, Any]]) -> list[Call]:
    """The calls of a Prefix with their arguments read again from the messages (the keys matched, so each
    message holds the same tool calls)."""
    out: list[Call] = []
    previous, slot = -1, 0
    for c in calls:
        if c.call_id is None:
            out.append(c)
            continue
        tool_calls = messages[c.index]["tool_calls"]
        slot = slot + 1 if c.index == previous else 0
        previous = c.index
        while not (isinstance(tool_calls[slot], dict) and isinstance(tool_calls[slot].get("id"), str)):
            slot += 1
        arguments = (tool_calls[slot].get("function") or {}).get("arguments")
        out.append(_with_arguments(c, arguments if isinstance(arguments, str) else ""))
    return out


def _with_arguments(call: Call, arguments: str) -> Call:
    """A copy of call with other arguments, its fields copied as they are (three times faster than __init__,
    and every resumed call is copied on every request)."""
    copied = object.__new__(Call)
    copied.__dict__.update(call.__dict__, arguments=arguments)
    return copied


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
