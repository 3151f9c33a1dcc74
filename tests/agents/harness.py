"""What the agents suite's tests share: a Ruyi on a real socket in front of the scripted model, an agent CLI run in a
scratch folder with no network but 127.0.0.1 (no telemetry, no update checks), the sessions Ruyi made, and the
OpenAI chat history check."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from proxy.http.app import make_app
from proxy.http.exposure import server_options
from proxy.rewrite.steps import default_steps
from tests.agents.scripted import Scripted
from tests.agents.scripted import make_app as scripted_app
from tests.conftest import base_url, config_for

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".agents" / "node_modules" / ".bin"
QUIET = {"DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", "NO_COLOR": "1", "OTEL_SDK_DISABLED": "true", "CI": "1"}
"""Environment every agent gets: no telemetry anywhere, no colour, non-interactive."""


async def run_agent(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 240) -> tuple[int, str]:  # noqa: ASYNC109 - the bound of one CLI run
    """Run an agent CLI to its end; its exit code and output (stdout and stderr together)."""
    full = {"PATH": os.environ.get("PATH", ""), **QUIET, **env}
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=full, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(errors="replace")


async def start(aiohttp_server: Any, tmp_path: Path, kind: str, models: dict[str, int], ruyi: bool = True) -> tuple[Scripted, str, str]:
    """The scripted model and, unless ``ruyi`` is False, a Ruyi in front of it: (model, URL the agent talks to, Ruyi's URL)."""
    scripted = Scripted()
    model = await aiohttp_server(scripted_app(scripted))
    upstream = base_url(model) + ("/v1" if kind == "openai" else "")
    if not ruyi:
        return scripted, upstream, ""
    cfg = config_for(upstream, kind, window={"models": models}, store={"data_dir": str(tmp_path / "ruyi")})
    app: web.Application = make_app(cfg, default_steps(cfg), probe_upstream=False)
    proxy = await aiohttp_server(app, **server_options(cfg))
    url = base_url(proxy)
    return scripted, url + ("/v1" if kind == "openai" else ""), url


async def sessions(ruyi_url: str) -> list[dict[str, Any]]:
    """Every session Ruyi holds, over every agent (``/ruyi/v1/agents``, then each agent's ``/ruyi/v1/sessions``)."""
    found: list[dict[str, Any]] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        async with http.get(ruyi_url + "/ruyi/v1/agents") as resp:
            agents = (await resp.json())["agents"]
        for agent in agents:
            async with http.get(ruyi_url + "/ruyi/v1/sessions", headers={"X-Ruyi-Agent": agent["agent_id"]}) as resp:
                found += (await resp.json())["sessions"]
    return found


def chat_problems(body: dict[str, Any]) -> list[str]:
    """What is malformed in an OpenAI chat history: a tool message with no call before it, a call never answered."""
    found: list[str] = []
    pending: set[str] = set()
    for n, m in enumerate(body.get("messages") or ()):
        role = m.get("role")
        if role == "tool":
            tid = m.get("tool_call_id")
            if tid not in pending:
                found.append(f"message {n}: tool result {tid} without its call")
            pending.discard(tid)
            continue
        if pending:
            found.append(f"message {n}: calls {sorted(pending)} without results")
            pending = set()
        if role == "assistant":
            pending = {c.get("id") for c in m.get("tool_calls") or ()}
    return found
