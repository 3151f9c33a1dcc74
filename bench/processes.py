"""Processes the benchmarks start: the fake upstream and `ruyi serve` (of this tree or another, for a before/after)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(args: list[str], port: int, env: Mapping[str, str] | None = None, cwd: Path = ROOT) -> subprocess.Popen[bytes]:
    """Start a server and wait until it accepts connections."""
    proc = subprocess.Popen(args, cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{args} did not start")


def fake_upstream(port: int, **switches: Any) -> subprocess.Popen[bytes]:
    """The test suite's fake upstream in its own process; ``switches`` set FakeUpstream fields (chunk_delay, reply…)."""
    return spawn([sys.executable, str(ROOT / "bench" / "fake_upstream_server.py"), str(port), json.dumps(switches)], port)


def ruyi(port: int, upstream: str, config: Mapping[str, Any] | None = None, root: Path = ROOT) -> subprocess.Popen[bytes]:
    """`ruyi serve` from the source tree ``root`` (another checkout measures the code before a change),
    with its own empty data_dir and ``config`` (a YAML mapping)."""
    data = Path(tempfile.mkdtemp(prefix="ruyi-bench-"))
    config_file = data / "config.yaml"
    config_file.write_text(json.dumps(dict(config or {})))  # JSON is YAML
    env = {"RUYI_DATA_DIR": str(data / "data"), "RUYI_LOG_LEVEL": "info", "PYTHONPATH": str(root)}
    args = [sys.executable, "-m", "proxy.cli", "serve", "--port", str(port), "--upstream", upstream, "--config", str(config_file)]
    return spawn(args, port, env, cwd=root)


async def serve(checkout: Path, port: int, upstream: str, data_dir: Path) -> asyncio.subprocess.Process:
    """`ruyi serve` of the source tree ``checkout`` on ``port``, its store in ``data_dir``, started from the event loop
    (the caller waits for it to answer, and kills it)."""
    env = {**os.environ, "RUYI_DATA_DIR": str(data_dir), "RUYI_LOG_LEVEL": "warning", "PYTHONPATH": str(checkout)}
    args = ["-m", "proxy.cli", "serve", "--port", str(port), "--upstream", upstream]
    out = asyncio.subprocess.DEVNULL
    return await asyncio.create_subprocess_exec(sys.executable, *args, cwd=checkout, env=env, stdout=out, stderr=out)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
