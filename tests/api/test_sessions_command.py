"""``ruyi sessions`` against a running Ruyi: the agents with their session counts, then one agent's sessions."""

from __future__ import annotations

import asyncio

import pytest

from proxy.cli import main
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.longctx.sessions import session
from tests.longctx.test_archive import post


async def test_the_agents_then_one_agents_sessions(make_proxy: MakeProxy, fake: FakeUpstream, capsys: pytest.CaptureFixture[str]) -> None:
    proxy = await make_proxy()
    sid = (await post(proxy, session(2))).headers["X-Ruyi-Session"]
    await post(proxy, session(1, task="Another task entirely"))
    assert await asyncio.to_thread(main, ["sessions", "--url", base_url(proxy)]) == 0
    out = capsys.readouterr().out
    assert "1 agent(s)" in out and "- a · 2 session(s)" in out
    assert await asyncio.to_thread(main, ["sessions", "--url", base_url(proxy), "--agent", "a"]) == 0
    out = capsys.readouterr().out
    assert "agent a: 2 session(s)" in out and sid in out
    assert await asyncio.to_thread(main, ["sessions", "--url", "http://127.0.0.1:9"]) == 1
    assert "cannot reach Ruyi" in capsys.readouterr().err
    assert await asyncio.to_thread(main, ["sessions", "--server", base_url(proxy)]) == 0  # the deprecated name of --url
    out, err = capsys.readouterr()
    assert "- a · 2 session(s)" in out and "--server is deprecated" in err
