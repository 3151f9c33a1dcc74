"""The one bounded cache every room uses: past its size the least recently used entry goes, never the whole cache."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar, overload

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


class LRU(OrderedDict[K, V]):
    """At most ``max_entries`` entries, least recently used first: a write (``cache[key] = value``) or a hit of ``get``
    makes an entry the most recent, ``peek`` and ``cache[key]`` read without; a write past the bound drops the least
    recently used, one at a time, each handed to ``evicted`` when given (what else must forget it). Read only with
    ``peek`` and it is a first-in first-out cache.

    Worker threads may share one without a lock, as they share an ``OrderedDict``: each step is one of its own
    operations, and an entry another thread dropped meanwhile is a miss, not an error."""

    def __init__(self, max_entries: int, evicted: Callable[[K, V], Any] | None = None) -> None:
        super().__init__()
        self.max_entries = max_entries
        self.evicted = evicted

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
        with contextlib.suppress(KeyError):  # another thread dropped it meanwhile
            self.move_to_end(key)
        return value

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
