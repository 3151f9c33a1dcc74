"""Where the sections come from, each failing open: the agent's notebook and anchors, its workspace, project rules, knowledge cards."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from memory.anchors.anchor import Anchor
from memory.notebook.render import injected
from proxy.layout.sections import terms

if TYPE_CHECKING:
    from config.schema import Config
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


class Sources:
    """One per pipeline. A source that fails gives nothing, is counted (``failures``) and logged with the request id;
    the request goes on."""

    def __init__(self, config: Config | None) -> None:
        self.config = config
        self.failures: Counter[str] = Counter()
        self._shelf: Any = None

    def _failed(self, what: str, request_id: str) -> None:
        self.failures[what] += 1
        log.warning("layout_source_failed", source=what, request_id=request_id, exc_info=True)

    def memory(self, keeper: Keeper | None, agent_id: str, notebook_chars: int, request_id: str) -> Memory:
        if keeper is None:
            return NO_MEMORY
        try:
            body = keeper.notebook.current(agent_id).body
            return Memory(injected(body, notebook_chars) if notebook_chars else "", tuple(keeper.anchors.list(agent_id)))
        except Exception:  # noqa: BLE001 - fail open: no memory sections this request
            self._failed("memory", request_id)
            return NO_MEMORY

    def workspace(self, agent_id: str, request_id: str) -> Any:
        """The agent's workspace (root, card folders, rule files), or None without the cards room or on failure."""
        if self.config is None or not hasattr(self.config, "cards"):
            return None
        try:
            from memory.cards.workspace import for_agent
            return for_agent(self.config, agent_id)
        except Exception:  # noqa: BLE001 - fail open: no rules and no cards this request
            self._failed("workspace", request_id)
            return None

    def shelf(self) -> Any:
        if self._shelf is None:
            from memory.cards.workspace import Shelf
            self._shelf = Shelf(getattr(getattr(self.config, "cards", None), "recheck_seconds", 0.0))
        return self._shelf

    def rules(self, ws: Any, request_id: str) -> tuple[str, bool]:
        """The project rules under the agent's workspace root (empty without one) and whether they were cut."""
        if ws is None or ws.workspace_root is None:
            return "", False
        try:
            rules = self.shelf().rules(ws)
            return rules.text, bool(rules.cut)
        except Exception:  # noqa: BLE001 - fail open: an unreadable AGENTS.md leaves the rules out
            self._failed("rules", request_id)
            return "", False

    def cards(self, ws: Any, keywords: Sequence[str], request_id: str) -> list[Any]:
        if ws is None or not keywords:
            return []
        try:
            return list(self.shelf().search(ws, keywords))
        except Exception:  # noqa: BLE001 - fail open: a broken card folder leaves the cards out
            self._failed("cards", request_id)
            return []

    def keywords(self, texts: Iterable[str]) -> list[str]:
        """Seed 003's heuristic keywords (CamelCase, snake_case, acronyms, quoted strings) when the cards room is
        there, else plain words."""
        texts = list(texts)
        try:
            from memory.cards.keywords import keywords_from
            return list(keywords_from(texts))
        except ImportError:
            return sorted(terms(texts))
