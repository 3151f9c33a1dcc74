"""A client chaining by ``previous_response_id`` (``store``: the history at the provider, each body only the new items),
through Ruyi with the official openai client: forwarded as sent, each chain one session (found by the answer it names),
the provider's usage recorded as the session's size and never calibrating Ruyi's counts by it."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

QUESTION = "word " * 1000
"""About 1,000 tokens of new input a turn: the provider reports 1,500 (the history Ruyi never sees), a ratio that
calibration would take if it were fed it."""


async def sessions_of(proxy: Any) -> dict[str, dict[str, Any]]:
    async with aiohttp.ClientSession() as http:
        async with http.get(base_url(proxy) + "/ruyi/v1/sessions", headers={"Authorization": "Bearer sk-test"}) as resp:
            return {s["session_id"]: s for s in (await resp.json())["sessions"]}


async def test_each_chain_is_one_session_measured_by_the_providers_usage(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    fake.prompt_tokens = 1500
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="sk-test", max_retries=0)

    async def turn(previous: str, n: int) -> tuple[str, str, int]:
        raw = await client.responses.with_raw_response.create(
            model="gpt-5-codex", store=True, previous_response_id=previous, input=[{"role": "user", "content": f"{n}: {QUESTION}"}]
        )
        answer = raw.parse()
        sent = fake.last("/v1/responses").json
        assert sent["previous_response_id"] == previous and len(sent["input"]) == 1  # forwarded as sent: the chain unbroken
        return answer.id, raw.headers["X-Ruyi-Session"], int(raw.headers["X-Ruyi-Tokens-Before"])

    first, a, counted = await turn("resp_before_ruyi", 1)  # a chain Ruyi joins midway
    other, b, _ = await turn("resp_elsewhere", 2)  # another conversation, interleaved
    second, a2, _ = await turn(first, 3)
    _, b2, _ = await turn(other, 4)
    _, a3, counted_later = await turn(second, 5)
    await client.close()
    assert a == a2 == a3 and b == b2 and a != b  # each chain one session, by the answer it names
    assert 750 < counted < 1500 and abs(counted_later - counted) < 10  # the new items counted, never scaled by the provider's 1,500
    sessions = await sessions_of(proxy)
    assert (sessions[a]["requests"], sessions[b]["requests"]) == (3, 2)
    assert sessions[a]["upstream_prompt_tokens"] == 1500 and sessions[a]["calibration"] == 1.0
