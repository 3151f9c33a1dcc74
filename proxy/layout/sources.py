"""Where the sections come from, each failing open: the agent's notebook and anchors, its workspace, project rules, knowledge cards."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from memory.anchors.anchor import Anchor
from memory.cards.card import Card
from memory.cards.keywords import keywords_from
from memory.cards.workspace import AgentWorkspace, Shelf, for_agent
from memory.notebook.render import injected

if TYPE_CHECKING:
    from memory.cards.options import CardSettings
    from proxy.context import RequestContext
    from proxy.keep.keeper import Keeper

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Memory:
    """What the agent keeps, as the layout reads it: the notebook's injected text and every anchor."""

    notebook: str
    anchors: tuple[Anchor, ...]

    @property
    def notebook_lines(self) -> list[str]:
        return [line for line in self.notebook.splitlines() if line.startswith("- ")]

    @property
    def active(self) -> list[str]:
        return sorted(a.anchor_id for a in self.anchors if a.status == "active")


NO_MEMORY = Memory("", ())
WORKSPACES_KEPT = 4096
"""Agents whose workspace is remembered (the oldest forgotten first)."""
UNINJECTED = ("ruyi", "proposed")
"""Notebook entries the layout leaves out: Ruyi's own dynamic-pool lines (one per prune batch and archive) and proposals
no person accepted yet; they are in the API and ``ruyi memo``, and a prompt changes only with what a person or agent kept."""


class Sources:
    """One per pipeline. A source that fails gives nothing, is counted (``failures``) and logged with the request id;
    the request goes on."""

    def __init__(self, config: CardSettings | None) -> None:
        self.config = config
        self.failures: Counter[str] = Counter()
        self._workspaces: dict[str, AgentWorkspace] = {}
        self._lock = threading.Lock()
        self.shelf = Shelf(config.cards.recheck_seconds if config is not None else 0.0)
        """Used without a keeper (offline); the proxy's keeper holds the app's one shelf, shared with the cards API."""

    def _shelf(self, ctx: RequestContext) -> Shelf:
        keeper = ctx.keeper
        return keeper.shelf if keeper is not None and isinstance(getattr(keeper, "shelf", None), Shelf) else self.shelf

    def _failed(self, what: str, ctx: RequestContext) -> None:
        """Counted here, named in the request's access event (``failed_steps``) and warned."""
        self.failures[what] += 1
        ctx.facts.setdefault("failed_steps", []).append(f"layout_{what}")
        log.warning("layout_source_failed", source=what, request_id=ctx.request_id, exc_info=True)

    def memory(self, keeper: Keeper | None, agent_id: str, notebook_chars: int, ctx: RequestContext, child: str | None = None) -> Memory:
        """The notebook's injected text (a sub-agent's own, ``child``, never its parent's as its own) and the anchors."""
        if keeper is None:
            return NO_MEMORY
        try:
            notebook = keeper.notebook.current(agent_id, child) if child is not None else keeper.current_notebook(agent_id)
            body = {name: [e for e in entries if e.get("by") not in UNINJECTED] for name, entries in notebook.body.items()}
            return Memory(injected(body, notebook_chars) if notebook_chars else "", tuple(keeper.anchor_list(agent_id)))
        except Exception:  # noqa: BLE001 - fail open: no memory sections this request
            self._failed("memory", ctx)
            return NO_MEMORY

    def workspace(self, agent_id: str, ctx: RequestContext) -> AgentWorkspace | None:
        """The agent's workspace (root, card folders, rule files; its own settings over the shared ones), None on failure."""
        if self.config is None:
            return None
        with self._lock:
            known = self._workspaces.get(agent_id)
        if known is not None:
            return known
        try:
            found = for_agent(self.config, agent_id)  # the config never changes: worked out once per agent
            with self._lock:
                self._workspaces[agent_id] = found
                if len(self._workspaces) > WORKSPACES_KEPT:
                    self._workspaces.pop(next(iter(self._workspaces)))
            return found
        except Exception:  # noqa: BLE001 - fail open: no rules and no cards this request
            self._failed("workspace", ctx)
            return None

    def rules(self, ws: AgentWorkspace | None, ctx: RequestContext) -> str:
        """The project rules under the agent's workspace root (empty without one; cut with a note past its budget)."""
        if ws is None or ws.workspace_root is None:
            return ""
        try:
            return self._shelf(ctx).rules(ws).text  # a file it could not read is named in a warning once, by the cards room
        except Exception:  # noqa: BLE001 - fail open: an unreadable AGENTS.md leaves the rules out
            self._failed("rules", ctx)
            return ""

    def cards(self, ws: AgentWorkspace | None, keywords: Callable[[], Sequence[str]], ctx: RequestContext) -> list[Card]:
        """The agent's most relevant cards (a malformed one is skipped by the index, with a warning naming it); the
        keywords are worked out only when the agent has cards."""
        if ws is None:
            return []
        try:
            shelf = self._shelf(ctx)
            if not shelf.cards(ws).cards():
                return []
            return shelf.search(ws, keywords())
        except Exception:  # noqa: BLE001 - fail open: a broken card folder leaves the cards out
            self._failed("cards", ctx)
            return []

    @staticmethod
    def keywords(texts: Iterable[str]) -> list[str]:
        """Seed 003's heuristic keywords: CamelCase and snake_case identifiers, code identifiers, acronyms, quoted strings."""
        return keywords_from(texts)
