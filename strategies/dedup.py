"""Dedup: an older read, search or list made redundant by a later one of the same unchanged file or query."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from conversation.messages import Call
from strategies.base import Replacement, StrategyContext, check_strings
from strategies.conversation import Conversation, analyze
from strategies.placeholder import replace_output

_BY_KEY = frozenset({"read", "search", "list"})


def overlaps(a: str | None, b: str | None) -> bool:
    """Whether a change to path a may change what a call on path b shows (same path, one inside the other).

    With an unknown working directory a relative path may be any absolute one: then any shared
    directory name counts, erring towards "changed" (which only ever keeps an output).
    """
    if a is None or b is None or "*" in (a, b):
        return True
    a, b = _fixed_part(a), _fixed_part(b)
    if "." in (a, b):
        return True
    if a.startswith("/") != b.startswith("/"):
        relative, absolute = (a, b) if b.startswith("/") else (b, a)
        return relative.split("/", 1)[0] in absolute.split("/")
    return a == b or b.startswith(a.rstrip("/") + "/") or a.startswith(b.rstrip("/") + "/")


def _fixed_part(path: str) -> str:
    """A glob path's directory before its first wildcard (`src/*.py` -> `src`)."""
    if not any(c in path for c in "*?["):
        return path
    parts = path.split("/")
    cut = next(i for i, part in enumerate(parts) if any(c in part for c in "*?["))
    return "/".join(parts[:cut]) or "."


class WriteLog:
    """Every call that changes files, by position, to ask: did anything change path between two calls?"""

    def __init__(self, calls: tuple[Call, ...]) -> None:
        self._positions = [c.position for c in calls if c.action.writes]
        self._writes = [c.action.writes for c in calls if c.action.writes]

    def changed(self, path: str | None, after: int, before: int) -> bool:
        lo, hi = bisect_right(self._positions, after), bisect_left(self._positions, before)
        return any(overlaps(w, path) for writes in self._writes[lo:hi] for w in writes)


def covers(later: Call, older: Call) -> bool:
    """Whether the later read shows at least what the older read showed of the same file."""
    a, b = older.action, later.action
    if a.kind != "read" or b.kind != "read" or a.path is None or a.path != b.path:
        return False
    if b.range is None and b.selector is None:
        return True
    if a.selector is not None or b.selector is not None or a.range is None or b.range is None:
        return a.key == b.key
    return b.range[0] <= a.range[0] and a.range[1] <= b.range[1]


