"""Shared fixtures: a real fake upstream and a real Ruyi, both listening on 127.0.0.1."""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from config.load import load_config
from config.schema import Config
from memory.store.backend import open_database, open_recall, open_store
from memory.store.base import KeeperDatabase, Store
from memory.store.options import StoreOptions
from proxy.http.app import make_app
from proxy.http.exposure import server_options
from proxy.rewrite.steps import default_steps
from tests import pg
from tests.fake_upstream import FakeUpstream, make_fake_app

MakeProxy = Callable[..., Awaitable[TestServer]]


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own store (RUYI_DATA_DIR, inherited by the `ruyi` processes tests start)."""
    path = tmp_path / "ruyi-data"
    monkeypatch.setenv("RUYI_DATA_DIR", str(path))
    return path


@pytest.fixture(autouse=True)
def no_ruyi_left_running() -> Iterator[None]:
    """A test that fails before it stops a `ruyi serve` it started (tests/memory/ruyi_process.py) leaves none running."""
    yield
    module = sys.modules.get("tests.memory.ruyi_process")
    if module is not None:
        module.kill_left_running()


@pytest.fixture
def fake() -> FakeUpstream:
    return FakeUpstream()


@pytest.fixture
async def upstream(aiohttp_server: Any, fake: FakeUpstream) -> TestServer:
    return await aiohttp_server(make_fake_app(fake), max_line_size=1 << 16, max_field_size=1 << 16)  # as lenient as real upstreams


def base_url(server: TestServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def free_port() -> int:
    """A port nothing listens on (to test refused connections)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config_for(upstream_url: str, kind: str = "openai", **sections: Any) -> Config:
    sections["default_route"] = {"url": upstream_url, "kind": kind, **sections.get("default_route", {})}
    overrides = {}
    for section, values in sections.items():
        if isinstance(values, dict):
            overrides.update({f"{section}.{k}": v for k, v in values.items()})
        else:
            overrides[section] = values
    return load_config(None, {"RUYI_DATA_DIR": os.environ.get("RUYI_DATA_DIR", "./.ruyi")}, overrides)


@pytest.fixture
def make_proxy(aiohttp_server: Any, upstream: TestServer) -> MakeProxy:
    """Start a Ruyi in front of the fake upstream; keyword args are config sections."""

    async def start(kind: str = "openai", config: Config | None = None, steps: Any = None, **sections: Any) -> TestServer:
        """The real pipeline unless ``steps`` replaces it."""
        suffix = "/v1" if kind == "openai" else ""
        cfg = config or config_for(base_url(upstream) + suffix, kind, **sections)
        app: web.Application = make_app(cfg, default_steps(cfg) if steps is None else steps, probe_upstream=False)
        return await aiohttp_server(app, **server_options(cfg))

    return start


@pytest.fixture(scope="session")
def pg_server() -> str:
    """The PostgreSQL server's URL (127.0.0.1:5432, database ``test``); the test is skipped, with the reason, without one."""
    url, reason = pg.probe()
    if url is None:
        pytest.skip(reason)
    return url


@pytest.fixture(scope="session")
def pg_run_schema(pg_server: str) -> Iterator[tuple[str, str]]:
    """One schema for the whole test run, migrated, dropped after: (schema, URL)."""
    schema, url = pg.create_schema(pg_server)
    try:
        open_store(StoreOptions(backend="postgres", url=url)).close()  # type: ignore[union-attr]
        yield schema, url
    finally:
        pg.drop_schema(pg_server, schema)


@pytest.fixture
def pg_url(pg_server: str, pg_run_schema: tuple[str, str]) -> str:
    """The run's schema, its tables emptied: a migrated store with nothing in it."""
    schema, url = pg_run_schema
    pg.empty_tables(pg_server, schema)
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def store_options(request: pytest.FixtureRequest, tmp_path: Path) -> StoreOptions:
    """The store's options, once per backend (PostgreSQL: skipped without a server)."""
    if request.param == "postgres":
        return StoreOptions(backend="postgres", url=request.getfixturevalue("pg_url"), data_dir=str(tmp_path / "unused"))
    return StoreOptions(backend="sqlite", data_dir=str(tmp_path / "store"))


@pytest.fixture
def make_store(store_options: StoreOptions) -> Iterator[Callable[..., Store]]:
    """Open the test's store (again and again: each call a new connection to the same data); ``make_store("other")`` opens
    another, empty store of the same backend (PostgreSQL: a schema of its own). All closed (and dropped) after the test."""
    opened: list[Store] = []
    others: dict[str, StoreOptions] = {}
    schemas: list[str] = []

    def make(name: str | None = None) -> Store:
        options = store_options
        if name is not None:
            if name not in others:
                if store_options.backend == "postgres":
                    schema, url = pg.create_schema(pg.probe()[0] or "", "ruyi_other")
                    schemas.append(schema)
                    others[name] = dataclasses.replace(store_options, url=url)
                else:
                    others[name] = dataclasses.replace(store_options, data_dir=str(Path(store_options.data_dir).parent / name))
            options = others[name]
        store = open_store(options)
        assert store is not None
        opened.append(store)
        return store

    yield make
    for store in opened:
        try:
            store.close()
        except Exception:  # noqa: BLE001 - closed by the test already
            pass
    for schema in schemas:
        pg.drop_schema(pg.probe()[0] or "", schema)


@pytest.fixture
def keeper_database(store_options: StoreOptions) -> Iterator[KeeperDatabase]:
    """The keeper's database (anchors, notebook, forms) on the test's backend, closed after."""
    db = open_database(store_options)
    yield db
    db.close()


@pytest.fixture
def make_recall(store_options: StoreOptions, make_store: Callable[..., Store]) -> Iterator[Callable[[], Any]]:
    """Recall beside the test's store (its own connection or pool each call), all closed after the test."""
    opened: list[Any] = []

    def make() -> Any:
        recall = open_recall(store_options, make_store())
        opened.append(recall)
        return recall

    yield make
    for recall in opened:
        recall.close()
