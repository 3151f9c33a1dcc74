"""The Organizer (seed 003) beside the request path: draft cards from each archive, a person's verdict on them, an agent's cards searched."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from memory.cards.card import Card, card_text, write_card
from memory.cards.keywords import keywords_from
from memory.cards.rules import Rules
from memory.cards.sqlite_drafts import CardDrafts, Draft
from memory.cards.workspace import AgentWorkspace, Shelf
from memory.store.sqlite_database import Database
from summaries.organizer import draft_cards

log = structlog.get_logger(__name__)
SEARCH_LIMIT = 20
"""The most cards a person's search lists (a request gets at most ``cards.max_inject``)."""
LIST_LIMIT = 1000
"""The most cards a listing (no words) shows."""


class Organizer:
    """Per agent, isolated: its drafts in the store, its cards and rules from its own workspace (``for_agent``)."""

    def __init__(
        self,
        db: Database,
        workspaces: Callable[[str], AgentWorkspace],
        shelf: Shelf,
        clock: Callable[[], float] = time.time,
        redact: Callable[[str], str] = lambda s: s,
    ) -> None:
        self.drafts = CardDrafts(db, clock, redact)
        self.workspaces = workspaces
        self.shelf = shelf
        self._clock = clock

    def drafted(self, messages: Sequence[dict[str, Any]]) -> list[tuple[str, str, tuple[str, ...], str]]:
        """The extractive draft cards for an archive's turns, as (key, title, tags, body), for ``propose``."""
        return [(d.key, d.title, d.tags, d.body) for d in draft_cards(messages)]

    def propose(self, agent_id: str, session_id: str, drafts: Sequence[tuple[str, str, Sequence[str], str]]) -> list[Draft]:
        """Draft cards for what an archive's turns established (extractive, or the summarizer's), kept as proposed (never
        written into a cards folder until a person accepts one; never one proposed before, rejected, or titled like a card
        the agent has)."""
        if not drafts:
            return []
        try:
            known = [c.title for c in self.shelf.cards(self.workspaces(agent_id)).cards()]
        except OSError:
            known = []
        return self.drafts.propose(agent_id, session_id, drafts, known)

    def accept(self, agent_id: str, draft_id: int) -> Draft | None:
        """Write the draft as a card file in the agent's project cards folder (never over a file) and mark it accepted."""
        ws = self.workspaces(agent_id)
        folder = ws.project_cards
        when = dt.datetime.fromtimestamp(self._clock(), dt.UTC)

        def write(draft: Draft) -> Path:
            return write_card(folder, draft.title, card_text(draft.title, draft.tags, draft.body, agent_id, when))

        done = self.drafts.accept(agent_id, draft_id, write)
        if done is not None:
            log.info("card_draft_accepted", agent_id=agent_id, draft=draft_id, path=done.path)
            self.shelf.cards(ws).refresh()  # searched at once, whatever cards.recheck_seconds says
        return done

    def reject(self, agent_id: str, draft_id: int) -> Draft | None:
        return self.drafts.reject(agent_id, draft_id)

    def search(self, agent_id: str, words: str | None, limit: int = SEARCH_LIMIT) -> tuple[list[str], list[Card], dict[Path, str]]:
        """A person's search of the agent's cards: the keywords read from ``words`` (each word, and the identifiers and
        quoted strings in them), the cards found (every card when no words), and the files skipped with why."""
        index = self.shelf.cards(self.workspaces(agent_id))
        if not words or not words.strip():
            return [], index.cards()[:LIST_LIMIT], index.skipped_files()
        keywords = list(dict.fromkeys([*keywords_from([words]), *words.split()]))
        return keywords, index.search(keywords, limit), index.skipped_files()

    def rules(self, agent_id: str) -> tuple[AgentWorkspace, Rules]:
        ws = self.workspaces(agent_id)
        return ws, self.shelf.rules(ws)
