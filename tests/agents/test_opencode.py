"""opencode (``opencode run``) driven end to end through Ruyi against a scripted OpenAI chat model (a custom
OpenAI-compatible provider at Ruyi): large command outputs, a sub-agent (its ``task`` tool), then a final answer, in a
window small enough that Ruyi prunes and archives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.agents import harness
from tests.agents.scripted import CHAT_STEPS, FINAL, SUB_RESULT, Scripted, chat_is_subagent

OPENCODE = harness.BIN / "opencode"
pytestmark = [
    pytest.mark.skipif(not OPENCODE.exists(), reason="opencode is not installed: `make agents` installs the pinned CLIs into .agents/"),
    pytest.mark.timeout(300),  # a real agent CLI, its own 240 s wait inside
]
REQUEST = "Print the numbers with seq as told, ask a sub-agent to count the lines of notes.txt, then say you are done."
MODEL = "qwen3-coder-plus"
WINDOW = 22_000
QUIET = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_AUTOCOMPACT": "1",
    "OPENCODE_DISABLE_SHARE": "1",
}
"""No update check, no models.dev fetch, no plugin or LSP download: nothing but 127.0.0.1 is reached."""


def config(url: str, window: int = WINDOW) -> dict[str, Any]:
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"ruyi/{MODEL}",
        "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny"},
        "provider": {
            "ruyi": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Ruyi",
                "options": {"baseURL": url, "apiKey": "sk-agents-suite"},
                "models": {MODEL: {"name": "Qwen3 Coder", "tool_call": True, "limit": {"context": window, "output": 4000}}},
            }
        },
    }


async def run_opencode(url: str, work: Path, home: Path, window: int = WINDOW) -> tuple[int, str]:
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "OPENCODE_CONFIG_CONTENT": json.dumps(config(url, window)),
        **QUIET,
    }
    return await harness.run_agent([str(OPENCODE), "run", "-m", f"ruyi/{MODEL}", REQUEST], work, env)


async def opencode_session(aiohttp_server: Any, tmp_path: Path, ruyi: bool = True) -> dict[str, Any]:
    scripted, url, ruyi_url = await harness.start(aiohttp_server, tmp_path, "openai", {"qwen*": WINDOW}, ruyi)
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    (work / "notes.txt").write_text("one\ntwo\nthree\n")
    code, output = await run_opencode(url, work, home)
    return {"code": code, "output": output, "scripted": scripted, "sessions": await harness.sessions(ruyi_url) if ruyi else []}


_RUN: dict[str, Any] = {}


@pytest.fixture
async def opencode_run(aiohttp_server: Any, tmp_path: Path) -> dict[str, Any]:
    """One run of the agent for the whole module (everything it left is read before its servers stop)."""
    if not _RUN:
        _RUN.update(await opencode_session(aiohttp_server, tmp_path))
    return _RUN


def main_bodies(scripted: Scripted) -> list[dict[str, Any]]:
    return [b for b in scripted.received if b.get("tools") and not chat_is_subagent(b)]


async def test_opencode_completes_through_ruyi_with_a_valid_history(opencode_run: dict[str, Any]) -> None:
    assert opencode_run["code"] == 0 and FINAL in opencode_run["output"], opencode_run["output"][-3000:]
    scripted: Scripted = opencode_run["scripted"]
    main = main_bodies(scripted)
    assert CHAT_STEPS + 1 <= len(main) <= CHAT_STEPS + 3, f"{len(main)} main requests"
    for body in scripted.received:
        assert harness.chat_problems(body) == [], harness.chat_problems(body)
    assert any("<ruyi-archive" in json.dumps(b) for b in main), "the conversation was archived"
    assert any(SUB_RESULT in json.dumps(b["messages"]) for b in main), "the sub-agent's result came back"


async def test_opencode_is_one_ruyi_session(opencode_run: dict[str, Any]) -> None:
    main = main_bodies(opencode_run["scripted"])
    busiest = max(opencode_run["sessions"], key=lambda s: s["requests"])
    assert busiest["requests"] == len(main), (busiest, len(main))


async def test_opencode_keeps_the_request_verbatim_in_every_request(opencode_run: dict[str, Any]) -> None:
    main = main_bodies(opencode_run["scripted"])
    missing = [n for n, b in enumerate(main) if REQUEST not in json.dumps(b["messages"])]
    assert missing == [], f"the person's request is missing from main requests {missing} of {len(main)}"


async def test_opencode_sub_agent_is_linked_to_its_parent(opencode_run: dict[str, Any]) -> None:
    sessions = opencode_run["sessions"]
    busiest = max(sessions, key=lambda s: s["requests"])
    assert any(s["parent_id"] == busiest["session_id"] for s in sessions), sessions
