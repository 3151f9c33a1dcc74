"""The options of knowledge cards, project rules and per-agent workspaces (``cards``, ``workspace``, ``agents`` in the config)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CardsOptions:
    """Knowledge cards (Lite RAG, seed 003): Markdown files with YAML front matter, looked up by keywords."""

    project_dir: str = "./.ruyi/knowledge-cards/"
    """The project's cards; a relative path is taken from the agent's workspace root when it has one, else from the folder
    Ruyi runs in. An agent's ``cards_dir`` (``agents``) replaces it."""
    global_dir: str | None = None
    """Cards every agent may get, looked up after the project's (``~/.ruyi/knowledge-cards/``, say); null: none."""
    trigger_interval: int = 1
    """Cards are looked up every this many steps (a step: a tool call)."""
    context_window_steps: int = 5
    """Keywords come from the last this many steps."""
    max_inject: int = 3
    """The most cards one request gets, most relevant first."""
    max_card_chars: int = 2000
    """One card's injected text is cut to this many characters (a note says where the rest is)."""
    recheck_seconds: float = 2.0
    """The folders' listings and files' times are looked at again at most this often (a changed file is read again then)."""

    def check(self) -> None:
        if self.trigger_interval < 1 or self.context_window_steps < 1:
            raise ValueError("trigger_interval and context_window_steps must be at least 1")
        if not 0 <= self.max_inject <= 20:
            raise ValueError(f"max_inject must be between 0 and 20, got {self.max_inject}")
        if self.max_card_chars < 200:
            raise ValueError("max_card_chars must be at least 200")
        if self.recheck_seconds < 0:
            raise ValueError("recheck_seconds must be >= 0")


@dataclass(frozen=True)
class WorkspaceOptions:
    """The project an agent works in: its rule files (AGENTS.md) are added to its prompts."""

    root: str | None = None
    """The project's folder; null: no project rules (agents that read AGENTS.md themselves need not get it twice). An
    agent's ``workspace_root`` (``agents``) replaces it."""
    rules: tuple[str, ...] = ("AGENTS.md",)
    """Rule files looked for under the root, nearest the root first (add CLAUDE.md for agents that do not read it)."""
    rules_max_chars: int = 8000
    """The rules' text is cut to this many characters, with a note saying so and naming the files."""

    def check(self) -> None:
        if not self.rules or any(not n or "/" in n or "\\" in n for n in self.rules):
            raise ValueError("rules must name at least one file (AGENTS.md, CLAUDE.md), names without folders")
        if self.rules_max_chars < 200:
            raise ValueError("rules_max_chars must be at least 200")


@dataclass(frozen=True)
class AgentSettings:
    """What one agent (and its sub-agents, ``agent/x``) uses instead of the shared settings."""

    workspace_root: str | None = None
    """The agent's project folder (replaces ``workspace.root``)."""
    cards_dir: str | None = None
    """The agent's cards folder (replaces ``cards.project_dir``; a relative path is taken from its workspace root)."""
    global_cards: bool = True
    """false: the agent gets none of ``cards.global_dir``."""


class CardSettings(Protocol):
    """The config sections an agent's workspace is worked out from (the whole config has them)."""

    @property
    def cards(self) -> CardsOptions: ...
    @property
    def workspace(self) -> WorkspaceOptions: ...
    @property
    def agents(self) -> Mapping[str, AgentSettings]: ...
