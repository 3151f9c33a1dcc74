"""The dashboard in a real browser (Debian's chromium driven by playwright) against a real `ruyi serve` with a
replayed session (a public trace when present, else one made here): the overview lists the session, its chart has one
point per request and marks the archive, a draft card accepted in the page is accepted in the API, no console error,
no key or secret ever on the page. Screenshots go to ``.artifacts/ui/`` at the checkout's root (or $RUYI_TEST_ARTIFACTS)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from memory.cards.sqlite_drafts import CardDrafts
from memory.store.sqlite_database import Database
from tests.conftest import base_url
from tests.fake_upstream import FakeUpstream
from tests.memory.ruyi_process import RuyiProcess, replay
from tests.traces import TRACES, load, requests_of

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright = pytest.importorskip("playwright.async_api", reason="playwright is not installed (make install-test)")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it: apt-get install chromium)")
ARTIFACTS = Path(os.environ.get("RUYI_TEST_ARTIFACTS") or Path(__file__).resolve().parents[2] / ".artifacts" / "ui")
SECRET = "sk-ant-api03-PLANTEDsecretVALUE0123456789abcdefXYZ"
ADMIN_KEY = "ruyi-admin-key-0123456789"
AGENT = "coder"
DRAFT = "Run the failing test alone before the whole suite（先单独运行失败的测试）"


def session_messages() -> list[dict[str, Any]]:
    """The shortest public trace with at least 24 messages, else a made-up coding session; a secret planted in a tool
    output either way (it must never reach the page)."""
    if TRACES is not None:
        traces = sorted((p for p in TRACES.glob("*.json") if p.name != "INDEX.json"), key=lambda p: p.stat().st_size)
        for path in traces:
            messages = load(path)["messages"]
            if len(messages) >= 24:
                break
        messages = [dict(m) for m in messages[:60]]
    else:
        messages = [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "修复 parser 里的 bug, then run the tests."},
        ]
        for n in range(14):
            call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"cat src/m{n}.py"})}}
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{n}", "content": "\n".join(f"def f{n}_{i}(x): return x + {i}" for i in range(300))},
            ]
    for m in messages:
        if m.get("role") == "tool":
            m["content"] = f"{m.get('content') or ''}\nexport ANTHROPIC_API_KEY={SECRET}"
            break
    return messages


@pytest.fixture
async def ruyi(upstream: TestServer, fake: FakeUpstream, tmp_path: Path, request: Any) -> AsyncIterator[tuple[RuyiProcess, list[Any]]]:
    data = tmp_path / "data"
    keys = getattr(request, "param", {})
    db = Database(data / "ruyi.db")
    CardDrafts(db).propose(AGENT, None, [("k-draft-1", DRAFT, ("pytest", "测试"), "Run `pytest -x tests/test_parser.py` first.")])
    db.close()
    config = {"window": {"models": {"gpt-4o*": 8000}}, "workspace": {"root": str(tmp_path / "project")}, **keys}
    (tmp_path / "project").mkdir()
    proc = RuyiProcess(base_url(upstream) + "/v1", data, config, tmp_path / "ruyi.log")
    await proc.start()
    messages = session_messages()
    requests = requests_of(messages)
    await replay(proc.url, requests, AGENT, [f"r{i}" for i in range(len(requests))])
    try:
        yield proc, requests
    finally:
        await proc.stop()


async def browser_page(p: Any) -> tuple[Any, Any, list[str]]:
    browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text} at {m.location}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    return browser, page, problems


async def shot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - one mkdir in a test, before the page is shot
    path = ARTIFACTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    return path


async def test_the_dashboard_shows_the_session_and_accepts_a_draft(ruyi: tuple[RuyiProcess, list[Any]]) -> None:
    proc, sent = ruyi
    requests = len(sent)
    async with playwright.async_playwright() as p:
        browser, page, problems = await browser_page(p)
        try:
            await page.goto(proc.url + "/ruyi/ui", wait_until="networkidle")
            link = page.locator("a.session-link").first
            await link.wait_for(timeout=20_000)
            assert "Overview" in await page.inner_text("h1")
            await shot(page, "overview")
            await link.click()
            await page.locator(".chart circle.point").nth(requests - 1).wait_for(timeout=20_000)
            assert await page.locator(".chart circle.point").count() == requests  # one point per request
            assert await page.locator(".chart line.archive").count() >= 1  # the archive is marked
            await shot(page, "session")
            await page.emulate_media(color_scheme="dark")  # readable in dark too (looked at: .artifacts/ui/session-dark.png)
            await shot(page, "session-dark")
            await page.emulate_media(color_scheme="light")
            more = [*sent[-1], {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Now the docs, please."}]
            await replay(proc.url, [more], AGENT, ["r-live"])
            await page.locator(".chart circle.point").nth(requests).wait_for(timeout=20_000)  # live: no reload
            await page.goto(proc.url + f"/ruyi/ui#/memory/{AGENT}", wait_until="networkidle")
            button = page.locator("button.accept-draft").first
            await button.wait_for(timeout=20_000)
            assert "先单独运行" in await page.inner_text("main")  # Chinese shown as sent
            await button.focus()
            await page.keyboard.press("Enter")  # keyboard usable
            await page.get_by_text("done", exact=True).wait_for(timeout=20_000)
            await shot(page, "memory")
            html = await page.content()
        finally:
            await browser.close()
    async with aiohttp.ClientSession() as http:
        async with http.get(proc.url + "/ruyi/v1/cards/drafts", headers={"X-Ruyi-Agent": AGENT}) as resp:
            drafts = (await resp.json())["drafts"]
    assert [d["status"] for d in drafts] == ["accepted"]
    assert problems == []
    assert SECRET not in html and SECRET[20:40] not in html


@pytest.mark.parametrize("ruyi", [{"auth": {"admin_key": ADMIN_KEY}}], indirect=True)
async def test_with_keys_the_page_asks_for_one_and_never_shows_it(ruyi: tuple[RuyiProcess, list[Any]]) -> None:
    proc, _ = ruyi
    async with playwright.async_playwright() as p:
        browser, page, problems = await browser_page(p)
        try:
            await page.goto(proc.url + "/ruyi/ui", wait_until="networkidle")
            await page.locator("#keybox").wait_for(state="visible", timeout=20_000)
            await page.fill("#key", ADMIN_KEY)
            await page.press("#key", "Enter")
            await page.locator("#keybox").wait_for(state="hidden", timeout=20_000)
            await page.get_by_role("heading", name="Overview").wait_for(timeout=20_000)
            html, url = await page.content(), page.url
            await shot(page, "with-key")
        finally:
            await browser.close()
    assert ADMIN_KEY not in html and ADMIN_KEY not in url
    assert [p for p in problems if "401" not in p] == []  # the first call is refused: that is how the page learns to ask
