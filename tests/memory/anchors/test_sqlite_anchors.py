"""An agent's anchors in a real SQLite file and in PostgreSQL: numbering per agent and type, patches, capture once, isolation."""

from __future__ import annotations

import threading

import pytest

from memory.anchors.anchor import AnchorError
from memory.anchors.capture import definitions
from memory.anchors.sqlite_anchors import AnchorBook
from memory.store.backend import open_database
from memory.store.base import KeeperDatabase
from memory.store.options import StoreOptions

FIELDS = {
    "alternatives": "Postgres",
    "why": "nothing to install",
    "impact": "memory/store",
    "verification": "pytest",
    "rollback": "store.backend: memory",
}


@pytest.fixture
def book(keeper_database: KeeperDatabase) -> AnchorBook:
    """On both backends (SQLite, PostgreSQL)."""
    return AnchorBook(keeper_database)


def test_ids_are_numbered_per_agent_and_type(book: AnchorBook) -> None:
    assert book.create("a", {"type": "D", "title": "Use SQLite", "fields": FIELDS}).anchor_id == "D001"
    assert book.create("a", {"type": "D", "title": "Use WAL", "fields": FIELDS}).anchor_id == "D002"
    assert book.create("a", {"type": "C", "title": "Redact", "status": "pending"}).anchor_id == "C001"
    assert book.create("b", {"type": "D", "title": "Other agent", "fields": FIELDS}).anchor_id == "D001"
    assert [a.anchor_id for a in book.list("a")] == ["C001", "D001", "D002"]
    assert [a.anchor_id for a in book.list("a", status="pending")] == ["C001"] and [a.anchor_id for a in book.list("a", kind="d")] == ["D001", "D002"]


def test_an_active_anchor_without_its_fields_is_refused_and_nothing_is_written(book: AnchorBook) -> None:
    with pytest.raises(AnchorError) as err:
        book.create("a", {"type": "D", "title": "Use SQLite", "fields": {"why": "cheap"}})
    assert err.value.missing == ("alternatives", "impact", "verification", "rollback")
    assert book.list("a") == []


def test_promotion_to_active_applies_the_write_rule(book: AnchorBook) -> None:
    book.create("a", {"type": "D", "title": "Use SQLite", "status": "pending"})
    with pytest.raises(AnchorError):
        book.update("a", "D001", {"status": "active"})
    assert book.get("a", "D001").status == "pending"
    done = book.update("a", "D001", {"status": "active", "fields": FIELDS})
    assert done is not None and done.status == "active" and done.missing == ()
    assert book.update("a", "D009", {"status": "obsolete"}) is None and book.update("b", "D001", {"status": "obsolete"}) is None


def test_a_line_is_captured_once_as_pending_and_never_into_another_agent(book: AnchorBook) -> None:
    found = definitions("[D004] Use SQLite for the default store — why: nothing to install")
    [made] = book.capture("a", "s1", found)
    assert (made.anchor_id, made.status, made.source, made.session_id) == ("D004", "pending", "captured", "s1")
    assert made.missing == ("alternatives", "impact", "verification", "rollback")
    assert book.capture("a", "s2", found) == []
    assert book.list("b") == []
    book.delete("a", "D004")
    assert book.capture("a", "s3", found) == []  # a person deleted it: not captured again


def test_a_stated_id_taken_by_another_anchor_gets_the_next_number(book: AnchorBook) -> None:
    book.create("a", {"type": "D", "title": "Use SQLite", "fields": FIELDS})
    assert book.capture("a", None, definitions("[D001] Use SQLite")) == []  # a restatement
    [other] = book.capture("a", None, definitions("[D001] Use Postgres"))
    assert other.anchor_id == "D002" and other.fields["stated_as"] == "D001"


def test_two_replicas_capturing_the_same_lines_at_once_make_each_anchor_once(book: AnchorBook, store_options: StoreOptions) -> None:
    """Each on its own connection (two processes): changes are serialized, so a line is captured once and numbers stay unique."""
    other = AnchorBook(open_database(store_options))
    text = "\n".join(f"[D{n:03d}] Decision number {n} — why: reason {n}" for n in range(1, 13))
    made: list[list[str]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def capture(on: AnchorBook, extra: int) -> None:
        try:
            start.wait()
            made.append([a.anchor_id for a in on.capture("a", "s", definitions(text))])
            made.append([on.create("a", {"type": "D", "title": f"Made by hand {extra}", "fields": FIELDS}).anchor_id])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=capture, args=(on, i)) for i, on in enumerate((book, other, book, other))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    other.db.close()
    assert errors == []
    ids = [i for batch in made for i in batch]
    assert len(ids) == len(set(ids)) == 12 + 4
    assert sorted(a.anchor_id for a in book.list("a")) == [f"D{n:03d}" for n in range(1, 17)]
