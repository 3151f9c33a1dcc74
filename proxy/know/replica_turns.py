"""With replicas sharing the store: a session's turn taken under its lock in the store, its session resolved under it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import structlog

from memory.chain import MessageChain
from memory.chain_index import NeedsStore
from memory.session import Resolution
from memory.sessions import SessionRegistry
from memory.shared import Relocate
from memory.store.base import Store
from proxy.know.calibration import Calibration
from proxy.offload import TURN_WAIT_S, SessionTurns, Turn

log = structlog.get_logger(__name__)
RELOCATE_TRIES = 8
"""With replicas, how often a request follows a session whose tip another process moved before it gives up (fail open)."""


def resolve_shared(
    registry: SessionRegistry,
    store: Store | None,
    turns: SessionTurns,
    calibration: Calibration,
    agent_id: str,
    chain: MessageChain,
    header: str | None,
    stored: bool,
) -> tuple[Resolution, Turn]:
    """The request's session resolved under its lock in the store (taken without the registry's lock, which the
    holder may need), and its turn, which releases the lock when it ends (after the durable write)."""
    if not stored:
        raise NeedsStore(agent_id)
    assert store is not None
    candidate = None
    for _ in range(RELOCATE_TRIES):
        if candidate is None:
            candidate = registry.locate(agent_id, chain, header)  # type: ignore[attr-defined]
        held = store.session_lock(agent_id, candidate) if candidate is not None else None
        if held is not None and not held.acquire(TURN_WAIT_S):  # a holder stuck: go on, as a session's turn does
            log.warning("session_lock_overdue", waited_s=TURN_WAIT_S, session=candidate)
            held = None
        try:
            with registry.lock:  # type: ignore[attr-defined]
                resolution = registry.resolve(agent_id, chain, header, locked=candidate)  # type: ignore[call-arg]
                turn = turns.enter((agent_id, resolution.session.session_id))
                calibration.restore(store.ratios())  # what the other processes observed last
        except BaseException as exc:
            if held is not None:
                held.release()
            if not isinstance(exc, Relocate):
                raise
            candidate = exc.session_id  # another process moved a tip meanwhile: that session's lock instead
            continue
        if held is not None:
            if resolution.session.session_id == candidate:
                turn.release = held.release  # held until the turn ends: after the rewrite and its durable write
            else:
                held.release()  # a new session or a child: no other process knows it yet
        return resolution, turn
    raise RuntimeError(f"no stable session after {RELOCATE_TRIES} tries (replicas keep moving its tip)")


@contextmanager
def session_turn(store: Store | None, turns: SessionTurns, agent_id: str, session_id: str) -> Iterator[None]:
    """A new turn of a session, under its lock in ``store`` (None: the turn alone)."""
    held = store.session_lock(agent_id, session_id) if store is not None else None
    if held is not None and not held.acquire(TURN_WAIT_S):
        log.warning("session_lock_overdue", waited_s=TURN_WAIT_S, session=session_id)
        held = None
    try:
        with turns.enter((agent_id, session_id)):
            yield
    finally:
        if held is not None:
            held.release()
