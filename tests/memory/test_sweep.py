"""Expiry (on both backends): the app sweeps at start-up (then daily) in small steps; the config names data_dir, ttl and interval."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from config.load import load_config
from config.validate import ConfigError
from memory.chain import chain_of
from memory.serialized import SerializedRegistry
from memory.session import SessionOptions
from memory.sessions import SessionRegistry
from memory.store.base import Store
from memory.store.options import StoreOptions
from memory.store.sqlite_store import SQLiteStore
from memory.sweep import CHUNK, sweep
from tests.conftest import MakeProxy
from tests.memory.ruyi_process import wait_for


def old_sessions(store: Store, n: int, days_ago: float) -> list[str]:
    """`n` sessions last seen `days_ago` days ago (each with a ref)."""
    import time

    when = time.time() - days_ago * 86400
    registry = SessionRegistry(SessionOptions(), clock=lambda: when, store=store)
    ids = []
    for i in range(n):
        s = registry.resolve("a", chain_of([{"role": "user", "content": f"task {i}, {days_ago} days ago"}])).session
        registry.record("a", s.session_id, refs={f"r{days_ago:g}-{i}": "original"})
        ids.append(s.session_id)
    registry.flush()
    registry.store.close()  # type: ignore[union-attr]
    return ids


def test_sweep_removes_everything_expired_in_chunks(make_store: Callable[[], Store]) -> None:
    old_sessions(make_store(), CHUNK + 30, days_ago=20)
    fresh = old_sessions(make_store(), 3, days_ago=1)
    registry = SessionRegistry(SessionOptions(ttl_days=14), store=make_store())
    assert sweep(SerializedRegistry(registry)) == CHUNK + 30
    assert {s.session_id for s in registry.list("a")} == set(fresh)


async def test_the_app_sweeps_at_start_up(make_proxy: MakeProxy, make_store: Callable[[], Store], store_options: StoreOptions) -> None:
    gone = old_sessions(make_store(), 2, days_ago=30)
    kept = old_sessions(make_store(), 1, days_ago=2)
    proxy: TestServer = await make_proxy(store={"backend": store_options.backend, "url": store_options.url, "data_dir": store_options.data_dir})
    reader = make_store()
    await wait_for(lambda: reader.session_ids("a") == kept, "the start-up sweep")
    assert all(reader.load_session("a", sid) is None for sid in gone) and reader.find_ref("a", "r30-0") is None and reader.find_ref("a", "r2-0")
    reader.close()
    assert proxy.port


def test_store_config_from_env_and_its_checks(tmp_path: Path) -> None:
    cfg = load_config(None, {"RUYI_DATA_DIR": str(tmp_path), "RUYI_SESSIONS__TTL_DAYS": "3"})
    assert (cfg.store.data_dir, cfg.sessions.ttl_days, cfg.store.backend) == (str(tmp_path), 3.0, "sqlite")
    bad: list[dict[str, Any]] = [{"sessions.ttl_days": 0}, {"store.sweep_interval_hours": -1}, {"store.backend": "postgres"}]
    for overrides in bad:
        with pytest.raises(ConfigError):
            load_config(None, {}, overrides)


def test_vacuum_gives_space_back_in_small_steps_until_none_is_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    import memory.sweep

    path = tmp_path / "ruyi.db"
    when = time.time() - 20 * 86400
    writer = SessionRegistry(SessionOptions(), clock=lambda: when, store=SQLiteStore(path))
    for i in range(100):  # each with a 4 KB original: freed, they leave about a page each
        s = writer.resolve("a", chain_of([{"role": "user", "content": f"task {i}"}])).session
        writer.record("a", s.session_id, refs={f"r{i}": f"{i} " + "x" * 4000})
    writer.flush()
    writer.store.close()  # type: ignore[union-attr]
    monkeypatch.setattr(memory.sweep, "PAGES", 4)
    store = SQLiteStore(path)
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)  # watching the real connection, nothing replaced
    assert sweep(SerializedRegistry(SessionRegistry(SessionOptions(ttl_days=14), store=store))) == 100
    steps = [s for s in statements if "incremental_vacuum" in s]
    assert len(steps) > 2 and all(s.endswith("incremental_vacuum(4)") for s in steps)  # never one long vacuum
    assert store.compact(4) == 0  # and all of it given back (a new database is made with incremental vacuum on)