class Dedup:
    """An older output is redundant when a later call repeats it.

    Reads, searches and lists: a later call with the same key (or, for reads, a later read covering
    the older range of the same file) with no write of that path in between. Any other call: only
    when a later call with the same key returned byte-identical output (a failing and then passing
    `python reproduce.py` keeps both).
    """

    name: ClassVar[str] = "dedup"

    @dataclass(frozen=True)
    class Options:
        by_key: tuple[str, ...] = ("read", "search", "list")
        """list of kinds, default read, search, list: kinds deduplicated by key with no write in between."""

        def __post_init__(self) -> None:
            check_strings("by_key", self.by_key)

    def __init__(self, options: Dedup.Options | None = None) -> None:
        self.options = options or Dedup.Options()

    def propose(self, messages: list[dict[str, Any]], ctx: StrategyContext) -> list[Replacement]:
        conversation = analyze(messages, ctx)
        calls = [c for c in conversation.calls if c.result is not None and c.result not in conversation.protected]
        known, valid = self._known(conversation)
        # Calls the previous request checked need only the candidates from `valid` on, others those after them.
        lo = min([valid, *(c.position for c in calls if c.position < valid and c.position not in known)])
        by_key: dict[str, list[Call]] = defaultdict(list)
        reads_by_path: dict[str, list[Call]] = defaultdict(list)
        rank: dict[tuple[bool, int], int] = {}  # (a read of a path?, position) -> place in its list
        for call in conversation.calls[lo:]:
            if call.result is None:
                continue
            group = by_key[call.action.key]
            rank[False, call.position] = len(group)
            group.append(call)
            if call.action.kind == "read" and call.action.path is not None:
                group = reads_by_path[call.action.path]
                rank[True, call.position] = len(group)
                group.append(call)
        writes = WriteLog(conversation.calls)
        final = conversation.prefix.final if conversation.prefix is not None else 0
        found: dict[int, int | None] = {}
        proposals: list[Replacement] = []
        for call in calls:
            earlier = known.get(call.position, -1) if call.position < valid else -1
            if earlier is not None and 0 <= earlier < valid:
                later: Call | None = conversation.calls[earlier]
            else:
                since = valid if call.position < valid and call.position in known else 0
                later = self._later(call, by_key, reads_by_path, rank, writes, conversation, since)
            if call.position < final:
                found[call.position] = later.position if later is not None and later.position < final else None
            if later is None:
                continue
            why, how = self._explain(call, later)
            replacement = replace_output(conversation, call, ctx, self.name, why, how)
            if replacement is not None:
                proposals.append(replacement)
        if conversation.prefix is not None:
            conversation.prefix.notes[self.name, self.options] = (final, found)
        return proposals

    def _known(self, conversation: Conversation) -> tuple[dict[int, int | None], int]:
        """What the request this one resumed from found: by older call, the candidate that made it redundant
        (None: no candidate did), every candidate before the returned position checked."""
        inherited = conversation.prefix.inherited if conversation.prefix is not None else None
        if inherited is None or (self.name, self.options) not in inherited[0]:
            return {}, 0
        notes, reused = inherited
        final, found = notes[self.name, self.options]
        return found, min(final, reused)

    def _later(
        self,
        older: Call,
        by_key: dict[str, list[Call]],
        reads_by_path: dict[str, list[Call]],
        rank: dict[tuple[bool, int], int],
        writes: WriteLog,
        conversation: Conversation,
        since: int = 0,
    ) -> Call | None:
        """The earliest later call that makes older redundant: it never changes as the conversation grows.
        The groups hold the candidates (at least those from position since on: the earlier ones are known not to)."""
        kind = older.action.kind
        path = older.action.path if kind == "read" and "read" in self.options.by_key else None  # later reads covering it
        if older.action.key not in by_key and path not in reads_by_path:
            return None
        output = conversation.output(older)
        by_key_kind = kind in self.options.by_key and kind in _BY_KEY
        same = by_key[older.action.key][rank.get((False, older.position), -1) + 1 :]
        candidates: Iterable[Call] = same
        if path is not None:
            reads = reads_by_path[path][rank.get((True, older.position), -1) + 1 :]
            candidates = _with_covering(older, same, reads, since)
        for later in candidates:
            if later.position < since:
                continue
            if later.action.key == older.action.key and conversation.output(later) == output:
                return later
            if by_key_kind and not later.is_error and not writes.changed(older.action.path, older.position, later.position):
                return later
        return None

    @staticmethod
    def _explain(older: Call, later: Call) -> tuple[str, str]:
        kind = older.action.kind
        if kind == "read":
            same = later.action.key == older.action.key
            return ("the same lines were read again later" if same else "a later read shows these lines"), "run it again if you need it"
        if kind in {"search", "list"}:
            return f"the same {kind} ran again later, no file changed in between", "run it again if you need it"
        return "a later identical call returned the same output", "see the later output"


def _with_covering(older: Call, same: list[Call], reads: list[Call], since: int) -> Iterator[Call]:
    """The later calls with older's key and the later reads covering it, in order (coverage checked lazily,
    and only from position since on)."""
    i = 0
    for read in reads:
        if read.action.key == older.action.key or read.position < since:
            continue
        while i < len(same) and same[i].position < read.position:
            yield same[i]
            i += 1
        if covers(read, older):
            yield read
    yield from same[i:]
