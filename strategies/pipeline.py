"""The strategy order (one list), fail-open proposing, conflict resolution, and applying replacements."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import structlog

from strategies.base import (
    ARGS_PREFIX,
    CONTENT,
    OptionError,
    Replacement,
    StrategyContext,
)
from strategies.conversation import analyze
from strategies.dedup import Dedup
from strategies.discard import Discard
from strategies.purge_errors import PurgeErrors
from strategies.supersede import Supersede
from strategies.truncation import Truncation

log = structlog.get_logger(__name__)

STRATEGY_ORDER: tuple[type[Dedup | Supersede | PurgeErrors | Truncation | Discard], ...] = (
    Dedup,
    Supersede,
    PurgeErrors,
    Truncation,
    Discard,
)
"""Whole-output replacements first (they free the most and leave nothing to truncate), then inputs,
then truncation of what is left, and last what is not redundant at all. Adding a strategy = one
module, one test file, one line here."""

LAST_RESORT: frozenset[str] = frozenset({Discard.name})
"""Strategies whose proposals are not redundancy: the pruner takes them only in a batch at the prune
tier or after an overflow, after all the others, oldest first and only as many as the batch needs."""


@dataclass(frozen=True)
class PipelineOptions:
    """Which strategies run, and each one's options (config keys: the strategy names)."""

    enabled: tuple[str, ...] = tuple(s.name for s in STRATEGY_ORDER)
    """list of strategy names, default all of STRATEGY_ORDER: the strategies that run, in STRATEGY_ORDER's order."""

    dedup: Dedup.Options = field(default_factory=Dedup.Options)
    supersede: Supersede.Options = field(default_factory=Supersede.Options)
    purge_errors: PurgeErrors.Options = field(default_factory=PurgeErrors.Options)
    truncation: Truncation.Options = field(default_factory=Truncation.Options)
    discard: Discard.Options = field(default_factory=Discard.Options)

    def __post_init__(self) -> None:
        known = {s.name for s in STRATEGY_ORDER}
        unknown = [name for name in self.enabled if name not in known]
        if unknown:
            raise OptionError(f"enabled: unknown strategy {unknown[0]!r} (known: {', '.join(sorted(known))})")


def propose_all(
    messages: list[dict[str, Any]], ctx: StrategyContext, options: PipelineOptions | None = None, failures: Counter[str] | None = None
) -> list[Replacement]:
    """Every strategy's proposals, in order; at most one per (index, target), earlier strategies first.

    A strategy that raises is skipped, logged (strategy_failed) and counted in failures; the
    messages are analysed once and shared. Proposals on protected messages are dropped here too.
    """
    options = options or PipelineOptions()
    try:
        conversation = analyze(messages, ctx)
    except Exception:  # fail open: no analysis, no pruning
        log.warning("strategy_failed", strategy="analysis", exc_info=True)
        if failures is not None:
            failures["analysis"] += 1
        return []
    ctx = dataclasses.replace(ctx, conversation=conversation)
    taken: dict[tuple[int, str], Replacement] = {}
    for strategy_class in STRATEGY_ORDER:
        if strategy_class.name not in options.enabled:
            continue
        strategy = strategy_class(getattr(options, strategy_class.name))
        try:
            proposals = strategy.propose(messages, ctx)
        except Exception:  # fail open: one broken strategy never fails the request
            log.warning("strategy_failed", strategy=strategy_class.name, exc_info=True)
            if failures is not None:
                failures[strategy_class.name] += 1
            continue
        for replacement in proposals:
            slot = (replacement.index, replacement.target)
            if slot not in taken and replacement.index not in conversation.protected and _fits(messages, replacement):
                taken[slot] = replacement
    return sorted(taken.values(), key=lambda r: (r.index, r.target))


def _fits(messages: list[dict[str, Any]], replacement: Replacement) -> bool:
    if not 0 <= replacement.index < len(messages):
        return False
    message = messages[replacement.index]
    call_id = replacement.call_id
    if call_id is None:
        return replacement.target == CONTENT and message.get("role") != "system"
    return any(isinstance(c, dict) and c.get("id") == call_id for c in message.get("tool_calls") or [])


def apply_replacements(messages: list[dict[str, Any]], replacements: list[Replacement]) -> list[dict[str, Any]]:
    """A new list with the replacements applied; untouched messages are the very same objects.

    Roles, ids, order and pairing never change: content is set in place of the text (for a list of
    content parts, the first text part gets the new text, other text parts go, images and other
    parts stay), and a call's arguments string is swapped for the new one, which must be JSON.
    A replacement that does not fit the messages is skipped and logged.
    """
    out = list(messages)
    for replacement in replacements:
        if not _fits(messages, replacement):
            log.warning("replacement_skipped", index=replacement.index, target=replacement.target)
            continue
        message = out[replacement.index]
        if message is messages[replacement.index]:
            message = copy.copy(message)
            out[replacement.index] = message
        if replacement.target == CONTENT:
            message["content"] = _new_content(message.get("content"), replacement.new_text)
            continue
        try:
            json.loads(replacement.new_text)
        except ValueError:
            log.warning("replacement_skipped", index=replacement.index, target=replacement.target)
            continue
        call_id = replacement.target[len(ARGS_PREFIX) :]
        calls = []
        for tool_call in message.get("tool_calls") or []:
            if isinstance(tool_call, dict) and tool_call.get("id") == call_id:
                function = dict(tool_call.get("function") or {}, arguments=replacement.new_text)
                tool_call = dict(tool_call, function=function)
            calls.append(tool_call)
        message["tool_calls"] = calls
    return out


def _new_content(content: object, text: str) -> object:
    if not isinstance(content, list):
        return text
    parts: list[Any] = []
    placed = False
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            if not placed:
                parts.append(dict(part, text=text))
                placed = True
            continue
        parts.append(part)
    return parts if placed else [{"type": "text", "text": text}, *parts]
