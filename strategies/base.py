"""Shared types of the strategy layer: a proposed Replacement, the StrategyContext, option checks."""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from conversation.actions.options import OptionError  # re-exported: the strategies' option checks raise it
from redaction.redact import redact

if TYPE_CHECKING:
    from conversation.actions.classify import ToolSpec
    from strategies.conversation import Conversation
    from strategies.protection import Protection

CONTENT = "content"
ARGS_PREFIX = "args:"


@dataclass(frozen=True)
class Replacement:
    """One proposed rewrite: the text at (index, target) becomes new_text.

    target is "content" (the message's text; for content-part lists, its text parts) or
    "args:<tool_call_id>" (the whole arguments JSON of that call in the assistant message
    at index; the new JSON keeps every key).
    """

    index: int
    target: str
    new_text: str
    original: str
    tokens_before: int
    tokens_after: int
    ref_id: str
    strategy: str
    reason: str
    kept: str | None = field(default=None, compare=False, repr=False)
    """The original as Ruyi keeps it (redacted), when the strategy has redacted it already: kept once, never redacted
    twice (redacting a 30 MiB tool output takes about 2 s of the interpreter)."""

    @property
    def kept_original(self) -> str:
        """What the ref keeps: the original redacted."""
        return self.kept if self.kept is not None else redact(self.original)

    @property
    def tokens_saved(self) -> int:
        return max(0, self.tokens_before - self.tokens_after)

    @property
    def call_id(self) -> str | None:
        """The tool_call_id of an args target, else None."""
        return self.target[len(ARGS_PREFIX) :] if self.target.startswith(ARGS_PREFIX) else None


def _default_protection() -> Protection.Options:
    from strategies.protection import Protection

    return Protection.Options()


def _default_tools() -> Mapping[str, ToolSpec]:
    from conversation.actions.classify import DEFAULT_TOOLS

    return DEFAULT_TOOLS


@dataclass(frozen=True)
class StrategyContext:
    """What a strategy may know besides the messages. Built per request; never shared state.

    count_tokens: the caller's (cached) token counter.
    window_tokens / remaining_tokens: the model's window and what is left of it.
    protected_turns: the last N turns are never touched.
    protection: Protection.Options (roles, anchors, protected paths and tools).
    tools: tool name -> ToolSpec (the classification table).
    min_saving_tokens: a replacement saving fewer tokens than this is not proposed.
    conversation: the analysis of these messages, when the pipeline has made it once.
    memo: a cache the caller keeps across requests: the classification of each call already seen and
        each placeholder already built, so a growing conversation costs its new calls only. Pure: entries
        depend only on their keys (count_tokens among them, so it must be pure too).
    """

    count_tokens: Callable[[str], int]
    window_tokens: int
    remaining_tokens: int
    protected_turns: int = 4
    protection: Protection.Options = field(default_factory=_default_protection)
    tools: Mapping[str, ToolSpec] = field(default_factory=_default_tools)
    min_saving_tokens: int = 20
    conversation: Conversation | None = None
    memo: MutableMapping[Any, Any] | None = None
    recall_tool: str | None = None
    """The name the request offers Ruyi's MCP ``recall`` tool under, if it does: a placeholder then says to call it
    with its ref (the model can fetch the original itself)."""
    usable_tokens: int | None = None
    """The window less the answer's reserve, on the same scale as ``count_tokens``: caps meant for big windows
    (truncation's) are scaled down to it, so no single output outgrows a small window."""

    def __post_init__(self) -> None:
        check_int("protected_turns", self.protected_turns, minimum=0)
        check_int("min_saving_tokens", self.min_saving_tokens, minimum=0)
        check_int("window_tokens", self.window_tokens, minimum=0)


class Strategy(Protocol):
    """What the pipeline needs of a strategy: a name, a constructor taking its Options, and propose().

    propose() does no I/O, never mutates messages, and answers "which messages would I replace,
    with what, saving how many tokens"; the pipeline resolves conflicts and applies.
    """

    name: ClassVar[str]
    Options: ClassVar[type[Any]]

    def __init__(self, options: Any = None) -> None: ...

    def propose(self, messages: list[dict[str, Any]], ctx: StrategyContext) -> list[Replacement]: ...


def check_int(name: str, value: object, minimum: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise OptionError(f"{name}: expected an integer >= {minimum}, got {value!r}")


def check_fraction(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise OptionError(f"{name}: expected a number in (0, 1], got {value!r}")


def check_strings(name: str, value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
        raise OptionError(f"{name}: expected a list of strings, got {value!r}")
