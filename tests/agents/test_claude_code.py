"""Claude Code (``claude -p``) driven end to end through Ruyi against a scripted model: large command outputs, a
sub-agent, then a final answer, in a window small enough that Ruyi prunes and archives. What reached the model is
checked: the person's request verbatim in every main request, a valid history every time, one Ruyi session for the
conversation, an archive, the sub-agent linked to its parent."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from proxy.http.app import make_app
from proxy.http.exposure import server_options
from proxy.rewrite.steps import default_steps
from tests.agents.scripted import FINAL, SUB_RESULT, Scripted
from tests.agents.scripted import make_app as scripted_app
from tests.anthropic_shape import problems
from tests.conftest import base_url, config_for

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = ROOT / ".agents" / "node_modules" / ".bin" / "claude"
pytestmark = [
    pytest.mark.skipif(not CLAUDE.exists(), reason="Claude Code is not installed: `make agents` installs the pinned CLIs into .agents/"),
    pytest.mark.timeout(300),  # a real agent CLI, its own 240 s wait inside
]
REQUEST = "Print the numbers with seq as told, ask a sub-agent to count the lines of notes.txt, then say you are done."
WINDOW = 64_000
"""Claude Code asks for 32,000 answer tokens and sends about 23,000 of system prompt and tools: 32,000 usable, so a few
outputs of about 2,000 tokens reach the archive tier."""


async def run_claude(proxy_url: str, workdir: Path, home: Path) -> tuple[int, str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": proxy_url,
        "ANTHROPIC_API_KEY": "sk-ant-agents-suite",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "IS_SANDBOX": "1",
        "NO_COLOR": "1",
    }
    proc = await asyncio.create_subprocess_exec(
        str(CLAUDE),
        "-p",
        REQUEST,
        "--model",
        "claude-sonnet-4-5",
        "--allowedTools",
        "Bash,Read,Task,Agent",
        cwd=workdir,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 240)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(errors="replace")


_RUN: dict[str, Any] = {}


@pytest.fixture
async def claude_run(aiohttp_server: Any, tmp_path: Path) -> dict[str, Any]:
    """One run of Claude Code for the whole module (everything it left is read before its servers stop)."""
    if not _RUN:
        _RUN.update(await claude_session(aiohttp_server, tmp_path))
    return _RUN


async def claude_session(aiohttp_server: Any, tmp_path: Path) -> dict[str, Any]:
    scripted = Scripted()
    model = await aiohttp_server(scripted_app(scripted))
    cfg = config_for(base_url(model), "anthropic", window={"models": {"claude-*": WINDOW}}, store={"data_dir": str(tmp_path / "ruyi")})
    app: web.Application = make_app(cfg, default_steps(cfg), probe_upstream=False)
    proxy = await aiohttp_server(app, **server_options(cfg))
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    (work / "notes.txt").write_text("one\ntwo\nthree\n")
    code, output = await run_claude(base_url(proxy), work, home)
    async with aiohttp.ClientSession() as http:
        async with http.get(base_url(proxy) + "/ruyi/v1/agents") as resp:
            agents = (await resp.json())["agents"]
        sessions: list[dict[str, Any]] = []
        for agent in agents:
            async with http.get(base_url(proxy) + "/ruyi/v1/sessions", headers={"X-Ruyi-Agent": agent["agent_id"]}) as resp:
                sessions += (await resp.json())["sessions"]
    return {"code": code, "output": output, "scripted": scripted, "sessions": sessions}


async def test_claude_code_completes_through_ruyi_with_a_valid_history(claude_run: dict[str, Any]) -> None:
    assert claude_run["code"] == 0 and FINAL in claude_run["output"], claude_run["output"][-2000:]
    scripted: Scripted = claude_run["scripted"]
    main = scripted.main_bodies(REQUEST[:40])
    assert 13 <= len(main) <= 16, f"{len(main)} main requests"  # the script's steps and the final answer (no loop)
    for body in scripted.received:
        assert problems(body) == [], problems(body)  # no malformed history ever reached the model
    for body in main:
        assert REQUEST in json.dumps(body["messages"]), "the person's request, verbatim, in every main request"
    assert any("<ruyi-archive" in json.dumps(b) for b in main), "the conversation was archived"
    assert any(SUB_RESULT in json.dumps(b["messages"]) for b in main), "the sub-agent's result came back"


async def test_claude_code_is_one_ruyi_session(claude_run: dict[str, Any]) -> None:
    scripted: Scripted = claude_run["scripted"]
    main = scripted.main_bodies(REQUEST[:40])
    busiest = max(claude_run["sessions"], key=lambda s: s["requests"])
    assert busiest["requests"] == len(main), (busiest, len(main))


async def test_claude_codes_sub_agent_is_linked_to_its_parent(claude_run: dict[str, Any]) -> None:
    sessions = claude_run["sessions"]
    busiest = max(sessions, key=lambda s: s["requests"])
    assert any(s["parent_id"] == busiest["session_id"] for s in sessions)
