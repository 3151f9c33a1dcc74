"""What one agent gets: its workspace root, card folders and rule files (per-agent settings over the shared ones), and the shelf that serves them."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from memory.cards.card import Card
from memory.cards.index import CardIndex
from memory.cards.options import AgentSettings, CardSettings, CardsOptions, WorkspaceOptions
from memory.cards.rules import ProjectRules, Rules


@dataclass(frozen=True)
class AgentWorkspace:
    """One agent's view: everything it may get, and nothing of another project's."""

    agent_id: str
    workspace_root: Path | None
    """None: no project rules for this agent."""
    card_dirs: tuple[Path, ...]
    """Project folder first, then the global one (when set and allowed)."""
    rule_names: tuple[str, ...]
    rules_max_chars: int
    max_inject: int
    max_card_chars: int
    trigger_interval: int
    context_window_steps: int

    @property
    def project_cards(self) -> Path:
        """Where an accepted draft card is written."""
        return self.card_dirs[0]


def settings_of(agents: Mapping[str, AgentSettings], agent_id: str) -> AgentSettings | None:
    """The agent's own settings, else its parent agent's (``project-a/x`` is a sub-agent of ``project-a``)."""
    if agent_id in agents:
        return agents[agent_id]
    return agents.get(agent_id.split("/", 1)[0])


def _path(value: str, base: Path | None) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() or base is None else base / path


def workspace_of(cards: CardsOptions, workspace: WorkspaceOptions, agents: Mapping[str, AgentSettings], agent_id: str) -> AgentWorkspace:
    mine = settings_of(agents, agent_id)
    root_value = mine.workspace_root if mine is not None and mine.workspace_root else workspace.root
    root = Path(root_value).expanduser().absolute() if root_value else None
    project = _path(mine.cards_dir if mine is not None and mine.cards_dir else cards.project_dir, root).absolute()
    folders = [project]
    if cards.global_dir and (mine is None or mine.global_cards):
        folders.append(Path(cards.global_dir).expanduser().absolute())
    return AgentWorkspace(
        agent_id,
        root,
        tuple(folders),
        workspace.rules,
        workspace.rules_max_chars,
        cards.max_inject,
        cards.max_card_chars,
        cards.trigger_interval,
        cards.context_window_steps,
    )


def for_agent(config: CardSettings, agent_id: str) -> AgentWorkspace:
    """The workspace root, card folders and rule files of ``agent_id`` (its ``agents`` entry, or its parent agent's, over
    ``workspace`` and ``cards``)."""
    return workspace_of(config.cards, config.workspace, config.agents, agent_id)


class Shelf:
    """One per app: a card index per set of folders and the project rules per root, shared by every request. Thread-safe."""

    def __init__(self, recheck_seconds: float = 0.0) -> None:
        self.recheck_seconds = recheck_seconds
        self.rules_cache = ProjectRules()
        self._lock = threading.Lock()
        self._indexes: dict[tuple[Path, ...], CardIndex] = {}

    def index(self, folders: Sequence[Path]) -> CardIndex:
        key = tuple(folders)
        with self._lock:
            found = self._indexes.get(key)
            if found is None:
                found = self._indexes[key] = CardIndex(key, self.recheck_seconds)
            return found

    def cards(self, ws: AgentWorkspace) -> CardIndex:
        return self.index(ws.card_dirs)

    def search(self, ws: AgentWorkspace, keywords: Sequence[str], limit: int | None = None) -> list[Card]:
        """The agent's most relevant cards (at most ``max_inject`` unless ``limit`` says)."""
        return self.cards(ws).search(keywords, ws.max_inject if limit is None else limit)

    def rules(self, ws: AgentWorkspace) -> Rules:
        """The agent's project rules; empty when it has no workspace root."""
        if ws.workspace_root is None:
            return Rules()
        return self.rules_cache.read(ws.workspace_root, ws.rule_names, ws.rules_max_chars)
