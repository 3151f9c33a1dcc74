"""One session record: the registry's ``Session`` is the store's ``SessionRecord`` (declared once) and what is kept beside it."""

from __future__ import annotations

from dataclasses import fields

from memory.session import Session
from memory.sessions import _restored
from memory.store.base import SessionRecord, StoredSession


def test_a_session_is_its_row_and_what_is_kept_beside_it() -> None:
    row = [f.name for f in fields(SessionRecord)]
    assert [f.name for f in fields(Session)][: len(row)] == row
    assert {f.name for f in fields(Session)} - set(row) == {"links", "decisions", "reports", "refs"}


def test_the_row_round_trips_through_the_store_shape() -> None:
    session = Session(
        "a",
        "s",
        parent_id="p",
        created_at=1.0,
        last_seen=2.0,
        requests=3,
        prompt_tokens=400,
        tier="normal",
        window=8000,
        num_ctx=8192,
        calibration=1.1,
        batch_retry_at=500,
        version=2,
        links=("l1", "l2"),
        decisions={"l1": [{"ref_id": "r"}]},
        reports=[{"batch": None}],
        refs={"r": "original"},
    )
    row = session.row()
    assert type(row) is SessionRecord and (row.parent_id, row.num_ctx, row.batch_retry_at, row.version) == ("p", 8192, 500, 2)
    back = _restored(StoredSession(row, session.links, session.decisions, True))
    assert back == Session(**{**vars(session), "reports": [], "refs": {}})  # reports and refs are read back on demand
