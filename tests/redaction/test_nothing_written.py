"""Secrets never stored: each kind planted in tool outputs, arguments and commands, a session replayed through a
real `ruyi serve`, and every file under its data directory (database, WAL, log) grepped: nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from tests.conftest import base_url
from tests.fake_upstream import FakeUpstream
from tests.memory.ruyi_process import RuyiProcess, forwarded, replay
from tests.redaction.planted import KINDS
from tests.stored_bytes import stored_bytes
from tests.traces import requests_of

CONFIG = {"window": {"models": {"gpt-4o*": 12000}}, "pruning": {"strategies": {"truncation": {"max_tool_output_tokens": 300}}}}
NOISE = "\n".join(f"build step {n}: compiled module_{n}.o in 0.{n % 10}s" for n in range(500))
SHORT = NOISE[:600]
"""Under the truncation cap, so dedup and purge_errors find these outputs whole."""


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def turn(tool_call: dict[str, Any], output: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": None, "tool_calls": [tool_call]}, {"role": "tool", "tool_call_id": tool_call["id"], "content": output}]


def session_with_secrets() -> list[dict[str, Any]]:
    """Every kind in a command (a placeholder's label), at the head and tail of a long output (truncation,
    first lines), in a write's arguments (a long one replaced, a short one kept), read twice (dedup), and
    in a failed call's error lines (purge_errors)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Set up the deployment credentials and check them."},
    ]
    for i, kind in enumerate(sorted(KINDS)):
        text, _ = KINDS[kind]
        one_line = text.replace("\n", " ")
        messages += turn(call("bash", f"c{i}", command=f"echo {one_line} >> .env"), f"{text}\n{NOISE}\n{text}")
        messages += turn(call("Write", f"w{i}", file_path=f"/srv/app/conf{i}.env", comment=one_line[:60], content=f"{text}\n{NOISE}"), "ok")
        messages += turn(call("Read", f"r{i}", file_path=f"/srv/app/conf{i}.env"), f"{text}\n{SHORT}")
        messages += turn(call("Read", f"s{i}", file_path=f"/srv/app/conf{i}.env"), f"{text}\n{SHORT}")
        trace = "Traceback (most recent call last):\n" + "\n".join(f'  File "/srv/m{n}.py", line {n}, in f' for n in range(12))
        messages += turn(
            call("bash", f"e{i}", command=f"deploy --token {one_line}"), f"{trace}\nRuntimeError: rejected {one_line}\n<returncode>1</returncode>"
        )
    for n in range(5):  # turns after the last failure, so its error is purged
        messages += turn(call("bash", f"t{n}", command=f"ls /srv/{n}"), f"file_{n}.txt")
    return messages


def leaks(data_dir: Path) -> dict[str, list[str]]:
    """Each planted secret (and a middle slice of it, in case one was clipped) → the files holding it."""
    found: dict[str, list[str]] = {}
    files = stored_bytes(data_dir)  # each file's bytes and the text of the packed bodies in it (audit, reports, raw turns)
    for kind, (_, secret) in KINDS.items():
        needles = {secret.encode(), secret[len(secret) // 4 : -len(secret) // 4 or None].encode()}
        holding = [name for name, data in files.items() if any(n in data for n in needles if len(n) >= 8)]
        if holding:
            found[kind] = holding
    return found


@pytest.mark.timeout(180)  # a long session replayed twice through real processes, logging at debug
@pytest.mark.parametrize("recent", [0, None, 100], ids=["every-strategy", "recent-work", "recent-work-small"])
async def test_no_planted_secret_reaches_any_file_ruyi_writes(upstream: TestServer, fake: FakeUpstream, tmp_path: Path, recent: int | None) -> None:
    """With archives off, every pruning strategy rewrites something on the way (with them, which batches run before
    an archive in this session turns on the block's size); with the archive's verbatim messages of the agent (the default), the
    archives carry the agent's own archived lines, secrets among them; with a small budget for them, its densest
    lines (a private key's body alone, once) and the map of the files it read."""
    config = {**CONFIG, "archive": {"recent_tokens": recent, "enabled": recent != 0}} if recent is not None else CONFIG
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    messages = session_with_secrets()
    requests = requests_of(messages)
    ids = [f"req-{i}" for i in range(len(requests))]
    proc = RuyiProcess(base_url(upstream) + "/v1", data_dir, config, data_dir / "ruyi.log", level="debug")
    await proc.start()
    await replay(proc.url, requests, "agent", ids)
    sent = forwarded(fake)
    last = json.loads(sent[-1][1])["messages"]
    assert last[-1] == messages[-1] and last[1]["content"].startswith(messages[1]["content"])  # the client's own messages: as sent
    assert last[1]["content"] == messages[1]["content"] or last[1]["content"].startswith(messages[1]["content"] + "\n\n<ruyi-archive")
    assert sum(b"[ruyi:" in body for _, body in sent) > 10 and any(b"[REDACTED:" in body for _, body in sent)
    assert recent == 0 or any(b"<recent-work>" in body for _, body in sent)
    assert recent != 100 or any(b"<code-map>" in body for _, body in sent)  # and the map of the files it read (names, never values)
    running = leaks(data_dir)  # with the write-ahead log still open
    assert await proc.stop() == 0
    store = proc.store()
    try:
        session = store.session_ids("agent")[0]
        # every strategy rewrote something on the way (an archive later replaces what was decided before it)
        applied = {name for r in store.reports("agent", session, 1000) for name in (r.get("strategies") or {})}
        assert {"truncation", "dedup", "supersede", "purge_errors"} <= applied if recent == 0 else {"truncation", "supersede"} <= applied
    finally:
        store.close()
    assert b"request_done" in (data_dir / "ruyi.log").read_bytes()
    assert running == {} and leaks(data_dir) == {}

    # What is stored and what is forwarded stay the same bytes across a restart.
    fake.received.clear()
    again = RuyiProcess(base_url(upstream) + "/v1", data_dir, config, data_dir / "ruyi.log", level="debug")
    await again.start()
    await replay(again.url, requests[-1:], "agent", ["req-again"])
    assert await again.stop() == 0
    assert forwarded(fake)[-1][1] == sent[-1][1]
    assert leaks(data_dir) == {}


def test_a_key_sent_as_a_session_or_agent_id_becomes_a_hash() -> None:
    from memory.identity import agent_id_for, session_header

    key = "sk-ant-api03-Zq8_Yw-7Xv6UZq8_Yw-7Xv6UZq8_Yw"
    session = session_header({"X-Ruyi-Session": key})
    assert session is not None and session.startswith("h-") and key not in session
    assert session == session_header({"X-Ruyi-Session": key})  # the same key names the same session
    assert session_header({"X-Ruyi-Session": "my-task-42"}) == "my-task-42"
    assert agent_id_for({"X-Ruyi-Agent": key}).startswith("h-")
