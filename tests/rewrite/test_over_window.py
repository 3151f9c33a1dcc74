"""A request over the usable window: a batch frees what it can toward getting under the prune tier."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

WINDOW = {"models": {"gpt-4o*": 8192}}  # a llama.cpp server's 8k
NO_ARCHIVE = {"enabled": False}  # pruning on its own: what it frees before an archive would take over
USABLE = 8192 - 2000  # less the answer's reserve
PRUNE = 0.85 * USABLE


def exploration(turns: int, reread: int | None = None) -> list[dict[str, Any]]:
    """An agent reading a different file every turn (nothing redundant, only old); ``reread``: that file once more."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix module.py"}]
    files = list(range(turns)) + ([reread] if reread is not None else [])
    for t, f in enumerate(files):
        call = {"id": f"call_{t}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"cat /testbed/m{f}.py"})}}
        messages.append({"role": "assistant", "content": f"Step {t}.", "tool_calls": [call]})
        body = "\n".join(f"def f{f}_{i}(x):\n    return x + {f * 1000 + i}" for i in range(60))
        messages.append({"role": "tool", "tool_call_id": f"call_{t}", "content": body})
    return messages


async def post(proxy: Any, messages: list[dict[str, Any]]) -> tuple[int, int, str]:
    async with aiohttp.ClientSession() as http:
        async with http.post(
            base_url(proxy) + "/v1/chat/completions", json={"model": "gpt-4o", "messages": messages}, headers={"X-Ruyi-Agent": "a"}
        ) as r:
            assert r.status == 200
            return int(r.headers["X-Ruyi-Tokens-Before"]), int(r.headers["X-Ruyi-Tokens-After"]), r.headers["X-Ruyi-Tier"]


async def test_no_tier_claims_an_archive_that_does_not_exist_yet(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window=WINDOW, pruning={"enabled": False}, archive=NO_ARCHIVE)
    before, after, tier = await post(proxy, exploration(28))
    assert after == before > 4 * USABLE and tier == "prune"


async def test_a_request_four_times_over_the_window_gets_under_the_prune_tier(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    fake.prompt_scale = 1.0  # the upstream counts as Ruyi does: the numbers below stay on one scale
    proxy = await make_proxy(window=WINDOW, archive=NO_ARCHIVE)
    before, after, _ = await post(proxy, exploration(16))
    assert before > 2 * USABLE
    assert after <= PRUNE, "not just clear_at_least of the window: under the prune tier"
    before, after, _ = await post(proxy, exploration(26))  # too much even then: every output it may clear goes
    sent, original = fake.last().json["messages"], exploration(26)
    assert before > 3.5 * USABLE and after < USABLE
    assert all(m["content"].startswith("[ruyi:") for m in sent[:-8] if m["role"] == "tool")
    assert sent[-8:] == original[-8:] and sent[:2] == original[:2]  # the newest 4 turns and the task stay verbatim


async def test_over_the_window_a_batch_short_of_clear_at_least_still_frees_what_it_can(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    keep_outputs = {"economic": False, "strategies": {"enabled": ["dedup", "supersede", "purge_errors", "truncation"]}}  # no discard
    proxy = await make_proxy(window=WINDOW, pruning=keep_outputs, archive=NO_ARCHIVE)
    messages = exploration(8, reread=0)  # one re-read: far less than clear_at_least of the window to free
    before, after, _ = await post(proxy, messages)
    assert before > USABLE, "over the usable window"
    assert after < before and fake.last().json["messages"][3]["content"].startswith("[ruyi:"), "the redundant read went"
