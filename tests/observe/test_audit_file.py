"""``audit.path``: real requests leave the store's audit records, redacted, as JSON lines in a file rotated by size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from memory.store.sqlite_store import SQLiteStore
from proxy.observe.audit_file import QUEUE_MAX, AuditFile
from proxy.observe.options import AuditOptions
from tests.conftest import MakeProxy, base_url
from tests.rewrite.test_decisions import WINDOW, rereads

SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
"""A GitHub token pattern: here in the model name, which the audit record carries."""


async def chat(proxy: Any, messages: list[dict[str, Any]], model: str = "gpt-4o") -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        resp = await http.post(base_url(proxy) + "/v1/chat/completions", json={"model": model, "messages": messages}, headers={"X-Ruyi-Agent": "a"})
        await resp.read()
        assert resp.status == 200
        return resp


def lines(*paths: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in paths if path.exists() for line in path.read_text().splitlines()]


async def test_each_request_leaves_the_stores_audit_record_as_a_redacted_json_line(make_proxy: MakeProxy, tmp_path: Path, data_dir: Path) -> None:
    path = tmp_path / "logs" / "audit.jsonl"
    proxy = await make_proxy(window=WINDOW, pruning={"economic": False}, audit={"path": str(path)})
    sessions = {(await chat(proxy, rereads(n), model=f"gpt-4o-{SECRET}")).headers["X-Ruyi-Session"] for n in (3, 5, 13)}
    await proxy.close()  # a graceful shutdown writes what is queued
    written = lines(path)
    assert len(written) == 3 and len(sessions) == 1 and path.stat().st_mode & 0o777 == 0o600
    assert all(set(r) == {"agent_id", "session_id", "request_id", "created_at", "body"} for r in written)
    assert SECRET not in path.read_text() and all("[REDACTED:github-pat]" in r["body"]["model"] for r in written)
    store = SQLiteStore(data_dir / "ruyi.db")
    try:
        stored = store.audit("a", sessions.pop())
    finally:
        store.close()
    assert [r["body"] for r in written] == stored  # the same records, redacted the same way
    assert written[-1]["body"]["batch"] == "applied" and written[-1]["body"]["est_after"] < written[-1]["body"]["est_before"]
    assert {"window", "usable", "status", "latency_ruyi_ms", "latency_llm_ms"} <= set(written[-1]["body"])


async def test_the_file_is_rotated_by_size_and_keeps_its_backups(make_proxy: MakeProxy, tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    proxy = await make_proxy(window=WINDOW, audit={"path": str(path), "max_bytes": 2048, "backups": 2})
    for _ in range(16):
        await chat(proxy, rereads(1))
    await proxy.close()
    rotated = [path.with_name("audit.jsonl.1"), path.with_name("audit.jsonl.2")]
    assert path.exists() and all(p.exists() for p in rotated) and not path.with_name("audit.jsonl.3").exists()
    assert all(p.stat().st_size <= 2048 for p in (path, *rotated))
    kept = lines(*reversed(rotated), path)  # oldest first
    assert 2 <= len(kept) < 16  # the oldest went with the oldest backup
    assert [r["created_at"] for r in kept] == sorted(r["created_at"] for r in kept)


async def test_a_full_queue_drops_and_counts_instead_of_waiting(tmp_path: Path) -> None:
    audit = AuditFile(AuditOptions(path=str(tmp_path / "a.jsonl")))
    await audit.close()  # its thread gone: a writer that cannot keep up
    for i in range(QUEUE_MAX + 5):
        audit.put("a", "s", f"r{i}", {"n": i})
    assert audit.pending == QUEUE_MAX and audit.dropped == 5 and audit.written == 0


@pytest.mark.parametrize("bad", [{"max_bytes": 10}, {"backups": 0}, {"path": " "}])
def test_bad_options_are_refused_naming_the_key(make_proxy: MakeProxy, bad: dict[str, Any]) -> None:
    from config.validate import ConfigError
    from tests.conftest import config_for

    with pytest.raises(ConfigError) as err:
        config_for("http://127.0.0.1:9/v1", audit={"path": "x.jsonl", **bad})
    assert "audit" in str(err.value)


async def test_a_path_ruyi_cannot_write_stops_start_up_naming_the_key(make_proxy: MakeProxy, tmp_path: Path) -> None:
    from config.validate import ConfigError

    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError) as err:
        await make_proxy(audit={"path": str(blocker / "audit.jsonl")})
    assert "audit.path" in str(err.value) and "a-file" in str(err.value)


async def test_the_file_is_written_without_a_store_too(make_proxy: MakeProxy, tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    proxy = await make_proxy(window=WINDOW, store={"backend": "memory"}, audit={"path": str(path)})
    await chat(proxy, rereads(2))
    await proxy.close()
    assert [r["body"]["est_before"] > 0 for r in lines(path)] == [True]
