"""What /ruyi/v1's anchors, notebook, cards and workspace endpoints answer, built once for the API and the CLI.

The API's handlers (proxy/api/) run these off the event loop; ``ruyi anchors|memo|cards`` on the store's file
(keep/clients.py) calls them directly, so a command answers the same JSON locally as from a running Ruyi."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from memory.anchors.anchor import Anchor
from memory.anchors.render import compact, export, full
from memory.forms.render import SessionState
from memory.forms.report import summarize
from memory.notebook.render import injected
from memory.notebook.sections import ENGLISH, SECTIONS
from memory.notebook.sqlite_notebook import Notebook
from proxy.keep.keeper import Keeper
from proxy.keep.organizer import SEARCH_LIMIT


def anchor_view(anchor: Anchor) -> dict[str, Any]:
    """One anchor: its fields, and its compact and full renderings."""
    return {**anchor.view(), "compact": compact(anchor), "full": full(anchor)}


def anchor_created(keeper: Keeper, agent: str, body: Any) -> dict[str, Any]:
    """POST /anchors (raises AnchorError when refused: nothing written)."""
    anchor = keeper.anchors.create(agent, body)
    return {"id": anchor.anchor_id, "anchor": anchor_view(anchor)}


def anchors_listed(keeper: Keeper, agent: str, status: str | None, kind: str | None) -> dict[str, Any]:
    """GET /anchors (``?status=``, ``?type=``)."""
    return {"agent_id": agent, "anchors": [a.view() for a in keeper.anchors.list(agent, status, kind)]}


def anchors_md(keeper: Keeper, agent: str) -> str:
    """GET /anchors.md: an index, then every anchor in full."""
    return export(keeper.anchors.list(agent), agent)


def notebook_view(nb: Notebook, notes: tuple[str, ...] = ()) -> dict[str, Any]:
    """The notebook (the agent's, or a sub-agent's own) as GET /notebook answers it; ``notes``: what a change joined or cut."""
    out: dict[str, Any] = {
        "agent_id": nb.agent_id,
        "scope": "agent" if nb.session_id is None else "sub-agent",
        "version": nb.version,
        "pending": nb.pending,
        "counts": nb.counts(),
        "sections": {name: {"title": SECTIONS[name], "english": ENGLISH[name], "entries": nb.body[name]} for name in SECTIONS},
        "injected": injected(nb.body),
    }
    if nb.session_id is not None:
        out["session_id"] = nb.session_id
    if notes:
        out["notes"] = list(notes)
    return out


def notebook_versions(keeper: Keeper, agent: str, child: str | None) -> dict[str, Any]:
    """GET /notebook/versions."""
    return {"agent_id": agent, **({"session_id": child} if child else {}), "versions": keeper.notebook.versions(agent, child)}


def compaction(after: Notebook | None, how: str, current: Notebook | None) -> tuple[int, dict[str, Any]]:
    """POST /notebook/compact: the new version, or (``after`` None) the ``current`` one unchanged with why."""
    if after is None:
        assert current is not None
        return 409 if how == "stale" else 502, {**notebook_view(current), "compacted": False, "how": how}
    return 200, {**notebook_view(after), "compacted": True, "how": how}


def form_state(keeper: Keeper, agent: str, session_id: str, session: Mapping[str, Any], reports: Sequence[dict[str, Any]]) -> SessionState:
    """What GET /sessions/ID/forms/FORM renders: the agent's memory for the session, its record (``requests``, ``tier``,
    ``tokens``, ``window``) and the totals of its DCP reports."""
    return dataclasses.replace(keeper.state(agent, session_id), session=dict(session), reports=summarize(reports))


def cards_found(keeper: Keeper, agent: str, words: str | None, limit: int = SEARCH_LIMIT) -> dict[str, Any]:
    """GET /cards (``?q=WORDS``): the agent's cards most relevant first (every card without words), the files skipped."""
    keywords, found, skipped = keeper.organizer.search(agent, words, limit)
    folders = keeper.organizer.workspaces(agent).card_dirs
    return {
        "agent_id": agent,
        "query": words,
        "keywords": keywords,
        "folders": [str(f) for f in folders],
        "cards": [c.view(with_body=bool(words)) for c in found],
        "skipped": [{"path": str(p), "reason": why} for p, why in sorted(skipped.items())],
    }


def drafts_listed(keeper: Keeper, agent: str, status: str | None) -> dict[str, Any]:
    """GET /cards/drafts (``?status=``)."""
    return {"agent_id": agent, "drafts": [d.view() for d in keeper.organizer.drafts.list(agent, status)]}


def draft_judged(keeper: Keeper, agent: str, draft_id: int, accept: bool) -> dict[str, Any] | None:
    """POST /cards/drafts/ID/accept|reject (None: no such draft; raises DraftError or OSError when refused)."""
    done = (keeper.organizer.accept if accept else keeper.organizer.reject)(agent, draft_id)
    return None if done is None else {"agent_id": agent, "draft": done.view()}


def workspace_view(keeper: Keeper, agent: str) -> dict[str, Any]:
    """GET /workspace: what the agent's prompts may get (workspace root, card folders, project rules)."""
    ws, rules = keeper.organizer.rules(agent)
    return {
        "agent_id": agent,
        "workspace_root": str(ws.workspace_root) if ws.workspace_root else None,
        "card_dirs": [str(f) for f in ws.card_dirs],
        "rule_names": list(ws.rule_names),
        "rules": {
            "files": [str(f) for f in rules.files],
            "chars": rules.chars,
            "cut": rules.cut,
            "problems": list(rules.problems),
            "text": rules.text,
        },
    }
