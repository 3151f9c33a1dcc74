"""One pass over a request's messages: texts, turns, tool calls paired with their results, errors, protection."""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from conversation.actions.classify import ClassifyState, classify, observe
from conversation.messages import Call, is_error_output, read, text_key
from strategies.prefix import Frontier, Prefix, rearm, with_arguments
from strategies.protection import always_protected, cites_anchor, protected_indices

if TYPE_CHECKING:
    from strategies.base import StrategyContext
    from strategies.protection import Protection

_FENCE = re.compile(r"```(?:bash|sh|shell|console|mswea_bash_command)?[ \t]*\n(.*?)```", re.DOTALL)
_OBSERVATION = re.compile(r"^\s*(?:<returncode>|<output>|<exception>|Observation:|OBSERVATION:)")


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
        calls = rearm(known.calls[:count], messages)
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
        anchored.update(i for i in range(start, len(messages)) if isinstance(messages[i], dict) and cites_anchor(texts[i], messages[i], ctx.memo))
    conversation = Conversation(messages, roles, texts, tuple(turn_of), turn + 1, found, anchored=frozenset(anchored))
    always.update(always_protected(conversation, ctx.protection, start))
    kept = (known.calls[:count] if known is not None else ()) + tuple(with_arguments(c, "") for c in found[count:])
    prefix = Prefix(
        keys,
        conversation.turn_of,
        kept,
        tuple(frontiers),
        frozenset(always),
        conversation.anchored or frozenset(),
        ctx.tools,
        ctx.protection,
        inherited=(known.notes, count) if known is not None and start else None,
    )
    conversation = replace(conversation, always=(ctx.protection, prefix.always), prefix=prefix)
    return replace(conversation, protected=protected_indices(conversation, ctx.protected_turns, ctx.protection))


def _calls(
    messages: list[dict[str, Any]],
    roles: tuple[str | None, ...],
    texts: tuple[str | None, ...],
    turn_of: list[int],
    state: ClassifyState,
    observations: bool,
    memo: MutableMapping[Any, Any] | None,
    start: int,
    calls: list[Call],
    frontiers: list[Frontier],
) -> tuple[Call, ...]:
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
                calls.append(
                    _call(
                        len(calls),
                        index,
                        call_id,
                        str(function.get("name") or ""),
                        arguments if isinstance(arguments, str) else "",
                        result,
                        tool_call,
                        messages,
                        texts,
                        turn_of,
                        state,
                        memo,
                    )
                )
        elif observations:
            reach = max(reach, index + 1)
            if index + 1 < len(messages) and roles[index + 1] == "user":
                fence = _FENCE.search(texts[index] or "")
                if fence and _OBSERVATION.match(texts[index + 1] or ""):
                    tool_call = {"function": {"name": "bash", "arguments": {"command": fence.group(1).strip()}}}
                    calls.append(_call(len(calls), index, None, "bash", "", index + 1, tool_call, messages, texts, turn_of, state))
    if reach < len(messages) and (not frontiers or frontiers[-1][0] < len(messages)):
        frontiers.append((len(messages), len(calls), state.cwd, state.open_file, tuple(state.script_writes.items())))
    return tuple(calls)


def _call(
    position: int,
    index: int,
    call_id: str | None,
    name: str,
    arguments: str,
    result: int | None,
    tool_call: Mapping[str, Any],
    messages: list[dict[str, Any]],
    texts: tuple[str | None, ...],
    turn_of: list[int],
    state: ClassifyState,
    memo: MutableMapping[Any, Any] | None = None,
) -> Call:
    output = texts[result] if result is not None else None
    key = None
    if memo is not None and call_id is not None:
        key = (
            call_id,
            name,
            text_key(arguments),
            text_key(output) if output is not None else None,
            result is not None and messages[result].get("is_error"),
            state.cwd,
            state.open_file,
            tuple(state.script_writes.items()),
        )
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
