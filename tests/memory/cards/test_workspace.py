"""Per-agent settings: an agent's root and card folders over the shared ones, a sub-agent sharing its agent's, no agent reaching another's."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.load import load_config
from config.validate import ConfigError
from memory.cards.workspace import Shelf, for_agent


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def config_file(tmp_path: Path, text: str) -> Path:
    return write(tmp_path / "ruyi.yaml", text)


def test_each_agent_gets_its_own_projects_rules_and_cards_and_never_anothers(tmp_path: Path) -> None:
    a, b = tmp_path / "project-a", tmp_path / "project-b"
    write(a / "AGENTS.md", "rules of A")
    write(b / "AGENTS.md", "rules of B")
    write(a / ".ruyi" / "knowledge-cards" / "a.md", "---\ntitle: Deploy checklist\n---\nA's deploy\n")
    write(b / "docs" / "cards" / "b.md", "---\ntitle: Deploy checklist\n---\nB's deploy\n")
    write(tmp_path / "global" / "g.md", "---\ntitle: Deploy basics\n---\nfor all\n")
    config = load_config(
        config_file(
            tmp_path,
            f"""
cards: {{global_dir: {tmp_path / "global"}}}
agents:
  agent-a: {{workspace_root: {a}}}
  agent-b: {{workspace_root: {b}, cards_dir: docs/cards, global_cards: false}}
""",
        )
    )
    shelf = Shelf()
    ws_a, ws_b = for_agent(config, "agent-a"), for_agent(config, "agent-b")
    assert ws_a.card_dirs == (a / ".ruyi" / "knowledge-cards", tmp_path / "global")
    assert ws_b.card_dirs == (b / "docs" / "cards",) and ws_b.project_cards == b / "docs" / "cards"
    assert shelf.rules(ws_a).text.endswith("rules of A") and "rules of B" not in shelf.rules(ws_a).text
    assert shelf.rules(ws_b).text.endswith("rules of B") and "rules of A" not in shelf.rules(ws_b).text
    assert [c.body.strip() for c in shelf.search(ws_a, ["deploy"])] == ["A's deploy", "for all"]
    assert [c.body.strip() for c in shelf.search(ws_b, ["deploy"])] == ["B's deploy"]


def test_a_sub_agent_shares_its_agents_settings_and_others_get_the_shared_ones(tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path, f"workspace: {{root: {tmp_path}}}\nagents: {{agent-a: {{workspace_root: /src/a}}}}\n"))
    assert for_agent(config, "agent-a/reviewer").workspace_root == Path("/src/a")
    assert for_agent(config, "someone-else").workspace_root == tmp_path
    assert for_agent(config, "someone-else").card_dirs == (tmp_path / ".ruyi" / "knowledge-cards",)


def test_without_a_workspace_root_there_are_no_rules(tmp_path: Path) -> None:
    ws = for_agent(load_config(None, {}), "default")
    assert ws.workspace_root is None and Shelf().rules(ws).text == ""
    assert ws.card_dirs == (Path("./.ruyi/knowledge-cards").absolute(),) and ws.max_inject == 3


def test_the_same_folders_share_one_index(tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path, f"workspace: {{root: {tmp_path}}}\n"))
    shelf = Shelf()
    assert shelf.cards(for_agent(config, "a")) is shelf.cards(for_agent(config, "b"))


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("agents: {'bad agent': {workspace_root: /x}}", "(top level)"),
        ("agents: {a: {workspace: /x}}", "agents.a.workspace"),
        ("agents: [a]", "agents"),
        ("workspace: {rules: []}", "workspace"),
        ("cards: {max_inject: -1}", "cards"),
    ],
)
def test_bad_settings_stop_start_up_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(config_file(tmp_path, text + "\n"))
    assert err.value.key == key
