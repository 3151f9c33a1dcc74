"""The one bounded cache every room uses: past its size the least recently used entry goes, never the whole cache.

Its size is a count of entries, and, where entries differ in size, optionally a count of bytes too."""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

_MISSING: Any = object()


class LRU(OrderedDict[K, V]):
    """At most ``max_entries`` entries, least recently used first: a write (``cache[key] = value``) or a hit of ``get``
    makes an entry the most recent, ``peek`` and ``cache[key]`` read without; a write past the bound drops the least
    recently used, one at a time, each handed to ``evicted`` when given (what else must forget it). Read only with
    ``peek`` and it is a first-in first-out cache.

    With ``max_bytes``, ``size(key, value)`` says what an entry holds in bytes (it must give the same figure for the
    same entry each time: a pure function of both); ``held_bytes`` is their sum, and a write past ``max_bytes`` drops
    the least recently used too, but never the entry just written (one entry larger than the bound stays, alone).

    ``forget_idle`` drops the entries neither written nor hit for a while (what a finished conversation left), so a
    cache holds what is in use rather than filling to its bound over hours.

    Worker threads may share one without a lock, as they share an ``OrderedDict``: each step is one of its own
    operations, and an entry another thread dropped meanwhile is a miss, not an error. A cache bounded in bytes
    changes its entries and its count under a lock of its own, so the count never drifts."""

    def __init__(
        self,
        max_entries: int,
        evicted: Callable[[K, V], Any] | None = None,
        *,
        max_bytes: int | None = None,
        size: Callable[[K, V], int] | None = None,
    ) -> None:
        super().__init__()
        if (max_bytes is None) != (size is None):
            raise ValueError("max_bytes and size go together")
        self.max_entries = max_entries
        self.evicted = evicted
        self.max_bytes = max_bytes
        self.size = size
        self.held_bytes = 0
        """The sum of ``size`` over the entries (0 without a bound in bytes)."""
        self._lock = threading.RLock() if size is not None else None
        self.touches = 0
        """Writes and hits so far. The entries written or hit since a moment are at most the growth of this count
        since then, and they are the last ones: every entry before them was untouched since (``forget_idle``)."""
        self._marks: deque[tuple[float, int, Any]] = deque()
        """(time, ``touches`` then, the most recent key then), oldest first: one per ``forget_idle`` call, kept while
        it may still be needed."""
        self._unmoved: dict[Any, float] = {}
        """Keys the marks name → the first mark's time since the key was last written or hit: while it stays, every
        entry before it is older than that mark (the exact bound; ``touches`` counts a hot key's every hit)."""

    @overload
    def get(self, key: K, default: None = None, /) -> V | None: ...
    @overload
    def get(self, key: K, default: V, /) -> V: ...
    @overload
    def get(self, key: K, default: T, /) -> V | T: ...

    def get(self, key: K, default: Any = None, /) -> Any:
        """The entry (now the most recent), or ``default``."""
        try:
            value = self[key]
        except KeyError:
            return default
        self._touched(key)  # before it moves: ``forget_idle`` stops at a key used meanwhile
        with contextlib.suppress(KeyError):  # another thread dropped it meanwhile
            self.move_to_end(key)
        return value

    def _touched(self, key: K) -> None:
        self.touches += 1
        if self._unmoved:
            self._unmoved.pop(key, None)

    @overload
    def peek(self, key: K, default: None = None, /) -> V | None: ...
    @overload
    def peek(self, key: K, default: V, /) -> V: ...
    @overload
    def peek(self, key: K, default: T, /) -> V | T: ...

    def peek(self, key: K, default: Any = None, /) -> Any:
        """The entry, or ``default``, leaving its place as it is."""
        return OrderedDict.get(self, key, default)

    def __setitem__(self, key: K, value: V) -> None:
        if self._lock is not None:
            self._set_sized(key, value)
            return
        self._touched(key)
        super().__setitem__(key, value)
        with contextlib.suppress(KeyError):
            self.move_to_end(key)
        while len(self) > self.max_entries:
            try:
                old, gone = self.popitem(last=False)
            except KeyError:  # another thread emptied it meanwhile
                break
            if self.evicted is not None:
                self.evicted(old, gone)

    def _set_sized(self, key: K, value: V) -> None:
        size, limit, lock = self.size, self.max_bytes, self._lock
        assert size is not None and limit is not None and lock is not None
        gone: list[tuple[K, V]] = []
        with lock:
            old = OrderedDict.get(self, key, _MISSING)
            if old is not _MISSING:
                self.held_bytes -= size(key, old)
            self._touched(key)
            OrderedDict.__setitem__(self, key, value)
            self.move_to_end(key)
            self.held_bytes += size(key, value)
            while len(self) > self.max_entries or (self.held_bytes > limit and len(self) > 1):
                k = next(iter(self))
                v = OrderedDict.__getitem__(self, k)
                OrderedDict.__delitem__(self, k)
                self.held_bytes -= size(k, v)
                gone.append((k, v))
        if self.evicted is not None:  # outside the lock: what else forgets may read this cache
            for k, v in gone:
                self.evicted(k, v)

    def __delitem__(self, key: K) -> None:
        """Taken out by hand (not an eviction); ``pop`` and ``popitem`` of a subclass come here too."""
        if self._lock is None:
            OrderedDict.__delitem__(self, key)
            return
        assert self.size is not None
        with self._lock:
            value = OrderedDict.__getitem__(self, key)
            OrderedDict.__delitem__(self, key)
            self.held_bytes -= self.size(key, value)

    @overload
    def pop(self, key: K, /) -> V: ...
    @overload
    def pop(self, key: K, default: V, /) -> V: ...
    @overload
    def pop(self, key: K, default: T, /) -> V | T: ...

    def pop(self, key: K, default: Any = _MISSING, /) -> Any:
        if self._lock is None:
            return OrderedDict.pop(self, key) if default is _MISSING else OrderedDict.pop(self, key, default)
        with self._lock:
            if key not in self:
                if default is _MISSING:
                    raise KeyError(key)
                return default
            value = OrderedDict.__getitem__(self, key)
            self.__delitem__(key)
            return value

    def popitem(self, last: bool = True) -> tuple[K, V]:
        if self._lock is None:
            return OrderedDict.popitem(self, last)
        with self._lock:
            if not self:
                raise KeyError("popitem(): dictionary is empty")
            key = next(reversed(self)) if last else next(iter(self))
            value = OrderedDict.__getitem__(self, key)
            self.__delitem__(key)
            return key, value

    def clear(self) -> None:
        if self._lock is None:
            OrderedDict.clear(self)
            return
        with self._lock:
            OrderedDict.clear(self)
            self.held_bytes = 0

    def forget_idle(self, now: float, idle_s: float, limit: int) -> int:
        """Drop, least recently used first, up to ``limit`` entries neither written nor hit (``get``) in the last
        ``idle_s`` seconds, each handed to ``evicted``; returns how many went. ``now`` is any clock's time, the same
        clock at every call: each call marks it (with ``touches`` and the most recent key), and what goes is what the
        newest mark at least ``idle_s`` old shows untouched since: every entry up to the key it named, while that key
        was not used since; else as many as ``touches`` proves (fewer where a key was hit many times). So nothing goes
        before the calls span ``idle_s``. Call it again while it returns ``limit``. A peek does not count as use: a
        cache read only with ``peek`` forgets what was written that long ago (counted again when asked for again)."""
        marks, cutoff = self._marks, now - idle_s
        if not marks or marks[-1][0] < now:
            last = next(reversed(self), _MISSING) if self else _MISSING
            marks.append((now, self.touches, last))
            if last is not _MISSING:
                self._unmoved.setdefault(last, now)
        while len(marks) > 1 and marks[1][0] <= cutoff:
            gone = marks.popleft()[2]
            if gone is not _MISSING and not any(m[2] == gone for m in marks):
                self._unmoved.pop(gone, None)
        at, touches, key = marks[0]
        if at > cutoff:
            return 0
        through = key is not _MISSING and self._unmoved.get(key, now) <= at and key in self
        untouched = len(self) if through else len(self) - (self.touches - touches)
        dropped = 0
        while dropped < min(limit, untouched):
            if through and key not in self._unmoved:  # used meanwhile (another thread): it is no longer where it was
                break
            try:
                old, value = self.popitem(last=False)
            except KeyError:  # another thread emptied it meanwhile
                break
            dropped += 1
            if self.evicted is not None:
                self.evicted(old, value)
            if through and old == key:
                self._unmoved.pop(key, None)
                break
        return dropped
