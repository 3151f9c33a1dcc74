"""The keeper's tasks after answers: a session's in the order they came, other sessions beside them, waits bounded."""

from __future__ import annotations

import asyncio

from proxy.keep.answer_tasks import AnswerTasks, Work


async def test_a_sessions_work_runs_in_order_and_another_sessions_beside_it() -> None:
    tasks, done = AnswerTasks(), []
    go = asyncio.Event()

    def work(name: str, slow: bool = False) -> Work:
        async def run(after: asyncio.Task[None] | None) -> None:
            if after is not None:
                await asyncio.wait([after])
            if slow:
                await go.wait()
            done.append(name)

        return run

    first = tasks.start("a", "s", work("s1", slow=True))
    tasks.start("a", "s", work("s2"))
    other = tasks.start("a", "t", work("t1"))
    await other  # another session never waits for this one's slow work
    assert done == ["t1"] and len(tasks) == 2 and tasks.sessions() == 1
    go.set()
    await tasks.settle()
    assert done == ["t1", "s1", "s2"] and first.done()
    assert len(tasks) == 0 and tasks.sessions() == 0


async def test_a_failed_task_does_not_stop_the_next_and_an_agents_wait_is_bounded() -> None:
    tasks, done = AnswerTasks(), []

    async def fails(after: asyncio.Task[None] | None) -> None:
        raise ValueError("the store broke")

    async def after_it(after: asyncio.Task[None] | None) -> None:
        if after is not None:
            await asyncio.wait([after])
        done.append("next")

    async def never(after: asyncio.Task[None] | None) -> None:
        await asyncio.Event().wait()

    broken = tasks.start("a", "s", fails)
    await tasks.start("a", "s", after_it)
    assert done == ["next"] and isinstance(broken.exception(), ValueError)
    stuck = tasks.start("b", "s", never)
    await asyncio.wait_for(tasks.settle_agent("b"), timeout=10)  # returns after its bound (1 s), the task still there
    assert not stuck.done() and len(tasks) == 1
    stuck.cancel()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert len(tasks) == 0
