"""The Organizer through the keeper: an archive's draft cards per agent, never one titled like an existing card, none for a
sub-agent; accepting writes into the agent's own folder and the next search sees it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory.cards.options import AgentSettings, CardsOptions, WorkspaceOptions
from memory.cards.workspace import workspace_of
from proxy.keep.keeper import Keeper
from proxy.keep.options import NotebookOptions
from tests.summaries.test_organizer import fixed_run


def keeper(tmp_path: Path) -> Keeper:
    agents = {"a": AgentSettings(workspace_root=str(tmp_path / "a")), "b": AgentSettings(workspace_root=str(tmp_path / "b"))}
    return Keeper(
        tmp_path / "ruyi.db",
        NotebookOptions(),
        None,
        workspaces=lambda agent: workspace_of(CardsOptions(recheck_seconds=0), WorkspaceOptions(), agents, agent),
    )


def archive(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"record": {"number": 1, "head": 1, "end": len(messages) - 1, "reason": "requested"}, "messages": messages, "source": "extractive"}


def archived(k: Any, agent_id: str, session_id: str, made: dict[str, Any]) -> None:
    """An archive's proposals made and applied as the keeper does with no summarizer configured."""
    plan = k.archived(agent_id, session_id, made)
    assert plan is not None
    k.apply(agent_id, session_id, plan[1], "extractive")


def test_drafts_belong_to_their_agent_and_accepting_writes_its_folder(tmp_path: Path) -> None:
    k = keeper(tmp_path)
    try:
        archived(k, "a", "s1", archive(fixed_run()))
        assert [d.draft_id for d in k.organizer.drafts.list("a")] == [1]
        assert k.organizer.drafts.list("b") == []
        assert k.organizer.accept("b", 1) is None
        done = k.organizer.accept("a", 1)
        assert done is not None and Path(done.path).parent == tmp_path / "a" / ".ruyi" / "knowledge-cards"  # type: ignore[arg-type]
        keywords, found, _ = k.organizer.search("a", "ImportError parse_config")
        assert "ImportError" in keywords and [c.path for c in found] == [Path(done.path)]  # type: ignore[arg-type]
        assert k.organizer.search("b", "ImportError")[1] == []
    finally:
        k.close()


def test_a_lesson_already_in_a_card_or_from_a_sub_agent_is_not_drafted(tmp_path: Path) -> None:
    k = keeper(tmp_path)
    try:
        title = "ImportError: cannot import name 'parse_config' from 'ap… (pytest): fixed in app.py"
        folder = tmp_path / "a" / ".ruyi" / "knowledge-cards"
        folder.mkdir(parents=True)
        (folder / "mine.md").write_text(f"---\ntitle: {title!r}\n---\nwritten by a person\n")
        archived(k, "a", "s1", archive(fixed_run()))
        assert k.organizer.drafts.list("a") == []
        k.sessions.keep_snapshot("b", "child", "parent", "snapshot")
        assert k.archived("b", "child", archive(fixed_run())) is None
        assert k.organizer.drafts.list("b") == []
    finally:
        k.close()
