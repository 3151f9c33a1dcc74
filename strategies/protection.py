"""The messages no strategy may touch: the last turns, system and user messages, anchor citations, protected paths and tools."""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from dataclasses import dataclass
from fnmatch import translate
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from conversation.messages import text_key
from strategies.base import check_strings

if TYPE_CHECKING:
    from strategies.conversation import Conversation

ANCHOR = re.compile(r"\[(?:CK|DN|[DCIPMU])\d{3,4}\]")
_PRUNABLE_ROLES = frozenset({"assistant", "tool"})


class Protection:
    """Namespace of the protection rules' options; the rules are protected_indices()."""

    @dataclass(frozen=True)
    class Options:
        """Options of protection (protected_turns itself lives on StrategyContext)."""

        anchor_protection: bool = True
        """bool, default true: a message citing an anchor ([D001], [C002], [I003], [P001], [M001], [U001],
        [CK001], [DN001]) in its text or tool-call arguments is never touched."""

        protected_patterns: tuple[str, ...] = ("*.md", "anchors.md", "requirements.md", "design.md")
        """list of globs, default *.md, anchors.md, requirements.md, design.md: a call reading or writing a
        path whose name (or whole path) matches, case-insensitively, is never touched, nor its result."""

        protected_tools: tuple[str, ...] = ("Task", "task", "TodoWrite", "todowrite", "TodoRead", "todoread", "mcp__ruyi__recall", "recall")
        """list of tool names, default the sub-agent and todo tools and Ruyi's own ``recall`` (what the model asked back
        is never cut again): their calls and results are never touched."""

        observations_in_user_messages: bool = False
        """bool, default false: treat a user message that starts like a tool observation (<returncode>, …)
        right after an assistant message with a fenced bash block as that command's output, prunable.
        Off by default: every user message is a needle and stays verbatim."""

        def __post_init__(self) -> None:
            check_strings("protected_patterns", self.protected_patterns)
            check_strings("protected_tools", self.protected_tools)


def protected_indices(conversation: Conversation, protected_turns: int, options: Protection.Options) -> frozenset[int]:
    """Indices of messages that must reach the model byte-identical."""
    found = conversation.always
    always = found[1] if found is not None and found[0] == options else frozenset(always_protected(conversation, options))
    if protected_turns <= 0:
        return always
    assistants = [i for i, r in enumerate(conversation.roles) if r == "assistant"]
    start = assistants[-protected_turns] if len(assistants) >= protected_turns else 0
    return always.union(range(start, len(conversation.messages)))


def always_protected(conversation: Conversation, options: Protection.Options, start: int = 0) -> set[int]:
    """Indices from start on protected whatever the protected turns: roles, anchors, protected tools and paths.
    Calls before start must have their results before start (a Prefix frontier)."""
    messages = conversation.messages
    observation_results = {c.result for c in conversation.calls if c.call_id is None and c.result is not None}
    roles = conversation.roles
    protected = {i for i in range(start, len(roles)) if roles[i] not in _PRUNABLE_ROLES and i not in observation_results}
    if options.anchor_protection:
        anchored = conversation.anchored
        if anchored is None:
            anchored = frozenset(i for i, m in enumerate(messages) if isinstance(m, dict) and cites_anchor(conversation.texts[i], m))
        protected.update(i for i in anchored if i >= start)
    patterns = _pattern(tuple(options.protected_patterns))
    tools = frozenset(options.protected_tools)
    for call in conversation.calls:
        if call.index < start:
            continue
        paths = [p for p in (call.action.path, *call.action.writes) if p and p != "*"]
        if call.name in tools or any(_matches(p, patterns) for p in paths):
            protected.add(call.index)
            if call.result is not None:
                protected.add(call.result)
    return protected


def _anchored(text: str, memo: MutableMapping[Any, Any] | None) -> bool:
    """Whether a text cites an anchor; remembered in ``memo``, since every request shows the same old texts again."""
    if memo is None:
        return ANCHOR.search(text) is not None
    key = ("anchor", text_key(text))
    found = memo.get(key)
    if found is None:
        found = memo[key] = ANCHOR.search(text) is not None
    return bool(found)


def cites_anchor(text: str | None, message: dict[str, object], memo: MutableMapping[Any, Any] | None = None) -> bool:
    if text and _anchored(text, memo):
        return True
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list):
        for tool_call in tool_calls:
            function = tool_call.get("function") if isinstance(tool_call, dict) else None
            arguments = function.get("arguments") if isinstance(function, dict) else None
            if isinstance(arguments, str) and _anchored(arguments, memo):
                return True
    return False


@lru_cache(maxsize=64)
def _pattern(globs: tuple[str, ...]) -> re.Pattern[str] | None:
    """One case-insensitive regex for the protected globs (fnmatch syntax)."""
    return re.compile("|".join(translate(g) for g in globs), re.IGNORECASE) if globs else None


def _matches(path: str, pattern: re.Pattern[str] | None) -> bool:
    return pattern is not None and bool(pattern.match(path.rsplit("/", 1)[-1]) or pattern.match(path))
