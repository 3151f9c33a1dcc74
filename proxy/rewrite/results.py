"""What each rewrite step returns: typed values ``steps.Rewrite`` hands to the later steps that need them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from proxy.longctx.archive import Archived
    from proxy.longctx.restart import Restart
    from proxy.rewrite.pruning import Outcome

Messages = list[dict[str, Any]]
Positions = tuple[int, ...]


@dataclass(frozen=True)
class Noted:
    """``note``: the request's canonical messages as the client sent them, and those new in this request (what the
    keeper learns from after the answer)."""

    new: Messages
    all: Messages


@dataclass(frozen=True)
class Restarted:
    """``restart``: the request as its session continues it (from the archive in force, byte for byte), and what a
    person asked for this request."""

    messages: Messages
    requested: str | None = None
    """What a person asked for this request (archive, prune, pass)."""
    restart: Restart | None = None
    """The archive in force and the restarted view of the request (None: none in force, or a person said pass)."""
    decisions: dict[str, Any] = field(default_factory=dict)
    """Session decisions to record before forwarding (a person's request done)."""

    @property
    def positions(self) -> Positions | None:
        """The restarted messages' positions in the client's request (None: as sent)."""
        return self.restart.positions if self.restart is not None else None

    @property
    def archive_number(self) -> int:
        """The number of the archive in force (0: none)."""
        return int(self.restart.archive.get("number", 0)) if self.restart is not None else 0


@dataclass(frozen=True)
class Archiving:
    """``archive``: the request once archived (or as it was), the outcome with it, the archive made, what to prepare ahead."""

    messages: Messages
    outcome: Outcome | None
    """The pruning outcome with what the archive made of it (decisions, size, report): a copy, the one given left as it was."""
    archived: Archived | None = None
    prepared: bool | None = None
    """Whether the archive made found its summary made ahead of need (None: no archive; audit only, timing-dependent)."""
    prepare_until: int | None = None
    """The last position the next archive would replace, when summaries should be prepared up to it."""
    prepare_number: int | None = None
    """The number the next archive would have (its block is counted ahead too)."""
    decisions: dict[str, Any] = field(default_factory=dict)
    """Session decisions to record before forwarding (the session's archives, this one added)."""


@dataclass(frozen=True)
class Recalled:
    """``recall``: the request with a recalled block on its newest input (or as it was), and what recall did."""

    messages: Messages
    outcome: Outcome | None
    """The pruning outcome with the recalled block counted (a copy when it changed)."""
    recall: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Placed:
    """``snapshot`` and ``layout``: the request with what they placed, where each message came from when they placed
    it (None: they did not, the positions before them hold), and the pruning outcome with the layout's sections
    counted (the layout's: a copy when it changed)."""

    messages: Messages
    positions: Positions | None = None
    outcome: Outcome | None = None


@dataclass(frozen=True)
class Fitted:
    """``fit``: the request cut to fit its usable window, and its parts when it cannot fit at all (for the refusal)."""

    messages: Messages
    outcome: Outcome | None
    """The pruning outcome with what was cut (a copy when it changed)."""
    unfit: dict[str, int] | None = None


@dataclass(frozen=True)
class Rewritten:
    """What the rewrite comes to, for building, recording and after the answer: the messages to send, where each came
    from, the pruning outcome (with what every later step added to it), the session decisions of the long-context
    steps, what the keeper learns from, and why it cannot fit when it cannot."""

    messages: Messages
    pruning: Outcome | None = None
    positions: Positions | None = None
    """The messages' positions in the client's request, when messages were removed or added (None: as sent)."""
    decisions: dict[str, Any] = field(default_factory=dict)
    """Session decisions of the long-context steps (a person's request done, an archive): recorded when nothing was pruned."""
    noted: Noted | None = None
    unfit: dict[str, int] | None = None
    num_ctx: int | None = None
    """Ollama's ``num_ctx`` as the layout's sections need it (None: as measured)."""
