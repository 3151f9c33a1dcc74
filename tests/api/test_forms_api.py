"""A session's three forms over real sockets: built from what the session showed, within their sizes, in its language."""

from __future__ import annotations

import json

import aiohttp

from tests.api.test_anchors_api import FIELDS, call
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.rewrite.test_pruning import post


def work(task: str) -> list[dict]:
    edit = {
        "id": "c2",
        "type": "function",
        "function": {
            "name": "str_replace_editor",
            "arguments": json.dumps({"command": "str_replace", "path": "/repo/app.py", "old_str": "a", "new_str": "b"}),
        },
    }
    run = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": "python -m pytest tests"})}}
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": task},
        {"role": "assistant", "content": "Running the tests.", "tool_calls": [run]},
        {"role": "tool", "tool_call_id": "c1", "content": "Traceback (most recent call last):\nZeroDivisionError: division by zero"},
        {"role": "assistant", "content": "Fixing app.py.", "tool_calls": [edit]},
        {"role": "tool", "tool_call_id": "c2", "content": "done"},
    ]


async def test_the_three_forms_of_a_session(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    fake.reply = "Fixed the division by zero in app.py; tests pass."
    sid = (await post(proxy, work("Fix the failing tests in app.py"), headers={"X-Ruyi-Agent": "a"})).headers["X-Ruyi-Session"]
    url = base_url(proxy) + f"/ruyi/v1/sessions/{sid}/forms/"
    async with aiohttp.ClientSession() as http:
        await call(
            http, "POST", base_url(proxy) + "/ruyi/v1/anchors", agent="a", json={"type": "D", "title": "Guard divisions in app.py", "fields": FIELDS}
        )
        await call(
            http,
            "POST",
            base_url(proxy) + "/ruyi/v1/anchors",
            agent="a",
            json={"type": "C", "title": "Tests must pass before merge", "status": "pending"},
        )
        await call(http, "POST", base_url(proxy) + "/ruyi/v1/notebook/user", agent="a", json={"text": "prefers small diffs"})
        status, compact = await call(http, "GET", url + "compact", agent="a")
        assert status == 200 and compact["chars"] < 500
        text = compact["text"]
        assert "【Task】Fix the failing tests in app.py" in text and "[D001] Guard divisions in app.py" in text and "/repo/app.py" in text
        status, normal = await call(http, "GET", url + "normal", agent="a")
        assert 500 <= normal["chars"] <= 2000 and "| D001 | Guard divisions in app.py |" in normal["text"] and "ZeroDivisionError" in normal["text"]
        status, expanded = await call(http, "GET", url + "expanded?format=markdown", agent="a")
        assert "## [D001] Guard divisions in app.py" in expanded and "prefers small diffs" in expanded and "python -m pytest tests" in expanded
        assert (await call(http, "GET", url + "huge", agent="a"))[0] == 404
        assert (await call(http, "GET", url + "compact", agent="b"))[0] == 404


async def test_a_chinese_conversation_gets_the_chinese_templates(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    sid = (await post(proxy, work("修复 app.py 中失败的测试"), headers={"X-Ruyi-Agent": "a"})).headers["X-Ruyi-Session"]
    async with aiohttp.ClientSession() as http:
        status, compact = await call(http, "GET", base_url(proxy) + f"/ruyi/v1/sessions/{sid}/forms/compact", agent="a")
    assert (
        compact["text"].startswith("## 🔸 缩形态上下文") and "【任务】修复 app.py 中失败的测试" in compact["text"] and "【已决策】" in compact["text"]
    )
