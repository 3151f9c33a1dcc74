"""Qwen Code (``qwen -p``) driven end to end through Ruyi against a scripted OpenAI chat model: large command outputs,
a sub-agent (its ``task`` tool), then a final answer, in a window small enough that Ruyi prunes and archives. Qwen Code
sends its environment as a first user message and an assistant acknowledgement before the person's request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.agents import harness
from tests.agents.scripted import CHAT_STEPS, FINAL, SUB_RESULT, Scripted, chat_is_subagent

QWEN = harness.BIN / "qwen"
pytestmark = [
    pytest.mark.skipif(not QWEN.exists(), reason="Qwen Code is not installed: `make agents` installs the pinned CLIs into .agents/"),
    pytest.mark.timeout(300),  # a real agent CLI, its own 240 s wait inside
]
REQUEST = "Print the numbers with seq as told, ask a sub-agent to count the lines of notes.txt, then say you are done."
MODEL = "qwen3-coder-plus"
WINDOW = 32_000
SETTINGS = {
    "general": {"enableAutoUpdate": False, "checkpointing": {"enabled": False}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "security": {"auth": {"selectedType": "openai"}},
}
"""Qwen Code's settings (v2 layout, bundled docs/configuration/settings.md): no update check, no usage statistics, no
telemetry, the OpenAI-compatible auth that reads OPENAI_BASE_URL / OPENAI_API_KEY."""


async def run_qwen(url: str, work: Path, home: Path) -> tuple[int, str]:
    (home / ".qwen").mkdir(parents=True, exist_ok=True)
    (home / ".qwen" / "settings.json").write_text(json.dumps(SETTINGS))
    env = {"HOME": str(home), "OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk-agents-suite", "OPENAI_MODEL": MODEL}
    return await harness.run_agent([str(QWEN), "-p", REQUEST, "--yolo", "--model", MODEL], work, env)


async def qwen_session(aiohttp_server: Any, tmp_path: Path, ruyi: bool = True) -> dict[str, Any]:
    scripted, url, ruyi_url = await harness.start(aiohttp_server, tmp_path, "openai", {"qwen*": WINDOW}, ruyi)
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    (work / "notes.txt").write_text("one\ntwo\nthree\n")
    code, output = await run_qwen(url, work, home)
    return {"code": code, "output": output, "scripted": scripted, "sessions": await harness.sessions(ruyi_url) if ruyi else []}


_RUN: dict[str, Any] = {}


@pytest.fixture
async def qwen_run(aiohttp_server: Any, tmp_path: Path) -> dict[str, Any]:
    """One run of the agent for the whole module (everything it left is read before its servers stop)."""
    if not _RUN:
        _RUN.update(await qwen_session(aiohttp_server, tmp_path))
    return _RUN


def main_bodies(scripted: Scripted) -> list[dict[str, Any]]:
    return [b for b in scripted.received if b.get("tools") and not chat_is_subagent(b)]


async def test_qwen_code_completes_through_ruyi_with_a_valid_history(qwen_run: dict[str, Any]) -> None:
    assert qwen_run["code"] == 0 and FINAL in qwen_run["output"], qwen_run["output"][-3000:]
    scripted: Scripted = qwen_run["scripted"]
    main = main_bodies(scripted)
    assert CHAT_STEPS + 1 <= len(main) <= CHAT_STEPS + 3, f"{len(main)} main requests"
    for body in scripted.received:
        assert harness.chat_problems(body) == [], harness.chat_problems(body)
    assert any("<ruyi-archive" in json.dumps(b) for b in main), "the conversation was archived"
    assert any(SUB_RESULT in json.dumps(b["messages"]) for b in main), "the sub-agent's result came back"


async def test_qwen_code_is_one_ruyi_session(qwen_run: dict[str, Any]) -> None:
    main = main_bodies(qwen_run["scripted"])
    busiest = max(qwen_run["sessions"], key=lambda s: s["requests"])
    assert busiest["requests"] == len(main), (busiest, len(main))


async def test_qwen_code_keeps_the_request_verbatim_in_every_request(qwen_run: dict[str, Any]) -> None:
    main = main_bodies(qwen_run["scripted"])
    missing = [n for n, b in enumerate(main) if REQUEST not in json.dumps(b["messages"])]
    assert missing == [], f"the person's request is missing from main requests {missing} of {len(main)}"


async def test_qwen_code_sub_agent_is_linked_to_its_parent(qwen_run: dict[str, Any]) -> None:
    sessions = qwen_run["sessions"]
    busiest = max(sessions, key=lambda s: s["requests"])
    assert any(s["parent_id"] == busiest["session_id"] for s in sessions), sessions
