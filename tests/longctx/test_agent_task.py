"""Through the real proxy: the request of Qwen Code, Claude Code and a text-mode agent survives archives verbatim,
its preambles stay where they were, the summary's Task quotes the request, and user-only histories fit the window."""

from __future__ import annotations

import json
from typing import Any

from proxy.replay.run import Cl100kCounter
from tests.conftest import MakeProxy
from tests.conversation.agent_bodies import REQUEST, claude_code_blocks, mini_swe_agent_text_mode, qwen_code
from tests.fake_upstream import FakeUpstream
from tests.longctx.sessions import archive_message, block_after, turn
from tests.longctx.test_archive import CONFIG, WINDOW, forwarded, post

COUNT = Cl100kCounter()


async def run_until_archived(proxy: Any, fake: FakeUpstream, opening: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    client = list(opening)
    for t in range(60):
        client += turn(t)
        resp = await post(proxy, client)
        assert resp.status == 200
        if "X-Ruyi-Archived" in resp.headers:
            return client, forwarded(fake)
    raise AssertionError("never archived")


async def test_qwen_codes_environment_acknowledgement_and_request_stay_verbatim_and_the_task_is_the_request(
    make_proxy: MakeProxy, fake: FakeUpstream
) -> None:
    proxy = await make_proxy(**CONFIG)
    opening = qwen_code()
    client, out = await run_until_archived(proxy, fake, opening)
    assert out[:3] == opening[:3]  # system, environment, "Got it": where they were, byte for byte
    block = block_after(out[3], opening[3])  # the request as sent, then the block
    task = block.split("## Task", 1)[1].split("\n\n", 1)[0] if "## Task" in block else block
    assert REQUEST[:50] in task and "We are setting up the context" not in task
    again = [*client, *turn(99)]
    await post(proxy, again)
    assert forwarded(fake)[:4] == out[:4]


async def test_claude_codes_task_quotes_the_request_not_its_system_reminders(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    opening = claude_code_blocks()
    _, out = await run_until_archived(proxy, fake, opening)
    assert out[0] == opening[0] and archive_message(out) == 1
    block = block_after(out[1], opening[1])
    assert "## Task" in block
    task = block.split("## Task", 1)[1].split("\n\n", 1)[0]
    assert REQUEST[:50] in task and "claudeMd" not in task and "system-reminder" not in task


async def test_a_history_of_user_messages_only_never_goes_over_the_window(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    client = mini_swe_agent_text_mode(0)
    for k in range(120):
        client.append(
            {
                "role": "user",
                "content": f"<returncode>0</returncode>\n<output>\nfile_{k}.py\n" + " ".join(f"word{k}_{i}" for i in range(60)) + "\n</output>",
            }
        )
        resp = await post(proxy, client)
        assert resp.status == 200
        out = forwarded(fake)
        assert COUNT(out, None).total <= WINDOW, f"request {k} over the window"
        assert out[1] == client[1] or block_after(out[1], client[1])  # the task, verbatim (then the archive block)
    assert COUNT(client, None).total > 2 * WINDOW


async def test_the_metadata_tells_the_model_the_usage_and_tier_of_what_is_forwarded(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    import re

    proxy = await make_proxy(**CONFIG, layout={"metadata": True})
    client = qwen_code() + [m for t in range(60) for m in turn(t)]  # far over the window: archived in this request
    resp = await post(proxy, client)
    assert resp.headers.get("X-Ruyi-Archived") == "1"
    text = json.dumps(forwarded(fake))
    found = re.search(r"- context: (\d+)% of [\d,]+ tokens used \(tier (\w+)\)", text)
    assert found is not None
    assert int(found.group(1)) < 100 and found.group(2) == resp.headers["X-Ruyi-Tier"] != "archive"
