"""Codex (``codex exec``) driven end to end through Ruyi against a scripted model speaking the Responses API, with a
custom provider pointing at Ruyi: it completes, Ruyi measures and rewrites its requests (one session named from Codex's
own id, archived as it grows), and no malformed history (a call without its output, an output without its call) reaches the model."""

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
from tests.agents.scripted import CODEX_STEPS, FINAL, Scripted
from tests.agents.scripted import make_app as scripted_app
from tests.conftest import base_url, config_for

ROOT = Path(__file__).resolve().parents[2]
CODEX = ROOT / ".agents" / "node_modules" / ".bin" / "codex"
pytestmark = [
    pytest.mark.skipif(not CODEX.exists(), reason="Codex is not installed: `make agents` installs the pinned CLIs into .agents/"),
    pytest.mark.timeout(300),  # a real agent CLI, its own 240 s wait inside
]
REQUEST = "Print the numbers with seq as told, then say you are done."
CONFIG = """model = "gpt-5-codex"
model_provider = "ruyi"

[model_providers.ruyi]
name = "Ruyi"
base_url = "{url}/v1"
env_key = "RUYI_AGENTS_KEY"
wire_api = "responses"
"""


async def run_codex(proxy_url: str, workdir: Path, home: Path) -> tuple[int, str]:
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text(CONFIG.format(url=proxy_url))
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "RUYI_AGENTS_KEY": "sk-agents-suite",
        "NO_COLOR": "1",
        "RUST_LOG": "error",
    }
    proc = await asyncio.create_subprocess_exec(
        str(CODEX),
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        REQUEST,
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


@pytest.fixture(params=["responses", "chat-only"])
async def codex_run(aiohttp_server: Any, tmp_path: Path, request: Any) -> dict[str, Any]:
    """Against a server with the Responses API, and against a chat-only one (llama.cpp, vLLM) with ``translate: true``."""
    scripted = Scripted(mode="codex")
    model = await aiohttp_server(scripted_app(scripted))
    route = {"translate": True} if request.param == "chat-only" else {}
    cfg = config_for(
        base_url(model) + "/v1", "openai", window={"models": {"gpt-5*": 16000}}, store={"data_dir": str(tmp_path / "ruyi")}, default_route=route
    )
    app: web.Application = make_app(cfg, default_steps(cfg), probe_upstream=False)
    proxy = await aiohttp_server(app, **server_options(cfg))
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    code, output = await run_codex(base_url(proxy), work, home)
    async with aiohttp.ClientSession() as http:
        async with http.get(base_url(proxy) + "/ruyi/v1/agents") as resp:
            agents = (await resp.json())["agents"]
        sessions: list[dict[str, Any]] = []
        for agent in agents:
            async with http.get(base_url(proxy) + "/ruyi/v1/sessions", headers={"X-Ruyi-Agent": agent["agent_id"]}) as resp:
                sessions += (await resp.json())["sessions"]
    return {
        "code": code,
        "output": output,
        "scripted": scripted,
        "sessions": sessions,
        "chat": request.param == "chat-only",
        "codex_ids": codex_ids(home),
    }


def codex_ids(home: Path) -> list[str]:
    """The ids of the conversations Codex ran, from its own rollout files (their first line: the session's meta)."""
    rollouts = sorted((home / ".codex" / "sessions").rglob("rollout-*.jsonl"))
    return [json.loads(path.read_text().splitlines()[0])["payload"]["id"] for path in rollouts]


def chat_paired(body: dict[str, Any]) -> bool:
    messages = [m for m in body.get("messages") or () if isinstance(m, dict)]
    calls = {c.get("id") for m in messages for c in m.get("tool_calls") or ()}
    return calls == {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}


def paired(body: dict[str, Any]) -> bool:
    items = [i for i in body.get("input") or () if isinstance(i, dict)]
    calls = {i.get("call_id") for i in items if i.get("type") == "function_call"}
    outputs = {i.get("call_id") for i in items if i.get("type") == "function_call_output"}
    return calls == outputs


async def test_codex_completes_through_ruyi_measured_and_archived(codex_run: dict[str, Any]) -> None:
    assert codex_run["code"] == 0 and FINAL in codex_run["output"], codex_run["output"][-3000:]
    scripted: Scripted = codex_run["scripted"]
    main = [b for b in scripted.received if REQUEST in json.dumps(b.get("messages") if codex_run["chat"] else b.get("input"))]
    assert len(main) == CODEX_STEPS + 1, len(main)
    check = chat_paired if codex_run["chat"] else paired
    assert all(check(b) for b in scripted.received), "every call with its output, every output with its call"
    assert any("ruyi-archive" in json.dumps(b) for b in main), "the session was archived as it grew"
    busiest = max(codex_run["sessions"], key=lambda s: s["requests"])
    assert busiest["requests"] == len(main)  # one Ruyi session for the conversation
    assert [busiest["session_id"]] == codex_run["codex_ids"]  # named from Codex's own id (its session-id header)
