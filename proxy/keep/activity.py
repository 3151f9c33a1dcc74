"""Which agents have a request in flight, and since when each has been idle: compaction waits for idle agents."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

FORGET_S = 3600.0
"""How long an agent's last request is remembered by default: ``idle`` is exact for any ``seconds`` up to this."""


class Activity:
    """Requests in flight per agent (sub-agents count for their agent), and when each agent's last one ended.

    Only what ``idle`` can still tell apart is kept: an agent whose last request ended ``forget_s`` ago or more is idle
    for every ``seconds`` up to ``forget_s`` whether it is remembered or not, so it is forgotten (the keeper asks with
    its ``idle_seconds``). What is held is the agents in flight plus those that ended within ``forget_s``, never every
    agent ever seen."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, forget_s: float = FORGET_S) -> None:
        self._clock = clock
        self.forget_s = forget_s
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = {}
        self._ended: OrderedDict[str, float] = OrderedDict()
        """When each agent's last request ended, the oldest first (an ending moves its agent to the end). Expired by age
        (``forget_s``), not bounded by a count, so not a ``memory.lru.LRU``."""

    @contextmanager
    def busy(self, agent_id: str) -> Iterator[None]:
        """Around a request: the agent is not idle until it ends."""
        with self._lock:
            self._in_flight[agent_id] = self._in_flight.get(agent_id, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._in_flight.pop(agent_id) - 1
                if left:
                    self._in_flight[agent_id] = left
                now = self._clock()
                self._ended[agent_id] = now
                self._ended.move_to_end(agent_id)
                self._forget(now)

    def _forget(self, now: float) -> None:
        """Drop the agents that ended ``forget_s`` ago or more (under the lock; the oldest are first)."""
        while self._ended:
            agent_id, ended = next(iter(self._ended.items()))
            if now - ended < self.forget_s:
                return
            self._ended.popitem(last=False)

    def __len__(self) -> int:
        """Agents remembered (in flight or ended within ``forget_s``)."""
        with self._lock:
            return len({*self._in_flight, *self._ended})

    def idle(self, agent_id: str, seconds: float) -> bool:
        """No request of the agent (or of its sub-agents, ``agent/…``) in flight, and none ended in the last ``seconds``
        (exact for ``seconds`` up to ``forget_s``)."""
        now = self._clock()
        with self._lock:
            self._forget(now)
            mine = [a for a in {*self._in_flight, *self._ended} if a == agent_id or a.startswith(agent_id + "/")]
            return not any(self._in_flight.get(a) for a in mine) and all(now - self._ended.get(a, -1e18) >= seconds for a in mine)
