"""The pipeline hook: X-Ruyi-Mode off / dry-run, and fail-open steps that are skipped, logged, counted."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import pytest

from proxy import appkeys
from proxy.context import RequestContext
from proxy.rewrite.pipeline import Guard
from proxy.rewrite.results import Rewritten
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

MESSAGES = [{"role": "user", "content": "original"}]


class Shout:
    name = "shout"

    def apply(self, messages: list[dict[str, Any]], ctx: RequestContext) -> list[dict[str, Any]]:
        return [{**m, "content": str(m["content"]).upper()} for m in messages]


class Broken:
    name = "broken"

    def apply(self, messages: list[dict[str, Any]], ctx: RequestContext) -> list[dict[str, Any]]:
        raise RuntimeError("a bug in a rewrite step")


async def send(proxy: Any, mode: str | None = None) -> None:
    headers = {"X-Ruyi-Mode": mode} if mode else {}
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="k", default_headers=headers, max_retries=0)
    await client.chat.completions.create(model="m", messages=MESSAGES)  # type: ignore[arg-type]


async def test_steps_rewrite_when_on(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(steps=[Shout()])
    await send(proxy)
    assert fake.last().json["messages"][0]["content"] == "ORIGINAL"


@pytest.mark.parametrize("mode", ["off", "dry-run"])
async def test_off_and_dry_run_forward_the_original(make_proxy: MakeProxy, fake: FakeUpstream, mode: str) -> None:
    proxy = await make_proxy(steps=[Shout()])
    await send(proxy, mode)
    assert fake.last().json["messages"][0]["content"] == "original"
    assert "X-Ruyi-Mode" not in fake.last().headers


async def test_unknown_mode_is_a_clear_400(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    with pytest.raises(openai.BadRequestError) as err:
        await send(proxy, "sideways")
    assert "X-Ruyi-Mode" in err.value.message


async def test_a_failing_step_is_skipped_and_counted(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(steps=[Broken(), Shout()])
    await send(proxy)
    await send(proxy)
    assert fake.last().json["messages"][0]["content"] == "ORIGINAL"
    async with aiohttp.ClientSession() as http:
        async with http.get(base_url(proxy) + "/ruyi/v1/stats") as resp:
            assert (await resp.json())["failed_open"] == {"broken": 2}


async def test_ollama_rewrites_keep_untouched_messages_native(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    import ollama

    class ShoutTools:
        name = "shout_tools"

        def apply(self, messages: list[dict[str, Any]], ctx: RequestContext) -> list[dict[str, Any]]:
            return [{**m, "content": m["content"].upper()} if m["role"] == "tool" else m for m in messages]

    proxy = await make_proxy("ollama", steps=[ShoutTools()])
    messages = [
        {"role": "user", "content": "read"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "read", "arguments": {"path": "a"}}}]},
        {"role": "tool", "content": "body", "tool_name": "read"},
    ]
    await ollama.AsyncClient(host=base_url(proxy)).chat(model="m", messages=messages, stream=False)
    sent = fake.last("/api/chat").json["messages"]
    assert sent[2] == {"role": "tool", "content": "BODY", "tool_name": "read"}
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == {"path": "a"}


class LeavesABrokenOutcome:
    """Steps that rewrite and come to an outcome the recording after them cannot use."""

    name = "leaves_a_broken_outcome"

    def run(self, messages: list[dict[str, Any]], ctx: RequestContext, guard: Guard) -> Rewritten:
        shouted = [{**m, "content": str(m["content"]).upper()} for m in messages]
        return Rewritten(shouted, pruning="not an outcome")  # type: ignore[arg-type]


async def test_a_rewrite_that_cannot_be_recorded_forwards_the_original(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(steps=[LeavesABrokenOutcome()])
    await send(proxy)
    assert fake.last().json["messages"] == MESSAGES  # not the half-done rewrite
    assert proxy.app[appkeys.PIPELINE].failures["rewrite"] == 1
