"""Claude Code with Ruyi's MCP server configured (``--mcp-config``, the ``ruyi`` server at /mcp): a long output is
truncated on arrival with its original kept under a ref, the scripted model calls ``mcp__ruyi__recall`` with that ref,
and the original comes back to the model through Claude Code (issue 24)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from proxy.http.app import make_app
from proxy.http.exposure import server_options
from proxy.rewrite.steps import default_steps
from tests.agents.scripted import RECALL_TOOL, RECALLED, Scripted
from tests.agents.scripted import make_app as scripted_app
from tests.conftest import base_url, config_for

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = ROOT / ".agents" / "node_modules" / ".bin" / "claude"
pytestmark = [
    pytest.mark.skipif(not CLAUDE.exists(), reason="Claude Code is not installed: `make agents` installs the pinned CLIs into .agents/"),
    pytest.mark.timeout(300),  # a real agent CLI, its own 240 s wait inside
]


async def test_claude_code_gets_an_original_back_through_ruyis_recall_tool(aiohttp_server: Any, tmp_path: Path) -> None:
    scripted = Scripted(mode="recall")
    model = await aiohttp_server(scripted_app(scripted))
    cfg = config_for(base_url(model), "anthropic", window={"models": {"claude-*": 64_000}}, store={"data_dir": str(tmp_path / "ruyi")})
    proxy = await aiohttp_server(make_app(cfg, default_steps(cfg), probe_upstream=False), **server_options(cfg))
    mcp = {"mcpServers": {"ruyi": {"type": "http", "url": base_url(proxy) + "/mcp", "headers": {"X-Ruyi-Agent": "claude"}}}}
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url(proxy),
        "ANTHROPIC_API_KEY": "sk-ant-agents-suite",
        "ANTHROPIC_CUSTOM_HEADERS": "X-Ruyi-Agent: claude",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "IS_SANDBOX": "1",
        "NO_COLOR": "1",
        "ENABLE_TOOL_SEARCH": "false",  # MCP tools in the request itself, not deferred behind ToolSearch
        "MCP_CONNECTION_NONBLOCKING": "0",
    }  # connect to Ruyi's MCP server before the first request
    proc = await asyncio.create_subprocess_exec(
        str(CLAUDE),
        "-p",
        "Print 5000 numbers, then check what Ruyi kept of them.",
        "--model",
        "claude-sonnet-4-5",
        "--mcp-config",
        json.dumps(mcp),
        "--allowedTools",
        f"Bash,{RECALL_TOOL}",
        cwd=work,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 180)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    text = out.decode(errors="replace")
    offered = [b for b in scripted.received if any(t.get("name") == RECALL_TOOL for t in b.get("tools") or ())]
    assert offered, f"Claude Code offered no {RECALL_TOOL}: {text[-2000:]}"
    assert proc.returncode == 0 and RECALLED in text, text[-2000:]
