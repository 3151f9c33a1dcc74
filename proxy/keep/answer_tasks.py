"""The keeper's work after each answer, as tasks: a session's one at a time in the order they came, waited for per agent or all."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any

SETTLE_AGENT_S = 1.0
"""The longest a fresh conversation waits for its agent's earlier answers to be remembered."""

Work = Callable[[asyncio.Task[None] | None], Coroutine[Any, Any, None]]
"""An answer's work, given the task of its session's answer before it (None: none in flight) to wait for first."""


class AnswerTasks:
    """The tasks in flight, all of them, per agent, and each session's newest. A session's answers are remembered one at
    a time and in the order they came, however the worker threads are scheduled: the facts keep the files a session
    touched most recent last and fold in from the first message not folded yet, so an answer remembered before the one
    it followed would reorder them, and what the next archive shows would depend on the threads."""

    def __init__(self) -> None:
        self._all: set[asyncio.Task[None]] = set()
        self._agents: dict[str, set[asyncio.Task[None]]] = {}
        self._newest: dict[tuple[str, str], asyncio.Task[None]] = {}

    def start(self, agent_id: str, session_id: str, work: Work) -> asyncio.Task[None]:
        """``work`` in a task of its own, after the session's newest one still in flight."""
        key = (agent_id, session_id)
        task = asyncio.create_task(work(self._newest.get(key)))
        self._newest[key] = task
        self._all.add(task)
        self._agents.setdefault(agent_id, set()).add(task)
        task.add_done_callback(functools.partial(self._done, key))
        return task

    def _done(self, key: tuple[str, str], task: asyncio.Task[None]) -> None:
        self._all.discard(task)
        if self._newest.get(key) is task:
            del self._newest[key]
        mine = self._agents.get(key[0])
        if mine is not None:
            mine.discard(task)
            if not mine:
                del self._agents[key[0]]

    async def settle_agent(self, agent_id: str) -> None:
        """Wait for this agent's tasks (bounded: a locked store never holds a request long). Other agents never wait."""
        mine = self._agents.get(agent_id)
        if mine:
            await asyncio.wait(list(mine), timeout=SETTLE_AGENT_S)

    async def settle(self) -> None:
        """Wait for every task in flight now."""
        if self._all:
            await asyncio.gather(*list(self._all), return_exceptions=True)

    def __len__(self) -> int:
        return len(self._all)

    def sessions(self) -> int:
        """Sessions with a task in flight."""
        return len(self._newest)
