"""The layout's options (config ``layout:``): the mode, metadata, the core template, the budgets of each section."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from memory.cards.options import CardSettings
from proxy.keep.pending import REMEMBER_WAIT_S
from proxy.know.options import WindowOptions

LayoutMode = Literal["off", "append", "full"]
MODES: tuple[str, ...] = ("off", "append", "full")


@dataclass(frozen=True)
class LayoutOptions:
    """Seed 003's sections, added to a request without breaking the provider's prompt cache."""

    mode: LayoutMode = "append"
    """``off``: Ruyi adds nothing (no notebook, anchors, rules, cards, snapshot, metadata). ``append``: the client's
    messages as sent, with only the sections that have content for this agent and session (its system part ends
    with the stable ones; the newest user or tool message carries the per-request block). ``full``: the system part
    built in the seed's order (task, core template with the client's system prompt inside, notebook, rules), then the
    conversation as sent, metadata and cards in the per-request block."""
    metadata: bool = False
    """Add the metadata section (time, workspace root, agent and parent, model, context usage and tier) to every request's
    trailing block. Always on in ``full``."""
    core_template: str = ""
    """``full``: the core template (section 2), the client's own system prompt verbatim inside it where it says
    ``{client_system}`` (after it when it does not say so). Empty: the client's system prompt alone."""
    notebook_chars: int = 1800
    """Most characters of the notebook in the stable part."""
    anchors_max: int = 8
    """Most anchors in the stable part: active constraints always, then active anchors that share words with the
    session's task and latest messages, most shared first."""
    anchors_chars: int = 2000
    """Most characters of the anchors in the stable part (constraints first)."""
    delta_chars: int = 600
    """Most characters of the delta (memory changed since the stable part was built) in the per-request block."""
    reminder: bool = True
    """After an archive, the stable part carries the session's compact form and the seed's yellow-light reminder that
    the context has room again (so the model does not rush to wrap up)."""
    memory_wait_s: float = REMEMBER_WAIT_S
    """Longest an archiving request waits (in a worker thread) for what its session's earlier answers taught the
    keeper (local work, milliseconds), so that its stable part is the same bytes however fast the keeper went; past
    it the archive goes with what the keeper has (``memory.archives_unsettled`` in GET /ruyi/v1/stats)."""

    def check(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        budgets = (self.notebook_chars, self.anchors_chars, self.delta_chars)
        if self.anchors_max < 0 or any(n < 0 for n in budgets) or self.memory_wait_s < 0:
            raise ValueError("anchors_max, memory_wait_s and the *_chars budgets must be >= 0")


class LayoutSettings(CardSettings, Protocol):
    """The config sections the layout reads besides its own: the agents' workspaces and cards, the window."""

    @property
    def window(self) -> WindowOptions: ...
